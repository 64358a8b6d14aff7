// End-to-end: MCP servers over stdio as tool sources (`kind = "mcp"`, docs/protocol.md §7) —
// the real npm servers of tests/mcp (server-everything, server-filesystem, server-memory) and a
// fake one with bad behaviour on demand (tests/mcp/fake_server.mjs): listing, descriptors,
// calls, structured content, progress, cancel and timeout (with notifications/cancelled),
// crashes and restarts, annotations and permissions, list_changed, the server's own requests,
// logging, garbage, revisions and limits.
#include "daemon_fixture.hpp"

#include <catch2/catch.hpp>

#include <csignal>
#include <fstream>
#include <thread>

using namespace meith::test;

namespace e2e_mcp_test { // one namespace per file: the tests build as unity batches

namespace {

std::string mcp_dir() {
    return std::string(MEITH_SOURCE_DIR) + "/tests/mcp";
}

/// A server script of tests/mcp/node_modules; fails loudly when the packages are not installed.
std::string npm_server(const std::string& package) {
    const auto path =
        mcp_dir() + "/node_modules/@modelcontextprotocol/" + package + "/dist/index.js";
    INFO("the MCP test servers are missing: run scripts/install-deps (npm ci in tests/mcp)");
    REQUIRE(fs::exists(path));
    return path;
}

std::string toml_string_array(const std::vector<std::string>& items) {
    std::string out = "[";
    for (const auto& i : items) {
        if (out.size() > 1) out += ", ";
        out += json(i).dump();
    }
    return out + "]";
}

/// A `[[sources]]` entry of kind mcp running `node ARGS…`.
std::string mcp_source_toml(const std::string& name, const std::vector<std::string>& node_args,
                            const std::string& extra = "") {
    std::vector<std::string> cmd{"node"};
    cmd.insert(cmd.end(), node_args.begin(), node_args.end());
    return "[[sources]]\nname = \"" + name +
           "\"\nkind = \"mcp\"\ncommand = " + toml_string_array(cmd) + "\n" + extra + "\n";
}

std::string everything_toml(const std::string& extra = "trust_annotations = true\n") {
    return mcp_source_toml("ev", {npm_server("server-everything"), "stdio"},
                           "prefix = \"ev_\"\n" + extra);
}

std::string fake_toml(const std::vector<std::string>& flags = {}, const std::string& extra = "") {
    std::vector<std::string> args{mcp_dir() + "/fake_server.mjs"};
    args.insert(args.end(), flags.begin(), flags.end());
    return mcp_source_toml("fk", args, "prefix = \"fk_\"\ntrust_annotations = true\n" + extra);
}

json find_tool(const json& tools, const std::string& name) {
    for (const auto& t : tools)
        if (t["name"] == name) return t;
    return nullptr;
}

json list_tools(client& c, const std::string& caller = "cli") {
    c.send({{"type", "list_tools"}, {"clientInfo", {{"caller", caller}}}});
    return c.read()["tools"];
}

/// Polls list_sources until `pred` holds for source `name` (or fails after `timeout`).
json wait_source(client& c, const std::string& name, const std::function<bool(const json&)>& pred,
                 std::chrono::milliseconds timeout = 10s) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    json s;
    while (std::chrono::steady_clock::now() < deadline) {
        s = source_status(c, name);
        if (pred(s)) return s;
        std::this_thread::sleep_for(50ms);
    }
    FAIL("source " << name << " never reached the expected state; last: " << s.dump());
    return s;
}

std::string code_of(const json& frame) {
    return frame["result"]["error"]["code"].get<std::string>();
}

std::string message_of(const json& frame) {
    return frame["result"]["error"]["message"].get<std::string>();
}

std::string first_text(const json& frame) {
    return frame["result"]["content"]["content"][0]["text"].get<std::string>();
}

std::string cli_can_write() {
    return "[permissions.callers.cli]\n"
           "allow = [\"read-only\", \"accesses-network\", \"writes-files\"]\n"
           "deny = [\"destructive\"]\n";
}

} // namespace

