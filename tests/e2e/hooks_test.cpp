// End-to-end: filter and observe hooks, one-shot and server mode (docs/protocol.md §7 "Hooks") —
// deny and allow, fail-closed on crash, hang and garbage, results withheld after execution,
// observe hooks that never delay a call, payload shape and the audit trail of decisions.
#include "daemon_fixture.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <set>
#include <thread>

using namespace meith::test;

namespace e2e_hooks_test { // one namespace per file: the tests build as unity batches

namespace {

std::string code_of(const json& f) {
    return f["result"].contains("error") ? f["result"]["error"]["code"].get<std::string>() : "";
}

std::vector<json> read_lines(const fs::path& file) {
    std::vector<json> out;
    std::ifstream in(file);
    std::string line;
    while (std::getline(in, line))
        if (!line.empty()) out.push_back(json::parse(line));
    return out;
}

std::vector<json> wait_lines(const fs::path& file, std::size_t n,
                             std::chrono::milliseconds timeout = 5s) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
        auto lines = read_lines(file);
        if (lines.size() >= n || std::chrono::steady_clock::now() > deadline) return lines;
        std::this_thread::sleep_for(20ms);
    }
}

} // namespace

TEST_CASE("a before_execution filter hook denies and the tool never runs", "[e2e][hooks]") {
    const std::string cli_writes =
        "[permissions.callers.cli]\nallow = [\"read-only\", \"writes-files\"]\n";
    for (const char* mode : {"oneshot", "server"}) {
        DYNAMIC_SECTION(mode) {
            std::vector<std::string> flags = {"--deny-tool=t_write"};
            if (std::string(mode) == "server") flags.push_back("--server");
            daemon_process d(host_source_toml("th") + cli_writes +
                             hook_toml("gate", "filter", mode, "before_execution", flags));
            client c(d.socket());
            const json as_cli = {{"clientInfo", {{"caller", "cli"}}}};
            // t_state returns how many calls the host has executed so far.
            const int before = c.call("t_state", json::object())["result"]["content"];
            auto denied = c.call("t_write", json::object(), as_cli);
            CHECK(code_of(denied) == "PERMISSION_DENIED");
            CHECK_THAT(denied["result"]["error"]["message"].get<std::string>(),
                       Catch::Contains("tool t_write is blocked"));
            const int after = c.call("t_state", json::object())["result"]["content"];
            CHECK(after == before + 1); // the denied t_write never reached the host
            auto lines = d.audit_events("tool_call");
            REQUIRE(lines.size() == 3);
            CHECK(lines[1]["decision"] == "deny");
            CHECK(lines[1]["reason"] == "tool t_write is blocked");
            REQUIRE(lines[1]["hooks"].size() == 1);
            CHECK(lines[1]["hooks"][0] == json({{"name", "gate"},
                                                {"phase", "before_execution"},
                                                {"kind", "filter"},
                                                {"decision", "deny"},
                                                {"reason", "tool t_write is blocked"}}));
            CHECK(lines[2]["hooks"][0]["decision"] == "allow");
            d.stop();
        }
    }
}

TEST_CASE("filter hooks that crash, hang or talk garbage deny (fail closed)", "[e2e][hooks]") {
    for (const char* mode : {"oneshot", "server"}) {
        for (const char* behaviour : {"--crash", "--hang", "--garbage"}) {
            DYNAMIC_SECTION(mode << " " << behaviour) {
                std::vector<std::string> flags = {behaviour};
                if (std::string(mode) == "server") flags.push_back("--server");
                daemon_process d(host_source_toml("th") + hook_toml("bad", "filter", mode,
                                                                    "before_execution", flags,
                                                                    "timeout_ms = 400\n"));
                client c(d.socket());
                const auto t0 = std::chrono::steady_clock::now();
                auto r = c.call("t_echo", json::object());
                CHECK(code_of(r) == "PERMISSION_DENIED");
                CHECK_THAT(r["result"]["error"]["message"].get<std::string>(),
                           Catch::Contains("fail closed"));
                CHECK(std::chrono::steady_clock::now() - t0 < 5s);
                auto line = d.audit_events("tool_call").at(0);
                CHECK(line["decision"] == "deny");
                CHECK(line["hooks"][0]["decision"] == "deny");
            }
        }
    }
}

