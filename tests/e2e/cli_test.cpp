// End-to-end: the `meith` CLI against the real daemon — discovery through config.json,
// status, tools, call (events, exit status, timeouts, permissions), Ctrl-C cancel, audit
// (reading the log, rotated files, filters, corrupt lines) and policy check.
#include "daemon_fixture.hpp"

#include <catch2/catch.hpp>

#include <chrono>
#include <csignal>
#include <ctime>
#include <fcntl.h>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

using namespace meith::test;

namespace {} // namespace

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

namespace {
/// Non-empty lines of `text`.
std::vector<std::string> lines_of(const std::string& text) {
    std::vector<std::string> out;
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line))
        if (!line.empty()) out.push_back(line);
    return out;
}
} // namespace

TEST_CASE("meith audit shows calls as a table, filters them and prints JSON Lines", "[e2e][cli]") {
    daemon_process d(host_source_toml("th"));
    REQUIRE(run_cli({"call", "echo", R"({"a":1})"}, d.home()).status == 0);
    REQUIRE(run_cli({"call", "t_write", "{}", "--caller", "plugin"}, d.home()).status == 1);
    REQUIRE(run_cli({"call", "no_such_tool"}, d.home()).status == 1);

    auto table = run_cli({"audit"}, d.home());
    CHECK(table.status == 0);
    CHECK(table.err.empty());
    CHECK_THAT(table.out, Catch::Contains("TOOL") && Catch::Contains("echo") &&
                              Catch::Contains("t_write") && Catch::Contains("no_such_tool") &&
                              Catch::Contains("deny") && Catch::Contains("UNKNOWN_TOOL"));
    CHECK_THAT(table.out, !Catch::Contains("daemon_start")); // the table shows calls by default
    CHECK_THAT(run_cli({"audit", "--event", "all"}, d.home()).out, Catch::Contains("daemon_start"));

    auto denied = run_cli({"audit", "--denied"}, d.home());
    CHECK(denied.status == 0);
    CHECK_THAT(denied.out, Catch::Contains("t_write") && Catch::Contains("deny"));
    CHECK_THAT(denied.out, !Catch::Contains("echo") && !Catch::Contains("no_such_tool"));
    CHECK(lines_of(denied.out).size() == 2); // header + the one denied call

    auto plugin = run_cli({"audit", "--caller", "plugin"}, d.home());
    CHECK_THAT(plugin.out, Catch::Contains("t_write") && !Catch::Contains("echo"));

    auto echo = run_cli({"audit", "--tool", "echo", "--json"}, d.home());
    CHECK(echo.status == 0);
    const auto echo_lines = lines_of(echo.out);
    REQUIRE(echo_lines.size() == 1);
    for (const auto& l : echo_lines) {
        const json j = json::parse(l);
        CHECK(j["toolName"] == "echo");
        CHECK(j["event"] == "tool_call");
        CHECK(j["decision"] == "allow");
    }

    auto recent = run_cli({"audit", "--since", "1h", "--json", "--event", "tool_call"}, d.home());
    CHECK(recent.status == 0);
    CHECK(lines_of(recent.out).size() == 3);
    auto last = run_cli({"audit", "--json", "--event", "tool_call", "--limit", "1"}, d.home());
    REQUIRE(lines_of(last.out).size() == 1);
    CHECK(json::parse(lines_of(last.out)[0])["toolName"] == "no_such_tool");

    CHECK(run_cli({"audit", "--since", "soon"}, d.home()).status == 2);
    CHECK(run_cli({"tools", "--denied"}, d.home()).status == 2);
}

TEST_CASE("meith audit reads rotated files oldest first", "[e2e][cli]") {
    daemon_process d("[audit]\nmax_bytes = 2048\nkeep = 50\n");
    constexpr int calls = 30;
    {
        client c(d.socket());
        for (int i = 0; i < calls; ++i) {
            auto r = c.call("echo", {{"i", i}}, {{"requestId", "r" + std::to_string(i)}});
            REQUIRE(r["result"]["ok"] == true);
        }
    }
    REQUIRE(fs::exists(d.home() / "audit.jsonl.1"));
    REQUIRE(fs::exists(d.home() / "audit.jsonl.2"));

    auto r = run_cli({"audit", "--json", "--event", "tool_call"}, d.home());
    CHECK(r.status == 0);
    const auto lines = lines_of(r.out);
    REQUIRE(lines.size() == calls);
    for (int i = 0; i < calls; ++i)
        CHECK(json::parse(lines[i])["requestId"] == "r" + std::to_string(i));

    auto limited = run_cli({"audit", "--limit", "3"}, d.home());
    CHECK(lines_of(limited.out).size() == 4); // header + 3
    CHECK_THAT(limited.out, Catch::Contains("r29") && !Catch::Contains("r26"));
}