// ---- the real servers ----------------------------------------------------------------------

TEST_CASE("mcp: server-everything's tools are listed with prefixed names and MCP descriptors",
          "[e2e][mcp]") {
    daemon_process d(everything_toml(""));
    client c(d.socket());
    const auto tools = list_tools(c);
    const auto echo = find_tool(tools, "ev_echo");
    REQUIRE(echo.is_object());
    CHECK(echo["source"] == "ev");
    CHECK(echo["title"] == "Echo Tool");
    CHECK(echo["description"] == "Echoes back the input string");
    CHECK(echo["inputSchema"]["required"] == json::array({"message"}));
    CHECK(echo["annotations"]["readOnlyHint"] == true);
    // Untrusted annotations give nothing: the tool is `unknown`, denied by default.
    CHECK(echo["capabilities"] == json::array({"unknown"}));
    CHECK(echo["permission"] == "deny");
    CHECK(find_tool(tools, "ev_get-structured-content")["outputSchema"].is_object());
    CHECK(find_tool(tools, "echo")["source"] == "builtin"); // the MCP echo is ev_echo

    const auto s = source_status(c, "ev");
    CHECK(s["kind"] == "mcp");
    CHECK(s["state"] == "ready");
    CHECK(s["protocolVersion"] == "2025-11-25");
    CHECK(s["tools"].get<int>() == static_cast<int>(tools.size()) - 1); // all but echo (builtin)
    CHECK(code_of(c.call("ev_echo", {{"message", "x"}})) == "PERMISSION_DENIED");
    CHECK(d.stop() == 0);
}

TEST_CASE("mcp: calls return MCP results and keep structured content and stream progress",
          "[e2e][mcp]") {
    daemon_process d(everything_toml());
    client c(d.socket());
    auto echo = c.call("ev_echo", {{"message", "hello"}});
    REQUIRE(echo["result"]["ok"] == true);
    CHECK(first_text(echo) == "Echo: hello");
    CHECK_FALSE(echo["result"]["content"].contains("isError"));

    auto weather = c.call("ev_get-structured-content", {{"location", "Chicago"}});
    REQUIRE(weather["result"]["ok"] == true);
    CHECK(weather["result"]["content"]["structuredContent"]["temperature"].is_number());
    CHECK(weather["result"]["content"]["content"].is_array());

    std::vector<json> events;
    auto op = c.call("ev_trigger-long-running-operation", {{"duration", 1}, {"steps", 4}},
                     json::object(), &events);
    REQUIRE(op["result"]["ok"] == true);
    REQUIRE(events.size() == 4);
    for (std::size_t i = 0; i < events.size(); ++i) {
        const auto& e = events[i];
        CHECK(e["type"] == "progress");
        CHECK(e["progress"] == i + 1);
        CHECK(e["total"] == 4);
        CHECK(e["fraction"].get<double>() == Approx(double(i + 1) / 4));
    }
    // Arguments are validated against the server's inputSchema before it is asked.
    CHECK(code_of(c.call("ev_echo", json::object())) == "VALIDATION_ERROR");
}

TEST_CASE("mcp: a required property with a default may be left out, as the server takes it",
          "[e2e][mcp]") {
    // Playwright's browser_take_screenshot declares `type` both required and defaulted, and
    // accepts a call without it; meith must not refuse what the server takes (issue 43).
    daemon_process d(fake_toml({"--shot"}));
    client c(d.socket());
    auto shot = c.call("fk_shot", {{"name", "page"}});
    REQUIRE(shot["result"]["ok"] == true);
    CHECK(first_text(shot) == "page.png"); // the server filled its own default
    auto jpeg = c.call("fk_shot", {{"name", "page"}, {"format", "jpeg"}});
    CHECK(first_text(jpeg) == "page.jpeg");
    // What is given is still checked against the schema, and a property without a default is
    // still required.
    CHECK(code_of(c.call("fk_shot", {{"name", "page"}, {"format", "gif"}})) == "VALIDATION_ERROR");
    CHECK(code_of(c.call("fk_shot", {{"format", "png"}})) == "VALIDATION_ERROR");
}

