// Unit tests: the pure side of remote MCP sources (remote/): the egress address table, the SSE
// parser (WHATWG HTML §9.2.6), and the OAuth helpers (RFC 6749, 7636, 8414, 8707, 9728) —
// challenge parsing, well-known URLs, the credentials file, token answers, PKCE, the
// authorization URL and the loopback callback.
#include "egress/address.hpp"
#include "remote/http_client.hpp"
#include "remote/oauth.hpp"
#include "remote/sse.hpp"

#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <cstring>
#include <string>
#include <vector>

namespace remote = meith::remote;
namespace egress = meith::egress;
using remote::sse_parser;

namespace unit_remote_test { // one namespace per file: the tests build as unity batches

namespace {

/// The kind of `text` (an IPv4 or IPv6 literal) as special_address_kind judges it.
std::string kind_of(const char* text) {
    sockaddr_storage ss{};
    if (std::strchr(text, ':') != nullptr) {
        auto* in6 = reinterpret_cast<sockaddr_in6*>(&ss);
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons(443);
        REQUIRE(::inet_pton(AF_INET6, text, &in6->sin6_addr) == 1);
    } else {
        auto* in = reinterpret_cast<sockaddr_in*>(&ss);
        in->sin_family = AF_INET;
        in->sin_port = htons(443);
        REQUIRE(::inet_pton(AF_INET, text, &in->sin_addr) == 1);
    }
    return std::string(egress::special_address_kind(reinterpret_cast<const sockaddr*>(&ss)));
}

/// An event as a comparable value.
struct seen_event {
    std::string type, data, id;
    std::optional<long> retry_ms;
    bool operator==(const seen_event&) const = default;
};

std::ostream& operator<<(std::ostream& os, const seen_event& e) {
    os << "{type=" << e.type << " data=\"" << e.data << "\" id=" << e.id;
    if (e.retry_ms) os << " retry=" << *e.retry_ms;
    return os << "}";
}

using events = std::vector<seen_event>;

/// Feeds `chunks` in order to `p` and returns the events it dispatched.
events feed_chunks(sse_parser& p, const std::vector<std::string>& chunks) {
    events out;
    for (const auto& c : chunks)
        p.feed(c, [&](remote::sse_event& e) { out.push_back({e.type, e.data, e.id, e.retry_ms}); });
    return out;
}

events feed_whole(const std::string& text, std::size_t max = 1 << 20) {
    sse_parser p(max);
    return feed_chunks(p, {text});
}

events feed_bytes(const std::string& text, std::size_t max = 1 << 20) {
    sse_parser p(max);
    std::vector<std::string> chunks;
    for (char c : text)
        chunks.emplace_back(1, c);
    return feed_chunks(p, chunks);
}

/// Checks that one chunk, one byte at a time and every split in two give `expected`.
void check_any_split(const std::string& text, const events& expected, std::size_t max = 1 << 20) {
    INFO("stream: " << text);
    CHECK(feed_whole(text, max) == expected);
    CHECK(feed_bytes(text, max) == expected);
    for (std::size_t at = 0; at <= text.size(); ++at) {
        sse_parser p(max);
        INFO("split at " << at);
        CHECK(feed_chunks(p, {text.substr(0, at), text.substr(at)}) == expected);
    }
}

const std::string base64url_alphabet =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

bool all_base64url(const std::string& s) {
    return s.find_first_not_of(base64url_alphabet) == std::string::npos;
}

} // namespace

// ---- egress ---------------------------------------------------------------------------------

TEST_CASE("egress: IPv4 special-use addresses by kind, public ones empty", "[remote][egress]") {
    CHECK(kind_of("127.0.0.1") == "loopback");
    CHECK(kind_of("127.255.0.1") == "loopback");
    CHECK(kind_of("10.1.2.3") == "private");
    CHECK(kind_of("172.16.0.1") == "private");
    CHECK(kind_of("172.31.255.255") == "private");
    CHECK(kind_of("192.168.1.1") == "private");
    CHECK(kind_of("172.32.0.1").empty());
    CHECK(kind_of("172.15.255.255").empty());
    CHECK(kind_of("169.254.169.254") == "cloud metadata");
    CHECK(kind_of("169.254.1.1") == "link-local");
    CHECK(kind_of("100.64.0.1") == "shared (CGNAT)");
    CHECK(kind_of("100.127.255.255") == "shared (CGNAT)");
    CHECK(kind_of("100.128.0.1").empty());
    CHECK(kind_of("0.0.0.0") == "unspecified");
    CHECK(kind_of("224.0.0.1") == "multicast");
    CHECK(kind_of("239.255.255.250") == "multicast");
    CHECK(kind_of("255.255.255.255") == "reserved");
    CHECK(kind_of("198.18.0.1") == "reserved");
    CHECK(kind_of("8.8.8.8").empty());
    CHECK(kind_of("203.0.113.5").empty());
}

TEST_CASE("egress: IPv6 special-use addresses, mapped and NAT64 ones by their IPv4 address",
          "[remote][egress]") {
    CHECK(kind_of("::1") == "loopback");
    CHECK(kind_of("::") == "unspecified");
    CHECK(kind_of("::ffff:127.0.0.1") == "loopback");
    CHECK(kind_of("::ffff:10.0.0.1") == "private");
    CHECK(kind_of("::ffff:169.254.169.254") == "cloud metadata");
    CHECK(kind_of("::ffff:8.8.8.8").empty());
    CHECK(kind_of("::127.0.0.1") == "loopback"); // IPv4-compatible (deprecated)
    CHECK(kind_of("fe80::1") == "link-local");
    CHECK(kind_of("febf::1") == "link-local");
    CHECK(kind_of("fd00::1") == "unique-local");
    CHECK(kind_of("fc00::1") == "unique-local");
    CHECK(kind_of("fd00:ec2::254") == "cloud metadata");
    CHECK(kind_of("ff02::1") == "multicast");
    CHECK(kind_of("2001:4860:4860::8888").empty());
    CHECK(kind_of("64:ff9b::a00:1") == "private"); // NAT64 of 10.0.0.1
    CHECK(kind_of("64:ff9b::7f00:1") == "loopback");
    CHECK(kind_of("64:ff9b::808:808").empty());
}

TEST_CASE("egress: a non-IP address is \"not IP\"", "[remote][egress]") {
    sockaddr_un un{};
    un.sun_family = AF_UNIX;
    std::strcpy(un.sun_path, "/tmp/x.sock");
    CHECK(egress::special_address_kind(reinterpret_cast<const sockaddr*>(&un)) == "not IP");
    CHECK(egress::special_address_kind(nullptr) == "not IP");
}

// ---- sse ------------------------------------------------------------------------------------

TEST_CASE("sse: events come out the same whatever the chunk boundaries", "[remote][sse]") {
    const std::string stream = "event: message\n"
                               "id: 1\n"
                               "data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n"
                               "\n"
                               ": keep-alive\n"
                               "data: second\n"
                               "\n";
    const events expected = {
        {"message", R"({"jsonrpc":"2.0","id":1,"result":{}})", "1", std::nullopt},
        {"message", "second", "1", std::nullopt}};
    check_any_split(stream, expected);
}

TEST_CASE("sse: CRLF, CR and LF line endings, mixed", "[remote][sse]") {
    const events expected = {{"message", "a\nb", "", std::nullopt},
                             {"message", "c", "", std::nullopt}};
    check_any_split("data: a\r\ndata: b\r\n\r\ndata: c\r\n\r\n", expected);
    check_any_split("data: a\rdata: b\r\rdata: c\r\r", expected);
    check_any_split("data: a\ndata: b\n\ndata: c\n\n", expected);
    check_any_split("data: a\r\ndata: b\r\rdata: c\n\r\n", expected);
}

TEST_CASE("sse: a CR at a chunk's end still pairs with the LF after an empty chunk",
          "[remote][sse]") {
    sse_parser p(1024);
    const auto got = feed_chunks(p, {"data: a\r", "", "\ndata: b\n\n"});
    CHECK(got == events{{"message", "a\nb", "", std::nullopt}});
}

TEST_CASE("sse: data lines join with a newline, fields without a space or value", "[remote][sse]") {
    check_any_split("data: one\ndata:two\ndata\ndata:  four\n\n",
                    {{"message", "one\ntwo\n\n four", "", std::nullopt}});
    // A field name alone is the field with an empty value; unknown fields are ignored.
    check_any_split("foo: bar\ndata\n\n", {{"message", "", "", std::nullopt}});
}

TEST_CASE("sse: comments are ignored, an event without data is not dispatched", "[remote][sse]") {
    check_any_split(": ping\n\n:\n\nevent: x\n\ndata: y\n\n", {{"message", "y", "", std::nullopt}});
}

TEST_CASE("sse: event type, id persisting across events, retry", "[remote][sse]") {
    const std::string stream = "event: notice\nid: 41\nretry: 3000\ndata: a\n\n"
                               "data: b\n\n"
                               "id: 42\ndata: c\n\n"
                               "id\ndata: d\n\n";
    const events expected = {{"notice", "a", "41", 3000L},
                             {"message", "b", "41", std::nullopt},
                             {"message", "c", "42", std::nullopt},
                             {"message", "d", "", std::nullopt}}; // an empty id resets it
    check_any_split(stream, expected);

    sse_parser p(1024);
    feed_chunks(p, {stream.substr(0, stream.size() - 9)}); // up to "id\n" in the last event
    CHECK(p.last_event_id() == "42");
    feed_chunks(p, {"id: 43\ndata: e\n\n"});
    CHECK(p.last_event_id() == "43");
}

TEST_CASE("sse: last_event_id moves only when an event is dispatched", "[remote][sse]") {
    // A stream cut inside an event must resume from the event before it (WHATWG: the last
    // event ID string is set at dispatch), else the server would skip the one not received.
    sse_parser p(1024);
    auto got = feed_chunks(p, {"id: 1\ndata: a\n\nid: 2\ndata: {\"partial"});
    CHECK(got.size() == 1);
    CHECK(p.last_event_id() == "1");
    got = feed_chunks(p, {"\"}\n\n"});
    REQUIRE(got.size() == 1);
    CHECK(got[0].id == "2");
    CHECK(p.last_event_id() == "2");

    // An id-only event (no data) still moves it.
    feed_chunks(p, {"id: 3\n"});
    CHECK(p.last_event_id() == "2");
    CHECK(feed_chunks(p, {"\n"}).empty());
    CHECK(p.last_event_id() == "3");

    // An id holding NUL is ignored.
    feed_chunks(p, {std::string("id: a\0b\n\n", 9)});
    CHECK(p.last_event_id() == "3");
}

TEST_CASE("sse: an empty event type is \"message\"", "[remote][sse]") {
    check_any_split("event:\ndata: x\n\n", {{"message", "x", "", std::nullopt}});
    check_any_split("event: a\nevent:\ndata: x\n\n", {{"message", "x", "", std::nullopt}});
}

TEST_CASE("sse: retry takes ASCII digits only", "[remote][sse]") {
    check_any_split("retry: 250\ndata: a\n\n", {{"message", "a", "", 250L}});
    check_any_split("retry: -5\ndata: a\n\n", {{"message", "a", "", std::nullopt}});
    check_any_split("retry: 12ab\ndata: a\n\n", {{"message", "a", "", std::nullopt}});
    check_any_split("retry: 99999999999999999999999\ndata: a\n\n",
                    {{"message", "a", "", std::nullopt}});
    // retry belongs to its event only.
    check_any_split("retry: 7\ndata: a\n\ndata: b\n\n",
                    {{"message", "a", "", 7L}, {"message", "b", "", std::nullopt}});
}

TEST_CASE("sse: the priming event (id and empty data) is dispatched with empty data",
          "[remote][sse]") {
    check_any_split("id: x\ndata: \n\n", {{"message", "", "x", std::nullopt}});
    sse_parser p(1024);
    feed_chunks(p, {"id: x\ndata: \n\n"});
    CHECK(p.last_event_id() == "x");
}

TEST_CASE("sse: an event over max_event_bytes is dropped and counted, the next arrives",
          "[remote][sse]") {
    const std::size_t max = 16;
    const std::string exact(max, 'x');
    const std::string over(max + 1, 'y');
    const std::string stream = "id: 1\ndata: " + over + "\n\n" +            // dropped
                               "id: 2\ndata: 0123456\ndata: 01234567\n\n" + // 7+1+8 = 16: kept
                               "data: 0123456\ndata: 012345678\n\n" +       // 17 in two: dropped
                               "data: " + exact + "\n\n";                   // exactly max: kept
    const events expected = {{"message", "0123456\n01234567", "2", std::nullopt},
                             {"message", exact, "2", std::nullopt}};
    check_any_split(stream, expected, max);

    sse_parser whole(max), bytes(max);
    feed_chunks(whole, {stream});
    std::vector<std::string> one_by_one;
    for (char c : stream)
        one_by_one.emplace_back(1, c);
    feed_chunks(bytes, one_by_one);
    CHECK(whole.dropped() == 2);
    CHECK(bytes.dropped() == 2);
    CHECK(whole.last_event_id() == "2");

    // A line far longer than the bound, fed in pieces, is dropped without being kept.
    sse_parser p(max);
    events got = feed_chunks(
        p, {"data: ", std::string(5000, 'z'), std::string(5000, 'z'), "\n\ndata: after\n\n"});
    CHECK(got == events{{"message", "after", "", std::nullopt}});
    CHECK(p.dropped() == 1);
}

// ---- oauth: challenges and well-known URLs --------------------------------------------------

TEST_CASE("oauth: the Bearer challenge's resource_metadata, scope and error", "[remote][oauth]") {
    auto c = remote::parse_bearer_challenge(
        R"(Bearer error="invalid_token", error_description="Missing Authorization header", )"
        R"(resource_metadata="http://127.0.0.1:1/.well-known/oauth-protected-resource/mcp")");
    CHECK(c.error == "invalid_token");
    CHECK(c.resource_metadata == "http://127.0.0.1:1/.well-known/oauth-protected-resource/mcp");
    CHECK(c.scope.empty());

    c = remote::parse_bearer_challenge(
        R"(Bearer resource_metadata="https://a.example/.well-known/oauth-protected-resource", )"
        R"(scope="files:read files:write")");
    CHECK(c.resource_metadata == "https://a.example/.well-known/oauth-protected-resource");
    CHECK(c.scope == "files:read files:write");
    CHECK(c.error.empty());

    // Lower-case scheme, unquoted values, an escaped quote.
    c = remote::parse_bearer_challenge(R"(bearer error=insufficient_scope, scope="a \"b\"")");
    CHECK(c.error == "insufficient_scope");
    CHECK(c.scope == R"(a "b")");

    for (const char* other : {R"(Basic realm="x", scope="s")", "", "Bear", "DPoP error=\"x\""}) {
        INFO(other);
        c = remote::parse_bearer_challenge(other);
        CHECK(c.resource_metadata.empty());
        CHECK(c.scope.empty());
        CHECK(c.error.empty());
    }
}

TEST_CASE("oauth: protected-resource metadata URLs, path-inserted first (RFC 9728 §3.1)",
          "[remote][oauth]") {
    using v = std::vector<std::string>;
    CHECK(remote::protected_resource_metadata_urls("https://a.example/mcp") ==
          v{"https://a.example/.well-known/oauth-protected-resource/mcp",
            "https://a.example/.well-known/oauth-protected-resource"});
    CHECK(remote::protected_resource_metadata_urls("https://a.example") ==
          v{"https://a.example/.well-known/oauth-protected-resource"});
    CHECK(remote::protected_resource_metadata_urls("https://a.example/") ==
          v{"https://a.example/.well-known/oauth-protected-resource"});
    CHECK(remote::protected_resource_metadata_urls("http://127.0.0.1:8080/v1/mcp") ==
          v{"http://127.0.0.1:8080/.well-known/oauth-protected-resource/v1/mcp",
            "http://127.0.0.1:8080/.well-known/oauth-protected-resource"});
    CHECK(remote::protected_resource_metadata_urls("ftp://a.example/mcp").empty());
    CHECK(remote::protected_resource_metadata_urls("not a url").empty());
}

TEST_CASE("oauth: authorization-server metadata URLs (RFC 8414 §3.1, OpenID Connect)",
          "[remote][oauth]") {
    using v = std::vector<std::string>;
    CHECK(remote::authorization_server_metadata_urls("https://auth.example") ==
          v{"https://auth.example/.well-known/oauth-authorization-server",
            "https://auth.example/.well-known/openid-configuration"});
    const v with_path = {"https://auth.example/.well-known/oauth-authorization-server/tenant1",
                         "https://auth.example/.well-known/openid-configuration/tenant1",
                         "https://auth.example/tenant1/.well-known/openid-configuration"};
    CHECK(remote::authorization_server_metadata_urls("https://auth.example/tenant1") == with_path);
    // "any terminating '/' MUST be removed" (RFC 8414 §3.1; OpenID Connect Discovery §4).
    CHECK(remote::authorization_server_metadata_urls("https://auth.example/tenant1/") == with_path);
    CHECK(remote::authorization_server_metadata_urls("https://auth.example/") ==
          remote::authorization_server_metadata_urls("https://auth.example"));
    CHECK(remote::authorization_server_metadata_urls("mailto:a@b").empty());
}

TEST_CASE("oauth: the canonical resource lower-cases scheme and host, keeps port and path",
          "[remote][oauth]") {
    CHECK(remote::canonical_resource("HTTPS://MCP.Example.COM:8443/Path/MCP") ==
          "https://mcp.example.com:8443/Path/MCP");
    CHECK(remote::canonical_resource("https://mcp.example.com/mcp#frag") ==
          "https://mcp.example.com/mcp");
    CHECK(remote::canonical_resource("https://mcp.example.com/") == "https://mcp.example.com");
    CHECK(remote::canonical_resource("https://mcp.example.com") == "https://mcp.example.com");
    CHECK(remote::canonical_resource("nonsense") == "nonsense");
}

// ---- oauth: the credentials file ------------------------------------------------------------

TEST_CASE("oauth: credentials round-trip through JSON with every field", "[remote][oauth]") {
    remote::credentials c;
    c.access_token = "at-\"quoted\"-\\-\xc3\xa9";
    c.refresh_token = "rt-1";
    c.expires_at = 1767225600;
    c.token_endpoint = "https://auth.example/token";
    c.client_id = "client-1";
    c.client_secret = "cs-1";
    c.resource = "https://mcp.example.com/mcp";
    c.scope = "files:read files:write";
    c.issuer = "https://auth.example";
    const std::string json = remote::to_json(c);
    CHECK(json == R"({"access_token":"at-\"quoted\"-\\-)"
                  "\xc3\xa9"
                  R"(","refresh_token":"rt-1","expires_at":1767225600,)"
                  R"("token_endpoint":"https://auth.example/token","client_id":"client-1",)"
                  R"("client_secret":"cs-1","resource":"https://mcp.example.com/mcp",)"
                  R"("scope":"files:read files:write","issuer":"https://auth.example"})");
    std::string why;
    const auto back = remote::credentials_from_json(json, why);
    REQUIRE(back);
    CHECK(back->access_token == c.access_token);
    CHECK(back->refresh_token == c.refresh_token);
    CHECK(back->expires_at == c.expires_at);
    CHECK(back->token_endpoint == c.token_endpoint);
    CHECK(back->client_id == c.client_id);
    CHECK(back->client_secret == c.client_secret);
    CHECK(back->resource == c.resource);
    CHECK(back->scope == c.scope);
    CHECK(back->issuer == c.issuer);
    CHECK(remote::to_json(*back) == json);

    // Empty members are left out; a refresh token alone is a grant.
    remote::credentials r;
    r.refresh_token = "only-refresh";
    CHECK(remote::to_json(r) == R"({"refresh_token":"only-refresh"})");
    const auto only = remote::credentials_from_json(remote::to_json(r), why);
    REQUIRE(only);
    CHECK(only->access_token.empty());
    CHECK(only->expires_at == 0);
}

TEST_CASE("oauth: credentials_from_json refuses non-objects and token-less objects",
          "[remote][oauth]") {
    for (const char* bad : {"[]", "\"x\"", "42", "{", "", "null"}) {
        INFO(bad);
        std::string why;
        CHECK_FALSE(remote::credentials_from_json(bad, why));
        CHECK(why == "not a JSON object");
    }
    std::string why;
    CHECK_FALSE(remote::credentials_from_json(R"({"client_id":"c","issuer":"https://a"})", why));
    CHECK(why == "it holds no token");
    why.clear();
    CHECK_FALSE(remote::credentials_from_json(R"({"access_token":7})", why));
    CHECK(why == "it holds no token");
}

TEST_CASE("oauth: secret_values lists the tokens and the client secret only", "[remote][oauth]") {
    remote::credentials c;
    c.access_token = "at";
    c.refresh_token = "rt";
    c.client_secret = "cs";
    c.client_id = "id";
    c.token_endpoint = "https://auth.example/token";
    c.resource = "https://mcp.example.com";
    c.scope = "s";
    c.issuer = "https://auth.example";
    CHECK(remote::secret_values(c) == std::vector<std::string>{"at", "rt", "cs"});
    c.client_secret.clear();
    c.refresh_token.clear();
    CHECK(remote::secret_values(c) == std::vector<std::string>{"at"});
    CHECK(remote::secret_values(remote::credentials{}).empty());
}

// ---- oauth: token answers -------------------------------------------------------------------

TEST_CASE("oauth: apply_token_response applies a token answer", "[remote][oauth]") {
    remote::credentials c;
    c.access_token = "old-access";
    c.refresh_token = "old-refresh";
    c.scope = "a";
    std::string why;
    bool invalid_grant = true;

    SECTION("with expires_in and a rotated refresh token") {
        REQUIRE(remote::apply_token_response(
            c, 200,
            R"({"access_token":"new-access","token_type":"Bearer","expires_in":3600,)"
            R"("refresh_token":"new-refresh","scope":"a b"})",
            1000, why, invalid_grant));
        CHECK_FALSE(invalid_grant);
        CHECK(c.access_token == "new-access");
        CHECK(c.refresh_token == "new-refresh");
        CHECK(c.expires_at == 4600);
        CHECK(c.scope == "a b");
    }
    SECTION("without a refresh token the old one stays; no expires_in: no expiry") {
        c.expires_at = 99;
        REQUIRE(remote::apply_token_response(c, 200, R"({"access_token":"new-access"})", 1000, why,
                                             invalid_grant));
        CHECK(c.access_token == "new-access");
        CHECK(c.refresh_token == "old-refresh");
        CHECK(c.expires_at == 0);
        CHECK(c.scope == "a");
    }
    SECTION("invalid_grant: flagged, named, and no token in the reason") {
        CHECK_FALSE(remote::apply_token_response(
            c, 400,
            R"({"error":"invalid_grant","error_description":"The refresh token is expired"})", 1000,
            why, invalid_grant));
        CHECK(invalid_grant);
        CHECK_THAT(why, Catch::Contains("invalid_grant") && Catch::Contains("HTTP 400") &&
                            Catch::Contains("The refresh token is expired"));
        CHECK_THAT(why, !Catch::Contains("old-refresh"));
        CHECK(c.access_token == "old-access");
        CHECK(c.refresh_token == "old-refresh");
    }
    SECTION("a description that echoes the grant's tokens does not carry them into the reason") {
        CHECK_FALSE(remote::apply_token_response(
            c, 400,
            R"({"error":"invalid_grant","error_description":"refresh token old-refresh )"
            R"(revoked, access old-access"})",
            1000, why, invalid_grant));
        CHECK(invalid_grant);
        CHECK_THAT(why, Catch::Contains("invalid_grant"));
        CHECK_THAT(why, !Catch::Contains("old-refresh") && !Catch::Contains("old-access"));
    }
    SECTION("another error code is not invalid_grant, even with status 200") {
        CHECK_FALSE(remote::apply_token_response(c, 200, R"({"error":"invalid_request"})", 1000,
                                                 why, invalid_grant));
        CHECK_FALSE(invalid_grant);
        CHECK_THAT(why, Catch::Contains("invalid_request"));
    }
    SECTION("an error status without a code") {
        CHECK_FALSE(remote::apply_token_response(c, 500, "{}", 1000, why, invalid_grant));
        CHECK_FALSE(invalid_grant);
        CHECK_THAT(why, Catch::Contains("HTTP 500") && Catch::Contains("no error code"));
    }
    SECTION("a body that is not JSON") {
        CHECK_FALSE(remote::apply_token_response(c, 502, "<html>Bad gateway</html>", 1000, why,
                                                 invalid_grant));
        CHECK_FALSE(invalid_grant);
        CHECK(why == "the token endpoint answered HTTP 502 without a JSON object");
        CHECK(c.access_token == "old-access");
    }
    SECTION("a 200 without an access token") {
        CHECK_FALSE(remote::apply_token_response(c, 200, R"({"token_type":"Bearer"})", 1000, why,
                                                 invalid_grant));
        CHECK_FALSE(invalid_grant);
        CHECK(why == "the token endpoint's answer has no access_token");
        CHECK(c.access_token == "old-access");
    }
}

// ---- oauth: PKCE and the authorization request ----------------------------------------------

TEST_CASE("redact_secret_pieces: a secret, and any prefix or suffix of it of 8 bytes or more, "
          "wherever it is",
          "[remote][oauth][redaction]") {
    const std::string secret = "s3cr3t-0123456789abcdefghijklmnopqrstuvw";
    auto redacted = [&](std::string text) {
        remote::redact_secret_pieces(text, {secret, "short"});
        return text;
    };
    CHECK(redacted("a " + secret + " b") == "a [REDACTED] b");
    CHECK(redacted("cut: " + secret.substr(0, 39)) == "cut: [REDACTED]");
    CHECK(redacted("..." + secret.substr(secret.size() - 8) + "!") == "...[REDACTED]!");
    CHECK(redacted(secret.substr(0, 8) + "|" + secret.substr(20)) == "[REDACTED]|[REDACTED]");
    // Under 8 bytes, and pieces from the middle, stay (as do short secrets).
    CHECK(redacted("x" + secret.substr(0, 7) + "x") == "x" + secret.substr(0, 7) + "x");
    CHECK(redacted(secret.substr(5, 20)) == secret.substr(5, 20));
    CHECK(redacted("short words") == "short words");

    // The token endpoint's error_description, cut by the server (the first 30 characters of
    // the refresh token) or by meith (at 200 bytes), gives no piece back.
    remote::credentials c;
    c.refresh_token = secret;
    std::string why;
    bool invalid = false;
    const std::string desc = "refresh token " + secret.substr(0, 30) + "... is revoked; " +
                             std::string(200 - 16 - 44 - 14, '.') + secret;
    CHECK_FALSE(remote::apply_token_response(
        c, 400, R"({"error":"invalid_grant","error_description":")" + desc + "\"}", 0, why,
        invalid));
    INFO(why);
    CHECK(invalid);
    for (std::size_t k = 8; k <= secret.size(); ++k)
        CHECK(why.find(secret.substr(0, k)) == std::string::npos);
}

