// End-to-end tests of `meith mcp` (docs/protocol.md §10): the real meith CLI serving the real
// meithd's tools to a real MCP client — the official TypeScript SDK's Client over
// StdioClientTransport (tests/mcp/bridge_client.mjs, @modelcontextprotocol/sdk pinned in
// tests/mcp/package-lock.json) — and to JSON-RPC lines written by hand for the bad-input cases.
#include "daemon_fixture.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cstdio>
#include <fstream>
#include <map>
#include <sys/wait.h>

using namespace meith::test;

namespace e2e_mcp_bridge_test { // one namespace per file: the tests build as unity batches

namespace {

/// Runs `node tests/mcp/bridge_client.mjs ARGS…` and parses the one JSON line it prints.
json run_bridge_client_env(const std::vector<std::string>& args, const std::string& env);

/// Runs tests/mcp/bridge_client.mjs with `args` (auto-start off: no test starts a stray daemon).
json run_bridge_client(const std::vector<std::string>& args) {
    return run_bridge_client_env(args, "MEITH_NO_AUTOSTART=1");
}

/// As run_bridge_client, with `env` ("NAME=value ...") before the command.
json run_bridge_client_env(const std::vector<std::string>& args, const std::string& env) {
    std::string cmd =
        env + " node '" + std::string(MEITH_SOURCE_DIR) + "/tests/mcp/bridge_client.mjs'";
    for (const auto& a : args)
        cmd += " '" + a + "'";
    return run_json_command(cmd);
}

std::vector<std::string> names_of(const json& tools) {
    std::vector<std::string> names;
    for (const auto& t : tools)
        names.push_back(t["name"].get<std::string>());
    return names;
}

} // namespace

TEST_CASE("meith mcp: the TypeScript SDK client lists, calls, streams, cancels and hears "
          "list_changed",
          "[e2e][mcp][bridge]") {
    daemon_process d(host_source_toml("th"));
    const fs::path next_config = d.home() / "next.toml";
    std::ofstream(next_config) << host_source_toml("th") +
                                      host_source_toml("th2", {}, "prefix = \"extra_\"");
    const json out = run_bridge_client({"sdk", MEITH_CLI, d.home().string(), next_config.string()});

    CHECK(out["serverVersion"]["name"] == "meith");
    CHECK(out["capabilities"]["tools"]["listChanged"] == true);

    // plugin (the default caller) sees the tools it may call: echo and the read-only host
    // tools, not t_write (writes-files).
    const auto names = names_of(out["tools"]);
    CHECK(std::count(names.begin(), names.end(), "echo") == 1);
    CHECK(std::count(names.begin(), names.end(), "t_echo") == 1);
    CHECK(std::count(names.begin(), names.end(), "t_write") == 0);
    for (const auto& t : out["tools"]) {
        CHECK(t["inputSchema"].is_object());
        if (t["name"] == "echo") CHECK(t["annotations"]["readOnlyHint"] == true);
    }

    // The text-payload tool: one string `input`, which becomes the payload.
    for (const auto& t : out["tools"])
        if (t["name"] == "t_custom") CHECK(t["inputSchema"]["required"] == json::array({"input"}));
    CHECK(out["custom"]["structuredContent"]["got"] == "free\nform");

    // echo's content (an object) is one text block plus structuredContent.
    CHECK(out["echo"]["content"][0]["type"] == "text");
    CHECK(out["echo"]["structuredContent"]["hello"] == "mcp");
    CHECK_FALSE(out["echo"].value("isError", false));

    // A streaming tool's events reach the client as progress notifications (the bridge sends
    // all three before the result; the SDK drops a notification it has not dispatched when
    // the result arrives, so the last one may be missing here).
    REQUIRE(out["progress"].size() >= 1);
    CHECK(out["progress"].size() <= 3);
    CHECK(out["progress"][0]["progress"] == 1);
    CHECK(out["stream"]["structuredContent"]["done"] == 3);

    // Denied: a tool result with isError, not a protocol error.
    CHECK(out["denied"]["isError"] == true);
    CHECK_THAT(out["denied"]["content"][0]["text"].get<std::string>(),
               Catch::StartsWith("PERMISSION_DENIED: "));
    // Unknown: the JSON-RPC error -32602.
    CHECK(out["unknown"]["code"] == -32602);

    // Twenty calls in flight at once, each answered with its own result.
    REQUIRE(out["many"].size() == 20);
    for (int i = 0; i < 20; ++i)
        CHECK(out["many"][static_cast<std::size_t>(i)] == i);

    // Cancel through the SDK's AbortSignal ends the call well before its 5 s.
    CHECK(out["cancel"]["rejected"] == true);
    CHECK(out["cancel"]["ms"].get<int>() < 3000);
    CHECK(out["afterCancel"]["structuredContent"]["after"] == "cancel");

    // The reload that added a source was announced and its tools are listed.
    CHECK(out["listChanged"].get<int>() >= 1);
    const auto after = out["toolsAfterReload"].get<std::vector<std::string>>();
    CHECK(std::count(after.begin(), after.end(), "extra_t_echo") == 1);

    // The daemon cancelled the call the client aborted, and audited the MCP client as agent.
    const json cancelled = d.wait_audit([](const json& l) {
        return l.value("event", "") == "tool_call" && l.value("toolName", "") == "t_sleep";
    });
    CHECK(cancelled["errorCode"] == "CANCELLED");
    CHECK(cancelled["agent"] == "sdk-test-agent");
    CHECK(cancelled["caller"] == "plugin");
}

TEST_CASE("meith mcp: bad JSON-RPC gets errors, pings are answered, stdin EOF ends it",
          "[e2e][mcp][bridge]") {
    daemon_process d;
    const json out = run_bridge_client({"raw", MEITH_CLI, "--home", d.home().string()});
    CHECK(out["initialize"]["result"]["protocolVersion"] == "2025-06-18");
    CHECK(out["malformed"]["error"]["code"] == -32700);
    CHECK(out["malformed"]["id"].is_null());
    CHECK(out["unknownMethod"]["error"]["code"] == -32601);
    CHECK(out["unknownMethod"]["id"] == 3);
    // The cancel for a finished request changed nothing: the ping after it is answered.
    CHECK(out["ping"]["id"] == 4);
    CHECK(out["ping"]["result"].is_object());
    CHECK(names_of(out["toolsList"]["result"]["tools"]) == std::vector<std::string>{"echo"});
    CHECK(out["badCursor"]["error"]["code"] == -32602);
    CHECK(out["exitCode"] == 0);
}

TEST_CASE("meith mcp: a request over 64 MiB is answered under its id, and its tail is not read as "
          "a message",
          "[e2e][mcp][bridge]") {
    // Issue 42: meith mcp split stdin by hand; past 64 MiB it answered with a null id and read
    // the rest of the line as a new (malformed) message.
    daemon_process d;
    const json out = run_bridge_client({"oversized", MEITH_CLI, "--home", d.home().string()});
    CHECK(out["initialize"]["result"]["protocolVersion"] == "2025-06-18");
    CHECK(out["huge"]["id"] == "huge");
    CHECK(out["huge"]["error"]["code"] == -32700);
    CHECK_THAT(out["huge"]["error"]["message"].get<std::string>(),
               Catch::Contains("is longer than 64 MiB"));
    CHECK(out["ping"]["id"] == 8);
    CHECK(out["ping"]["result"].is_object());
    CHECK(out["exitCode"] == 0);
}

TEST_CASE("meith mcp: requests in flight when stdin closes are still answered, then it exits",
          "[e2e][mcp][bridge]") {
    // A client that writes its requests and closes its end (a script piping into meith mcp)
    // gets every answer; the bridge used to exit at EOF and drop the calls in flight. The last
    // message (the cancel) has no newline before the EOF: it is still read.
    daemon_process d(host_source_toml("th"));
    const std::string lines =
        R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"pipe","version":"0"}}})"
        "\n"
        R"({"jsonrpc":"2.0","method":"notifications/initialized"})"
        "\n"
        R"({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"t_sleep","arguments":{"ms":400}}})"
        "\n"
        R"({"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"n":3}}})"
        "\n"
        R"({"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"t_sleep","arguments":{"ms":5000}}})"
        "\n"
        // A task-augmented call (answered at once with meith-task-1) and its tasks/result,
        // which waits for the call's end (after every other answer: the drain must wait for it).
        R"({"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"t_sleep","arguments":{"ms":700},"task":{"ttl":60000}}})"
        "\n"
        R"({"jsonrpc":"2.0","id":6,"method":"tasks/result","params":{"taskId":"meith-task-1"}})"
        "\n"
        R"({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":4}})";
    const fs::path in = d.home() / "requests.jsonl";
    std::ofstream(in) << lines;
    const std::string cmd = "MEITH_NO_AUTOSTART=1 '" + std::string(MEITH_CLI) + "' --home '" +
                            d.home().string() + "' mcp < '" + in.string() + "'";
    FILE* pipe = ::popen(cmd.c_str(), "r");
    REQUIRE(pipe != nullptr);
    std::string out;
    std::array<char, 4096> buf{};
    while (const std::size_t n = std::fread(buf.data(), 1, buf.size(), pipe))
        out.append(buf.data(), n);
    const int status = ::pclose(pipe);
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
    std::map<int, json> answers;
    for (const auto& line : lines_of(out)) {
        const json msg = json::parse(line);
        if (msg.contains("id")) answers[msg["id"].get<int>()] = msg;
    }
    CHECK(answers.count(1) == 1);
    REQUIRE(answers.count(2) == 1);
    CHECK(answers[2]["result"]["structuredContent"]["slept"] == 400);
    REQUIRE(answers.count(3) == 1);
    CHECK(answers[3]["result"]["structuredContent"]["n"] == 3);
    REQUIRE(answers.count(5) == 1);
    CHECK(answers[5]["result"]["task"]["taskId"] == "meith-task-1");
    REQUIRE(answers.count(6) == 1);
    CHECK(answers[6]["result"]["structuredContent"]["slept"] == 700);
    // The cancelled call's answer is not sent (the MCP rule), and the bridge did not wait 5 s
    // for it: the audit line says it was cancelled.
    CHECK(answers.count(4) == 0);
    const json cancelled = d.wait_audit([](const json& l) {
        return l.value("event", "") == "tool_call" && l.value("toolName", "") == "t_sleep" &&
               l.value("errorCode", "") == "CANCELLED";
    });
    CHECK(cancelled["caller"] == "plugin");
}