TEST_CASE("mcp: a cancelled long-running operation resolves at once and the server goes on",
          "[e2e][mcp]") {
    daemon_process d(everything_toml());
    client c(d.socket());
    c.send({{"type", "tool_call"},
            {"requestId", "long"},
            {"toolName", "ev_trigger-long-running-operation"},
            {"arguments", {{"duration", 20}, {"steps", 20}}}});
    auto first = c.read(); // its first progress event: the server is working on it
    CHECK(first["type"] == "tool_event");
    const auto t0 = std::chrono::steady_clock::now();
    c.send({{"type", "cancel_tool_call"}, {"requestId", "long"}});
    auto r = c.wait_result("long");
    CHECK(std::chrono::steady_clock::now() - t0 < 1s);
    CHECK(code_of(r) == "CANCELLED");
    CHECK(c.call("ev_echo", {{"message", "after"}})["result"]["ok"] == true);
    CHECK(c.silent_for(1500ms)); // no progress or result of the cancelled call leaks
}

TEST_CASE("mcp: a server killed mid-call fails the call and is restarted and works again",
          "[e2e][mcp]") {
    daemon_process d(everything_toml());
    client c(d.socket());
    const pid_t pid = source_status(c, "ev")["pid"].get<int>();
    c.send({{"type", "tool_call"},
            {"requestId", "long"},
            {"toolName", "ev_trigger-long-running-operation"},
            {"arguments", {{"duration", 20}, {"steps", 20}}}});
    CHECK(c.read()["type"] == "tool_event");
    ::kill(pid, SIGKILL);
    auto r = c.wait_result("long", nullptr, 3s); // at once, not at its timeout
    CHECK(code_of(r) == "TOOL_FAILED");
    CHECK_THAT(message_of(r), Catch::Contains("killed by signal 9"));
    auto again = c.call("ev_echo", {{"message", "back"}}); // waits for the restart
    REQUIRE(again["result"]["ok"] == true);
    CHECK(first_text(again) == "Echo: back");
    const auto s = source_status(c, "ev");
    CHECK(s["pid"] != pid);
    CHECK(s["restarts"] == 1);
    d.wait_audit([](const json& l) { return l.value("event", "") == "source_restart"; });
    CHECK_FALSE(d.audit_events("source_exit").empty());
}

