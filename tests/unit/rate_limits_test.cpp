// Unit tests for permissions/rate_limits: [[limits.rates]] token buckets (docs/protocol.md §21),
// on a clock the test moves.
#include "permissions/rate_limits.hpp"

#include <catch2/catch.hpp>

using namespace meith;
using permissions::caller;
using permissions::rate_limiter;
using namespace std::chrono_literals;

namespace unit_rate_limits_test { // one namespace per file: the tests build as unity batches

namespace {

config::rate_limit_config rule(std::uint64_t calls, std::uint64_t per_s, std::string tool = "*") {
    config::rate_limit_config r;
    r.calls = calls;
    r.per_s = per_s;
    r.tool = std::move(tool);
    return r;
}

const auto writes = permissions::bit(permissions::capability::writes_files);
const auto reads = permissions::bit(permissions::capability::read_only);

} // namespace

TEST_CASE("rate limits: a bucket of N calls empties, refills evenly, and a refusal says when") {
    rate_limiter rates;
    CHECK(rates.empty());
    rates.configure({rule(3, 3)}); // 3 at once, then one a second
    const auto t0 = rate_limiter::clock::now();
    for (int i = 0; i < 3; ++i)
        CHECK_FALSE(rates.take(caller::plugin, "s1", "echo", reads, t0));
    const auto refused = rates.take(caller::plugin, "s1", "echo", reads, t0);
    REQUIRE(refused);
    CHECK(refused->rule == 0);
    CHECK(refused->retry_after_ms == 1000);
    CHECK_THAT(refused->message, Catch::Contains("at most 3 call(s) per 3 s to any tool for "
                                                 "caller 'plugin' ([[limits.rates]] #1); try "
                                                 "again in 1.0 s"));
    // Half a second: still nothing; a refusal took no token, so at 1 s there is one.
    CHECK(rates.take(caller::plugin, "s1", "echo", reads, t0 + 500ms));
    CHECK_FALSE(rates.take(caller::plugin, "s1", "echo", reads, t0 + 1000ms));
    CHECK(rates.take(caller::plugin, "s1", "echo", reads, t0 + 1000ms));
    // Each caller has its own bucket; a long wait fills it only to its size.
    CHECK_FALSE(rates.take(caller::cli, "s2", "echo", reads, t0));
    for (int i = 0; i < 3; ++i)
        CHECK_FALSE(rates.take(caller::plugin, "s1", "echo", reads, t0 + 60s));
    CHECK(rates.take(caller::plugin, "s1", "echo", reads, t0 + 60s));
    // A reload starts every bucket full again.
    rates.configure({rule(3, 3)});
    CHECK_FALSE(rates.take(caller::plugin, "s1", "echo", reads, t0 + 60s));
}

TEST_CASE("rate limits: rules by tool glob, capability, caller and session, all must have a "
          "token") {
    auto by_tool = rule(1, 60, "fs_*");
    auto writes_only = rule(2, 60);
    writes_only.capability = "writes-files";
    writes_only.caller = "plugin";
    auto per_session = rule(5, 60);
    per_session.per_session = true;
    rate_limiter rates;
    rates.configure({by_tool, writes_only, per_session});
    const auto t = rate_limiter::clock::now();
    // fs_* for plugin: one call, then rule #1 refuses.
    CHECK_FALSE(rates.take(caller::plugin, "a", "fs_read", reads, t));
    auto r = rates.take(caller::plugin, "a", "fs_list", reads, t);
    REQUIRE(r);
    CHECK(r->rule == 0);
    // Writes by plugin: two, across tools; cli's writes are not counted by rule #2.
    CHECK_FALSE(rates.take(caller::plugin, "a", "save", writes, t));
    CHECK_FALSE(rates.take(caller::plugin, "a", "upload", writes, t));
    r = rates.take(caller::plugin, "a", "save", writes, t);
    REQUIRE(r);
    CHECK(r->rule == 1);
    CHECK_FALSE(rates.take(caller::cli, "b", "save", writes, t));
    // Per session: session a has used 3 of its 5 (refused calls took none); b its own.
    CHECK_FALSE(rates.take(caller::plugin, "a", "echo", reads, t));
    CHECK_FALSE(rates.take(caller::plugin, "a", "echo", reads, t));
    r = rates.take(caller::plugin, "a", "echo", reads, t);
    REQUIRE(r);
    CHECK(r->rule == 2);
    CHECK_THAT(r->message, Catch::Contains("for session a"));
    CHECK_FALSE(rates.take(caller::plugin, "c", "echo", reads, t));
    // A session that ends loses its bucket: a new one with that id starts full.
    rates.end_session("a");
    CHECK_FALSE(rates.take(caller::plugin, "a", "echo", reads, t));
}

TEST_CASE("rate limits: [[limits.rates]] is read with its defaults, bad entries say why") {
    auto ok = config::parse_config("[[limits.rates]]\ncalls = 10\n\n[[limits.rates]]\n"
                                   "caller = \"plugin\"\ntool = \"fs_*\"\ncapability = "
                                   "\"writes-files\"\ncalls = 2\nper_s = 10\nscope = \"session\"\n",
                                   "t.toml", "/etc/meith");
    REQUIRE_FALSE(ok.error);
    const auto& rates = ok.value->limits.rates;
    REQUIRE(rates.size() == 2);
    CHECK(rates[0].tool == "*");
    CHECK(rates[0].per_s == 60);
    CHECK_FALSE(rates[0].caller);
    CHECK_FALSE(rates[0].per_session);
    CHECK(rates[1].caller == "plugin");
    CHECK(rates[1].capability == "writes-files");
    CHECK(rates[1].calls == 2);
    CHECK(rates[1].per_session);
    const auto error = [](std::string_view text) {
        auto r = config::parse_config(text, "t.toml", "/etc/meith");
        return r.error ? r.error->to_string() : std::string("(no error)");
    };
    CHECK_THAT(error("[[limits.rates]]\ntool = \"x\"\n"), Catch::Contains("calls"));
    CHECK_THAT(error("[[limits.rates]]\ncalls = 0\n"), Catch::Contains("calls"));
    CHECK_THAT(error("[[limits.rates]]\ncalls = 1\ncapability = \"writes\"\n"),
               Catch::Contains("writes-files"));
    CHECK_THAT(error("[[limits.rates]]\ncalls = 1\nscope = \"agent\"\n"),
               Catch::Contains("\"caller\" or \"session\""));
    CHECK_THAT(error("[[limits.rates]]\ncalls = 1\nburst = 3\n"), Catch::Contains("burst"));
}

} // namespace unit_rate_limits_test