TEST_CASE("meith mcp: after stdin closes it stops waiting once nobody reads its answers",
          "[e2e][mcp][bridge]") {
    // The reader of stdout is gone (it exited): the call in flight is not waited for; it ends
    // cancelled when the bridge leaves, not with its result 5 s later.
    daemon_process d(host_source_toml("th"));
    const fs::path in = d.home() / "requests.jsonl";
    std::ofstream(in)
        << R"({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t_sleep","arguments":{"ms":5000}}})"
        << "\n";
    const std::string cmd = "MEITH_NO_AUTOSTART=1 '" + std::string(MEITH_CLI) + "' --home '" +
                            d.home().string() + "' mcp < '" + in.string() + "' | true";
    REQUIRE(std::system(cmd.c_str()) == 0);
    const json line = d.wait_audit([](const json& l) {
        return l.value("event", "") == "tool_call" && l.value("toolName", "") == "t_sleep";
    });
    CHECK(line["errorCode"] == "CANCELLED");
}

TEST_CASE("meith mcp: members of unexpected types get their JSON-RPC error and the session goes "
          "on, a long non-ASCII id is answered under that id",
          "[e2e][mcp][bridge]") {
    // Each of these made the bridge print `internal error: [json.exception.type_error.302]` and
    // exit 2, dropping every call in flight; the long id was cut inside a character and never
    // answered.
    daemon_process d;
    const json out = run_bridge_client({"typed", MEITH_CLI, "--home", d.home().string()});
    CHECK(out["numericJsonrpc"]["error"]["code"] == -32600);
    CHECK(out["numericJsonrpc"]["id"] == 1);
    CHECK(out["nullJsonrpc"]["error"]["code"] == -32600);
    CHECK(out["nullJsonrpc"]["id"] == 2);
    CHECK(out["numericVersion"]["error"]["code"] == -32602);
    CHECK_THAT(out["numericVersion"]["error"]["message"].get<std::string>(),
               Catch::Contains("protocolVersion") && Catch::Contains("string"));
    CHECK(out["numericClientName"]["error"]["code"] == -32602);
    CHECK_THAT(out["numericClientName"]["error"]["message"].get<std::string>(),
               Catch::Contains("clientInfo"));
    CHECK(out["initialize"]["result"]["protocolVersion"] == "2025-06-18");
    CHECK(out["longIdCall"]["id"] == out["longId"]);
    CHECK_FALSE(out["longIdCall"]["result"].contains("isError"));
    CHECK(out["longIdCall"]["result"]["structuredContent"]["say"] == "hi");
    CHECK(out["ping"]["id"] == 7);
    CHECK(out["ping"]["result"].is_object());
    CHECK(out["exitCode"] == 0);
}