TEST_CASE("mcp: server-filesystem lists and reads a folder - annotations decide only when trusted",
          "[e2e][mcp]") {
    temp_dir dir;
    std::ofstream(dir.path / "hello.txt") << "hello from mcp\n";
    const auto fs_server = npm_server("server-filesystem");
    const std::string plugin_policy = "[permissions.callers.plugin]\n"
                                      "allow = [\"read-only\", \"writes-files\"]\n"
                                      "deny = [\"destructive\"]\n";
    SECTION("trusted") {
        daemon_process d(mcp_source_toml("fs", {fs_server, dir.path.string()},
                                         "prefix = \"fs_\"\ntrust_annotations = true\n") +
                         plugin_policy);
        client c(d.socket());
        auto list = c.call("fs_list_directory", {{"path", dir.path.string()}},
                           {{"clientInfo", {{"caller", "plugin"}}}});
        REQUIRE(list["result"]["ok"] == true);
        CHECK_THAT(first_text(list), Catch::Contains("[FILE] hello.txt"));
        auto read = c.call("fs_read_text_file", {{"path", (dir.path / "hello.txt").string()}},
                           {{"clientInfo", {{"caller", "plugin"}}}});
        REQUIRE(read["result"]["ok"] == true);
        CHECK(first_text(read) == "hello from mcp\n");
        CHECK(read["result"]["content"]["structuredContent"]["content"] == "hello from mcp\n");
        // Outside the allowed folder: the server's own isError answer.
        auto outside = c.call("fs_read_text_file", {{"path", "/etc/hostname"}},
                              {{"clientInfo", {{"caller", "plugin"}}}});
        CHECK(code_of(outside) == "TOOL_FAILED");
        CHECK_THAT(message_of(outside), Catch::Contains("denied"));
        CHECK(outside["result"]["error"]["details"]["isError"] == true);

        const auto tools = list_tools(c, "plugin");
        CHECK(find_tool(tools, "fs_read_text_file")["capabilities"] == json::array({"read-only"}));
        CHECK(find_tool(tools, "fs_write_file")["capabilities"] ==
              json::array({"writes-files", "destructive"}));
        CHECK(find_tool(tools, "fs_write_file")["permission"] == "deny");
        CHECK(find_tool(tools, "fs_create_directory")["capabilities"] ==
              json::array({"writes-files"}));
        CHECK(find_tool(tools, "fs_create_directory")["permission"] == "allow");
        c.send({{"type", "check_policy"},
                {"requestId", "p1"},
                {"toolName", "fs_write_file"},
                {"clientInfo", {{"caller", "plugin"}}}});
        auto policy = c.read();
        CHECK(policy["decision"] == "deny");
        CHECK(policy["reason"] == "capability 'destructive' is denied for caller 'plugin'");
        auto write =
            c.call("fs_write_file", {{"path", (dir.path / "x.txt").string()}, {"content", "x"}},
                   {{"clientInfo", {{"caller", "plugin"}}}});
        CHECK(code_of(write) == "PERMISSION_DENIED");
        CHECK_FALSE(fs::exists(dir.path / "x.txt"));
    }
    SECTION("untrusted, with a capabilities entry for one tool") {
        daemon_process d(
            mcp_source_toml(
                "fs", {fs_server, dir.path.string()},
                "prefix = \"fs_\"\ncapabilities = { read_text_file = [\"read-only\"] }\n") +
            plugin_policy);
        client c(d.socket());
        const auto tools = list_tools(c, "plugin");
        CHECK(find_tool(tools, "fs_read_text_file")["capabilities"] == json::array({"read-only"}));
        CHECK(find_tool(tools, "fs_list_directory")["capabilities"] == json::array({"unknown"}));
        CHECK(find_tool(tools, "fs_create_directory")["permission"] == "deny");
        auto read = c.call("fs_read_text_file", {{"path", (dir.path / "hello.txt").string()}},
                           {{"clientInfo", {{"caller", "plugin"}}}});
        CHECK(read["result"]["ok"] == true);
        CHECK(code_of(c.call("fs_list_directory", {{"path", dir.path.string()}})) ==
              "PERMISSION_DENIED");
    }
}

TEST_CASE("mcp: server-memory keeps its graph in a file over a restart", "[e2e][mcp]") {
    temp_dir state;
    const auto file = state.path / "memory.jsonl";
    daemon_process d(mcp_source_toml("mem", {npm_server("server-memory")},
                                     "prefix = \"mem_\"\ntrust_annotations = true\nenv = { "
                                     "MEMORY_FILE_PATH = " +
                                         json(file.string()).dump() +
                                         " }\nsandbox_paths = { write = [" +
                                         json(state.path.string()).dump() + "] }\n") +
                     cli_can_write());
    client c(d.socket());
    const json cli = {{"clientInfo", {{"caller", "cli"}}}};
    auto created = c.call(
        "mem_create_entities",
        {{"entities",
          {{{"name", "meith"}, {"entityType", "daemon"}, {"observations", {"speaks MCP"}}}}}},
        cli);
    INFO(created.dump());
    REQUIRE(created["result"]["ok"] == true);
    CHECK(fs::exists(file));
    // delete_entities is destructive, which the cli may not use here.
    CHECK(code_of(c.call("mem_delete_entities", {{"entityNames", {"meith"}}}, cli)) ==
          "PERMISSION_DENIED");

    const int pid = source_status(c, "mem")["pid"];
    c.send({{"type", "restart_source"}, {"name", "mem"}, {"clientInfo", {{"caller", "cli"}}}});
    CHECK(c.read()["type"] == "source_restarted");
    wait_source(c, "mem", [&](const json& s) { return s["state"] == "ready" && s["pid"] != pid; });
    auto graph = c.call("mem_read_graph", json::object());
    REQUIRE(graph["result"]["ok"] == true);
    const auto& entities = graph["result"]["content"]["structuredContent"]["entities"];
    REQUIRE(entities.size() == 1);
    CHECK(entities[0]["name"] == "meith");
    CHECK(entities[0]["observations"] == json::array({"speaks MCP"}));
    CHECK(d.stop() == 0);
}

