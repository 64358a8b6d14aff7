// End-to-end: exec tools (one-shot and JSON-RPC server mode) under the shared supervisor —
// answers, failures, process-group kills on timeout and cancel, no zombies, late answers,
// restarts, crash loops and the sources listing (docs/protocol.md §7).
#include "daemon_fixture.hpp"

#include <catch2/catch.hpp>

#include <csignal>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>
#include <unistd.h>

using namespace meith::test;

namespace e2e_exec_test { // one namespace per file: the tests build as unity batches

namespace {

std::string code_of(const json& f) {
    return f["result"]["error"]["code"].get<std::string>();
}

std::vector<pid_t> read_pids(const fs::path& file) {
    std::vector<pid_t> pids;
    std::ifstream in(file);
    long p;
    while (in >> p)
        pids.push_back(static_cast<pid_t>(p));
    return pids;
}

/// True when `pid` is gone or a zombie not ours to reap.
bool dead(pid_t pid) {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    if (!stat) return true;
    std::string line;
    std::getline(stat, line);
    const auto close = line.rfind(')');
    return close != std::string::npos && line.size() > close + 2 && line[close + 2] == 'Z';
}

bool all_dead_within(const std::vector<pid_t>& pids, std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
        bool all = true;
        for (pid_t p : pids)
            all = all && dead(p);
        if (all) return true;
        std::this_thread::sleep_for(20ms);
    }
    return false;
}

/// Children of `parent` that are zombies (exited, not reaped).
int zombie_children(pid_t parent) {
    int count = 0;
    for (const auto& e : fs::directory_iterator("/proc")) {
        const auto name = e.path().filename().string();
        if (name.find_first_not_of("0123456789") != std::string::npos) continue;
        std::ifstream stat(e.path() / "stat");
        std::string line;
        if (!std::getline(stat, line)) continue;
        const auto close = line.rfind(')');
        if (close == std::string::npos) continue;
        std::istringstream rest(line.substr(close + 2));
        char state;
        long ppid;
        rest >> state >> ppid;
        if (ppid == parent && state == 'Z') ++count;
    }
    return count;
}

double cpu_seconds(pid_t pid) {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    std::getline(stat, line);
    std::istringstream rest(line.substr(line.rfind(')') + 2));
    std::string field;
    long utime = 0, stime = 0;
    for (int i = 3; i <= 15 && rest >> field; ++i) {
        if (i == 14) utime = std::stol(field);
        if (i == 15) stime = std::stol(field);
    }
    return double(utime + stime) / double(::sysconf(_SC_CLK_TCK));
}

} // namespace

TEST_CASE("one-shot exec tools answer with result, error and pending", "[e2e][exec]") {
    daemon_process d(exec_source_toml("os", "oneshot", "oneshot.mjs", "x_oneshot"));
    client c(d.socket());
    auto ok = c.call("x_oneshot", {{"mode", "echo"}, {"n", 1}});
    CHECK(ok["result"]["ok"] == true);
    CHECK(ok["result"]["content"]["n"] == 1);

    auto err = c.call("x_oneshot", {{"mode", "error"}});
    CHECK(code_of(err) == "TOOL_FAILED");
    CHECK(err["result"]["error"]["message"] == "asked to fail");

    auto pending = c.call("x_oneshot", {{"mode", "pending"}});
    CHECK(code_of(pending) == "TOOL_FAILED");
    CHECK(pending["result"]["error"]["details"]["pending"]["reason"] == "requires_approval");
    CHECK(pending["result"]["error"]["message"] == "needs a human");

    CHECK(code_of(c.call("x_oneshot", {{"mode", "garbage"}})) == "TOOL_FAILED");
    CHECK(code_of(c.call("x_oneshot", {{"mode", "empty"}})) == "TOOL_FAILED");
}

TEST_CASE("a one-shot exit status other than 0 fails with the redacted stderr tail",
          "[e2e][exec]") {
    daemon_process d(exec_source_toml("os", "oneshot", "oneshot.mjs", "x_oneshot"));
    client c(d.socket());
    auto r = c.call("x_oneshot", {{"mode", "exit3"}});
    CHECK(code_of(r) == "TOOL_FAILED"); // even though it printed a valid answer first
    CHECK_THAT(r["result"]["error"]["message"].get<std::string>(), Catch::Contains("status 3"));
    const auto details = r["result"]["error"]["details"].dump();
    CHECK_THAT(details, Catch::Contains("last words"));
    CHECK(details.find("ghp_abcdefghijklmnopqrstuvwxyz0123456789") == std::string::npos);
    d.stop();
    CHECK_THAT(d.log(), Catch::Contains("last words")); // stderr forwarded to the daemon log
    CHECK(d.log().find("ghp_abcdefghijklmnopqrstuvwxyz0123456789") == std::string::npos);
}