TEST_CASE("meith mcp: with no daemon every request gets an error saying how to start it",
          "[e2e][mcp][bridge]") {
    temp_dir home;
    const json out = run_bridge_client({"raw", MEITH_CLI, "--home", home.path.string(), "--socket",
                                        (home.path / "no.sock").string()});
    CHECK(out["initialize"]["error"]["code"] == -32603);
    CHECK_THAT(out["initialize"]["error"]["message"].get<std::string>(),
               Catch::Contains("meithd is not running") && Catch::Contains("start it with"));
    CHECK(out["ping"]["result"].is_object());
    CHECK(out["toolsList"]["error"]["code"] == -32603);
    CHECK(out["exitCode"] == 0);
}

TEST_CASE("meith mcp: on a cold home the bridge starts meithd and serves its tools",
          "[e2e][mcp][bridge][autostart]") {
    // How agents meet it: an MCP client config runs `meith mcp` before any daemon exists.
    temp_dir home;
    autostarted_daemon stop_it{home.path};
    const json out = run_bridge_client_env({"raw", MEITH_CLI, "--home", home.path.string()},
                                           "MEITH_NO_AUTOSTART=");
    CHECK(out["initialize"]["result"]["serverInfo"]["name"] == "meith");
    CHECK(names_of(out["toolsList"]["result"]["tools"]) == std::vector<std::string>{"echo"});
    CHECK(out["exitCode"] == 0);
    CHECK(fs::exists(home.path / "meithd.log"));
}