// ---- the fake server: protocol details and bad behaviour ------------------------------------

TEST_CASE("mcp: cancel and timeout send notifications/cancelled - late answers are dropped",
          "[e2e][mcp]") {
    daemon_process d(fake_toml());
    client c(d.socket());
    c.send({{"type", "tool_call"},
            {"requestId", "slow"},
            {"toolName", "fk_slow"},
            {"arguments", {{"ms", 700}}}});
    // One connection's frames are handled in order: the call is with the server by now.
    const auto t0 = std::chrono::steady_clock::now();
    c.send({{"type", "cancel_tool_call"}, {"requestId", "slow"}});
    CHECK(code_of(c.wait_result("slow")) == "CANCELLED");
    CHECK(std::chrono::steady_clock::now() - t0 < 500ms);

    auto timed_out = c.call("fk_slow", {{"ms", 700}}, {{"timeoutMs", 200}});
    CHECK(code_of(timed_out) == "TIMEOUT");
    CHECK(c.silent_for(1000ms)); // both late answers came and were dropped

    auto seen = c.call("fk_cancelled", json::object());
    const auto& cancelled = seen["result"]["content"]["structuredContent"]["cancelled"];
    REQUIRE(cancelled.size() == 2);
    CHECK(cancelled[0]["requestId"].is_number_integer());
    CHECK(cancelled[0]["reason"] == "cancelled by the client");
    CHECK(cancelled[1]["reason"] == "timeout");
    CHECK(cancelled[0]["requestId"] != cancelled[1]["requestId"]);
}

TEST_CASE("mcp: isError and JSON-RPC errors become TOOL_FAILED - progress carries messages",
          "[e2e][mcp]") {
    daemon_process d(fake_toml());
    client c(d.socket());
    auto fail = c.call("fk_fail", json::object());
    CHECK(code_of(fail) == "TOOL_FAILED");
    CHECK(message_of(fail) == "first problem\nsecond problem");
    CHECK(fail["result"]["error"]["details"]["content"].size() == 3);

    auto rpc = c.call("fk_rpc_error", json::object());
    CHECK(code_of(rpc) == "TOOL_FAILED");
    CHECK(message_of(rpc) == "the fake server refused");
    CHECK(rpc["result"]["error"]["details"] ==
          json::parse(
              R"({"code":-32000,"message":"the fake server refused","data":{"why":"asked to"}})"));

    std::vector<json> events;
    auto p = c.call("fk_progress", {{"steps", 2}}, json::object(), &events);
    CHECK(p["result"]["ok"] == true);
    REQUIRE(events.size() == 2);
    CHECK(events[1] ==
          json::parse(
              R"({"type":"progress","progress":2,"total":2,"fraction":1,"message":"step 2"})"));
}

TEST_CASE("mcp: a server that never answers initialize fails its start with a clear error",
          "[e2e][mcp]") {
    daemon_process d(fake_toml({"--no-init"}, "start_timeout_ms = 300\n"));
    client c(d.socket()); // readiness did not wait for it
    const auto s = wait_source(c, "fk", [](const json& s) { return !s["lastError"].is_null(); });
    CHECK_THAT(s["lastError"].get<std::string>(),
               Catch::Contains("not ready within 300 ms (start_timeout_ms)"));
    CHECK(s["state"] != "ready");
    CHECK(s["protocolVersion"].is_null());
    CHECK(code_of(c.call("fk_echo", {{"text", "x"}})) == "UNKNOWN_TOOL");
}