TEST_CASE("a one-shot answer that is not JSON, or missing, says what the tool printed",
          "[e2e][exec]") {
    daemon_process d(exec_source_toml("os", "oneshot", "oneshot.mjs", "x_oneshot"));
    client c(d.socket());

    // Prose on stdout: its start reaches the caller, escaped, redacted and cut, with its size.
    auto chatty = c.call("x_oneshot", {{"mode", "chatty"}});
    CHECK(code_of(chatty) == "TOOL_FAILED");
    const auto message = chatty["result"]["error"]["message"].get<std::string>();
    INFO(message);
    CHECK_THAT(message, Catch::StartsWith("the tool's answer is not one JSON object; it printed: "
                                          "\"Hello world\\n\\u0007 using ") &&
                            Catch::EndsWith("...\" (1000 bytes)"));
    CHECK_THAT(message, Catch::Contains("REDACTED"));
    CHECK(message.find("ghp_abcdefghijklmnopqrstuvwxyz0123456789") == std::string::npos);
    CHECK(message.size() < 320); // about 200 bytes of the 1000 printed
    CHECK(chatty["result"]["error"]["details"]["stdoutBytes"] == 1000);

    // Nothing on stdout: the exit status and the last stderr line say why.
    auto quiet = c.call("x_oneshot", {{"mode", "quiet"}});
    CHECK(code_of(quiet) == "TOOL_FAILED");
    CHECK(quiet["result"]["error"]["message"] ==
          "the tool wrote no answer on stdout (it exited with status 0; last stderr line: "
          "\"config file missing: /nowhere/tool.toml\")");
    CHECK(quiet["result"]["error"]["details"]["stderr"] ==
          json::array({"starting", "config file missing: /nowhere/tool.toml"}));
    auto empty = c.call("x_oneshot", {{"mode", "empty"}});
    CHECK(empty["result"]["error"]["message"] ==
          "the tool wrote no answer on stdout (it exited with status 0 and wrote nothing on "
          "stderr)");
}

TEST_CASE("one-shot output over max_result_bytes fails saying so", "[e2e][exec]") {
    daemon_process d(exec_source_toml("os", "oneshot", "oneshot.mjs", "x_oneshot") +
                     "[limits]\nmax_result_bytes = 10000\n");
    client c(d.socket());
    CHECK(c.call("x_oneshot", {{"mode", "big"}, {"bytes", 5000}})["result"]["ok"] == true);
    auto big = c.call("x_oneshot", {{"mode", "big"}, {"bytes", 500000}});
    CHECK(code_of(big) == "TOOL_FAILED");
    CHECK_THAT(big["result"]["error"]["message"].get<std::string>(),
               Catch::Contains("max_result_bytes"));
}

TEST_CASE("children get the env allow-list plus the source's env, and its cwd", "[e2e][exec]") {
    ::setenv("MEITH_E2E_HIDDEN", "should-not-pass", 1);
    daemon_process d(exec_source_toml("os", "oneshot", "oneshot.mjs", "x_oneshot", {},
                                      "env = { MY_SETTING = \"on\" }\ncwd = \"/tmp\"\n"));
    ::unsetenv("MEITH_E2E_HIDDEN");
    client c(d.socket());
    auto env = c.call("x_oneshot", {{"mode", "env"}})["result"]["content"];
    CHECK(env["MY_SETTING"] == "on");
    CHECK(env.contains("PATH"));
    CHECK_FALSE(env.contains("MEITH_E2E_HIDDEN"));
    CHECK(c.call("x_oneshot", {{"mode", "cwd"}})["result"]["content"] == "/tmp");
}

