// oauth: discovery, registration, the authorization request and its redirect (see oauth.hpp);
// the token endpoint's side is remote/token.cpp, their shared helpers oauth_internal.hpp.
#include "remote/oauth.hpp"

#include "remote/oauth_internal.hpp"

#include "protocol/json_writer.hpp"

#include <curl/curl.h>
#include <simdjson.h>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <ctime>
#include <memory>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <stdexcept>

namespace meith::remote {

namespace detail {

std::string base64url(const unsigned char* data, std::size_t n) {
    static constexpr char table[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    std::string out;
    out.reserve((n * 4 + 2) / 3);
    std::size_t i = 0;
    for (; i + 2 < n; i += 3) {
        const unsigned v = unsigned(data[i]) << 16 | unsigned(data[i + 1]) << 8 | data[i + 2];
        out += table[v >> 18];
        out += table[(v >> 12) & 63];
        out += table[(v >> 6) & 63];
        out += table[v & 63];
    }
    if (n - i == 1) {
        const unsigned v = unsigned(data[i]) << 16;
        out += table[v >> 18];
        out += table[(v >> 12) & 63];
    } else if (n - i == 2) {
        const unsigned v = unsigned(data[i]) << 16 | unsigned(data[i + 1]) << 8;
        out += table[v >> 18];
        out += table[(v >> 12) & 63];
        out += table[(v >> 6) & 63];
    }
    return out;
}

bool listed(const std::vector<std::string>& list, std::string_view v) {
    return std::find(list.begin(), list.end(), v) != list.end();
}

bool parse_object(simdjson::dom::parser& parser, std::string_view body, simdjson::dom::object& o) {
    return parser.parse(body.data(), body.size()).get_object().get(o) == simdjson::SUCCESS;
}

std::optional<url_parts> split_url(const std::string& url) {
    std::unique_ptr<CURLU, void (*)(CURLU*)> u(curl_url(), curl_url_cleanup);
    if (!u || curl_url_set(u.get(), CURLUPART_URL, url.c_str(), 0) != CURLUE_OK)
        return std::nullopt;
    url_parts p;
    auto get = [&](CURLUPart part, std::string& out) {
        char* v = nullptr;
        if (curl_url_get(u.get(), part, &v, 0) == CURLUE_OK && v != nullptr) {
            out = v;
            curl_free(v);
        }
    };
    get(CURLUPART_SCHEME, p.scheme);
    get(CURLUPART_HOST, p.host);
    get(CURLUPART_PORT, p.port);
    get(CURLUPART_PATH, p.path);
    if (p.scheme != "http" && p.scheme != "https") return std::nullopt;
    if (p.path == "/") p.path.clear();
    return p;
}

std::string origin(const url_parts& p) {
    return p.scheme + "://" + p.host + (p.port.empty() ? "" : ":" + p.port);
}

const char* const json_accept = "Accept: application/json";

void first_json(http_client& http, std::shared_ptr<std::vector<std::string>> urls, std::size_t i,
                std::string tried, std::function<void(std::string, std::string)> done) {
    if (i >= urls->size()) return done("", "nothing usable at " + tried);
    http_request req;
    req.url = (*urls)[i];
    req.headers = {json_accept};
    req.cross_origin_redirects = true; // public metadata: nothing secret goes with it
    req.timeout = std::chrono::milliseconds(15000);
    req.max_body_bytes = 1u << 20;
    auto body = std::make_shared<std::string>();
    http_handlers h;
    h.on_body = [body](std::string_view b) { body->append(b); };
    h.on_done = [&http, urls, i, tried, done = std::move(done), body](http_outcome out) mutable {
        tried += (tried.empty() ? "" : ", ") + (*urls)[i];
        if (out.refused) return done("", out.error + " (" + (*urls)[i] + "); " + out.remedy);
        if (out.error.empty() && out.head.status == 200) {
            simdjson::dom::parser p;
            simdjson::dom::object o;
            if (parse_object(p, *body, o)) return done(std::move(*body), "");
        }
        if (!out.error.empty())
            tried += " (" + out.error + ")";
        else
            tried += fmt::format(" (HTTP {})", out.head.status);
        first_json(http, urls, i + 1, std::move(tried), std::move(done));
    };
    http.start(std::move(req), std::move(h));
}

void post_form(http_client& http, const std::string& url,
               const std::vector<std::pair<std::string, std::string>>& fields,
               std::function<void(http_outcome, std::string)> done,
               std::vector<std::string> headers) {
    http_request req;
    req.method = "POST";
    req.url = url;
    req.headers = std::move(headers);
    req.headers.push_back(json_accept);
    req.headers.push_back("Content-Type: application/x-www-form-urlencoded");
    req.body = form_encode(fields);
    req.timeout = std::chrono::milliseconds(30000);
    req.max_body_bytes = 1u << 20;
    req.max_redirects = 0; // a token request is never replayed elsewhere
    auto body = std::make_shared<std::string>();
    http_handlers h;
    h.on_body = [body](std::string_view b) { body->append(b); };
    h.on_done = [body, done = std::move(done)](http_outcome out) {
        done(std::move(out), std::move(*body));
    };
    http.start(std::move(req), std::move(h));
}

std::int64_t unix_now() {
    return static_cast<std::int64_t>(std::time(nullptr));
}

} // namespace detail

using namespace detail;
using protocol::append_json_string;

std::string random_token() {
    unsigned char buf[32];
    if (RAND_bytes(buf, sizeof buf) != 1) throw std::runtime_error("no randomness (RAND_bytes)");
    return base64url(buf, sizeof buf);
}

std::string sha256_base64url(std::string_view text) {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    if (EVP_Digest(text.data(), text.size(), md, &n, EVP_sha256(), nullptr) != 1)
        throw std::runtime_error("SHA-256 failed");
    return base64url(md, n);
}

pkce_pair make_pkce() {
    pkce_pair p;
    p.verifier = random_token() + random_token().substr(0, 21); // 64 characters
    p.challenge = sha256_base64url(p.verifier);
    return p;
}

bearer_challenge parse_bearer_challenge(std::string_view header) {
    bearer_challenge out;
    auto lower_prefix = [](std::string_view s, std::string_view p) {
        if (s.size() < p.size()) return false;
        for (std::size_t i = 0; i < p.size(); ++i)
            if (std::tolower(static_cast<unsigned char>(s[i])) != p[i]) return false;
        return true;
    };
    if (!lower_prefix(header, "bearer")) return out;
    std::size_t i = 6;
    while (i < header.size()) {
        while (i < header.size() && (header[i] == ' ' || header[i] == ','))
            ++i;
        const auto eq = header.find('=', i);
        if (eq == std::string_view::npos) break;
        std::string_view name = header.substr(i, eq - i);
        while (!name.empty() && name.back() == ' ')
            name.remove_suffix(1);
        std::string value;
        i = eq + 1;
        if (i < header.size() && header[i] == '"') {
            for (++i; i < header.size() && header[i] != '"'; ++i) {
                if (header[i] == '\\' && i + 1 < header.size()) ++i;
                value += header[i];
            }
            ++i;
        } else {
            const auto end = header.find(',', i);
            value = std::string(
                header.substr(i, end == std::string_view::npos ? header.npos : end - i));
            i = end == std::string_view::npos ? header.size() : end;
        }
        if (name == "resource_metadata")
            out.resource_metadata = value;
        else if (name == "scope")
            out.scope = value;
        else if (name == "error")
            out.error = value;
    }
    return out;
}

std::vector<std::string> protected_resource_metadata_urls(const std::string& mcp_url) {
    const auto p = split_url(mcp_url);
    if (!p) return {};
    std::vector<std::string> out;
    if (!p->path.empty())
        out.push_back(origin(*p) + "/.well-known/oauth-protected-resource" + p->path);
    out.push_back(origin(*p) + "/.well-known/oauth-protected-resource");
    return out;
}

std::vector<std::string> authorization_server_metadata_urls(const std::string& issuer) {
    const auto p = split_url(issuer);
    if (!p) return {};
    const auto o = origin(*p);
    // "any terminating '/' MUST be removed" (RFC 8414 §3.1, OpenID Connect Discovery §4).
    auto path = p->path;
    while (!path.empty() && path.back() == '/')
        path.pop_back();
    if (path.empty())
        return {o + "/.well-known/oauth-authorization-server",
                o + "/.well-known/openid-configuration"};
    return {o + "/.well-known/oauth-authorization-server" + path,
            o + "/.well-known/openid-configuration" + path,
            o + path + "/.well-known/openid-configuration"};
}

std::string canonical_resource(const std::string& mcp_url) {
    const auto p = split_url(mcp_url);
    if (!p) return mcp_url;
    auto lower = [](std::string s) {
        for (auto& c : s)
            c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        return s;
    };
    return lower(p->scheme) + "://" + lower(p->host) + (p->port.empty() ? "" : ":" + p->port) +
           p->path;
}

bool resource_allowed(const std::string& mcp_url, const std::string& resource) {
    const auto server = split_url(canonical_resource(mcp_url));
    const auto named = split_url(canonical_resource(resource));
    if (!server || !named || origin(*server) != origin(*named)) return false;
    // Compared as folders: "/mcp" covers "/mcp" and "/mcp/x", not "/mcpx".
    auto folder = [](std::string p) { return p.ends_with('/') ? p : p + '/'; };
    return folder(server->path).starts_with(folder(named->path));
}

namespace {

std::vector<std::string> string_list(simdjson::dom::object o, std::string_view key) {
    std::vector<std::string> out;
    simdjson::dom::array a;
    if (o[key].get_array().get(a) != simdjson::SUCCESS) return out;
    for (auto e : a) {
        std::string_view v;
        if (e.get_string().get(v) == simdjson::SUCCESS) out.emplace_back(v);
    }
    return out;
}

/// RFC 8414 §2 members of an authorization server's metadata into `auth`. False, with `why`,
/// when the endpoints a login needs are missing.
bool read_as_metadata(std::string_view body, server_auth& auth, std::string& why) {
    simdjson::dom::parser p;
    simdjson::dom::object o;
    parse_object(p, body, o);
    auth.authorization_endpoint = string_member(o, "authorization_endpoint");
    auth.token_endpoint = string_member(o, "token_endpoint");
    auth.registration_endpoint = string_member(o, "registration_endpoint");
    if (auto issuer = string_member(o, "issuer"); !issuer.empty()) auth.issuer = issuer;
    bool cimd = false;
    if (o["client_id_metadata_document_supported"].get_bool().get(cimd) == simdjson::SUCCESS)
        auth.client_id_metadata_documents = cimd;
    auth.pkce_s256 = listed(string_list(o, "code_challenge_methods_supported"), "S256");
    auth.token_endpoint_auth_methods = string_list(o, "token_endpoint_auth_methods_supported");
    auth.grant_types = string_list(o, "grant_types_supported");
    if (auth.token_endpoint.empty()) {
        why = "the authorization server's metadata has no token_endpoint";
        return false;
    }
    return true;
}

using auth_done = std::function<void(std::optional<server_auth>, std::string)>;

/// The 2025-03-26 revision: no protected-resource metadata; the authorization server is the
/// MCP server's origin, its metadata there (RFC 8414), else the default endpoints `/authorize`,
/// `/token` and `/register` (MCP spec 2025-03-26, "Fallbacks for servers without metadata
/// discovery").
void legacy_discovery(http_client& http, const std::string& mcp_url,
                      std::shared_ptr<server_auth> auth, auth_done done) {
    const auto p = split_url(mcp_url);
    if (!p) return done(std::nullopt, mcp_url + " is not an http(s) URL");
    const auto base = origin(*p);
    auth->legacy = true;
    auth->issuer = base;
    auto urls = std::make_shared<std::vector<std::string>>(
        std::vector<std::string>{base + "/.well-known/oauth-authorization-server"});
    first_json(http, urls, 0, "",
               [auth, base, done = std::move(done)](std::string body, std::string) {
                   std::string why;
                   if (!body.empty()) {
                       if (!read_as_metadata(body, *auth, why)) return done(std::nullopt, why);
                       return done(*auth, "");
                   }
                   auth->authorization_endpoint = base + "/authorize";
                   auth->token_endpoint = base + "/token";
                   auth->registration_endpoint = base + "/register";
                   auth->pkce_s256 = true; // 2025-03-26: PKCE is required of every client
                   done(*auth, "");
               });
}

/// RFC 9728 protected-resource metadata in `body`: its first authorization server (RFC 8414
/// metadata fetched next) and the resource, which must be `mcp_url`'s (§3.3).
void read_resource_metadata(http_client& http, std::shared_ptr<server_auth> auth,
                            const std::string& mcp_url, const std::string& body, auth_done done) {
    simdjson::dom::parser p;
    simdjson::dom::object o;
    parse_object(p, body, o);
    simdjson::dom::array servers;
    std::string_view first;
    if (o["authorization_servers"].get_array().get(servers) != simdjson::SUCCESS ||
        servers.size() == 0 || servers.at(0).get_string().get(first) != simdjson::SUCCESS)
        return done(std::nullopt, "the protected-resource metadata names no authorization_servers");
    if (auto r = string_member(o, "resource"); !r.empty()) {
        // A token is asked for this resource and sent to this server: metadata that
        // names another one would have the user log in for it (RFC 9728 §3.3, §7.3).
        if (!resource_allowed(mcp_url, r))
            return done(std::nullopt,
                        fmt::format("the server's protected-resource metadata names "
                                    "the resource {}, which is not {} (RFC 9728 §3.3): "
                                    "meith asks for no token for another resource; the "
                                    "server is misconfigured, or is not the one you "
                                    "meant",
                                    protocol::cut_utf8(r, 200), mcp_url));
        auth->resource = r;
    }
    if (auth->scope.empty())
        for (const auto& v : string_list(o, "scopes_supported"))
            auth->scope += (auth->scope.empty() ? "" : " ") + v;
    auth->issuer = std::string(first);
    auto as_urls = std::make_shared<std::vector<std::string>>(
        authorization_server_metadata_urls(auth->issuer));
    first_json(
        http, as_urls, 0, "", [auth, done = std::move(done)](std::string body, std::string why) {
            if (body.empty())
                return done(std::nullopt, "no authorization-server metadata (RFC 8414): " + why);
            if (!read_as_metadata(body, *auth, why)) return done(std::nullopt, why);
            done(*auth, "");
        });
}

} // namespace

void discover_authorization(http_client& http, const std::string& mcp_url,
                            std::vector<std::string> headers, bearer_challenge known,
                            std::function<void(std::optional<server_auth>, std::string)> done) {
    http_request probe;
    probe.method = "POST";
    probe.url = mcp_url;
    probe.headers = std::move(headers);
    probe.headers.push_back("Content-Type: application/json");
    probe.headers.push_back("Accept: application/json, text/event-stream");
    probe.body =
        R"({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"meith","version":")" MEITH_VERSION
        R"("}}})";
    probe.timeout = std::chrono::milliseconds(15000);
    probe.max_body_bytes = 1u << 20;
    http_handlers h;
    h.on_done = [&http, mcp_url, known = std::move(known),
                 done = std::move(done)](http_outcome out) mutable {
        if (!out.error.empty())
            return done(std::nullopt, fmt::format("{}: {}", mcp_url, out.described()));
        const long status = out.head.status;
        auto challenge = parse_bearer_challenge(out.head.header("www-authenticate"));
        // A server may let `initialize` through and ask later (on tools/list, on a call): then
        // the challenge meithd saw there stands for it.
        const bool asked = status == 401 || status == 403;
        if (!asked) challenge = known;
        const bool challenged = asked || !known.error.empty() || !known.scope.empty() ||
                                !known.resource_metadata.empty();
        if (!challenged && status / 100 != 2)
            return done(std::nullopt,
                        fmt::format("{} answered HTTP {} without a token: it asks for no OAuth "
                                    "login (static `headers` may be what it wants)",
                                    mcp_url, status));
        auto auth = std::make_shared<server_auth>();
        auth->resource = canonical_resource(mcp_url);
        auth->scope = challenge.scope;
        auth->step_up = challenge.error == "insufficient_scope";
        auto prm_urls = std::make_shared<std::vector<std::string>>(
            challenge.resource_metadata.empty()
                ? protected_resource_metadata_urls(mcp_url)
                : std::vector<std::string>{challenge.resource_metadata});
        first_json(http, prm_urls, 0, "",
                   [&http, auth, mcp_url, challenged, status,
                    done = std::move(done)](std::string body, std::string why) mutable {
                       if (body.empty()) {
                           if (challenged)
                               return legacy_discovery(http, mcp_url, auth, std::move(done));
                           return done(
                               std::nullopt,
                               fmt::format("{} answered HTTP {} without a token and publishes no "
                                           "protected-resource metadata (RFC 9728; {}): it asks "
                                           "for no OAuth login (static `headers` may be what it "
                                           "wants)",
                                           mcp_url, status, why));
                       }
                       read_resource_metadata(http, auth, mcp_url, body, std::move(done));
                   });
    };
    http.start(std::move(probe), std::move(h));
}