TEST_CASE("filter hooks only apply to the tools their globs match", "[e2e][hooks]") {
    daemon_process d(host_source_toml("th") + hook_toml("only-echo", "filter", "oneshot",
                                                        "before_execution", {"--deny=no echo"},
                                                        "tools = [\"t_ec*\"]\n"));
    client c(d.socket());
    CHECK(code_of(c.call("t_echo", json::object())) == "PERMISSION_DENIED");
    CHECK(c.call("t_state", json::object())["result"]["ok"] == true);
    CHECK(d.audit_events("tool_call").at(1)["hooks"].empty());
}

TEST_CASE("an after_execution filter hook withholds a result", "[e2e][hooks]") {
    temp_dir logs;
    const auto log = (logs.path / "after.jsonl").string();
    daemon_process d(host_source_toml("th") +
                     hook_toml("dlp", "filter", "oneshot", "after_execution",
                               {"--deny-if-result-contains=TOPSECRET", "--log=" + log}));
    client c(d.socket());
    CHECK(c.call("t_echo", {{"v", "harmless"}})["result"]["ok"] == true);
    auto withheld = c.call("t_echo", {{"v", "TOPSECRET"}});
    CHECK(code_of(withheld) == "PERMISSION_DENIED");
    CHECK_THAT(withheld["result"]["error"]["message"].get<std::string>(),
               Catch::Contains("withheld"));
    CHECK_FALSE(withheld["result"].contains("content")); // the tool's output does not leave
    auto payloads = wait_lines(log, 2);
    REQUIRE(payloads.size() == 2);
    CHECK(payloads[1]["phase"] == "after_execution");
    CHECK(payloads[1]["response"]["ok"] == true);
    CHECK(payloads[1]["response"]["content"]["v"] == "TOPSECRET");
    auto line = d.audit_events("tool_call").at(1);
    CHECK(line["decision"] == "deny");
    CHECK(line["hooks"][0]["phase"] == "after_execution");
}

TEST_CASE("hook payloads keep arguments nested beside the call's metadata", "[e2e][hooks]") {
    temp_dir logs;
    const auto log = (logs.path / "payloads.jsonl").string();
    daemon_process d(host_source_toml("th") + hook_toml("seen", "filter", "oneshot",
                                                        "before_execution",
                                                        {"--allow", "--log=" + log}));
    client c(d.socket());
    c.send({{"type", "hello"}, {"clientInfo", {{"caller", "cli"}}}});
    const std::string session = c.read()["sessionId"];
    // An argument named like metadata must not collide with it.
    auto r = c.call("t_echo", {{"name", "not-the-tool"}, {"call_id", "forged"}},
                    {{"requestId", "req-42"}});
    CHECK(r["result"]["ok"] == true);
    auto p = wait_lines(log, 1).at(0);
    CHECK(p["hook"] == "tool");
    CHECK(p["phase"] == "before_execution");
    CHECK(p["request"]["name"] == "t_echo");
    CHECK(p["request"]["call_id"] == "req-42");
    CHECK(p["request"]["session_id"] == session);
    CHECK(p["request"]["caller"] == "cli");
    CHECK(p["request"]["args"] == json({{"name", "not-the-tool"}, {"call_id", "forged"}}));
    CHECK_FALSE(p.contains("response"));
}