TEST_CASE("mcp: revisions: an older one of the list is spoken and any other fails the start",
          "[e2e][mcp]") {
    SECTION("2024-11-05 is accepted") {
        daemon_process d(fake_toml({"--revision=2024-11-05"}));
        client c(d.socket());
        auto r = c.call("fk_echo", {{"text", "old"}});
        CHECK(r["result"]["content"]["structuredContent"]["revision"] == "2024-11-05");
        CHECK(source_status(c, "fk")["protocolVersion"] == "2024-11-05");
    }
    SECTION("an unknown revision is a start failure naming it") {
        daemon_process d(fake_toml({"--revision=1999-01-01"}));
        client c(d.socket());
        const auto s =
            wait_source(c, "fk", [](const json& s) { return !s["lastError"].is_null(); });
        CHECK_THAT(s["lastError"].get<std::string>(),
                   Catch::Contains("\"1999-01-01\"") && Catch::Contains("does not speak"));
        CHECK_THAT(d.log(), Catch::Contains("1999-01-01"));
        CHECK(code_of(c.call("fk_echo", {{"text", "x"}})) == "UNKNOWN_TOOL");
    }
    SECTION("an initialize error is a start failure") {
        daemon_process d(fake_toml({"--init-error"}));
        client c(d.socket());
        const auto s =
            wait_source(c, "fk", [](const json& s) { return !s["lastError"].is_null(); });
        CHECK_THAT(s["lastError"].get<std::string>(),
                   Catch::Contains("initialize failed: Unsupported protocol version"));
    }
}

TEST_CASE("mcp: garbage is skipped - a partial line and an exit fail the call and then a restart",
          "[e2e][mcp]") {
    daemon_process d(fake_toml({"--garbage-first", "--page-size=3", "--list-changed-early"}));
    client c(d.socket());
    CHECK(list_tools(c).size() == 15); // 14 tools over five pages, and echo
    CHECK(c.call("fk_echo", {{"text", "fine"}})["result"]["ok"] == true);
    CHECK_THAT(d.log(), Catch::Contains("not a protocol message"));

    auto r = c.call("fk_garbage_exit", json::object());
    CHECK(code_of(r) == "TOOL_FAILED");
    CHECK_THAT(message_of(r), Catch::Contains("exited with status 3"));
    auto again = c.call("fk_echo", {{"text", "again"}});
    CHECK(again["result"]["content"]["structuredContent"]["text"] == "again");
    CHECK(source_status(c, "fk")["restarts"] == 1);
}

TEST_CASE("mcp: a server that lists a taken name fails alone, the daemon starts", "[e2e][mcp]") {
    // Without a prefix the fake server lists `echo`, the built-in's name. Its listing is the
    // program's (an npm update can change it), so it must not stop meithd from starting.
    daemon_process d(mcp_source_toml("fk", {mcp_dir() + "/fake_server.mjs"}));
    client c(d.socket());
    const json fk = wait_source(c, "fk", [](const json& s) { return s["state"] == "failed"; });
    CHECK_THAT(fk["lastError"].get<std::string>(),
               Catch::Contains("'echo'") && Catch::Contains("builtin") && Catch::Contains("fk"));
    CHECK(c.call("echo", {{"x", 1}})["result"]["ok"] == true);
    CHECK_THAT(d.log(), Catch::Contains("source 'fk' failed"));
}

TEST_CASE("mcp: a reply too long to parse fails its own call, found by its top-level id, not "
          "another client's call whose id it holds",
          "[e2e][mcp]") {
    // The official SDKs write "id" after "result": the line's first "id" (here nested in its
    // structuredContent) is another client's call, still running.
    daemon_process d(fake_toml() + "[limits]\nmax_result_bytes = 2000\n");
    client other(d.socket());
    other.send({{"type", "tool_call"},
                {"protocol", 1},
                {"requestId", "slow-1"},
                {"toolName", "fk_slow"},
                {"arguments", {{"ms", 1500}}}});
    client c(d.socket());
    // Over the line limit (max_result_bytes + 1 MiB): dropped unparsed, its id scanned.
    auto huge = c.call("fk_big", {{"bytes", 1100000}, {"late_id", true}}, {{"timeoutMs", 10000}});
    CHECK(code_of(huge) == "TOOL_FAILED");
    CHECK_THAT(message_of(huge), Catch::Contains("max_result_bytes"));
    const json slow = other.read();
    REQUIRE(slow["type"] == "tool_result");
    CHECK(slow["requestId"] == "slow-1");
    CHECK(first_text(slow) == "slow done");
}