void register_client(http_client& http, const server_auth& as, const std::string& redirect_uri,
                     std::function<void(std::optional<credentials>, std::string)> done) {
    http_request req;
    req.method = "POST";
    req.url = as.registration_endpoint;
    req.headers = {json_accept, "Content-Type: application/json"};
    // RFC 7591 §2: a public client (no secret) of the authorization code grant.
    req.body = "{";
    protocol::json_members m(req.body);
    m.string("client_name", "meith");
    protocol::append_json_string_array(m.key("redirect_uris"), std::array{redirect_uri});
    protocol::append_json_string_array(m.key("grant_types"),
                                       std::array{"authorization_code", "refresh_token"});
    protocol::append_json_string_array(m.key("response_types"), std::array{"code"});
    m.string("token_endpoint_auth_method", "none");
    if (!as.scope.empty()) m.string("scope", as.scope);
    req.body += '}';
    req.timeout = std::chrono::milliseconds(30000);
    req.max_body_bytes = 1u << 20;
    auto body = std::make_shared<std::string>();
    http_handlers h;
    h.on_body = [body](std::string_view b) { body->append(b); };
    h.on_done = [body, as, done = std::move(done)](http_outcome out) {
        if (!out.error.empty())
            return done(std::nullopt, "client registration at " + as.registration_endpoint + ": " +
                                          out.described());
        simdjson::dom::parser p;
        simdjson::dom::object o;
        if (out.head.status / 100 != 2 || !parse_object(p, *body, o))
            return done(std::nullopt, fmt::format("client registration at {} answered HTTP {}",
                                                  as.registration_endpoint, out.head.status));
        credentials c;
        c.client_id = string_member(o, "client_id");
        c.client_secret = string_member(o, "client_secret");
        c.auth_method = string_member(o, "token_endpoint_auth_method"); // RFC 7591 §3.2.1
        if (c.client_id.empty())
            return done(std::nullopt, "client registration answered no client_id");
        done(std::move(c), "");
    };
    http.start(std::move(req), std::move(h));
}