TEST_CASE("observe hooks see sessions and calls but never delay or fail them", "[e2e][hooks]") {
    temp_dir logs;
    const auto log_oneshot = (logs.path / "o.jsonl").string();
    const auto log_server = (logs.path / "s.jsonl").string();
    daemon_process d(host_source_toml("th") +
                     hook_toml("watch-os", "observe", "oneshot", "before_execution",
                               {"--hang", "--log=" + log_oneshot}, "timeout_ms = 10000\n") +
                     hook_toml("watch-sv", "observe", "server", "after_execution",
                               {"--hang", "--server", "--log=" + log_server},
                               "timeout_ms = 10000\n") +
                     hook_toml("crashy", "observe", "oneshot", "before_execution", {"--crash"}) +
                     hook_toml("sessions", "observe", "oneshot", "session_start",
                               {"--observe", "--log=" + log_oneshot}) +
                     hook_toml("sessions-end", "observe", "oneshot", "session_end",
                               {"--observe", "--log=" + log_oneshot}));
    {
        client c(d.socket());
        for (int i = 0; i < 3; ++i) {
            const auto t0 = std::chrono::steady_clock::now();
            auto r = c.call("t_echo", {{"i", i}});
            CHECK(r["result"]["ok"] == true);
            CHECK(std::chrono::steady_clock::now() - t0 < 500ms); // the hung hooks delay nothing
        }
        auto line = d.audit_events("tool_call").at(0);
        std::set<std::string> names;
        for (auto& h : line["hooks"]) {
            CHECK(h["kind"] == "observe");
            names.insert(h["name"]);
        }
        CHECK(names == std::set<std::string>{"watch-os", "watch-sv", "crashy"});
    }
    auto seen = wait_lines(log_oneshot, 5);
    int starts = 0, ends = 0, befores = 0;
    for (auto& p : seen) {
        if (p["phase"] == "session_start") ++starts;
        if (p["phase"] == "session_end") ++ends;
        if (p["phase"] == "before_execution") ++befores;
    }
    CHECK(starts == 1);
    CHECK(ends == 1);
    CHECK(befores == 3);
    auto after = wait_lines(log_server, 3);
    CHECK(after.size() == 3);
    CHECK(after.at(0)["response"]["ok"] == true);
}

TEST_CASE("hook time counts against the call's timeout", "[e2e][hooks]") {
    daemon_process d(host_source_toml("th") + hook_toml("slow", "filter", "oneshot",
                                                        "before_execution", {"--hang"},
                                                        "timeout_ms = 10000\n"));
    client c(d.socket());
    const auto t0 = std::chrono::steady_clock::now();
    auto r = c.call("t_echo", json::object(), {{"timeoutMs", 300}});
    CHECK(std::chrono::steady_clock::now() - t0 < 3s);
    // The call's 300 ms bind, not the hook's 10 s: the call times out (its deadline fires
    // before the hook's timer, never a race between the two).
    CHECK(code_of(r) == "TIMEOUT");
}

TEST_CASE("a server-mode hook can be restarted by name and its lifecycle is audited",
          "[e2e][hooks]") {
    temp_dir pids;
    const auto pid_file = pids.path / "pids";
    daemon_process d(host_source_toml("th") +
                     hook_toml("gate", "filter", "server", "before_execution",
                               {"--server", "--allow", "--pid-file=" + pid_file.string()}));
    client c(d.socket());
    CHECK(c.call("t_echo", json::object())["result"]["ok"] == true);
    auto count_pids = [&] {
        std::ifstream in(pid_file);
        return std::count(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>(),
                          '\n');
    };
    REQUIRE(count_pids() == 1);
    c.send({{"type", "restart_source"},
            {"requestId", "r"},
            {"name", "gate"},
            {"clientInfo", {{"caller", "cli"}}}});
    CHECK(c.read()["type"] == "source_restarted");
    for (int i = 0; i < 300 && count_pids() < 2; ++i)
        std::this_thread::sleep_for(10ms);
    CHECK(count_pids() == 2);
    auto start = d.wait_audit([](const json& l) {
        return l.value("event", "") == "source_start" && l.value("hook", "") == "gate";
    });
    CHECK(start["pid"].is_number());
    // Served again after the restart.
    bool ok = false;
    for (int i = 0; i < 50 && !ok; ++i) {
        ok = c.call("t_echo", json::object())["result"]["ok"] == true;
        if (!ok) std::this_thread::sleep_for(50ms);
    }
    CHECK(ok);
}

} // namespace e2e_hooks_test
