// End-to-end tests of [[limits.rates]] (docs/protocol.md §21) on the real meithd: a limit
// trips with RATE_LIMITED (retryAfterMs, the rule) and an audit line of its own, resets as its
// bucket refills, spares calls the policy denies, and keeps one bucket per session when asked.
#include "daemon_fixture.hpp"

#include <catch2/catch.hpp>

#include <thread>

using namespace meith::test;

namespace e2e_rate_limits_test { // one namespace per file: the tests build as unity batches

namespace {

json echo(client& c, int i) {
    return c.call("echo", {{"i", i}}, {{"clientInfo", {{"caller", "plugin"}}}});
}

std::string code_of(const json& r) {
    return r["result"].value("ok", false) ? "ok" : r["result"]["error"]["code"].get<std::string>();
}

} // namespace

TEST_CASE("rate limits: a caller's bucket trips with RATE_LIMITED, audited, and resets as it "
          "refills",
          "[e2e][rates]") {
    daemon_process d("[[limits.rates]]\ncaller = \"plugin\"\ntool = \"ech*\"\ncalls = 3\n"
                     "per_s = 2\n\n"
                     "[[permissions.rules]]\ntool = \"echo\"\ncaller = \"cli\"\n"
                     "decision = \"deny\"\n");
    client c(d.socket());
    for (int i = 0; i < 3; ++i)
        CHECK(code_of(echo(c, i)) == "ok");
    const json limited = echo(c, 3);
    REQUIRE(code_of(limited) == "RATE_LIMITED");
    const json& error = limited["result"]["error"];
    CHECK_THAT(error["message"].get<std::string>(),
               Catch::Contains("at most 3 call(s) per 2 s to tools 'ech*' for caller 'plugin'"));
    CHECK(error["details"]["rule"] == 1);
    const auto wait = std::chrono::milliseconds(error["details"]["retryAfterMs"].get<int>());
    CHECK(wait.count() > 0);
    CHECK(wait.count() <= 667);
    // Another caller is not limited by a plugin rule; a denied call spends nothing.
    c.send({{"type", "tool_call"},
            {"requestId", "as-cli"},
            {"toolName", "echo"},
            {"arguments", {{"i", 9}}},
            {"clientInfo", {{"caller", "cli"}}}});
    CHECK(code_of(c.wait_result("as-cli")) == "PERMISSION_DENIED");
    // The audit line of the refused call says so.
    const json line = d.wait_audit([](const json& l) {
        return l.value("event", "") == "tool_call" && l["errorCode"] == "RATE_LIMITED";
    });
    CHECK(line["toolName"] == "echo");
    CHECK(line["caller"] == "plugin");
    CHECK(line["decision"] == "allow"); // the policy allowed it; the limit refused it after
    CHECK(line["end"] == "refused");
    // The bucket refills: after the wait it says, one more call goes through, then not.
    std::this_thread::sleep_for(wait);
    CHECK(code_of(echo(c, 4)) == "ok");
    CHECK(code_of(echo(c, 5)) == "RATE_LIMITED");
}

TEST_CASE("rate limits: scope = session keeps a bucket per session", "[e2e][rates]") {
    daemon_process d("[[limits.rates]]\ncalls = 2\nper_s = 3600\nscope = \"session\"\n");
    client a(d.socket()), b(d.socket());
    CHECK(code_of(echo(a, 1)) == "ok");
    CHECK(code_of(echo(a, 2)) == "ok");
    CHECK(code_of(echo(a, 3)) == "RATE_LIMITED");
    CHECK(code_of(echo(b, 1)) == "ok");
    CHECK(code_of(echo(b, 2)) == "ok");
    CHECK(code_of(echo(b, 3)) == "RATE_LIMITED");
}

} // namespace e2e_rate_limits_test
