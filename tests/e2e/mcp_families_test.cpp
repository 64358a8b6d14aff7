// End-to-end tests of MCP's families beyond tools (docs/protocol.md §17): the real meithd with
// @modelcontextprotocol/server-everything as a source, driven through the real `meith mcp` by
// the official SDK clients of both majors (tests/mcp/families.mjs: 1.x in 2025-11-25, 2.x
// pinned to 2026-07-28), each check comparing field by field with the same client talking to
// the server directly; and the native frames (mcp_request, client_request) on the socket.
#include "daemon_fixture.hpp"

#include <catch2/catch.hpp>

#include <sstream>

#include <cstdio>

using namespace meith::test;

namespace e2e_mcp_families_test { // one namespace per file: the tests build as unity batches

namespace {

std::string mcp_dir() {
    return std::string(MEITH_SOURCE_DIR) + "/tests/mcp";
}

/// Source NAME (prefix NAME_): tests/mcp/fake_server.mjs with `flag`.
std::string fake_source(const std::string& name, const std::string& flag) {
    return "[[sources]]\nname = \"" + name + "\"\nkind = \"mcp\"\ncommand = [\"node\", " +
           json(mcp_dir() + "/fake_server.mjs").dump() + ", \"" + flag + "\"]\nprefix = \"" + name +
           "_\"\ntrust_annotations = true\n";
}

std::string everything_js() {
    const auto path =
        mcp_dir() + "/node_modules/@modelcontextprotocol/server-everything/dist/index.js";
    INFO("the MCP test servers are missing: run scripts/install-deps (npm ci in tests/mcp)");
    REQUIRE(fs::exists(path));
    return path;
}

/// server-everything as source "everything" (prefix ev_), the roots probe as "roots" (rt_),
/// every capability allowed to plugins: the checks compare what the servers answer.
std::string families_toml(const std::string& extra = "") {
    return "[permissions.callers.plugin]\n"
           "allow = [\"read-only\", \"accesses-network\", \"writes-files\", \"destructive\", "
           "\"unknown\", \"starts-process\", \"controls-browser\"]\n\n"
           "[[sources]]\nname = \"everything\"\nkind = \"mcp\"\ncommand = [\"node\", " +
           json(everything_js()).dump() +
           ", \"stdio\"]\nprefix = \"ev_\"\nsandbox = \"off\"\nforward_roots = true\n" + extra +
           "\n[[sources]]\nname = \"roots\"\nkind = \"mcp\"\ncommand = [\"node\", " +
           json(mcp_dir() + "/roots_server.mjs").dump() +
           "]\nprefix = \"rt_\"\nsandbox = \"off\"\nforward_roots = true\n";
}

json run_families(const std::string& sdk, const fs::path& home) {
    return run_json_command("node '" + mcp_dir() + "/families.mjs' " + sdk + " '" + MEITH_CLI +
                            "' '" + home.string() + "' '" + everything_js() + "' '" + mcp_dir() +
                            "/roots_server.mjs'");
}

/// Every check of a driver held (at least `min` of them); a failed one shows both sides.
void check_all_equal_min(const json& out, std::size_t min) {
    REQUIRE(out["checks"].size() >= min);
    for (const auto& [name, c] : out["checks"].items()) {
        INFO(name << ": direct " << c.value("direct", json()).dump().substr(0, 2000)
                  << "\nthrough meith " << c.value("meith", json()).dump().substr(0, 2000));
        CHECK(c["equal"] == true);
    }
}

void check_all_equal(const json& out) {
    check_all_equal_min(out, 20);
}

json mcp_request(client& c, const std::string& id, const std::string& method,
                 const json& params = json::object()) {
    c.send({{"type", "mcp_request"}, {"requestId", id}, {"method", method}, {"params", params}});
    for (;;) {
        json f = c.read(15s);
        if (f.value("requestId", "") == id) return f;
    }
}

} // namespace

TEST_CASE("mcp families: the 1.x SDK client gets every family through meith mcp as the server "
          "gives it (2025-11-25)",
          "[e2e][mcp][families]") {
    daemon_process d(families_toml());
    const json out = run_families("v1", d.home());
    check_all_equal(out);
    for (const char* name :
         {"tools/list", "resources/list", "resources/templates/list", "prompts/list",
          "completion/complete {\"type\":\"ref/prompt\",\"name\":\"completable-prompt\"} name",
          "tools/call trigger-sampling-request", "elicitation request of trigger-url-elicitation",
          "notifications/resources/updated", "notifications/message",
          "notifications/resources/list_changed", "resources/list after list_changed",
          "roots/list during tools/call"})
        CHECK(out["checks"].contains(name));
    CHECK(out["extra"]["toolCount"] == 17); // the tools server-everything offers a full client
    // Progress reaches the client through meith as the server numbered it (the SDK drops one
    // that arrives after the result it belongs to, so the last may be missing: see
    // mcp_bridge_test).
    const json& progress = out["extra"]["progressThroughMeith"];
    REQUIRE(!progress.empty());
    for (std::size_t i = 0; i < progress.size(); ++i) {
        CHECK(progress[i]["progress"] == i + 1);
        CHECK(progress[i]["total"] == 3);
    }
    // A tool that runs only as a task: meith mcp runs the client's task, meithd calls the tool
    // as a task on the server; the client saw the task created, working, completed.
    CHECK(out["checks"]["tasks: tools/call as a task, its result"]["equal"] == true);
    const auto task_messages = out["extra"]["taskMessages"].get<std::vector<std::string>>();
    REQUIRE(task_messages.size() >= 3);
    CHECK(task_messages.front() == "taskCreated:working");
    CHECK(task_messages[task_messages.size() - 2] == "taskStatus:completed");
    CHECK(task_messages.back() == "result");
    // meithd checks arguments before the server sees them.
    CHECK_THAT(out["extra"]["invalidArguments"]["result"]["content"][0]["text"].get<std::string>(),
               Catch::StartsWith("VALIDATION_ERROR: "));
    // A client that declared no sampling: the server's request is refused, saying why.
    CHECK_THAT(out["extra"]["bareSampling"]["result"]["content"][0]["text"].get<std::string>(),
               Catch::Contains("meithd cannot forward sampling/createMessage: the client that made "
                               "the call did not declare the capability"));

    // Audited: reads by source and URI, and the servers' requests sent to the client.
    const json read = d.wait_audit([](const json& l) {
        return l.value("event", "") == "mcp_request" && l.value("method", "") == "resources/read" &&
               l.value("target", "") == "demo://resource/dynamic/blob/1";
    });
    CHECK(read["source"] == "everything");
    CHECK(read["decision"] == "allow");
    CHECK(read["outcome"] == "ok");
    CHECK(read["caller"] == "plugin");
    const json asked = d.wait_audit([](const json& l) {
        return l.value("event", "") == "client_request" &&
               l.value("method", "") == "sampling/createMessage";
    });
    CHECK(asked["requestId"].get<std::string>().find(":") != std::string::npos);
}

TEST_CASE("mcp families: the 2.x SDK client speaks 2026-07-28 to meith mcp and gets every family "
          "as the server gives it",
          "[e2e][mcp][families]") {
    daemon_process d(families_toml());
    const json out = run_families("v2", d.home());
    CHECK(out["extra"]["era"] == "modern");
    CHECK(out["extra"]["version"] == "2026-07-28");
    check_all_equal(out);
    // Sampling and elicitation became input_required results answered on the retry.
    CHECK(out["checks"]["tools/call trigger-sampling-request"]["equal"] == true);
    CHECK(out["checks"]["elicitation request of trigger-elicitation-request"]["equal"] == true);
}

TEST_CASE("mcp families: mcp_request frames on the socket - lists, routing, errors, policy",
          "[e2e][mcp][families]") {
    daemon_process d(families_toml("resource_capabilities = [\"destructive\"]\n"));
    client c(d.socket());
    c.send({{"type", "hello"}, {"clientInfo", {{"caller", "cli"}}}});
    c.read();

    // Lists merge the sources offering the family; prompt names get the source's prefix.
    const json prompts = mcp_request(c, "p1", "prompts/list");
    REQUIRE(prompts["type"] == "mcp_result");
    std::vector<std::string> names;
    for (const auto& p : prompts["result"]["prompts"])
        names.push_back(p["name"]);
    CHECK(std::find(names.begin(), names.end(), "ev_simple-prompt") != names.end());

    // A method meithd does not forward, and params of the wrong shape: JSON-RPC errors.
    const json unknown = mcp_request(c, "u1", "sampling/createMessage");
    CHECK(unknown["error"]["code"] == -32601);
    CHECK_THAT(unknown["error"]["message"].get<std::string>(), Catch::Contains("resources/list"));
    const json no_name = mcp_request(c, "u2", "prompts/get");
    CHECK(no_name["error"]["code"] == -32602);
    const json missing = mcp_request(c, "u3", "prompts/get", {{"name", "ev_no-such-prompt"}});
    CHECK(missing["error"]["code"] == -32602);
    CHECK_THAT(missing["error"]["message"].get<std::string>(), Catch::Contains("prompts/list"));
    c.send({{"type", "mcp_request"},
            {"requestId", "u4"},
            {"method", "resources/read"},
            {"params", "demo://x"}});
    CHECK(c.read()["code"] == "PROTOCOL_ERROR");

    // resource_capabilities = ["destructive"], which the cli caller may not: refused, audited.
    const json denied = mcp_request(c, "r1", "resources/read",
                                    {{"uri", "demo://resource/static/document/instructions.md"}});
    CHECK(denied["error"]["code"] == -32001);
    CHECK_THAT(denied["error"]["message"].get<std::string>(),
               Catch::StartsWith("PERMISSION_DENIED"));
    const json line = d.wait_audit([](const json& l) {
        return l.value("event", "") == "mcp_request" && l.value("decision", "") == "deny";
    });
    CHECK(line["method"] == "resources/read");
    CHECK(line["source"] == "everything");
    CHECK(line["outcome"] == "error");

    // A client_response nobody waits for is a protocol error that says so.
    c.send({{"type", "client_response"}, {"clientRequestId", "cr99"}, {"result", json::object()}});
    const json stray = c.read();
    CHECK(stray["code"] == "PROTOCOL_ERROR");
    CHECK_THAT(stray["message"].get<std::string>(), Catch::Contains("cr99"));
}

TEST_CASE("mcp families: a 2.x SDK server (serveStdio) is spoken to in 2026-07-28 - listed, "
          "called, asked for input, subscribed - and matches the same server spoken to directly",
          "[e2e][mcp][families]") {
    const std::string server = mcp_dir() + "/v2_server.mjs";
    daemon_process d("[permissions.callers.plugin]\n"
                     "allow = [\"read-only\", \"accesses-network\", \"unknown\"]\n\n"
                     "[[sources]]\nname = \"v2\"\nkind = \"mcp\"\ncommand = [\"node\", " +
                     json(server).dump() + "]\nprefix = \"v2_\"\nsandbox = \"off\"\n");
    client c(d.socket());
    const json status = source_status(c, "v2");
    CHECK(status["state"] == "ready");
    CHECK(status["protocolVersion"] == "2026-07-28"); // negotiated by server/discover

    const json out = run_json_command("node '" + mcp_dir() + "/v2_source.mjs' '" + MEITH_CLI +
                                      "' '" + d.home().string() + "' '" + server + "'");
    REQUIRE(out["checks"].size() == 8);
    check_all_equal_min(out, 8);
    // resources/updated reached the client on the listen meithd keeps with the server.
    REQUIRE(out["extra"]["updated"].size() >= 1);
    CHECK(out["extra"]["updated"][0] == json{{"uri", "info://hello"}});
    // 2026-07-28 on both hops: the input request went to the 2.x client and back.
    const json& modern = out["extra"]["modern"];
    CHECK(modern["era"] == "modern");
    CHECK(modern["echo"]["content"][0]["text"] == "echo: modern");
    CHECK(modern["confirm"]["content"][0]["text"] == "confirmed=false");
    REQUIRE(modern["asked"].size() == 1);
    CHECK(modern["asked"][0]["message"] == "Really ship?");
    // subscriptions/listen through meith mcp: acknowledged, and the update arrives on it.
    CHECK(modern["honored"]["resourceSubscriptions"] == json::array({"info://hello"}));
    REQUIRE(modern["heard"].size() >= 1);
    CHECK(modern["heard"][0]["uri"] == "info://hello");
    CHECK(modern["heard"][0]["_meta"]["io.modelcontextprotocol/subscriptionId"] == "listen:0");
}

TEST_CASE("mcp families: a server that ignores server/discover is spoken to with initialize "
          "once it answers the ping sent after the probe, and at meithd's next start at once",
          "[e2e][mcp][families]") {
    daemon_process d(fake_source("fk", "--silent-unknown"));
    client c(d.socket());
    const json status = source_status(c, "fk");
    CHECK(status["state"] == "ready");
    CHECK(status["protocolVersion"] == "2025-11-25");
    // Not the probe's 3 s deadline: the ping showed the server had read the probe.
    CHECK_THAT(d.log(), Catch::Contains("answered a ping but not server/discover, sent before "
                                        "it; using initialize"));
    CHECK_THAT(d.log(), !Catch::Contains("no answer to server/discover within"));
    CHECK(c.call("fk_echo", {{"text", "hi"}})["result"]["ok"] == true);

    // The revision it negotiated is remembered (HOME/mcp-revisions.json, owner-only): the next
    // start opens with initialize, without the probe or its wait.
    const fs::path memory = d.home() / "mcp-revisions.json";
    REQUIRE(fs::exists(memory));
    CHECK((fs::status(memory).permissions() & (fs::perms::group_all | fs::perms::others_all)) ==
          fs::perms::none);
    CHECK(json::parse(slurp(memory))["sources"]["fk"]["revision"] == "2025-11-25");
    REQUIRE(d.stop() == 0);
    d.restart();
    client again(d.socket());
    CHECK(source_status(again, "fk")["protocolVersion"] == "2025-11-25");
    CHECK_THAT(d.log(), Catch::Contains("fk': opening with initialize, as it negotiated "
                                        "2025-11-25 when it last started"));
    CHECK(again.call("fk_echo", {{"text", "hi"}})["result"]["ok"] == true);
}

TEST_CASE("mcp families: a server that answers nothing before initialize gets the probe's whole "
          "deadline, then initialize",
          "[e2e][mcp][families]") {
    daemon_process d(fake_source("mu", "--silent-before-init"));
    client c(d.socket());
    CHECK(source_status(c, "mu")["protocolVersion"] == "2025-11-25");
    CHECK_THAT(d.log(), Catch::Contains("no answer to server/discover within 3000 ms"));
    CHECK(c.call("mu_echo", {{"text", "hi"}})["result"]["ok"] == true);
}

TEST_CASE("mcp families: a URI two sources list is read from the one first in the config, "
          "however fast the other lists it",
          "[e2e][mcp][families]") {
    const std::string fake = json(mcp_dir() + "/fake_server.mjs").dump();
    // "first" answers resources/list late; "second" (a server that would like first's
    // resources) answers at once.
    daemon_process d("[[sources]]\nname = \"first\"\nkind = \"mcp\"\ncommand = [\"node\", " + fake +
                     ", \"--resources=first\", \"--list-delay=400\"]\nprefix = \"a_\"\n\n"
                     "[[sources]]\nname = \"second\"\nkind = \"mcp\"\ncommand = [\"node\", " +
                     fake + ", \"--resources=second\"]\nprefix = \"b_\"\n");
    client c(d.socket());
    const json listed = mcp_request(c, "l1", "resources/list");
    REQUIRE(listed["result"]["resources"].size() == 4); // both sources' lists, in config order
    CHECK(listed["result"]["resources"][0]["uri"] == "fake://shared");
    CHECK(listed["result"]["resources"][1]["uri"] == "fake://first");
    const json shared = mcp_request(c, "r1", "resources/read", {{"uri", "fake://shared"}});
    CHECK(shared["result"]["contents"][0]["text"] == "read from first");
    const json own = mcp_request(c, "r2", "resources/read", {{"uri", "fake://second"}});
    CHECK(own["result"]["contents"][0]["text"] == "read from second");
}

TEST_CASE("mcp families: a call's W3C traceparent reaches the MCP server in _meta and the audit "
          "line, a malformed one is a VALIDATION_ERROR",
          "[e2e][mcp][families]") {
    temp_dir work;
    const auto state = work.path / "received.jsonl";
    daemon_process d("[[sources]]\nname = \"fk\"\nkind = \"mcp\"\ncommand = [\"node\", " +
                     json(mcp_dir() + "/fake_server.mjs").dump() + ", " +
                     json("--state=" + state.string()).dump() +
                     "]\nprefix = \"fk_\"\ntrust_annotations = true\nsandbox = \"off\"\n");
    client c(d.socket());
    const std::string trace = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    CHECK(c.call("fk_echo", {{"text", "hi"}}, {{"traceparent", trace}})["result"]["ok"] == true);
    json received;
    std::istringstream lines(slurp(state));
    for (std::string line; std::getline(lines, line);) {
        const json m = json::parse(line);
        if (m.value("method", "") == "tools/call") received = m;
    }
    CHECK(received["params"]["_meta"]["traceparent"] == trace);
    const json line = d.wait_audit([](const json& l) {
        return l.value("event", "") == "tool_call" && l.value("toolName", "") == "fk_echo";
    });
    CHECK(line["traceparent"] == trace);
    const json bad = c.call("fk_echo", {{"text", "hi"}}, {{"traceparent", "00-not-a-trace"}});
    CHECK(bad["result"]["error"]["code"] == "VALIDATION_ERROR");
    CHECK_THAT(bad["result"]["error"]["message"].get<std::string>(),
               Catch::Contains("W3C trace context"));
}

TEST_CASE("mcp families: a client profile reaches the resources, prompts and completions of its "
          "own sources only",
          "[e2e][mcp][families][profiles]") {
    // Issue 42: a profile that listed only `echo` still got every source's prompts/*,
    // resources/* and completion/complete (docs/protocol.md §23 now says whose it gets).
    daemon_process d(families_toml() + "\n[clients.echo_only]\ntools = [\"echo\"]\n"
                                       "\n[clients.ev_tools]\ntools = [\"ev_*\"]\n"
                                       "\n[clients.named]\ntools = [\"echo\"]\n"
                                       "sources = [\"everything\", \"!roots\"]\n");
    const std::string doc = "demo://resource/static/document/instructions.md";
    auto with_profile = [&](const std::string& name) {
        auto c = std::make_unique<client>(d.socket());
        c->send({{"type", "hello"},
                 {"requestId", "h"},
                 {"clientInfo", {{"caller", "cli"}, {"client", name}}}});
        const json h = c->read();
        REQUIRE(h["client"]["name"] == name);
        return c;
    };
    auto prompt_names = [&](client& c) {
        std::vector<std::string> names;
        const json p = mcp_request(c, "pl", "prompts/list");
        REQUIRE(p["type"] == "mcp_result");
        for (const auto& item : p["result"]["prompts"])
            names.push_back(item["name"]);
        return names;
    };

    // Only echo: none of everything's families, by any path; each refusal says why.
    auto echo_only = with_profile("echo_only");
    CHECK(prompt_names(*echo_only).empty());
    const json resources = mcp_request(*echo_only, "rl", "resources/list");
    CHECK(resources["result"]["resources"].empty());
    const json read = mcp_request(*echo_only, "rr", "resources/read", {{"uri", doc}});
    CHECK(read["error"]["code"] == -32001);
    CHECK_THAT(read["error"]["message"].get<std::string>(),
               Catch::StartsWith("PERMISSION_DENIED: resources/read of '" + doc +
                                 "' from MCP source 'everything': client profile 'echo_only' "
                                 "shows none of its tools"));
    const json get = mcp_request(*echo_only, "pg", "prompts/get", {{"name", "ev_simple-prompt"}});
    CHECK(get["error"]["code"] == -32001);
    const json completion =
        mcp_request(*echo_only, "cc", "completion/complete",
                    {{"ref", {{"type", "ref/prompt"}, {"name", "ev_completable-prompt"}}},
                     {"argument", {{"name", "department"}, {"value", "S"}}}});
    CHECK(completion["error"]["code"] == -32001);
    const json sub = mcp_request(*echo_only, "rs", "resources/subscribe", {{"uri", doc}});
    CHECK(sub["error"]["code"] == -32001);
    const json line = d.wait_audit([](const json& l) {
        return l.value("event", "") == "mcp_request" && l.value("method", "") == "prompts/get";
    });
    CHECK(line["decision"] == "deny");
    CHECK(line["client"] == "echo_only");

    // The profile that shows everything's tools reaches its families; not the roots source's.
    auto ev_tools = with_profile("ev_tools");
    const auto names = prompt_names(*ev_tools);
    CHECK(std::find(names.begin(), names.end(), "ev_simple-prompt") != names.end());
    const json ok = mcp_request(*ev_tools, "rr2", "resources/read", {{"uri", doc}});
    CHECK(ok["type"] == "mcp_result");

    // A profile may name its sources outright, whatever tools it shows.
    auto named = with_profile("named");
    CHECK(!prompt_names(*named).empty());
    CHECK(mcp_request(*named, "rr3", "resources/read", {{"uri", doc}})["type"] == "mcp_result");

    // Without a profile, every source as before.
    client plain(d.socket());
    CHECK(mcp_request(plain, "rr4", "resources/read", {{"uri", doc}})["type"] == "mcp_result");
}

TEST_CASE("instances: server-everything per session with forward_roots shows each SDK client its "
          "own roots in get-roots-list",
          "[e2e][mcp][instances]") {
    daemon_process d("[[sources]]\nname = \"everything\"\nkind = \"mcp\"\ncommand = [\"node\", " +
                     json(everything_js()).dump() +
                     ", \"stdio\"]\nprefix = \"ev_\"\nforward_roots = true\n"
                     "trust_annotations = true\ninstances = \"per-session\"\n");
    const json out =
        run_json_command("MEITH_NO_AUTOSTART=1 node '" + mcp_dir() + "/bridge_client.mjs' roots '" +
                         MEITH_CLI + "' '" + d.home().string() + "'");
    INFO(out.dump(2) << "\n" << d.log());
    CHECK_THAT(out["a"].get<std::string>(), Catch::Contains("file:///roots/a"));
    CHECK_THAT(out["a"].get<std::string>(), !Catch::Contains("file:///roots/b"));
    CHECK_THAT(out["b"].get<std::string>(), Catch::Contains("file:///roots/b"));
    CHECK_THAT(out["b"].get<std::string>(), !Catch::Contains("file:///roots/a"));
    CHECK_THAT(out["aAgain"].get<std::string>(), Catch::Contains("file:///roots/a"));
}

} // namespace e2e_mcp_families_test
