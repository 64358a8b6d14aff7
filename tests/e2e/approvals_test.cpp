// End-to-end: grants and approvals (PROTOCOL.md §12, docs/protocol.md §14) — held calls, the
// approver's proof, answers, grants with uses and expiry, and their audit lines, against the
// real meithd. Approvers connect from a child process with a pseudo-terminal as its
// controlling terminal (client::from_terminal), as a person's `meith approve` does.
#include "daemon_fixture.hpp"

#include <catch2/catch.hpp>

#include <csignal>
#include <fstream>
#include <string>
#include <sys/stat.h>
#include <thread>

using namespace meith::test;

namespace e2e_approvals_test { // one namespace per file: the tests build as unity batches

namespace {

/// t_write (writes-files) asks for plugin; the built-in echo asks for plugin by a rule.
std::string ask_config(const std::string& extra = "") {
    return host_source_toml("th") +
           "[permissions.callers.plugin]\n"
           "allow = [\"read-only\", \"accesses-network\"]\n"
           "ask = [\"writes-files\"]\n"
           "[[permissions.rules]]\n"
           "tool = \"echo\"\n"
           "caller = \"plugin\"\n"
           "decision = \"ask\"\n" +
           extra;
}

json tool_call(const std::string& id, const std::string& tool, const json& args = json::object(),
               const json& extra = json::object()) {
    json f = {{"type", "tool_call"}, {"protocol", 1},     {"requestId", id},
              {"toolName", tool},    {"arguments", args}, {"clientInfo", {{"caller", "plugin"}}}};
    f.update(extra);
    return f;
}

/// Reads frames until one of `type`.
json read_type(client& c, const std::string& type, std::chrono::milliseconds timeout = 10s) {
    for (;;) {
        json f = c.read(timeout);
        if (f["type"] == type) return f;
    }
}

void approve(client& a, const std::string& approval_id, const std::string& decision,
             const std::string& reason = "") {
    json f = {
        {"type", "approve"}, {"protocol", 1}, {"approvalId", approval_id}, {"decision", decision}};
    if (!reason.empty()) f["reason"] = reason;
    a.send(f);
}

/// The tool_call audit line of `request_id`.
json call_line(const daemon_process& d, const std::string& request_id) {
    return d.wait_audit(
        [&](const json& l) { return l["event"] == "tool_call" && l["requestId"] == request_id; });
}

} // namespace

TEST_CASE("a held call approved once runs, and an identical second call is held again",
          "[e2e][approvals]") {
    daemon_process d(ask_config());
    auto approver = connect_approver(d);
    client agent(d.socket());

    agent.send(tool_call("w1", "t_write"));
    const json req = read_type(*approver, "approval_request");
    CHECK(req["requestId"] == "w1");
    CHECK(req["toolName"] == "t_write");
    CHECK(req["caller"] == "plugin");
    CHECK(req["capabilities"] == json::array({"writes-files"}));
    CHECK(req["sessionId"].get<std::string>().rfind("s_", 0) == 0);
    CHECK(req["preview"].is_string());
    CHECK(req["args"].is_object());
    // Held: the caller hears only that a person is being asked.
    const json pending = agent.read();
    CHECK(pending["type"] == "tool_event");
    CHECK(pending["requestId"] == "w1");
    CHECK(pending["event"]["type"] == "approval_pending");
    CHECK(pending["event"]["approvalId"] == req["approvalId"]);
    CHECK(agent.silent_for(200ms));

    approve(*approver, req["approvalId"], "allow_once");
    const json res = agent.wait_result("w1");
    INFO(res.dump());
    CHECK(res["result"]["ok"] == true);
    CHECK(res["result"]["content"] == "wrote");
    const json resolved = read_type(*approver, "approval_resolved");
    CHECK(resolved["approvalId"] == req["approvalId"]);
    CHECK(resolved["decision"] == "allow_once");

    const json line = call_line(d, "w1");
    CHECK(line["decision"] == "allow");
    CHECK(line["approvalId"] == req["approvalId"]);
    CHECK_FALSE(line.contains("grantId"));

    // Once means once: the same call is held again.
    agent.send(tool_call("w2", "t_write"));
    const json again = read_type(*approver, "approval_request");
    CHECK(again["requestId"] == "w2");
    CHECK(again["approvalId"] != req["approvalId"]);
    approve(*approver, again["approvalId"], "deny", "not today");
    const json denied = agent.wait_result("w2");
    CHECK(denied["result"]["ok"] == false);
    CHECK(denied["result"]["error"]["code"] == "PERMISSION_DENIED");
    CHECK(denied["result"]["error"]["message"].get<std::string>().find("not today") !=
          std::string::npos);
    // A person said no: the refusal does not suggest a grant.
    CHECK(denied["result"]["error"]["message"].get<std::string>().find("meith grant") ==
          std::string::npos);
    const json dline = call_line(d, "w2");
    CHECK(dline["decision"] == "deny");
    CHECK(dline["reason"].get<std::string>().find("not today") != std::string::npos);
    CHECK(dline["approvalId"] == again["approvalId"]);

    // Both decisions are on file with the approver's session.
    const auto decisions = d.audit_events("approval_decision");
    REQUIRE(decisions.size() == 2);
    CHECK(decisions[0]["decision"] == "allow_once");
    CHECK(decisions[1]["decision"] == "deny");
    CHECK(decisions[1]["approverSession"].is_string());
    CHECK(d.audit_events("approval_request").size() == 2);
}

TEST_CASE("allow_session lets that session's next calls through and not another session's",
          "[e2e][approvals][grants]") {
    daemon_process d(ask_config());
    auto approver = connect_approver(d);
    client agent(d.socket());
    client other(d.socket());

    agent.send(tool_call("e1", "echo", {{"x", 1}}));
    const json req = read_type(*approver, "approval_request");
    approve(*approver, req["approvalId"], "allow_session");
    CHECK(agent.wait_result("e1")["result"]["ok"] == true);

    // The session's next call passes on the grant the approval made: no request.
    const json second = agent.call("echo", {{"x", 2}}, {{"clientInfo", {{"caller", "plugin"}}}});
    CHECK(second["result"]["ok"] == true);
    const json line = call_line(d, second["requestId"]);
    REQUIRE(line.contains("grantId"));
    const auto created = d.audit_events("grant_created");
    REQUIRE(created.size() == 1);
    CHECK(created[0]["grant"]["grantId"] == line["grantId"]);
    CHECK(created[0]["grant"]["approvalId"] == req["approvalId"]);
    CHECK(created[0]["grant"]["tool"] == "echo");
    CHECK(d.audit_events("grant_used").size() == 1);

    // Another session is asked again.
    other.send(tool_call("o1", "echo", {{"x", 3}}));
    const json other_req = read_type(*approver, "approval_request");
    CHECK(other_req["requestId"] == "o1");
    CHECK(other_req["sessionId"] != req["sessionId"]);
    approve(*approver, other_req["approvalId"], "deny");
    CHECK(other.wait_result("o1")["result"]["error"]["code"] == "PERMISSION_DENIED");

    // The session's grant is listed for it (and not for another session).
    agent.send({{"type", "list_grants"}, {"protocol", 1}, {"requestId", "lg"}});
    const json mine = read_type(agent, "grants_list");
    REQUIRE(mine["grants"].size() == 1);
    other.send({{"type", "list_grants"}, {"protocol", 1}, {"requestId", "lg"}});
    CHECK(read_type(other, "grants_list")["grants"].empty());
}

TEST_CASE("a session's grant ends with the session, a held call's client leaving withdraws it",
          "[e2e][approvals][grants]") {
    daemon_process d(ask_config());
    auto approver = connect_approver(d);
    std::string grant_id;
    {
        client agent(d.socket());
        agent.send(tool_call("e1", "echo"));
        const json req = read_type(*approver, "approval_request");
        approve(*approver, req["approvalId"], "allow_session");
        agent.wait_result("e1");
        grant_id = d.wait_audit(
            [](const json& l) { return l["event"] == "grant_created"; })["grant"]["grantId"];
    }
    d.wait_audit([&](const json& l) {
        return l["event"] == "grant_expired" && l["grantId"] == grant_id &&
               l["why"] == "session_ended";
    });

    // The caller goes away while its call is held.
    {
        client agent(d.socket());
        agent.send(tool_call("gone", "echo"));
        read_type(*approver, "approval_request");
    }
    json w;
    do {
        w = read_type(*approver, "approval_resolved");
    } while (w["decision"] != "withdrawn");
    CHECK(w["reason"] == "the client disconnected");
    CHECK(call_line(d, "gone")["end"] == "client_disconnected");
}

TEST_CASE("shutdown ends held calls at once instead of waiting for an answer", "[e2e][approvals]") {
    daemon_process d(ask_config());
    auto approver = connect_approver(d);
    client agent(d.socket());
    agent.send(tool_call("h1", "echo", json::object(), {{"timeoutMs", 60000}}));
    const json req = read_type(*approver, "approval_request");
    const auto t0 = std::chrono::steady_clock::now();
    ::kill(d.pid(), SIGTERM);
    const json r = agent.wait_result("h1", nullptr, 10s);
    CHECK(r["result"]["error"]["code"] == "RUNTIME_SHUTTING_DOWN");
    // Not after shutdown_grace_ms (5 s): held calls are not waited for.
    CHECK(std::chrono::steady_clock::now() - t0 < 4s);
    const json w = read_type(*approver, "approval_resolved");
    CHECK(w["approvalId"] == req["approvalId"]);
    CHECK(w["reason"] == "meithd is shutting down");
    CHECK(d.wait_exit(15s) == 0);
    bool found = false;
    for (const auto& l : d.audit_events("tool_call"))
        if (l["requestId"] == "h1") {
            found = true;
            CHECK(l["end"] == "shutdown");
            CHECK(l["approvalId"] == req["approvalId"]);
        }
    CHECK(found);
}

TEST_CASE("a grant's use count and its expiry run out", "[e2e][approvals][grants]") {
    daemon_process d(ask_config());
    auto approver = connect_approver(d);
    client agent(d.socket());

    approver->send({{"type", "grant"},
                    {"protocol", 1},
                    {"requestId", "g1"},
                    {"grant", {{"tool", "t_*"}, {"capabilities", {"writes-files"}}, {"uses", 2}}}});
    const json g1 = read_type(*approver, "grant_result");
    const std::string uses_id = g1["grantId"];
    CHECK(uses_id.rfind("g_", 0) == 0);

    const json plugin = {{"clientInfo", {{"caller", "plugin"}}}};
    CHECK(agent.call("t_write", json::object(), plugin)["result"]["ok"] == true);
    CHECK(agent.call("t_write", json::object(), plugin)["result"]["ok"] == true);
    // Used up: the third is held (the approver is asked), and we deny it.
    agent.send(tool_call("w3", "t_write"));
    const json req = read_type(*approver, "approval_request");
    approve(*approver, req["approvalId"], "deny");
    CHECK(agent.wait_result("w3")["result"]["error"]["code"] == "PERMISSION_DENIED");
    const auto used = d.audit_events("grant_used");
    REQUIRE(used.size() == 2);
    CHECK(used[1]["usesLeft"] == 0);
    d.wait_audit([&](const json& l) {
        return l["event"] == "grant_expired" && l["grantId"] == uses_id && l["why"] == "used_up";
    });

    // An expiry: usable at once, gone after it, audited when it passes.
    approver->send({{"type", "grant"},
                    {"protocol", 1},
                    {"requestId", "g2"},
                    {"grant",
                     {{"caller", "plugin"},
                      {"tool", "echo"},
                      {"capabilities", {"read-only"}},
                      {"expiresInMs", 2000}}}});
    const std::string exp_id = read_type(*approver, "grant_result")["grantId"];
    CHECK(agent.call("echo", {{"a", 1}}, plugin)["result"]["ok"] == true);
    d.wait_audit(
        [&](const json& l) {
            return l["event"] == "grant_expired" && l["grantId"] == exp_id && l["why"] == "expired";
        },
        10s);
    agent.send(tool_call("e9", "echo"));
    const json held = read_type(*approver, "approval_request");
    CHECK(held["requestId"] == "e9");
    approve(*approver, held["approvalId"], "deny");
    agent.wait_result("e9");

    // Revoke; a revoked grant is gone from the list.
    approver->send({{"type", "grant"},
                    {"protocol", 1},
                    {"requestId", "g3"},
                    {"grant", {{"capabilities", {"writes-files"}}}}});
    const std::string rid = read_type(*approver, "grant_result")["grantId"];
    approver->send({{"type", "revoke"}, {"protocol", 1}, {"requestId", "r"}, {"grantId", rid}});
    CHECK(read_type(*approver, "revoke_result")["grantId"] == rid);
    approver->send({{"type", "list_grants"}, {"protocol", 1}, {"requestId", "l"}});
    CHECK(read_type(*approver, "grants_list")["grants"].empty());
    CHECK(d.audit_events("grant_revoked").size() == 1);
}

TEST_CASE("with no approver connected an ask call is denied at once, saying so",
          "[e2e][approvals]") {
    daemon_process d(ask_config());
    client agent(d.socket());
    const json r = agent.call("t_write", json::object(), {{"clientInfo", {{"caller", "plugin"}}}},
                              nullptr, 5s);
    CHECK(r["result"]["error"]["code"] == "PERMISSION_DENIED");
    CHECK(r["result"]["error"]["message"].get<std::string>().find("no approver is connected") !=
          std::string::npos);
    // check_policy and the descriptors say "ask".
    agent.send({{"type", "check_policy"},
                {"protocol", 1},
                {"requestId", "p"},
                {"toolName", "t_write"},
                {"clientInfo", {{"caller", "plugin"}}}});
    const json p = read_type(agent, "policy_decision");
    CHECK(p["decision"] == "ask");
    agent.send({{"type", "list_tools"},
                {"protocol", 1},
                {"requestId", "l"},
                {"clientInfo", {{"caller", "plugin"}}}});
    bool seen = false;
    const json list = read_type(agent, "tools_list");
    for (const auto& t : list["tools"])
        if (t["name"] == "t_write") {
            CHECK(t["permission"] == "ask");
            seen = true;
        }
    CHECK(seen);
}

TEST_CASE("an approver without the secret or without a terminal is refused and audited",
          "[e2e][approvals]") {
    daemon_process d(ask_config());
    // The secret file: 0600, 64 hex digits.
    struct stat st {};
    REQUIRE(::stat((d.home() / "approver.secret").c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0600);
    CHECK(approver_secret(d.home()).size() == 64);

    client tty(d.socket(), client::from_terminal);
    tty.send({{"type", "approver_hello"},
              {"protocol", 1},
              {"requestId", "a1"},
              {"secret", std::string(64, '0')}});
    const json wrong = tty.read();
    CHECK(wrong["type"] == "error");
    CHECK(wrong["message"].get<std::string>().find("secret") != std::string::npos);

    client no_tty(d.socket());
    no_tty.send({{"type", "approver_hello"},
                 {"protocol", 1},
                 {"requestId", "a2"},
                 {"secret", approver_secret(d.home())}});
    const json headless = no_tty.read();
    CHECK(headless["type"] == "error");
    CHECK(headless["message"].get<std::string>().find("controlling terminal") != std::string::npos);

    // Neither may answer, grant or revoke.
    no_tty.send({{"type", "grant"},
                 {"protocol", 1},
                 {"requestId", "g"},
                 {"grant", {{"capabilities", {"writes-files"}}}}});
    CHECK(no_tty.read()["type"] == "error");
    // No secret at all: a malformed approver_hello is refused and on file too.
    tty.send({{"type", "approver_hello"}, {"protocol", 1}, {"requestId", "a3"}});
    CHECK(tty.read()["type"] == "error");
    const auto rejected = d.wait_audit([](const json& l) {
        return l["event"] == "approver_rejected" &&
               l["reason"].get<std::string>().find("\"secret\"") != std::string::npos;
    });
    (void)rejected;
    const auto all_rejected = d.audit_events("approver_rejected");
    REQUIRE(all_rejected.size() == 3);
    CHECK(all_rejected[0]["reason"].get<std::string>().find("secret") != std::string::npos);
    CHECK(all_rejected[1]["reason"].get<std::string>().find("terminal") != std::string::npos);
    // No secret reaches the audit log.
    const std::string log = slurp(d.home() / "audit.jsonl");
    CHECK(log.find(approver_secret(d.home())) == std::string::npos);
    // And with no approver, the call is denied at once.
    client agent(d.socket());
    CHECK(agent.call("echo", json::object(), {{"clientInfo", {{"caller", "plugin"}}}}, nullptr,
                     5s)["result"]["error"]["code"] == "PERMISSION_DENIED");
}

TEST_CASE("a held call's timeout fires while it waits, and a cancel withdraws it",
          "[e2e][approvals]") {
    daemon_process d(ask_config());
    auto approver = connect_approver(d);
    client agent(d.socket());

    agent.send(tool_call("slow", "echo", json::object(), {{"timeoutMs", 300}}));
    const json req = read_type(*approver, "approval_request");
    CHECK(req["timeoutMs"] == 300);
    const json timed_out = agent.wait_result("slow", nullptr, 5s);
    CHECK(timed_out["result"]["error"]["code"] == "TIMEOUT");
    const json gone = read_type(*approver, "approval_resolved");
    CHECK(gone["approvalId"] == req["approvalId"]);
    CHECK(gone["decision"] == "withdrawn");
    CHECK(gone["reason"] == "the call timed out");
    // A late answer finds nothing to decide.
    approve(*approver, req["approvalId"], "allow_once");
    CHECK(read_type(*approver, "error")["message"].get<std::string>().find("no held call") !=
          std::string::npos);

    agent.send(tool_call("c1", "echo"));
    const json req2 = read_type(*approver, "approval_request");
    agent.send({{"type", "cancel_tool_call"}, {"protocol", 1}, {"requestId", "c1"}});
    CHECK(agent.wait_result("c1")["result"]["error"]["code"] == "CANCELLED");
    const json w = read_type(*approver, "approval_resolved");
    CHECK(w["approvalId"] == req2["approvalId"]);
    CHECK(w["reason"] == "the client cancelled it");
    CHECK(call_line(d, "c1")["end"] == "cancel");
}

TEST_CASE("two approvers race: the first answer wins, one that leaves mid-decision leaves the "
          "call to the other",
          "[e2e][approvals]") {
    daemon_process d(ask_config());
    auto first = connect_approver(d);
    auto second = connect_approver(d);
    client agent(d.socket());

    agent.send(tool_call("r1", "echo"));
    const json a = read_type(*first, "approval_request");
    const json b = read_type(*second, "approval_request");
    CHECK(a["approvalId"] == b["approvalId"]);
    // Both answer at once; the daemon takes the first it reads, whichever that is.
    approve(*second, b["approvalId"], "deny", "second said no");
    approve(*first, a["approvalId"], "allow_once");
    const json r = agent.wait_result("r1");
    const bool second_won = r["result"]["ok"] == false;
    if (second_won)
        CHECK(r["result"]["error"]["message"].get<std::string>().find("second said no") !=
              std::string::npos);
    // The loser hears the outcome, then gets an error for its late answer.
    client& loser = second_won ? *first : *second;
    CHECK(read_type(loser, "approval_resolved")["decision"] ==
          (second_won ? "deny" : "allow_once"));
    CHECK(read_type(loser, "error")["message"].get<std::string>().find("no held call") !=
          std::string::npos);
    CHECK(d.audit_events("approval_decision").size() == 1);

    // One approver goes away while a call is held: the other still decides it.
    agent.send(tool_call("r2", "echo"));
    read_type(*first, "approval_request");
    const json held = read_type(*second, "approval_request");
    const std::string first_session = d.audit_events("approver_connected")[0]["sessionId"];
    first.reset();
    d.wait_audit([&](const json& l) {
        return l["event"] == "connection_close" && l["sessionId"] == first_session;
    });
    approve(*second, held["approvalId"], "allow_once");
    CHECK(agent.wait_result("r2")["result"]["ok"] == true);

    // An approver that joins late is shown the calls already held.
    agent.send(tool_call("r3", "echo"));
    read_type(*second, "approval_request");
    auto late = connect_approver(d);
    const json shown = read_type(*late, "approval_request");
    CHECK(shown["requestId"] == "r3");
    approve(*late, shown["approvalId"], "allow_once");
    CHECK(agent.wait_result("r3")["result"]["ok"] == true);
}

TEST_CASE("grants without a session persist across a restart with expiry honoured",
          "[e2e][approvals][grants]") {
    daemon_process d(ask_config("[permissions]\npersist_grants = true\n"));
    {
        auto approver = connect_approver(d);
        approver->send({{"type", "grant"},
                        {"protocol", 1},
                        {"requestId", "g"},
                        {"grant", {{"tool", "t_write"}, {"capabilities", {"writes-files"}}}}});
        read_type(*approver, "grant_result");
    }
    struct stat st {};
    REQUIRE(::stat((d.home() / "grants.json").c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0600);
    CHECK(d.stop() == 0);
    // A grant that expired while the daemon was down: dropped and audited at start.
    json kept = json::parse(slurp(d.home() / "grants.json"));
    REQUIRE(kept["grants"].size() == 1);
    kept["grants"].push_back({{"grantId", "g_planted_expired"},
                              {"caller", nullptr},
                              {"tool", "echo"},
                              {"capabilities", {"read-only"}},
                              {"usesLeft", nullptr},
                              {"expiresAtMs", 1000},
                              {"createdAtMs", 500},
                              {"approvalId", nullptr}});
    std::ofstream(d.home() / "grants.json", std::ios::trunc) << kept.dump();
    ::chmod((d.home() / "grants.json").c_str(), 0600);
    d.restart();
    {
        client agent(d.socket());
        CHECK(agent.call("t_write", json::object(),
                         {{"clientInfo", {{"caller", "plugin"}}}})["result"]["ok"] == true);
    }
    d.wait_audit([](const json& l) {
        return l["event"] == "grant_expired" && l["grantId"] == "g_planted_expired" &&
               l["why"] == "expired";
    });
    // A grants file others could have written is not trusted.
    CHECK(d.stop() == 0);
    ::chmod((d.home() / "grants.json").c_str(), 0622);
    d.restart();
    client agent(d.socket());
    CHECK(agent.call("t_write", json::object(), {{"clientInfo", {{"caller", "plugin"}}}}, nullptr,
                     5s)["result"]["error"]["code"] == "PERMISSION_DENIED");
    CHECK_THAT(d.log(), Catch::Contains("writable by group or others"));
}

TEST_CASE("a held call is decided again at a reload: withdrawn when the config now denies it",
          "[e2e][approvals][reload]") {
    // Attack 8 of issue 26: ask, held, reload to deny, then an approver's allow_once ran it.
    daemon_process d(ask_config());
    auto approver = connect_approver(d);
    client agent(d.socket());
    agent.send(tool_call("w1", "t_write"));
    const json req = read_type(*approver, "approval_request");
    REQUIRE(req["requestId"] == "w1");

    std::ofstream(d.home() / "meithd.toml", std::ios::trunc) << host_source_toml("th") +
                                                                    "[permissions.callers.plugin]\n"
                                                                    "allow = [\"read-only\"]\n"
                                                                    "deny = [\"writes-files\"]\n";
    client op(d.socket());
    op.send({{"type", "reload_config"}, {"requestId", "r"}, {"clientInfo", {{"caller", "cli"}}}});
    CHECK(read_type(op, "config_reloaded")["ok"] == true);

    const json res = agent.wait_result("w1");
    INFO(res.dump());
    CHECK(res["result"]["error"]["code"] == "PERMISSION_DENIED");
    CHECK_THAT(res["result"]["error"]["message"].get<std::string>(),
               Catch::Contains("'writes-files' is denied") &&
                   Catch::Contains("config was reloaded"));
    const json withdrawn = read_type(*approver, "approval_resolved");
    CHECK(withdrawn["approvalId"] == req["approvalId"]);
    CHECK(withdrawn["decision"] == "withdrawn");
    CHECK_THAT(withdrawn["reason"].get<std::string>(), Catch::Contains("denies it"));
    // The approver's allow_once comes too late: nothing is held any more.
    approve(*approver, req["approvalId"], "allow_once");
    CHECK(read_type(*approver, "error")["message"].get<std::string>().find("no held call") !=
          std::string::npos);
    const json line = call_line(d, "w1");
    CHECK(line["decision"] == "deny");
    CHECK(line.value("outcome", "") != "ok");
}

TEST_CASE("an approval request's preview is redacted like its args", "[e2e][approvals]") {
    // Attack 9 of issue 26: the host's own preview quoted {"password":"hunter2"} verbatim.
    daemon_process d(host_source_toml("th", {"--optional-methods"}) +
                     "[permissions.callers.plugin]\nallow = [\"read-only\"]\n"
                     "ask = [\"writes-files\"]\n");
    auto approver = connect_approver(d);
    client agent(d.socket());
    agent.send(tool_call("p1", "t_write",
                         {{"password", "hunter2-long"},
                          {"token", "ghp_0123456789abcdefghijklmnopqrstuvwxyzAB"},
                          {"note", "fine"}}));
    const json req = read_type(*approver, "approval_request");
    INFO(req.dump());
    const std::string preview = req["preview"].get<std::string>();
    CHECK_THAT(preview, Catch::Contains("would run t_write"));
    CHECK_THAT(preview, Catch::Contains("fine"));
    CHECK_THAT(preview, !Catch::Contains("hunter2-long"));
    CHECK_THAT(preview, !Catch::Contains("ghp_0123456789"));
    CHECK_THAT(preview, Catch::Contains("[REDACTED"));
    CHECK(req["args"].dump().find("hunter2-long") == std::string::npos);
    approve(*approver, req["approvalId"], "deny");
    CHECK(agent.wait_result("p1")["result"]["ok"] == false);
}

} // namespace e2e_approvals_test
