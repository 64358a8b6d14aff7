// End-to-end tests of the egress proxy (docs/protocol.md §19): a real confined exec tool
// (tests/exec/sandbox_probe.mjs) whose source has a `network` table, in a network namespace of
// the test's own where 203.0.113.5 stands for a public host (tests/exec/egress_target.mjs
// listens there) and names resolve through a test hosts file (MEITH_EGRESS_TEST_HOSTS), not
// DNS: an allowed name's bytes arrive through HTTP CONNECT and SOCKS5; a name no rule allows,
// a denied name, a name resolving to 127.0.0.1 and an IP literal are refused with a
// sandbox_violation naming the rule; a direct connection goes nowhere; one audit line per
// connection.
#include "daemon_fixture.hpp"
#include "test_skip.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <optional>

using namespace meith::test;

namespace e2e_egress_test { // one namespace per file: the tests build as unity batches

namespace {

std::string egress_source(int port) {
    const std::string p = std::to_string(port);
    return "[permissions.callers.plugin]\nallow = [\"read-only\", \"accesses-network\"]\n\n"
           "[[sources]]\nname = \"net\"\nkind = \"exec\"\ncommand = [\"node\", \"" +
           std::string(MEITH_SOURCE_DIR) +
           "/tests/exec/sandbox_probe.mjs\"]\n"
           "tool = { name = \"net\", description = \"egress probe\", capabilities = "
           "[\"accesses-network\"] }\n"
           "network = { allow = [\"allowed.test:" +
           p + "\", \"sneaky.test\", \"*.wild.test\"], deny = [\"other.test\"] }\n";
}

struct outcome {
    json result;
    std::vector<json> events;
};

outcome reach(client& c, const std::string& via, const std::string& host, int port) {
    outcome o;
    const json r =
        c.call("net", {{"action", "egress"}, {"via", via}, {"host", host}, {"port", port}},
               {{"callerClaim", "cli"}}, &o.events, 30s);
    INFO(via << " " << host << ":" << port << " -> " << r.dump());
    REQUIRE(r["result"]["ok"] == true);
    o.result = r["result"]["content"];
    return o;
}

std::string violation_rule(const outcome& o) {
    for (const auto& e : o.events)
        if (e.value("type", "") == "sandbox_violation") return e.value("rule", "(no rule)");
    return "(no sandbox_violation event)";
}

/// A "public" host for the proxy to reach, in the test's own network namespace:
/// egress_target.mjs listening on 203.0.113.5 (greeting as `name`), and the names of `hosts`
/// ("NAME ADDRESS" lines) resolving through a test hosts file (MEITH_EGRESS_TEST_HOSTS) while
/// this lives, failed REQUIREs included.
struct egress_world {
    egress_world(const std::string& name, const std::string& hosts)
        : target({"node", std::string(MEITH_SOURCE_DIR) + "/tests/exec/egress_target.mjs",
                  "--host=203.0.113.5", "--name=" + name}) {
        REQUIRE(target.wait_for("listening", 30s));
        port = std::stoi(target.out().substr(10));
        std::ofstream(hosts_dir.path / "hosts") << hosts;
        hosts_env.emplace("MEITH_EGRESS_TEST_HOSTS", (hosts_dir.path / "hosts").string());
    }
    background_process target;
    int port = 0;
    temp_dir hosts_dir;
    std::optional<env_override> hosts_env;
};

} // namespace

TEST_CASE("egress: an allowed name's bytes arrive through the proxy, other names, private "
          "answers, IP literals and direct connections are refused, each audited",
          "[e2e][sandbox][egress]") {
    REQUIRE_KERNEL_SANDBOX(true);
    if (const auto why = own_network_namespace(); !why.empty())
        SKIP_TEST("no network namespace of the test's own (" + why + "; needs root)");
    egress_world world("allowed", "allowed.test 203.0.113.5\nsneaky.test 127.0.0.1\n"
                                  "other.test 203.0.113.5\na.wild.test 203.0.113.5\n");
    const int port = world.port;
    daemon_process d(egress_source(port));
    client c(d.socket());
    const json st = source_status(c, "net")["sandbox"];
    CHECK(st["net"] == "proxy");

    // Allowed: the bytes arrive, through HTTP CONNECT and through SOCKS5 (and a wildcard).
    auto ok = reach(c, "connect", "allowed.test", port);
    CHECK(ok.result["done"] == true);
    CHECK(ok.result.value("received", "").find("hello from allowed") != std::string::npos);
    CHECK(ok.result.value("received", "").find("pong") != std::string::npos);
    auto socks = reach(c, "socks5", "allowed.test", port);
    CHECK(socks.result["done"] == true);
    CHECK(socks.result.value("received", "").find("pong") != std::string::npos);
    CHECK(reach(c, "connect", "a.wild.test", port).result["done"] ==
          true); // "*.wild.test", any port
    // Refused: a name no rule allows, with the rule that would.
    auto unlisted = reach(c, "connect", "unlisted.test", 443);
    CHECK(unlisted.result["done"] == false);
    CHECK(unlisted.result.value("code", "") == "HTTP 403");
    CHECK(violation_rule(unlisted) == "add \"unlisted.test:443\" to the source's network.allow");
    // A tool that fails on it says only what its runtime says ("fetch failed", a 403): the
    // failed result carries the proxy's refusal and the rule that would allow it.
    const json failed = c.call("net",
                               {{"action", "egress"},
                                {"via", "connect"},
                                {"host", "unlisted.test"},
                                {"port", 443},
                                {"fail", true}},
                               {{"callerClaim", "cli"}}, nullptr, 30s);
    CHECK(failed["result"]["ok"] == false);
    CHECK_THAT(failed["result"]["error"]["message"].get<std::string>(),
               Catch::Contains("meith's egress proxy refused unlisted.test:443") &&
                   Catch::Contains("add \"unlisted.test:443\" to the source's network.allow"));
    // A denied name.
    auto denied = reach(c, "connect", "other.test", port);
    CHECK(denied.result["done"] == false);
    CHECK(violation_rule(denied) == "(no rule)"); // a deny rule decided: no rule to add
    // A name an allow rule matches but that resolves to 127.0.0.1.
    auto sneaky = reach(c, "connect", "sneaky.test", port);
    CHECK(sneaky.result["done"] == false);
    CHECK(sneaky.result.value("body", "").find("127.0.0.1, a loopback address") !=
          std::string::npos);
    CHECK(violation_rule(sneaky).find("allow_private") != std::string::npos);
    // An IP literal, even of the allowed host, through SOCKS5 too.
    auto literal = reach(c, "connect", "203.0.113.5", port);
    CHECK(literal.result["done"] == false);
    CHECK(violation_rule(literal) ==
          "add \"203.0.113.5:" + std::to_string(port) + "\" to the source's network.allow");
    // Directly: the namespace has only loopback.
    auto direct = reach(c, "direct", "203.0.113.5", port);
    CHECK(direct.result["done"] == false);
    CHECK(direct.result.value("code", "") == "ENETUNREACH");

    // One audit line per proxied connection, with the decision and the bytes.
    // (A line is written when its connection closes: wait for the eighth.)
    d.wait_audit([&](const json&) { return d.audit_events("egress").size() >= 8; }, 10s);
    const auto lines = d.audit_events("egress");
    REQUIRE(lines.size() == 8); // the direct attempt never reached the proxy
    CHECK(lines[0]["host"] == "allowed.test");
    CHECK(lines[0]["decision"] == "allow");
    CHECK(lines[0]["address"] == "203.0.113.5");
    CHECK(lines[0]["bytesReceived"].get<int>() > 0);
    CHECK(lines[0]["tool"] == "net");
    CHECK(lines[0]["caller"] == "plugin");
    CHECK(lines[0]["protocol"] == "connect");
    CHECK(lines[1]["protocol"] == "socks5");
    CHECK(lines[2]["decision"] == "allow");
    CHECK(lines[2]["rule"] == "*.wild.test");
    for (std::size_t i = 3; i < lines.size(); ++i)
        CHECK(lines[i]["decision"] == "deny");
}

TEST_CASE("egress: a long-running exec server's connection is its only call's: the audit line "
          "names the tool and caller, a refusal reaches that call",
          "[e2e][sandbox][egress]") {
    REQUIRE_KERNEL_SANDBOX(true);
    if (const auto why = own_network_namespace(); !why.empty())
        SKIP_TEST("no network namespace of the test's own (" + why + "; needs root)");
    egress_world world("allowed", "allowed.test 203.0.113.5\n");
    const int port = world.port;
    std::string cfg = egress_source(port);
    const auto at = cfg.find("kind = \"exec\"");
    REQUIRE(at != std::string::npos);
    cfg.replace(at, 13, "kind = \"exec\"\nmode = \"server\"");
    const auto probe = cfg.find("sandbox_probe.mjs\"");
    REQUIRE(probe != std::string::npos);
    cfg.insert(probe + 18, ", \"--server\"");
    daemon_process d(cfg);
    client c(d.socket());
    REQUIRE(source_status(c, "net")["kind"] == "exec-server");

    auto ok = reach(c, "connect", "allowed.test", port);
    CHECK(ok.result.value("received", "").find("pong") != std::string::npos);
    auto unlisted = reach(c, "connect", "unlisted.test", 443);
    CHECK(unlisted.result["done"] == false);
    CHECK(violation_rule(unlisted) == "add \"unlisted.test:443\" to the source's network.allow");

    d.wait_audit([&](const json&) { return d.audit_events("egress").size() >= 2; }, 10s);
    const auto lines = d.audit_events("egress");
    REQUIRE(lines.size() == 2);
    // Each line is written as its connection closes, which may be after its call's result:
    // the connection still names the call it was opened for.
    std::vector<std::string> decisions;
    for (const auto& line : lines) {
        INFO(line.dump());
        CHECK(line.value("source", "") == "net");
        CHECK(line.value("tool", "(none)") == "net");
        CHECK(line.value("caller", "(none)") == "plugin");
        decisions.push_back(line.value("decision", ""));
    }
    std::sort(decisions.begin(), decisions.end());
    CHECK(decisions == std::vector<std::string>{"allow", "deny"});
}

TEST_CASE("egress: a source with a network table fails closed where there are no namespaces",
          "[e2e][sandbox][egress]") {
    ::setenv("MEITH_SANDBOX_TEST_ABSENT", "namespaces", 1);
    daemon_process d(egress_source(443));
    ::unsetenv("MEITH_SANDBOX_TEST_ABSENT");
    client c(d.socket());
    const json st = source_status(c, "net");
    CHECK(st["state"] == "failed");
    CHECK(st["lastError"].get<std::string>().find("network namespace") != std::string::npos);
    const json r = c.call(
        "net", {{"action", "egress"}, {"via", "direct"}, {"host", "203.0.113.5"}, {"port", 1}});
    CHECK(r["result"]["ok"] == false);
}

namespace {

/// A source whose network table allows nothing outright and asks about every target.
std::string asking_source() {
    return "[permissions.callers.plugin]\nallow = [\"read-only\", \"accesses-network\"]\n\n"
           "[[sources]]\nname = \"net\"\nkind = \"exec\"\ncommand = [\"node\", \"" +
           std::string(MEITH_SOURCE_DIR) +
           "/tests/exec/sandbox_probe.mjs\"]\n"
           "tool = { name = \"net\", description = \"egress probe\", capabilities = "
           "[\"accesses-network\"] }\n"
           "# the agent's one network tool\n"
           "network = { allow = [], deny = [\"never.test\"], ask = true }\n";
}

/// Starts a call of the probe to `host`:`port` through HTTP CONNECT (its result is read later
/// with wait_result).
void start_reach(client& c, const std::string& id, const std::string& host, int port) {
    c.send({{"type", "tool_call"},
            {"requestId", id},
            {"toolName", "net"},
            {"callerClaim", "cli"},
            {"timeoutMs", 30000},
            {"arguments",
             {{"action", "egress"}, {"via", "connect"}, {"host", host}, {"port", port}}}});
}

/// The next approval_request the approver is shown.
json next_request(client& approver) {
    for (;;) {
        json f = approver.read(30s);
        if (f.value("type", "") == "approval_request") return f;
    }
}

void answer(client& approver, const json& request, const std::string& decision,
            const std::string& reason = "") {
    json f = {{"type", "approve"},
              {"protocol", 1},
              {"approvalId", request["approvalId"]},
              {"decision", decision}};
    if (!reason.empty()) f["reason"] = reason;
    approver.send(f);
}

std::string violation_message(const std::vector<json>& events) {
    for (const auto& e : events)
        if (e.value("type", "") == "sandbox_violation") return e.value("message", "");
    return "(no sandbox_violation event)";
}

} // namespace

TEST_CASE("egress: with network.ask a target no rule names waits for a person at meith approve: "
          "once, for the session, always (kept in the config), deny, with no approver it is "
          "refused at once",
          "[e2e][sandbox][egress]") {
    REQUIRE_KERNEL_SANDBOX(true);
    if (const auto why = own_network_namespace(); !why.empty())
        SKIP_TEST("no network namespace of the test's own (" + why + "; needs root)");
    egress_world world("asked", "once.test 203.0.113.5\nsession.test 203.0.113.5\n"
                                "kept.test 203.0.113.5\nnever.test 203.0.113.5\n");
    const int port = world.port;
    const std::string p = std::to_string(port);
    daemon_process d(asking_source());
    client c(d.socket());

    // No approver connected: refused at once, saying what would allow it.
    auto alone = reach(c, "connect", "once.test", port);
    CHECK(alone.result["done"] == false);
    CHECK(violation_rule(alone) == "add \"once.test:" + p + "\" to the source's network.allow");
    CHECK_THAT(violation_message(alone.events), Catch::Contains("no approver is connected"));
    // A deny rule decides without asking.
    auto never = reach(c, "connect", "never.test", port);
    CHECK(never.result["done"] == false);

    auto approver = connect_approver(d);
    // Once: this connection only; the next one to the same target is asked again.
    start_reach(c, "once-1", "once.test", port);
    json req = next_request(*approver);
    CHECK(req["kind"] == "egress");
    CHECK(req["source"] == "net");
    CHECK(req["target"] == "once.test:" + p);
    CHECK(req["toolName"] == "net");
    CHECK(req["requestId"] == "once-1");
    CHECK(req["decisions"] == json::array({"allow_once", "allow_session", "allow_always", "deny"}));
    // "allow_always" is for egress requests; a bad decision changes nothing.
    answer(*approver, req, "allow_forever");
    CHECK(approver->read()["type"] == "error");
    answer(*approver, req, "allow_once");
    json r = c.wait_result("once-1", nullptr, 30s);
    REQUIRE(r["result"]["ok"] == true);
    CHECK(r["result"]["content"]["done"] == true);
    CHECK_THAT(r["result"]["content"].value("received", ""), Catch::Contains("hello from asked"));
    start_reach(c, "once-2", "once.test", port);
    req = next_request(*approver);
    CHECK(req["requestId"] == "once-2");
    answer(*approver, req, "deny", "not that one");
    std::vector<json> events;
    r = c.wait_result("once-2", &events, 30s);
    CHECK(r["result"]["content"]["done"] == false);
    CHECK_THAT(violation_message(events),
               Catch::Contains("a person refused it at `meith approve`: not that one"));

    // For the session: asked once, then allowed without asking (nobody answers the second).
    start_reach(c, "session-1", "session.test", port);
    answer(*approver, next_request(*approver), "allow_session");
    CHECK(c.wait_result("session-1", nullptr, 30s)["result"]["content"]["done"] == true);
    CHECK(reach(c, "connect", "session.test", port).result["done"] == true);

    // Always: allowed, and written to the source's network.allow in the config file, with its
    // comment and the rest of the file as they were.
    start_reach(c, "kept-1", "kept.test", port);
    req = next_request(*approver); // the next request is this one: session.test was not asked
    CHECK(req["target"] == "kept.test:" + p);
    answer(*approver, req, "allow_always");
    CHECK(c.wait_result("kept-1", nullptr, 30s)["result"]["content"]["done"] == true);
    const std::string toml = slurp(d.home() / "meithd.toml");
    CHECK_THAT(toml, Catch::Contains("network = { allow = [\"kept.test:" + p +
                                     "\", ], deny = [\"never.test\"], ask = true }"));
    CHECK_THAT(toml, Catch::Contains("# the agent's one network tool"));
    CHECK(d.audit_events("egress_rule_added").size() == 1);
    // A reload of the file it wrote leaves the source as it is.
    const json reloaded = [&] {
        c.send(
            {{"type", "reload_config"}, {"requestId", "rl"}, {"clientInfo", {{"caller", "cli"}}}});
        for (;;) {
            json f = c.read(15s);
            if (f.value("requestId", "") == "rl") return f;
        }
    }();
    INFO(reloaded.dump());
    CHECK(reloaded["ok"] == true);
    CHECK(reloaded["sources"]["replaced"].empty());

    // The audit says who decided each connection.
    d.wait_audit([&](const json&) { return d.audit_events("egress").size() >= 7; }, 10s);
    std::vector<std::string> rules;
    for (const auto& line : d.audit_events("egress"))
        rules.push_back(line.value("decision", "") + " " + line.value("rule", ""));
    CHECK(rules == std::vector<std::string>{
                       "deny ", "deny never.test",
                       "allow once.test:" + p + " (a person allowed it once)", "deny ",
                       "allow session.test:" + p + " (a person allowed it for this session)",
                       "allow session.test:" + p + " (a person allowed it for this session)",
                       "allow kept.test:" + p + " (a person allowed it always)"});

    // After a restart, without an approver: the kept target connects, the session's does not.
    approver.reset();
    d.stop();
    d.restart();
    client again(d.socket());
    CHECK(reach(again, "connect", "kept.test", port).result["done"] == true);
    CHECK(reach(again, "connect", "session.test", port).result["done"] == false);
}

} // namespace e2e_egress_test