TEST_CASE("oauth: PKCE verifier and S256 challenge (RFC 7636)", "[remote][oauth]") {
    // RFC 7636 Appendix B.
    CHECK(remote::sha256_base64url("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk") ==
          "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM");
    CHECK(remote::sha256_base64url("") == "47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU");

    const auto a = remote::make_pkce();
    const auto b = remote::make_pkce();
    CHECK(a.verifier.size() == 64);
    CHECK(all_base64url(a.verifier));
    CHECK(a.challenge == remote::sha256_base64url(a.verifier));
    CHECK(a.challenge.size() == 43);
    CHECK(all_base64url(a.challenge));
    CHECK(a.verifier != b.verifier);

    const auto t = remote::random_token();
    CHECK(t.size() == 43);
    CHECK(all_base64url(t));
    CHECK(t != remote::random_token());
}

TEST_CASE("oauth: the authorization URL carries code, PKCE S256, state and resource",
          "[remote][oauth]") {
    remote::server_auth as;
    as.authorization_endpoint = "https://auth.example/authorize";
    as.resource = "https://mcp.example.com/mcp";
    as.scope = "files:read files:write";
    const remote::pkce_pair pkce{"the-verifier", "the-challenge"};
    const auto url =
        remote::authorization_url(as, "client 1", "http://127.0.0.1:33418/callback", pkce, "st8");
    CHECK(url ==
          "https://auth.example/authorize?response_type=code&client_id=client%201"
          "&redirect_uri=http%3A%2F%2F127.0.0.1%3A33418%2Fcallback"
          "&code_challenge=the-challenge&code_challenge_method=S256&state=st8"
          "&resource=https%3A%2F%2Fmcp.example.com%2Fmcp&scope=files%3Aread%20files%3Awrite");
    CHECK_THAT(url, !Catch::Contains("the-verifier"));

    // An endpoint with a query of its own; no scope: no scope parameter.
    as.authorization_endpoint = "https://auth.example/authorize?tenant=t1";
    as.scope.clear();
    const auto url2 = remote::authorization_url(as, "c", "http://127.0.0.1:1/cb", pkce, "s");
    CHECK_THAT(url2, Catch::StartsWith("https://auth.example/authorize?tenant=t1&response_type="));
    CHECK_THAT(url2, !Catch::Contains("scope="));
}