TEST_CASE("timeout and cancel kill a one-shot tool's whole process group", "[e2e][exec]") {
    temp_dir pids_dir;
    const auto pid_file = pids_dir.path / "pids";
    // grandchild.sh writes a pid file and starts sleep: process groups, not the sandbox.
    daemon_process d(exec_source_toml("gc", "oneshot", "grandchild.sh", "x_gc", {},
                                      "env = { PID_FILE = \"" + pid_file.string() +
                                          "\" }\nsandbox = \"off\"\n") +
                     "[tools]\nkill_grace_ms = 300\n");
    client c(d.socket());
    SECTION("on timeout") {
        auto r = c.call("x_gc", json::object(), {{"timeoutMs", 700}});
        CHECK(code_of(r) == "TIMEOUT");
    }
    SECTION("on cancel") {
        c.send({{"type", "tool_call"},
                {"requestId", "gc1"},
                {"toolName", "x_gc"},
                {"arguments", json::object()}});
        for (int i = 0; i < 300 && read_pids(pid_file).size() < 2; ++i)
            std::this_thread::sleep_for(10ms);
        c.send({{"type", "cancel_tool_call"}, {"requestId", "gc1"}});
        CHECK(code_of(c.wait_result("gc1")) == "CANCELLED");
    }
    const auto pids = read_pids(pid_file);
    REQUIRE(pids.size() == 2); // the tool and the grandchild it forked
    CHECK(all_dead_within(pids, 3s));
    // Reaped once the daemon's SIGCHLD handler has run: wait for it, bounded.
    const auto deadline = std::chrono::steady_clock::now() + 3s;
    while (zombie_children(d.pid()) != 0 && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(20ms);
    CHECK(zombie_children(d.pid()) == 0);
}

TEST_CASE("server-mode exec tools multiplex calls and map JSON-RPC errors", "[e2e][exec]") {
    daemon_process d(exec_source_toml("sv", "server", "server.mjs", "x_server"));
    client c(d.socket());
    CHECK(c.call("x_server", {{"mode", "echo"}, {"k", "v"}})["result"]["content"]["k"] == "v");
    auto err = c.call("x_server", {{"mode", "error"}});
    CHECK(code_of(err) == "TOOL_FAILED");
    CHECK(err["result"]["error"]["message"] == "asked to fail");
    CHECK(err["result"]["error"]["details"]["code"] == -32001);
    CHECK(err["result"]["error"]["details"]["data"]["why"] == "test");
    // Out-of-order answers reach the right calls.
    c.send({{"type", "tool_call"},
            {"requestId", "slow"},
            {"toolName", "x_server"},
            {"arguments", {{"mode", "sleep"}, {"ms", 400}}}});
    c.send({{"type", "tool_call"},
            {"requestId", "fast"},
            {"toolName", "x_server"},
            {"arguments", {{"mode", "echo"}, {"who", "fast"}}}});
    auto first = c.read();
    CHECK(first["requestId"] == "fast");
    CHECK(first["result"]["content"]["who"] == "fast");
    CHECK(c.wait_result("slow")["result"]["content"] == "slept");
}

TEST_CASE("a late server answer is never delivered to another call", "[e2e][exec]") {
    daemon_process d(exec_source_toml("sv", "server", "server.mjs", "x_server"));
    client c(d.socket());
    auto timed_out = c.call("x_server", {{"mode", "late"}, {"ms", 500}}, {{"timeoutMs", 150}});
    CHECK(code_of(timed_out) == "TIMEOUT");
    c.send({{"type", "tool_call"},
            {"requestId", "cx"},
            {"toolName", "x_server"},
            {"arguments", {{"mode", "late"}, {"ms", 500}}}});
    c.send({{"type", "cancel_tool_call"}, {"requestId", "cx"}});
    CHECK(code_of(c.wait_result("cx")) == "CANCELLED");
    // The next calls, made while the late answers are on their way, get their own answers.
    for (int i = 0; i < 5; ++i) {
        auto r = c.call("x_server", {{"mode", "sleep"}, {"ms", 150}});
        CHECK(r["result"]["content"] == "slept");
    }
    CHECK(c.silent_for(300ms));
}

TEST_CASE("a server-mode tool killed mid-call fails that call at once and serves the next",
          "[e2e][exec]") {
    daemon_process d(exec_source_toml("sv", "server", "server.mjs", "x_server"));
    client c(d.socket());
    // The source's pid (its sandbox's init: the server's own pid is its PID namespace's).
    const auto source_pid = [&c] {
        c.send({{"type", "list_sources"}, {"requestId", "ls"}});
        const json reply = c.read();
        for (const auto& s : reply["sources"])
            if (s["name"] == "sv") return s["pid"].get<pid_t>();
        return pid_t{-1};
    };
    REQUIRE(c.call("x_server", {{"mode", "pid"}})["result"]["ok"] == true);
    const pid_t pid = source_pid();
    REQUIRE(pid > 0);
    c.send({{"type", "tool_call"},
            {"requestId", "victim"},
            {"toolName", "x_server"},
            {"arguments", {{"mode", "sleep"}, {"ms", 20000}}}});
    // Requests reach the server in order: once a later call is answered, "victim" runs.
    REQUIRE(c.call("x_server", {{"mode", "echo"}})["result"]["ok"] == true);
    const auto t0 = std::chrono::steady_clock::now();
    ::kill(pid, SIGKILL);
    auto r = c.wait_result("victim");
    CHECK(std::chrono::steady_clock::now() - t0 < 1s); // noticed at the exit, not at a write
    CHECK(code_of(r) == "TOOL_FAILED");
    CHECK_THAT(r["result"]["error"]["message"].get<std::string>(), Catch::Contains("signal 9"));
    auto next = c.call("x_server", {{"mode", "pid"}}); // waits for the restart
    REQUIRE(next["result"]["ok"] == true);
    CHECK(source_pid() != pid);
}

TEST_CASE("a crash-looping server is marked failed without burning CPU", "[e2e][exec]") {
    temp_dir pids_dir;
    const auto pid_file = (pids_dir.path / "pids").string();
    // It records its pids in a file: supervision, not the sandbox.
    daemon_process d(exec_source_toml("loop", "server", "server.mjs", "x_loop",
                                      {"--crash-after-start-ms=1", "--pid-file=" + pid_file},
                                      "sandbox = \"off\""));
    client c(d.socket());
    d.wait_audit([](const json& l) { return l.value("event", "") == "source_failed"; }, 30s);
    const double cpu_before = cpu_seconds(d.pid());
    std::this_thread::sleep_for(1500ms);
    CHECK(cpu_seconds(d.pid()) - cpu_before < 0.3);
    CHECK(read_pids(pid_file).size() <= 6); // 5 exits within the window, no more spawns
    const auto t0 = std::chrono::steady_clock::now();
    auto r = c.call("x_loop", {{"mode", "echo"}});
    CHECK(std::chrono::steady_clock::now() - t0 < 1s);
    CHECK(code_of(r) == "TOOL_FAILED");
    CHECK_THAT(r["result"]["error"]["message"].get<std::string>(), Catch::Contains("exited"));

    c.send({{"type", "list_tools"}});
    auto tools = c.read()["tools"];
    bool found = false;
    for (auto& t : tools)
        if (t["name"] == "x_loop") {
            found = true;
            CHECK(t["available"] == false);
        }
    CHECK(found);

    c.send({{"type", "list_sources"}, {"requestId", "s1"}});
    auto sources = c.read();
    CHECK(sources["type"] == "sources_list");
    CHECK(sources["requestId"] == "s1");
    bool listed = false;
    for (auto& s : sources["sources"])
        if (s["name"] == "loop") {
            listed = true;
            CHECK(s["state"] == "failed");
            CHECK(s["restarts"].get<int>() >= 4);
            CHECK_THAT(s["lastError"].get<std::string>(), Catch::Contains("exited"));
        }
    CHECK(listed);

    // A manual restart (cli only) brings it back to life, if only briefly.
    c.send({{"type", "restart_source"},
            {"requestId", "r1"},
            {"name", "loop"},
            {"clientInfo", {{"caller", "plugin"}}}});
    CHECK(c.read()["type"] == "error");
    const auto spawned = read_pids(pid_file).size();
    c.send({{"type", "restart_source"},
            {"requestId", "r2"},
            {"name", "loop"},
            {"clientInfo", {{"caller", "cli"}}}});
    auto restarted = c.read();
    CHECK(restarted["type"] == "source_restarted");
    CHECK(restarted["name"] == "loop");
    for (int i = 0; i < 200 && read_pids(pid_file).size() == spawned; ++i)
        std::this_thread::sleep_for(10ms);
    CHECK(read_pids(pid_file).size() > spawned);
}

TEST_CASE("meith sources shows each source's state", "[e2e][exec][cli]") {
    daemon_process d(exec_source_toml("sv", "server", "server.mjs", "x_server") +
                     host_source_toml("th"));
    auto r = run_cli({"sources"}, d.home());
    CHECK(r.status == 0);
    CHECK_THAT(r.out, Catch::Contains("sv") && Catch::Contains("th") && Catch::Contains("ready"));
}

} // namespace e2e_exec_test