TEST_CASE("meith audit --file: order, --since and ts parsing on a written log", "[e2e][cli]") {
    temp_dir dir;
    const auto now = std::chrono::system_clock::now();
    const auto stamp = [](std::chrono::system_clock::time_point t) {
        const std::time_t s = std::chrono::system_clock::to_time_t(t);
        std::tm tm{};
        ::gmtime_r(&s, &tm);
        char buf[40];
        std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S.000Z", &tm);
        return std::string(buf);
    };
    const auto line = [](const std::string& ts, const std::string& id) {
        return json({{"ts", ts},
                     {"event", "tool_call"},
                     {"requestId", id},
                     {"toolName", "x"},
                     {"caller", "cli"},
                     {"decision", "allow"},
                     {"durationMs", 1.5},
                     {"ok", true},
                     {"errorCode", nullptr}})
                   .dump() +
               "\n";
    };
    const fs::path log = dir.path / "my.jsonl";
    std::ofstream(dir.path / "my.jsonl.2") << line("2020-01-02T03:04:05.678Z", "old");
    std::ofstream(dir.path / "my.jsonl.1") << line(stamp(now - std::chrono::hours(3)), "hours");
    std::ofstream(log) << line(stamp(now - std::chrono::seconds(5)), "fresh");

    auto all = run_cli({"audit", "--json", "--file", log.string()}, dir.path);
    REQUIRE(all.status == 0);
    const auto lines = lines_of(all.out);
    REQUIRE(lines.size() == 3);
    CHECK(json::parse(lines[0])["requestId"] == "old");
    CHECK(json::parse(lines[1])["requestId"] == "hours");
    CHECK(json::parse(lines[2])["requestId"] == "fresh");

    CHECK(lines_of(
              run_cli({"audit", "--json", "--file", log.string(), "--since", "1d"}, dir.path).out)
              .size() == 2);
    CHECK(lines_of(
              run_cli({"audit", "--json", "--file", log.string(), "--since", "2h"}, dir.path).out)
              .size() == 1);
    auto table = run_cli({"audit", "--file", log.string()}, dir.path);
    CHECK_THAT(table.out, Catch::Contains("2020-01-0") && Catch::Contains("fresh") &&
                              Catch::Contains("1.5") && Catch::Contains("ok"));

    auto missing = run_cli({"audit", "--file", (dir.path / "nope.jsonl").string()}, dir.path);
    CHECK(missing.status == 2);
    CHECK_THAT(missing.err, Catch::Contains("no audit log"));
}

TEST_CASE("meith audit reports a corrupt line with file:line and shows the rest", "[e2e][cli]") {
    daemon_process d(host_source_toml("th"));
    REQUIRE(run_cli({"call", "echo"}, d.home()).status == 0);
    d.stop();
    const fs::path log = d.home() / "audit.jsonl";
    const std::size_t before = lines_of(slurp(log)).size();
    std::ofstream(log, std::ios::app) << "{\"ts\": garbage, not json\n";

    auto r = run_cli({"audit"}, d.home()); // config.json still names the log
    CHECK(r.status == 0);
    CHECK_THAT(r.err, Catch::Contains(log.string() + ":" + std::to_string(before + 1)) &&
                          Catch::Contains("skipped"));
    CHECK_THAT(r.out, Catch::Contains("echo") && Catch::Contains("ok"));
    auto as_json = run_cli({"audit", "--json"}, d.home());
    CHECK(as_json.status == 0);
    CHECK(lines_of(as_json.out).size() == before);
}

TEST_CASE("meith policy check explains the decision; exit 0 allow, 1 deny", "[e2e][cli]") {
    SECTION("default permissions") {
        daemon_process d(host_source_toml("th"));
        auto w = run_cli({"policy", "check", "t_write", "--caller", "plugin"}, d.home());
        CHECK(w.status == 1);
        CHECK_THAT(w.out, Catch::Contains("t_write for caller plugin: deny") &&
                              Catch::Contains("writes-files") && Catch::Contains("reason:"));

        auto unknown = run_cli({"policy", "check", "no_such_tool"}, d.home());
        CHECK(unknown.status == 1);
        CHECK_THAT(unknown.out, Catch::Contains("deny") && Catch::Contains("unknown tool"));

        auto echo = run_cli({"policy", "check", "echo", "--json"}, d.home());
        CHECK(echo.status == 0);
        const json j = json::parse(echo.out);
        CHECK(j["decision"] == "allow");
        CHECK(j["toolName"] == "echo");
        CHECK(j["caller"] == "cli");

        CHECK(run_cli({"policy", "check"}, d.home()).status == 2);
        CHECK(run_cli({"policy"}, d.home()).status == 2);
    }
    SECTION("a config granting cli writes-files") {
        daemon_process d(host_source_toml("th") +
                         "[permissions.callers.cli]\nallow = [\"read-only\", \"writes-files\"]\n");
        auto w = run_cli({"policy", "check", "t_write", "--caller", "cli"}, d.home());
        CHECK(w.status == 0);
        CHECK_THAT(w.out, Catch::Contains("t_write for caller cli: allow") &&
                              Catch::Contains("writes-files"));
        CHECK(run_cli({"policy", "check", "t_write", "--caller", "plugin"}, d.home()).status == 1);
    }
}