TEST_CASE("meith mcp: the MCP Inspector's CLI mode lists and calls tools", "[e2e][mcp][bridge]") {
    // @modelcontextprotocol/inspector 0.15.0: the newest release that runs on Node.js 20 (0.16
    // and later want Node >= 22.7.5), pinned in tests/mcp/package.json.
    daemon_process d;
    const std::string inspector =
        std::string(MEITH_SOURCE_DIR) + "/tests/mcp/node_modules/.bin/mcp-inspector";
    const std::string prefix =
        "'" + inspector + "' --cli '" + MEITH_CLI + "' mcp --home '" + d.home().string() + "'";
    const json listed = run_json_command(prefix + " --method tools/list 2>/dev/null");
    CHECK(names_of(listed["tools"]) == std::vector<std::string>{"echo"});
    CHECK(listed["tools"][0]["annotations"]["readOnlyHint"] == true);
    const json called = run_json_command(
        prefix + " --method tools/call --tool-name echo --tool-arg msg=hi 2>/dev/null");
    CHECK(called["structuredContent"]["msg"] == "hi");
    const json line = d.wait_audit([](const json& l) {
        return l.value("event", "") == "tool_call" && l.value("toolName", "") == "echo";
    });
    CHECK(line["ok"] == true);
    CHECK(line["agent"].is_string());
}

TEST_CASE("meith mcp: a call held for approval says so as progress, names the agent to the "
          "approver, and ends saying nobody answered",
          "[e2e][mcp][bridge][diagnosis]") {
    daemon_process d("[tools]\ndefault_timeout_ms = 2000\n"
                     "[[permissions.rules]]\ntool = \"echo\"\ncaller = \"plugin\"\n"
                     "decision = \"ask\"\n");
    auto approver = connect_approver(d); // connected, never answering
    const json out = run_bridge_client({"held", MEITH_CLI, d.home().string()});
    INFO(out.dump());
    REQUIRE(out["progress"].size() >= 1);
    CHECK_THAT(
        out["progress"][0]["message"].get<std::string>(),
        Catch::Contains("waiting for a person to approve it in `meith approve` (up to 2 s)"));
    CHECK(out["result"]["isError"] == true);
    CHECK_THAT(out["result"]["content"][0]["text"].get<std::string>(),
               Catch::Contains("no approver answered within 2 s (the call's timeout); it did not "
                               "run"));
    // The approver saw who asked: the caller, and the MCP client's name as the agent.
    json request;
    for (;;) {
        request = approver->read();
        if (request["type"] == "approval_request") break;
    }
    CHECK(request["caller"] == "plugin");
    CHECK(request["agent"] == "held-agent");
}

} // namespace e2e_mcp_bridge_test
