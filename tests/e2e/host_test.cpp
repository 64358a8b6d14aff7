// End-to-end: meithd with real tool-host subprocesses (tests/hosts/test_host.mjs) — schemas,
// streaming, state, validation, permissions, timeouts, cancel, crashes, restarts, garbage,
// result limits and redaction (docs/protocol.md §3-§7).
#include "daemon_fixture.hpp"

#include <catch2/catch.hpp>

#include <csignal>
#include <fstream>
#include <map>
#include <thread>

using namespace meith::test;

namespace e2e_host_test { // one namespace per file: the tests build as unity batches

namespace {

std::string cli_can_write() {
    return "[permissions.callers.cli]\n"
           "allow = [\"read-only\", \"accesses-network\", \"writes-files\"]\n"
           "deny = [\"destructive\"]\n";
}

json find_tool(const json& tools, const std::string& name) {
    for (const auto& t : tools)
        if (t["name"] == name) return t;
    return nullptr;
}

std::string error_code(const json& result_frame) {
    return result_frame["result"]["error"]["code"].get<std::string>();
}

} // namespace

TEST_CASE("host tools are registered with schemas, capabilities and permissions", "[e2e][host]") {
    daemon_process d(host_source_toml("th") + cli_can_write());
    client c(d.socket());
    c.send({{"type", "list_tools"}, {"clientInfo", {{"caller", "cli"}}}});
    auto tools = c.read()["tools"];
    auto typed = find_tool(tools, "t_typed");
    REQUIRE(typed.is_object());
    CHECK(typed["source"] == "th");
    CHECK(typed["inputSchema"]["required"] == json::array({"n"}));
    CHECK(find_tool(tools, "t_write")["permission"] == "allow");
    CHECK(find_tool(tools, "t_write")["capabilities"] == json::array({"writes-files"}));
    CHECK(find_tool(tools, "t_nocaps")["capabilities"] == json::array({"unknown"}));
    CHECK(find_tool(tools, "t_nocaps")["permission"] == "deny");
    auto custom = find_tool(tools, "t_custom");
    REQUIRE(custom.is_object());
    CHECK_FALSE(custom.contains("inputSchema")); // text-payload tool

    c.send({{"type", "list_tools"}, {"clientInfo", {{"caller", "plugin"}}}});
    auto as_plugin = c.read()["tools"];
    CHECK(find_tool(as_plugin, "t_write")["permission"] == "deny");
    CHECK(find_tool(as_plugin, "t_echo")["permission"] == "allow");
}

TEST_CASE("a tool's events past max_outbound_bytes are dropped and counted, not queued without "
          "bound",
          "[e2e][host]") {
    // The client does not read while the tool writes 2000 events of 2 KB (4 MB) as fast as it
    // can; with max_outbound_bytes = 64 KiB meithd queued them all (hundreds of MB from one
    // fast tool). Now they are counted, and the next event or the result says how many.
    daemon_process d(host_source_toml("th") + "[limits]\nmax_result_bytes = 65536\n"
                                              "max_outbound_bytes = 65536\nwrite_stall_ms = "
                                              "120000\n");
    client c(d.socket());
    c.send({{"type", "tool_call"},
            {"protocol", 1},
            {"requestId", "flood"},
            {"toolName", "t_stream"},
            {"arguments", {{"n", 2000}, {"interval_ms", 0}, {"pad", 2000}}}});
    // Synchronise on the call's audit line (written before its result is queued), not on time.
    const auto deadline = std::chrono::steady_clock::now() + 60s;
    while (d.audit_events("tool_call").empty() && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(20ms);
    REQUIRE_FALSE(d.audit_events("tool_call").empty());

    std::uint64_t delivered = 0;
    std::uint64_t dropped = 0;
    json result;
    for (;;) {
        const json f = c.read();
        if (f["type"] == "tool_result") {
            result = f;
            break;
        }
        REQUIRE(f["type"] == "tool_event");
        if (f["event"]["type"] == "events_dropped") {
            dropped += f["event"]["count"].get<std::uint64_t>();
            CHECK_THAT(f["event"]["reason"].get<std::string>(),
                       Catch::Contains("max_outbound_bytes"));
        } else {
            ++delivered;
        }
    }
    CHECK(result["result"]["content"]["done"] == 2000);
    CHECK(dropped > 0);
    CHECK(delivered + dropped == 2000);
    // What was queued stayed near the limit (the socket's own buffer holds the rest).
    CHECK(delivered * 2000 < 2 * 1024 * 1024);
}

TEST_CASE("host calls return values, stream events and keep state", "[e2e][host]") {
    daemon_process d(host_source_toml("th"));
    client c(d.socket());
    auto r = c.call("t_echo", {{"a", "b"}, {"n", 1.5}});
    CHECK(r["result"] == json({{"ok", true}, {"content", {{"a", "b"}, {"n", 1.5}}}}));

    std::vector<json> events;
    auto s = c.call("t_stream", {{"n", 4}, {"interval_ms", 10}}, json::object(), &events);
    CHECK(s["result"]["content"]["done"] == 4);
    REQUIRE(events.size() == 4);
    for (int i = 0; i < 4; ++i) {
        CHECK(events[i]["type"] == "part");
        CHECK(events[i]["payload"]["i"] == i + 1);
    }

    auto first = c.call("t_state", json::object())["result"]["content"].get<int>();
    auto second = c.call("t_state", json::object())["result"]["content"].get<int>();
    CHECK(second == first + 1); // the host's state went back to it

    auto env = c.call("t_toolresult", json::object());
    CHECK(env["result"]["ok"] == true);
    CHECK(env["result"]["content"] == json({{"already", "enveloped"}}));
    CHECK(env["result"]["meta"] == json({{"m", 1}}));

    // A text-payload tool takes a string (docs/protocol.md §13).
    auto custom = c.call("t_custom", "freeform");
    CHECK(custom["result"]["content"]["got"] == "freeform");
    CHECK(custom["result"]["content"]["kind"] == "string");
}

TEST_CASE("arguments are validated against the tool's inputSchema before it runs", "[e2e][host]") {
    daemon_process d(host_source_toml("th"));
    client c(d.socket());
    CHECK(c.call("t_typed", {{"n", 3}})["result"]["content"]["n"] == 3);
    for (const json& bad :
         {json{{"n", -1}}, json{{"n", "three"}}, json::object(), json{{"n", 1}, {"extra", true}}}) {
        INFO(bad.dump());
        auto r = c.call("t_typed", bad);
        CHECK(error_code(r) == "VALIDATION_ERROR");
        CHECK_FALSE(r["result"]["error"]["message"].get<std::string>().empty());
    }
    // The tool never ran for the bad calls: t_state counts executions.
    const int before = c.call("t_state", json::object())["result"]["content"];
    c.call("t_typed", {{"n", "bad"}});
    const int after = c.call("t_state", json::object())["result"]["content"];
    CHECK(after == before + 1);
}

TEST_CASE("permissions: denied calls resolve PERMISSION_DENIED naming the capability",
          "[e2e][host]") {
    daemon_process d(host_source_toml("th") + cli_can_write());
    client c(d.socket());
    auto as_plugin = c.call("t_write", json::object(), {{"clientInfo", {{"caller", "plugin"}}}});
    CHECK(error_code(as_plugin) == "PERMISSION_DENIED");
    CHECK_THAT(as_plugin["result"]["error"]["message"].get<std::string>(),
               Catch::Contains("writes-files"));
    auto as_cli = c.call("t_write", json::object(), {{"clientInfo", {{"caller", "cli"}}}});
    CHECK(as_cli["result"]["ok"] == true);
    auto claimed = c.call("t_write", json::object(), {{"clientInfo", {{"caller", "agent"}}}});
    CHECK(error_code(claimed) == "PERMISSION_DENIED"); // agent is downgraded to plugin
    auto unknown = c.call("t_nocaps", json::object(), {{"clientInfo", {{"caller", "cli"}}}});
    CHECK(error_code(unknown) == "PERMISSION_DENIED");
    CHECK_THAT(unknown["result"]["error"]["message"].get<std::string>(),
               Catch::Contains("unknown"));

    auto lines = d.audit_events("tool_call");
    REQUIRE(lines.size() == 4);
    CHECK(lines[0]["decision"] == "deny");
    CHECK(lines[1]["decision"] == "allow");
    CHECK(lines[2]["claimedCaller"] == "agent");
    CHECK(lines[2]["caller"] == "plugin");
}

TEST_CASE("per-tool rules decide before the caller defaults", "[e2e][host]") {
    daemon_process d(
        host_source_toml("th") +
        "[[permissions.rules]]\ntool = \"t_wr*\"\ncaller = \"plugin\"\ndecision = \"allow\"\n"
        "[[permissions.rules]]\ntool = \"t_echo\"\ndecision = \"deny\"\n");
    client c(d.socket());
    CHECK(c.call("t_write", json::object())["result"]["ok"] == true);
    auto denied = c.call("t_echo", json::object());
    CHECK(error_code(denied) == "PERMISSION_DENIED");
    CHECK_THAT(denied["result"]["error"]["message"].get<std::string>(), Catch::Contains("rule 2"));
}

TEST_CASE("timeouts: the call resolves TIMEOUT and the host keeps serving", "[e2e][host]") {
    daemon_process d(host_source_toml("th"));
    client c(d.socket());
    const auto t0 = std::chrono::steady_clock::now();
    auto r = c.call("t_hang", json::object(), {{"timeoutMs", 300}});
    const auto took = std::chrono::steady_clock::now() - t0;
    CHECK(error_code(r) == "TIMEOUT");
    CHECK(took >= 290ms);
    CHECK(took < 5s);
    // A late answer after the timeout is dropped, never given to another call.
    auto slow = c.call("t_sleep", {{"ms", 400}}, {{"timeoutMs", 100}});
    CHECK(error_code(slow) == "TIMEOUT");
    auto next = c.call("t_echo", {{"k", "after"}});
    CHECK(next["result"]["content"]["k"] == "after");
    CHECK(c.silent_for(600ms)); // no stray frame from the late t_sleep answer
    auto line = d.audit_events("tool_call")[0];
    CHECK(line["errorCode"] == "TIMEOUT");
    CHECK(line["timeoutMs"] == 300);
}

TEST_CASE("the tool's and the config's timeouts apply in order, capped by max_timeout_ms",
          "[e2e][host]") {
    daemon_process d(host_source_toml("th", {}, "timeout_ms = { t_hang = 250 }\n") +
                     "[limits]\nmax_timeout_ms = 400\n[tools]\ndefault_timeout_ms = 350\n");
    client c(d.socket());
    CHECK(error_code(c.call("t_hang", json::object())) == "TIMEOUT");
    CHECK(error_code(c.call("t_sleep", {{"ms", 5000}})) == "TIMEOUT");
    CHECK(error_code(c.call("t_sleep", {{"ms", 5000}}, {{"timeoutMs", 100000}})) == "TIMEOUT");
    auto lines = d.audit_events("tool_call");
    REQUIRE(lines.size() == 3);
    CHECK(lines[0]["timeoutMs"] == 250);
    CHECK(lines[1]["timeoutMs"] == 350);
    CHECK(lines[2]["timeoutMs"] == 400);
}

TEST_CASE("cancel_tool_call resolves CANCELLED promptly and unknown ids change nothing",
          "[e2e][host]") {
    daemon_process d(host_source_toml("th"));
    client c(d.socket());
    c.send({{"type", "tool_call"},
            {"requestId", "long"},
            {"toolName", "t_sleep"},
            {"arguments", {{"ms", 20000}}}});
    c.send({{"type", "cancel_tool_call"}, {"requestId", "nobody"}});
    // One connection's frames are handled in order: the call is with the host by now.
    const auto t0 = std::chrono::steady_clock::now();
    c.send({{"type", "cancel_tool_call"}, {"requestId", "long"}});
    auto r = c.wait_result("long");
    CHECK(std::chrono::steady_clock::now() - t0 < 1s);
    CHECK(error_code(r) == "CANCELLED");
    CHECK(c.silent_for(300ms)); // the cancel itself has no reply, and "nobody" got none
    auto line = d.audit_events("tool_call")[0];
    CHECK(line["errorCode"] == "CANCELLED");
    CHECK(line["end"] == "cancel");
}

TEST_CASE("calls of several clients are multiplexed on one host by id", "[e2e][host]") {
    daemon_process d(host_source_toml("th"));
    client a(d.socket()), b(d.socket());
    // Same requestId on two connections: calls of one connection are invisible to others.
    a.send({{"type", "tool_call"},
            {"requestId", "same"},
            {"toolName", "t_sleep"},
            {"arguments", {{"ms", 300}}}});
    b.send({{"type", "tool_call"},
            {"requestId", "same"},
            {"toolName", "t_echo"},
            {"arguments", {{"who", "b"}}}});
    auto rb = b.wait_result("same");
    CHECK(rb["result"]["content"]["who"] == "b");
    auto ra = a.wait_result("same");
    CHECK(ra["result"]["content"]["slept"] == 300);
    // Duplicate requestId in flight on one connection: error frame; the first is unaffected.
    a.send({{"type", "tool_call"},
            {"requestId", "dup"},
            {"toolName", "t_sleep"},
            {"arguments", {{"ms", 300}}}});
    a.send({{"type", "tool_call"},
            {"requestId", "dup"},
            {"toolName", "t_echo"},
            {"arguments", json::object()}});
    auto err = a.read();
    CHECK(err["type"] == "error");
    CHECK(err["requestId"] == "dup");
    auto first = a.wait_result("dup");
    CHECK(first["result"]["content"]["slept"] == 300);
    auto rejected = d.audit_events("tool_call_rejected");
    REQUIRE(rejected.size() == 1);
    CHECK_THAT(rejected[0]["reason"].get<std::string>(), Catch::Contains("already in flight"));
}

TEST_CASE("calls beyond max_calls_in_flight_per_connection are refused at once", "[e2e][host]") {
    daemon_process d(host_source_toml("th") + "[limits]\nmax_calls_in_flight_per_connection = 2\n");
    client c(d.socket());
    for (const char* id : {"a", "b", "c"})
        c.send({{"type", "tool_call"},
                {"requestId", id},
                {"toolName", "t_sleep"},
                {"arguments", {{"ms", 500}}}});
    auto err = c.read();
    CHECK(err["type"] == "error");
    CHECK(err["requestId"] == "c");
    CHECK_THAT(err["message"].get<std::string>(), Catch::Contains("max_calls_in_flight"));
    // Cancels are still read while at the limit.
    c.send({{"type", "cancel_tool_call"}, {"requestId", "a"}});
    CHECK(error_code(c.wait_result("a")) == "CANCELLED");
    CHECK(c.wait_result("b")["result"]["ok"] == true);
}

TEST_CASE("a client that vanishes mid-call has its calls cancelled and audited", "[e2e][host]") {
    daemon_process d(host_source_toml("th"));
    {
        client c(d.socket());
        c.send({{"type", "tool_call"},
                {"requestId", "gone"},
                {"toolName", "t_sleep"},
                {"arguments", {{"ms", 10000}}}});
        // Frames are handled in order: once this is answered, "gone" is running.
        REQUIRE(c.call("t_echo", json::object())["result"]["ok"] == true);
    }
    auto line = d.wait_audit([](const json& l) {
        return l.value("event", "") == "tool_call" && l["requestId"] == "gone";
    });
    CHECK(line["errorCode"] == "CANCELLED");
    CHECK(line["end"] == "client_disconnected");
    auto close =
        d.wait_audit([](const json& l) { return l.value("event", "") == "connection_close"; });
    CHECK(close["callsCancelled"] == 1);
    client again(d.socket());
    CHECK(again.call("t_echo", json::object())["result"]["ok"] == true);
}

TEST_CASE("a crashing host fails its calls in flight and is restarted", "[e2e][host]") {
    temp_dir pids;
    const auto pid_file = (pids.path / "pids").string();
    // Supervision, not confinement: the host writes its pid file outside its sandbox.
    daemon_process d(host_source_toml("th", {"--pid-file=" + pid_file}, "sandbox = \"off\""));
    client c(d.socket());
    const int pid_before = c.call("t_pid", json::object())["result"]["content"];
    c.send({{"type", "tool_call"},
            {"requestId", "inflight"},
            {"toolName", "t_sleep"},
            {"arguments", {{"ms", 10000}}}});
    // Frames are handled in order and the host reads its requests in order: "inflight" is
    // running when t_crash ends the host.
    auto crash = c.call("t_crash", {{"code", 3}});
    CHECK(error_code(crash) == "TOOL_FAILED");
    CHECK_THAT(crash["result"]["error"]["message"].get<std::string>(),
               Catch::Contains("exited with status 3"));
    auto other = c.wait_result("inflight", nullptr, 3s); // failed at once, not at its timeout
    CHECK(error_code(other) == "TOOL_FAILED");
    // A call made while it restarts waits for it within its own timeout.
    auto after = c.call("t_pid", json::object());
    REQUIRE(after["result"]["ok"] == true);
    CHECK(after["result"]["content"] != pid_before);
    d.wait_audit([](const json& l) { return l.value("event", "") == "source_restart"; });
    CHECK_FALSE(d.audit_events("source_exit").empty());
}

TEST_CASE("a host that keeps crashing is marked failed and answers at once", "[e2e][host]") {
    daemon_process d(host_source_toml("th", {"--exit-after-list"}) +
                     host_source_toml("ok", {"--name-prefix=ok_"}));
    client c(d.socket());
    d.wait_audit([](const json& l) { return l.value("event", "") == "source_failed"; }, 20s);
    const auto t0 = std::chrono::steady_clock::now();
    auto r = c.call("t_echo", json::object());
    CHECK(std::chrono::steady_clock::now() - t0 < 1s);
    // It listed its tools before each crash: they stay registered, unavailable, and answer
    // TOOL_FAILED at once, never hang.
    CHECK(error_code(r) == "TOOL_FAILED");
    CHECK(c.call("ok_t_echo", {{"fine", 1}})["result"]["ok"] == true);
}

TEST_CASE("a host that fails to start does not block readiness", "[e2e][host]") {
    daemon_process d(host_source_toml("broken", {"--crash-on-init"}) +
                     host_source_toml("ok", {"--name-prefix=ok_"}));
    client c(d.socket());
    CHECK(c.call("ok_t_echo", json::object())["result"]["ok"] == true);
    CHECK(error_code(c.call("t_echo", json::object())) == "UNKNOWN_TOOL");
}

TEST_CASE("readiness waits for a slow host within start_timeout_ms", "[e2e][host]") {
    daemon_process d(host_source_toml("slow", {"--start-delay-ms=400"}));
    // config.json was written only after the host registered, so its tools are there now.
    client c(d.socket());
    CHECK(c.call("t_echo", {{"x", 1}})["result"]["ok"] == true);
}

TEST_CASE("garbage on a host's stdout is logged and skipped", "[e2e][host]") {
    daemon_process d(host_source_toml("th", {"--garbage-on-start"}));
    client c(d.socket());
    auto r = c.call("t_garbage", json::object());
    CHECK(r["result"]["content"] == "after-garbage");
    CHECK(c.call("t_echo", {{"still", "fine"}})["result"]["ok"] == true);
    CHECK_THAT(d.log(), Catch::Contains("not a protocol message"));
}

TEST_CASE("tool failures map to TOOL_FAILED with the host's details", "[e2e][host]") {
    daemon_process d(host_source_toml("th"));
    client c(d.socket());
    auto f = c.call("t_fail", json::object());
    CHECK(error_code(f) == "TOOL_FAILED");
    CHECK(f["result"]["error"]["message"] == "tool said no");
    auto t = c.call("t_throw", json::object());
    CHECK(error_code(t) == "TOOL_FAILED");
    CHECK(t["result"]["error"]["details"]["type"] == "TypeError");
    CHECK(t["result"]["error"]["details"]["detail"] == "boom");
    CHECK_FALSE(t["result"]["error"].dump().find("stack") != std::string::npos);
    CHECK_THAT(d.log(), Catch::Contains("at t_throw"));
}

TEST_CASE("results over max_result_bytes resolve TOOL_FAILED saying so", "[e2e][host]") {
    daemon_process d(host_source_toml("th") + "[limits]\nmax_result_bytes = 100000\n");
    client c(d.socket());
    CHECK(c.call("t_big", {{"bytes", 50000}})["result"]["ok"] == true);
    auto big = c.call("t_big", {{"bytes", 200000}});
    CHECK(error_code(big) == "TOOL_FAILED");
    CHECK_THAT(big["result"]["error"]["message"].get<std::string>(),
               Catch::Contains("max_result_bytes"));
    auto huge = c.call("t_big", {{"bytes", 3000000}}); // over the host line limit too
    CHECK(error_code(huge) == "TOOL_FAILED");
    CHECK(c.call("t_echo", json::object())["result"]["ok"] == true);
}

TEST_CASE("secrets never reach the audit log or the daemon log", "[e2e][host]") {
    daemon_process d(host_source_toml("th", {"--stderr-secret"}));
    client c(d.socket());
    const std::string token = "ghp_abcdefghijklmnopqrstuvwxyz0123456789";
    auto r = c.call("t_secret",
                    {{"token", token}, {"password", "hunter2"}, {"path", "/home/u/notes.txt"}});
    REQUIRE(r["result"]["ok"] == true);
    const auto line = d.audit_events("tool_call")[0].dump();
    CHECK(line.find(token) == std::string::npos);
    CHECK(line.find("hunter2") == std::string::npos);
    CHECK(line.find("abcdefghijklmnop1234") == std::string::npos);
    CHECK(line.find("/home/u/notes.txt") != std::string::npos);
    CHECK(line.find("[REDACTED]") != std::string::npos);
    d.stop();
    const auto log = d.log();
    CHECK(log.find("THISISSECRET12345") == std::string::npos);
    CHECK(log.find(token) == std::string::npos);
}

TEST_CASE("tool names are unique across sources and a prefix lets two coexist", "[e2e][host]") {
    {
        // Two hosts listing the same names: the daemon starts; the names stay with the host
        // earlier in the config, whichever listed first, and the other fails alone, named
        // with both sources in its error and the log.
        daemon_process d(host_source_toml("one") + host_source_toml("two"));
        client c(d.socket());
        CHECK(c.call("t_echo", json::object())["result"]["ok"] == true);
        CHECK(source_status(c, "one")["state"] == "ready");
        const json two = source_status(c, "two");
        CHECK(two["state"] == "failed");
        CHECK_THAT(two["lastError"].get<std::string>(), Catch::Contains("'one'") &&
                                                            Catch::Contains("'two'") &&
                                                            Catch::Contains("prefix"));
        CHECK_THAT(d.log(), Catch::Contains("source 'two' failed: tool name"));
    }
    daemon_process d(host_source_toml("one") + host_source_toml("two", {}, "prefix = \"b_\"\n"));
    client c(d.socket());
    CHECK(c.call("t_echo", json::object())["result"]["ok"] == true);
    CHECK(c.call("b_t_echo", json::object())["result"]["ok"] == true);
}

TEST_CASE("SIGTERM: new calls are refused, calls in flight get the grace, then exit 0",
          "[e2e][host]") {
    daemon_process d(host_source_toml("th") + "[tools]\nshutdown_grace_ms = 1000\n");
    client c(d.socket());
    c.send({{"type", "tool_call"},
            {"requestId", "short"},
            {"toolName", "t_sleep"},
            {"arguments", {{"ms", 300}}}});
    c.send({{"type", "tool_call"},
            {"requestId", "long"},
            {"toolName", "t_sleep"},
            {"arguments", {{"ms", 20000}}}});
    REQUIRE(c.call("t_echo", json::object())["result"]["ok"] == true); // both are in flight
    client other(d.socket());
    ::kill(d.pid(), SIGTERM);
    // Once the daemon has the signal, new calls are refused (bounded wait for it).
    const auto deadline = std::chrono::steady_clock::now() + 5s;
    auto refused = other.call("t_echo", json::object());
    while (refused["result"]["ok"] == true && std::chrono::steady_clock::now() < deadline)
        refused = other.call("t_echo", json::object());
    CHECK(error_code(refused) == "RUNTIME_SHUTTING_DOWN");
    CHECK(c.wait_result("short")["result"]["ok"] == true); // finished within the grace
    auto cut = c.wait_result("long");
    CHECK(error_code(cut) == "RUNTIME_SHUTTING_DOWN");
    CHECK(d.wait_exit(10s) == 0);
    CHECK_FALSE(fs::exists(d.socket()));
    auto lines = d.audit();
    CHECK(lines.back()["event"] == "daemon_stop");
}

TEST_CASE("tool hosts inherit no socket or other stray descriptor from the daemon", "[e2e][host]") {
    daemon_process d(host_source_toml("th"));
    client keep(d.socket()); // a live client connection the host must not see
    keep.send({{"type", "hello"}});
    keep.read();
    client c(d.socket());
    auto crash = c.call("t_crash", json::object()); // the restarted host is spawned after accept
    CHECK(crash["result"]["ok"] == false);
    const int pid = c.call("t_pid", json::object())["result"]["content"];
    int sockets = 0;
    for (const auto& e : fs::directory_iterator("/proc/" + std::to_string(pid) + "/fd")) {
        std::error_code ec;
        const auto target = fs::read_symlink(e.path(), ec).string();
        if (target.rfind("socket:", 0) == 0) ++sockets;
    }
    CHECK(sockets == 0);
}

TEST_CASE("a source whose program cannot be started says so once and is not restarted",
          "[e2e][host]") {
    // A missing program (sandbox off: posix_spawn's ENOENT), and wrapper scripts whose own
    // program is missing (127) or may not be executed (126, e.g. a pyenv shim under the
    // sandbox): each fails at once with a reason, not "exited 5 times".
    daemon_process d("[[sources]]\nname = \"ghost\"\nkind = \"host\"\n"
                     "command = [\"no-such-program-meith\"]\nsandbox = \"off\"\n"
                     "[[sources]]\nname = \"wrap127\"\nkind = \"host\"\n"
                     "command = [\"/bin/sh\", \"-c\", \"exec /no/such/interpreter\"]\n"
                     "sandbox = \"off\"\n"
                     "[[sources]]\nname = \"wrap126\"\nkind = \"host\"\n"
                     "command = [\"/bin/sh\", \"-c\", \"exit 126\"]\nsandbox = \"off\"\n"
                     // copied without its files: the interpreter is there, its script is not
                     "[[sources]]\nname = \"noscript\"\nkind = \"host\"\n"
                     "command = [\"node\", \"--no-warnings\", \"tools/missing-host.mjs\"]\n"
                     // a shell command line that ends in a script name is code, not a path
                     "[[sources]]\nname = \"shwrap\"\nkind = \"host\"\nsandbox = \"off\"\n"
                     "command = [\"/bin/sh\", \"-c\", \"exec node " +
                     std::string(MEITH_SOURCE_DIR) + "/tests/hosts/test_host.mjs\"]\n" +
                     host_source_toml("ok", {"--name-prefix=ok_"}));
    client c(d.socket());
    for (const char* name : {"ghost", "wrap127", "wrap126", "noscript"}) {
        d.wait_audit(
            [&](const json& l) {
                return l.value("event", "") == "source_failed" && l.value("source", "") == name;
            },
            10s);
    }
    c.send({{"type", "list_sources"}, {"requestId", "ls"}});
    const json reply = c.read();
    std::map<std::string, json> by_name;
    for (const auto& s : reply["sources"])
        by_name[s["name"].get<std::string>()] = s;
    for (const char* name : {"ghost", "wrap127", "wrap126", "noscript"}) {
        INFO(name << ": " << by_name[name].dump());
        CHECK(by_name[name]["state"] == "failed");
        CHECK(by_name[name]["restarts"] == 0);
        const auto why = by_name[name]["lastError"].get<std::string>();
        CHECK(why.starts_with("cannot start"));
        CHECK(why.find("times within") == std::string::npos);
    }
    CHECK(by_name["ghost"]["lastError"].get<std::string>().find("No such file") !=
          std::string::npos);
    CHECK(by_name["wrap127"]["lastError"].get<std::string>().find("was not found") !=
          std::string::npos);
    CHECK(by_name["wrap126"]["lastError"].get<std::string>().find("sandbox_paths.exec") !=
          std::string::npos);
    CHECK(by_name["noscript"]["lastError"].get<std::string>().find(
              "its script 'tools/missing-host.mjs': No such file or directory") !=
          std::string::npos);
    CHECK(c.call("ok_t_echo", json::object())["result"]["ok"] == true);
    CHECK(by_name["shwrap"]["state"] == "ready");
    CHECK(c.call("t_echo", json::object())["result"]["ok"] == true);
}

} // namespace e2e_host_test
