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

#include <cstdlib>
#include <fstream>

using namespace meith::test;

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

} // namespace

TEST_CASE("egress: an allowed name's bytes arrive through the proxy; other names, private "
          "answers, IP literals and direct connections are refused, each audited",
          "[e2e][sandbox][egress]") {
    REQUIRE_KERNEL_SANDBOX(true);
    if (const auto why = own_network_namespace(); !why.empty())
        SKIP_TEST("no network namespace of the test's own (" + why + "; needs root)");
    background_process target({"node",
                               std::string(MEITH_SOURCE_DIR) + "/tests/exec/egress_target.mjs",
                               "--host=203.0.113.5", "--name=allowed"});
    REQUIRE(target.wait_for("listening", 30s));
    const int port = std::stoi(target.out().substr(10));
    temp_dir hosts_dir;
    const auto hosts = hosts_dir.path / "hosts";
    std::ofstream(hosts) << "allowed.test 203.0.113.5\nsneaky.test 127.0.0.1\nother.test "
                            "203.0.113.5\na.wild.test 203.0.113.5\n";
    ::setenv("MEITH_EGRESS_TEST_HOSTS", hosts.c_str(), 1);
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
    // (A line is written when its connection closes: wait for the seventh.)
    d.wait_audit([&](const json&) { return d.audit_events("egress").size() >= 7; }, 10s);
    const auto lines = d.audit_events("egress");
    REQUIRE(lines.size() == 7); // the direct attempt never reached the proxy
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
    ::unsetenv("MEITH_EGRESS_TEST_HOSTS");
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