std::string authorization_url(const server_auth& as, const std::string& client_id,
                              const std::string& redirect_uri, const pkce_pair& pkce,
                              const std::string& state) {
    std::vector<std::pair<std::string, std::string>> q = {
        {"response_type", "code"},         {"client_id", client_id},
        {"redirect_uri", redirect_uri},    {"code_challenge", pkce.challenge},
        {"code_challenge_method", "S256"}, {"state", state},
        {"resource", as.resource}};
    if (!as.scope.empty()) q.emplace_back("scope", as.scope);
    const char sep = as.authorization_endpoint.find('?') == std::string::npos ? '?' : '&';
    return as.authorization_endpoint + sep + form_encode(q);
}

namespace {
std::string percent_decode(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    for (std::size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '+') {
            out += ' ';
        } else if (s[i] == '%' && i + 2 < s.size() &&
                   std::isxdigit(static_cast<unsigned char>(s[i + 1])) &&
                   std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
            out += static_cast<char>(std::stoi(std::string(s.substr(i + 1, 2)), nullptr, 16));
            i += 2;
        } else {
            out += s[i];
        }
    }
    return out;
}
} // namespace

std::optional<loopback_callback> parse_callback_request(std::string_view head) {
    if (!head.starts_with("GET ")) return std::nullopt;
    head.remove_prefix(4);
    const auto sp = head.find(' ');
    if (sp == std::string_view::npos) return std::nullopt;
    std::string_view target = head.substr(0, sp);
    loopback_callback cb;
    const auto q = target.find('?');
    cb.path = std::string(target.substr(0, q));
    std::string_view query =
        q == std::string_view::npos ? std::string_view{} : target.substr(q + 1);
    while (!query.empty()) {
        const auto amp = query.find('&');
        const auto pair = query.substr(0, amp);
        query = amp == std::string_view::npos ? std::string_view{} : query.substr(amp + 1);
        const auto eq = pair.find('=');
        const auto key = pair.substr(0, eq);
        const auto value =
            eq == std::string_view::npos ? std::string() : percent_decode(pair.substr(eq + 1));
        if (key == "code")
            cb.code = value;
        else if (key == "state")
            cb.state = value;
        else if (key == "error")
            cb.error = value;
        else if (key == "error_description")
            cb.error_description = value;
    }
    return cb;
}

} // namespace meith::remote