TEST_CASE("mcp: results over max_result_bytes fail - foreign ids are dropped", "[e2e][mcp]") {
    daemon_process d(fake_toml() + "[limits]\nmax_result_bytes = 2000\n");
    client c(d.socket());
    auto over = c.call("fk_big", {{"bytes", 3000}});
    CHECK(code_of(over) == "TOOL_FAILED");
    CHECK_THAT(message_of(over), Catch::Contains("max_result_bytes"));
    // A line over the line limit (max_result_bytes + 1 MiB) names its id first.
    auto huge = c.call("fk_big", {{"bytes", 1100000}}, {{"timeoutMs", 10000}});
    CHECK(code_of(huge) == "TOOL_FAILED");
    CHECK_THAT(message_of(huge), Catch::Contains("max_result_bytes"));
    CHECK(c.call("fk_big", {{"bytes", 100}})["result"]["ok"] == true);

    auto right = c.call("fk_wrong_id", json::object());
    CHECK(first_text(right) == "right answer");
    CHECK(c.call("fk_echo", {{"text", "still"}})["result"]["ok"] == true);
    CHECK(c.silent_for(200ms));
}

TEST_CASE(
    "mcp: the server's requests: ping and roots answered and sampling and elicitation refused",
    "[e2e][mcp]") {
    temp_dir work;
    daemon_process d(fake_toml({}, "cwd = " + json(work.path.string()).dump() + "\n"));
    client c(d.socket());
    auto ask = [&](const std::string& method) {
        auto r = c.call("fk_ask", {{"method", method}});
        REQUIRE(r["result"]["ok"] == true);
        return r["result"]["content"]["structuredContent"];
    };
    auto sampling = ask("sampling/createMessage");
    CHECK(sampling["error"]["code"] == -32601);
    CHECK(sampling["id"].is_string()); // a string id is answered as sent
    CHECK(ask("elicitation/create")["error"]["code"] == -32601);
    CHECK(ask("ping")["result"] == json::object());
    auto roots = ask("roots/list");
    CHECK(roots["id"] == 77);
    REQUIRE(roots["result"]["roots"].size() == 1);
    CHECK(roots["result"]["roots"][0]["uri"] == "file://" + work.path.string());
}

