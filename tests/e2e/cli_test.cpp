// End-to-end: the `meith` CLI against the real daemon — discovery through config.json,
// status, tools, call (events, exit status, timeouts, permissions) and Ctrl-C cancel.
#include "daemon_fixture.hpp"

#include <catch2/catch.hpp>

#include <csignal>
#include <fcntl.h>
#include <fstream>
#include <sstream>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

using namespace meith::test;

namespace {
std::string slurp(const fs::path& p) {
    std::ifstream in(p);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}
} // namespace

TEST_CASE("meith status and tools find the daemon through config.json", "[e2e][cli]") {
    daemon_process d(host_source_toml("th"));
    auto status = run_cli({"status"}, d.home());
    CHECK(status.status == 0);
    CHECK_THAT(status.out, Catch::Contains(d.socket().string()));
    CHECK_THAT(status.out, Catch::Contains("s_"));

    auto tools = run_cli({"tools"}, d.home());
    CHECK(tools.status == 0);
    CHECK_THAT(tools.out,
               Catch::Contains("t_echo") && Catch::Contains("echo") && Catch::Contains("builtin"));
    auto as_json = run_cli({"tools", "--json"}, d.home());
    REQUIRE(as_json.status == 0);
    auto parsed = json::parse(as_json.out);
    CHECK(parsed.is_array());
    CHECK(parsed.size() > 10);
}

TEST_CASE("meith call prints events and the result, and its exit status follows ok", "[e2e][cli]") {
    daemon_process d(host_source_toml("th"));
    auto ok = run_cli({"call", "t_stream", R"({"n":3,"interval_ms":10})"}, d.home());
    CHECK(ok.status == 0);
    CHECK_THAT(ok.out, Catch::Contains("\"done\": 3"));
    CHECK_THAT(ok.err, Catch::Contains("[part]"));

    auto failed = run_cli({"call", "t_fail"}, d.home());
    CHECK(failed.status == 1);
    CHECK_THAT(failed.err, Catch::Contains("TOOL_FAILED") && Catch::Contains("tool said no"));

    auto denied = run_cli({"call", "t_write", "{}", "--caller", "plugin"}, d.home());
    CHECK(denied.status == 1);
    CHECK_THAT(denied.err, Catch::Contains("PERMISSION_DENIED"));

    auto timed_out =
        run_cli({"call", "t_sleep", R"({"ms":5000})", "--timeout-ms", "300"}, d.home());
    CHECK(timed_out.status == 1);
    CHECK_THAT(timed_out.err, Catch::Contains("TIMEOUT"));

    auto bad_json = run_cli({"call", "t_echo", "{not json"}, d.home());
    CHECK(bad_json.status == 2);

    auto lines = d.audit_events("tool_call");
    CHECK(lines.size() == 4); // the bad JSON never reached the daemon
}

TEST_CASE("meith call: Ctrl-C sends cancel_tool_call and waits for CANCELLED", "[e2e][cli]") {
    daemon_process d(host_source_toml("th"));
    temp_dir out;
    const pid_t pid = ::fork();
    if (pid == 0) {
        const int o = ::open((out.path / "out").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
        const int e = ::open((out.path / "err").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
        ::dup2(o, 1);
        ::dup2(e, 2);
        ::setenv("MEITH_HOME", d.home().c_str(), 1);
        ::execl(MEITH_CLI, MEITH_CLI, "call", "t_stream", R"({"n":1000,"interval_ms":50})",
                static_cast<char*>(nullptr));
        ::_exit(127);
    }
    // Wait for the first streamed event, then press Ctrl-C.
    for (int i = 0; i < 500 && slurp(out.path / "err").find("[part]") == std::string::npos; ++i)
        std::this_thread::sleep_for(10ms);
    REQUIRE_THAT(slurp(out.path / "err"), Catch::Contains("[part]"));
    ::kill(pid, SIGINT);
    int status = 0;
    for (int i = 0; i < 500 && ::waitpid(pid, &status, WNOHANG) == 0; ++i)
        std::this_thread::sleep_for(10ms);
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 1);
    CHECK_THAT(slurp(out.path / "err"), Catch::Contains("CANCELLED"));
    auto line = d.wait_audit([](const json& l) { return l.value("event", "") == "tool_call"; });
    CHECK(line["errorCode"] == "CANCELLED");
    CHECK(line["end"] == "cancel");
}

TEST_CASE("meith without a running daemon says how to start it", "[e2e][cli]") {
    temp_dir home;
    auto r = run_cli({"tools"}, home.path);
    CHECK(r.status == 2);
    CHECK_THAT(r.err, Catch::Contains("not running"));
}
