// Unit tests of egress rules (egress/rules.hpp, docs/protocol.md §19).
#include "egress/rules.hpp"

#include <catch2/catch.hpp>

using namespace meith::egress;

namespace {

rule_set rules(std::vector<std::string> allow, std::vector<std::string> deny = {}) {
    rule_set s;
    for (const auto& t : allow) {
        std::string why;
        auto r = parse_rule(t, why);
        INFO(t << ": " << why);
        REQUIRE(r);
        s.allow.push_back(*r);
    }
    for (const auto& t : deny) {
        std::string why;
        auto r = parse_rule(t, why);
        REQUIRE(r);
        s.deny.push_back(*r);
    }
    return s;
}

std::string decided(const rule_set& s, std::string_view host, std::uint16_t port) {
    bool denied = false;
    const rule* r = s.decide(host, port, denied);
    if (r == nullptr) return "none";
    return (denied ? "deny " : "allow ") + r->text;
}

} // namespace

TEST_CASE("egress rules: names, ports, wildcards, any, IP literals", "[egress]") {
    const auto s =
        rules({"api.github.com:443", "*.npmjs.org", "*:8080", "203.0.113.7", "[2001:db8::1]:443"},
              {"evil.npmjs.org"});
    CHECK(decided(s, "api.github.com", 443) == "allow api.github.com:443");
    CHECK(decided(s, "api.github.com", 80) == "none");
    CHECK(decided(s, "registry.npmjs.org", 443) == "allow *.npmjs.org");
    CHECK(decided(s, "a.b.npmjs.org", 1) == "allow *.npmjs.org");
    CHECK(decided(s, "npmjs.org", 443) == "none"); // the wildcard is for subdomains only
    CHECK(decided(s, "xnpmjs.org", 443) == "none");
    CHECK(decided(s, "evil.npmjs.org", 443) == "deny evil.npmjs.org"); // deny wins
    CHECK(decided(s, "anything.example", 8080) == "allow *:8080");
    CHECK(decided(s, "203.0.113.7", 22) == "allow 203.0.113.7");
    CHECK(decided(s, "2001:db8::1", 443) == "allow [2001:db8::1]:443");
}

TEST_CASE("egress rules: names are normalised, bad rules say why", "[egress]") {
    CHECK(normal_host("API.GitHub.com.") == "api.github.com");
    CHECK(normal_host("[::1]") == "::1");
    std::string why;
    CHECK_FALSE(parse_rule("api.github.com:0", why));
    CHECK_THAT(why, Catch::Contains("1-65535"));
    CHECK_FALSE(parse_rule("api.github.com:99999", why));
    CHECK_FALSE(parse_rule("2001:db8::1", why));
    CHECK_THAT(why, Catch::Contains("brackets"));
    CHECK_FALSE(parse_rule("*.*.example.com", why));
    CHECK_FALSE(parse_rule("exa mple.com", why));
    CHECK_FALSE(parse_rule("[::1", why));
    const auto r = parse_rule("Example.COM:443", why);
    REQUIRE(r);
    CHECK(r->host == "example.com");
    CHECK(r->port == 443);
    CHECK(parse_rule("host:*", why)->port == 0);
}