TEST_CASE("mcp: log messages from the server reach the daemon log redacted", "[e2e][mcp]") {
    daemon_process d(fake_toml());
    client c(d.socket());
    CHECK(c.call("fk_log_secret", json::object())["result"]["ok"] == true);
    const auto deadline = std::chrono::steady_clock::now() + 3s;
    while (d.log().find("leaked") == std::string::npos &&
           std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(20ms);
    const auto log = d.log();
    CHECK_THAT(log, Catch::Contains("logged by the fake server"));
    CHECK_THAT(log, Catch::Contains("leaked"));
    CHECK(log.find("hunter2-very-secret") == std::string::npos);
    CHECK(log.find("ghp_abcdefghijklmnopqrstuvwxyz0123456789") == std::string::npos);
}

TEST_CASE("mcp: list_changed re-lists the tools - calls in flight are unaffected", "[e2e][mcp]") {
    daemon_process d(fake_toml());
    client c(d.socket());
    CHECK(find_tool(list_tools(c), "fk_added").is_null());
    c.send({{"type", "tool_call"},
            {"requestId", "inflight"},
            {"toolName", "fk_slow"},
            {"arguments", {{"ms", 600}}}});
    CHECK(c.call("fk_add_tool", json::object())["result"]["ok"] == true);
    auto line =
        d.wait_audit([](const json& l) { return l.value("event", "") == "source_tools_changed"; });
    CHECK(line["source"] == "fk");
    CHECK(line["added"] == json::array({"fk_added"}));
    CHECK(line["removed"] == json::array());
    CHECK(line["tools"] == 15);
    const auto added = find_tool(list_tools(c), "fk_added");
    REQUIRE(added.is_object());
    CHECK(added["capabilities"] ==
          json::array({"writes-files", "accesses-network", "destructive"}));
    CHECK(code_of(c.call("fk_added", json::object())) == "PERMISSION_DENIED");
    auto inflight = c.wait_result("inflight");
    CHECK(first_text(inflight) == "slow done");
}

TEST_CASE("mcp: shutdown closes stdin first and signals only after kill_grace_ms", "[e2e][mcp]") {
    SECTION("a server that exits on EOF is never signalled") {
        daemon_process d(fake_toml());
        client c(d.socket());
        CHECK(c.call("fk_echo", {{"text", "x"}})["result"]["ok"] == true);
        CHECK(d.stop() == 0);
        const auto exits = d.audit_events("source_exit");
        REQUIRE(exits.size() == 1);
        CHECK(exits[0]["status"] == "exited with status 0");
    }
    SECTION("a server that ignores EOF gets SIGTERM after the grace") {
        daemon_process d(fake_toml({"--ignore-eof"}) + "[tools]\nkill_grace_ms = 400\n");
        client c(d.socket());
        CHECK(c.call("fk_echo", {{"text", "x"}})["result"]["ok"] == true);
        const auto t0 = std::chrono::steady_clock::now();
        CHECK(d.stop() == 0);
        CHECK(std::chrono::steady_clock::now() - t0 >= 400ms);
        const auto exits = d.audit_events("source_exit");
        REQUIRE(exits.size() == 1);
        CHECK(exits[0]["status"] == "killed by signal 15 (Terminated)");
    }
}

TEST_CASE("mcp: a tool refused for unknown capabilities says how to declare them, and the "
          "server runs confined in the default profile, saying so",
          "[e2e][mcp][diagnosis]") {
    // No trust_annotations, no capabilities table: every tool of the server is `unknown`.
    daemon_process d(mcp_source_toml("fk", {mcp_dir() + "/fake_server.mjs"}, "prefix = \"fk_\"\n"));
    client c(d.socket());
    const json r = c.call("fk_echo", {{"text", "hi"}});
    REQUIRE(r["result"]["ok"] == false);
    const std::string m = r["result"]["error"]["message"].get<std::string>();
    CHECK(r["result"]["error"]["code"] == "PERMISSION_DENIED");
    CHECK_THAT(m, Catch::Contains("MCP server 'fk' declares no capabilities for 'echo': add "
                                  "`trust_annotations = true` to its [[sources]] entry"));
    CHECK_THAT(m, Catch::Contains("`capabilities = { \"echo\" = [\"read-only\"] }`"));
    CHECK_THAT(d.log(), Catch::Contains("'fk': a tool of it declares no capabilities, so it "
                                        "runs in the sandbox profile \"default\""));
    const auto s = source_status(c, "fk");
    CHECK_FALSE(s["sandbox"].contains("unconfined"));
    CHECK(s["sandbox"]["profile"] == "default");
}

TEST_CASE("mcp: a launcher that hangs at start says why at its first timeout: the reason "
          "names its last stderr line",
          "[e2e][mcp][diagnosis]") {
    // npx without the network: it says so on stderr, then waits on its retries.
    daemon_process d(mcp_source_toml(
        "hung",
        {"-e", "console.error('npm error network request to https://registry.npmjs.org/x failed'); "
               "setInterval(() => {}, 1000)"},
        "start_timeout_ms = 1500\n"));
    client c(d.socket());
    json s;
    for (int i = 0; i < 200; ++i) {
        s = source_status(c, "hung");
        if (!s["lastError"].is_null()) break;
        std::this_thread::sleep_for(50ms);
    }
    INFO(s.dump());
    CHECK(s["lastError"] == "not ready within 1500 ms (start_timeout_ms); its last stderr line: "
                            "npm error network request to https://registry.npmjs.org/x failed");
}

} // namespace e2e_mcp_test