TEST_CASE("url_encode and form_encode: unreserved kept, the rest percent-encoded",
          "[remote][http]") {
    CHECK(remote::url_encode("AZaz09-._~") == "AZaz09-._~");
    CHECK(remote::url_encode("") == "");
    CHECK(remote::url_encode(" !#$&'()*+,/:;=?@[]%") ==
          "%20%21%23%24%26%27%28%29%2A%2B%2C%2F%3A%3B%3D%3F%40%5B%5D%25");
    CHECK(remote::url_encode("\xc3\xa9\xe2\x82\xac") == "%C3%A9%E2%82%AC"); // é€
    CHECK(remote::url_encode(std::string("a\0b\xff", 4)) == "a%00b%FF");
    CHECK(remote::form_encode({}) == "");
    CHECK(remote::form_encode(
              {{"grant_type", "refresh_token"}, {"a b", "c&d=e"}, {"k", "\xc3\xa4/?#+"}}) ==
          "grant_type=refresh_token&a%20b=c%26d%3De&k=%C3%A4%2F%3F%23%2B");
}

// ---- oauth: the loopback callback -----------------------------------------------------------

TEST_CASE("oauth: parse_callback_request reads the redirect's query", "[remote][oauth]") {
    auto cb = remote::parse_callback_request(
        "GET /callback?code=a%2Bb&state=s1 HTTP/1.1\r\nHost: x\r\n\r\n");
    REQUIRE(cb);
    CHECK(cb->path == "/callback");
    CHECK(cb->code == "a+b");
    CHECK(cb->state == "s1");
    CHECK(cb->error.empty());
    CHECK(cb->error_description.empty());

    cb = remote::parse_callback_request(
        "GET /callback?error=access_denied&error_description=The+user+said+no%21&state=s2 "
        "HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
    REQUIRE(cb);
    CHECK(cb->error == "access_denied");
    CHECK(cb->error_description == "The user said no!");
    CHECK(cb->state == "s2");
    CHECK(cb->code.empty());

    // Unknown parameters ignored; bad escapes kept as they are; a key without '='.
    cb = remote::parse_callback_request("GET /cb?x=1&code=%zz%4&state&iss=y HTTP/1.1\r\n\r\n");
    REQUIRE(cb);
    CHECK(cb->path == "/cb");
    CHECK(cb->code == "%zz%4");
    CHECK(cb->state.empty());

    cb = remote::parse_callback_request("GET /favicon.ico HTTP/1.1\r\n\r\n");
    REQUIRE(cb);
    CHECK(cb->path == "/favicon.ico");
    CHECK(cb->code.empty());

    CHECK_FALSE(remote::parse_callback_request(
        "POST /callback?code=x&state=s HTTP/1.1\r\nHost: x\r\n\r\n"));
    CHECK_FALSE(remote::parse_callback_request(""));
    CHECK_FALSE(remote::parse_callback_request("GET /callback?code=x"));
}

// ---- issue 41: the conformance suite's client checks, the pure parts -------------------------

TEST_CASE("sse: the reconnection time is the last retry field, kept for the whole stream",
          "[remote][sse]") {
    sse_parser p(1024);
    CHECK_FALSE(p.reconnection_ms());
    // The priming event of a response stream: an id, a retry and empty data.
    feed_chunks(p, {"id: e1\nretry: 500\ndata: \n\n"});
    REQUIRE(p.reconnection_ms());
    CHECK(*p.reconnection_ms() == 500);
    // Later events without retry keep it; a field takes effect before its event dispatches.
    feed_chunks(p, {"data: x\n\n", "retry: 40"});
    CHECK(*p.reconnection_ms() == 500); // the line is not complete yet
    feed_chunks(p, {"\n"});
    CHECK(*p.reconnection_ms() == 40);
    feed_chunks(p, {"retry: -1\n", "retry: x\n\n"});
    CHECK(*p.reconnection_ms() == 40);
}

TEST_CASE("oauth: resource_allowed takes the server's own URL or a parent path, on its origin",
          "[remote][oauth]") {
    const std::string server = "http://localhost:3000/mcp";
    CHECK(remote::resource_allowed(server, "http://localhost:3000/mcp"));
    CHECK(remote::resource_allowed(server, "http://LOCALHOST:3000/mcp"));
    CHECK(remote::resource_allowed(server, "http://localhost:3000/"));
    CHECK(remote::resource_allowed(server, "http://localhost:3000"));
    CHECK(remote::resource_allowed("https://a.example/api/mcp", "https://a.example/api"));
    // The conformance suite's auth/resource-mismatch: another origin.
    CHECK_FALSE(remote::resource_allowed(server, "https://evil.example.com/mcp"));
    CHECK_FALSE(remote::resource_allowed(server, "http://localhost:3001/mcp"));
    CHECK_FALSE(remote::resource_allowed(server, "https://localhost:3000/mcp"));
    // Path segments, not string prefixes; a deeper or sibling path is another resource.
    CHECK_FALSE(remote::resource_allowed(server, "http://localhost:3000/mc"));
    CHECK_FALSE(remote::resource_allowed(server, "http://localhost:3000/mcp/other"));
    CHECK_FALSE(remote::resource_allowed("https://a.example/api/mcp", "https://a.example/apix"));
    CHECK_FALSE(remote::resource_allowed(server, "not a url"));
}

TEST_CASE("oauth: the token endpoint's authentication method follows the server's list",
          "[remote][oauth]") {
    remote::server_auth as;
    remote::credentials c;
    std::string why;
    // A public client.
    CHECK(remote::choose_auth_method(as, c, why) == "none");
    as.token_endpoint_auth_methods = {"client_secret_basic"};
    CHECK(remote::choose_auth_method(as, c, why).empty());
    CHECK(why.find("meith secret set NAME") != std::string::npos);
    // A client with a secret: basic when listed (or when nothing is: RFC 8414's default).
    c.client_secret = "s3cret-value";
    CHECK(remote::choose_auth_method(as, c, why) == "client_secret_basic");
    as.token_endpoint_auth_methods = {"client_secret_post"};
    CHECK(remote::choose_auth_method(as, c, why) == "client_secret_post");
    as.token_endpoint_auth_methods = {};
    CHECK(remote::choose_auth_method(as, c, why) == "client_secret_basic");
    as.token_endpoint_auth_methods = {"client_secret_post", "client_secret_basic"};
    CHECK(remote::choose_auth_method(as, c, why) == "client_secret_basic");
    // What registration said wins when the server lists it.
    c.auth_method = "client_secret_post";
    CHECK(remote::choose_auth_method(as, c, why) == "client_secret_post");
    // A secret the server does not take leaves the client public; a method it lacks fails.
    as.token_endpoint_auth_methods = {"none"};
    CHECK(remote::choose_auth_method(as, c, why) == "none");
    as.token_endpoint_auth_methods = {"private_key_jwt"};
    why.clear();
    CHECK(remote::choose_auth_method(as, c, why).empty());
    CHECK(why.find("by private_key_jwt only") != std::string::npos);
    // A key: private_key_jwt.
    remote::credentials k;
    k.private_key = "-----BEGIN PRIVATE KEY-----";
    as.token_endpoint_auth_methods = {"private_key_jwt"};
    CHECK(remote::choose_auth_method(as, k, why) == "private_key_jwt");
}

TEST_CASE("oauth: make_client_assertion signs an RFC 7523 JWT with an EC P-256 key (ES256)",
          "[remote][oauth]") {
    // A P-256 key made for this test (openssl genpkey -algorithm EC -pkeyopt
    // ec_paramgen_curve:P-256).
    const std::string pem = "-----BEGIN PRIVATE KEY-----\n"
                            "MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg5rd2+CBD+zeWEhC1\n"
                            "jeS0Uwg01NUX5KQYMWBw0VMwGROhRANCAARC0PpVtQS0b7XzkD4/X4BlNjXlJUQ7\n"
                            "3jimtqNpDOQS/gyKnWY3gt9FsGt+4cgQL3yG7aOvUPLlJQL+B9qez3lL\n"
                            "-----END PRIVATE KEY-----\n";
    std::string why;
    const auto jwt = remote::make_client_assertion("client-1", "https://auth.example", pem, why);
    INFO(why);
    REQUIRE_FALSE(jwt.empty());
    const auto dot1 = jwt.find('.');
    const auto dot2 = jwt.find('.', dot1 + 1);
    REQUIRE(dot2 != std::string::npos);
    // {"alg":"ES256","typ":"JWT"}, base64url.
    CHECK(jwt.substr(0, dot1) == "eyJhbGciOiJFUzI1NiIsInR5cCI6IkpXVCJ9");
    // R || S: 64 bytes, 86 base64url characters without padding.
    CHECK(jwt.size() - dot2 - 1 == 86);
    CHECK(jwt.find_first_of("+/=") == std::string::npos);

    CHECK(remote::make_client_assertion("c", "a", "not a key", why).empty());
    CHECK(why.find("not a PEM private key") != std::string::npos);
}

} // namespace unit_remote_test
