// oauth: discovery, registration, code exchange and refresh over http_client (see oauth.hpp).
#include "remote/oauth.hpp"

#include "protocol/json_writer.hpp"

#include <curl/curl.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <simdjson.h>

#include <fmt/format.h>

#include <algorithm>
#include <ctime>
#include <memory>
#include <stdexcept>

namespace meith::remote {

using protocol::append_json_string;

namespace {

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

std::string string_member(simdjson::dom::object o, std::string_view key) {
    std::string_view v;
    if (o[key].get_string().get(v) != simdjson::SUCCESS) return {};
    return std::string(v);
}

/// Parses `body` as a JSON object into `parser`'s document.
bool parse_object(simdjson::dom::parser& parser, std::string_view body, simdjson::dom::object& o) {
    return parser.parse(body.data(), body.size()).get_object().get(o) == simdjson::SUCCESS;
}

struct url_parts {
    std::string scheme, host, port, path;
};

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

/// GETs each URL in turn until one answers 200 with a JSON object; `done(body, "")` then, or
/// `done("", why)` naming every URL tried.
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
               std::function<void(http_outcome, std::string)> done) {
    http_request req;
    req.method = "POST";
    req.url = url;
    req.headers = {json_accept, "Content-Type: application/x-www-form-urlencoded"};
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

} // namespace

bool apply_token_response(credentials& c, long status, std::string_view body, std::int64_t now,
                          std::string& why, bool& invalid_grant) {
    invalid_grant = false;
    simdjson::dom::parser p;
    simdjson::dom::object o;
    if (!parse_object(p, body, o)) {
        why = fmt::format("the token endpoint answered HTTP {} without a JSON object", status);
        return false;
    }
    if (auto error = string_member(o, "error"); !error.empty() || status != 200) {
        invalid_grant = error == "invalid_grant";
        auto desc = string_member(o, "error_description");
        // A server may echo the grant back ("refresh token X is revoked"): never repeat it,
        // nor a piece of it that the cut below or the server's own leaves (8 bytes or more).
        const auto secrets = secret_values(c);
        redact_secret_pieces(error, secrets);
        std::string shown(protocol::cut_utf8(desc, 200));
        redact_secret_pieces(shown, secrets);
        why =
            fmt::format("the token endpoint answered HTTP {}: {}{}{}", status,
                        error.empty() ? "no error code" : error, shown.empty() ? "" : ": ", shown);
        return false;
    }
    auto access = string_member(o, "access_token");
    if (access.empty()) {
        why = "the token endpoint's answer has no access_token";
        return false;
    }
    c.access_token = std::move(access);
    if (auto r = string_member(o, "refresh_token"); !r.empty()) c.refresh_token = std::move(r);
    std::int64_t expires_in = 0;
    c.expires_at =
        o["expires_in"].get_int64().get(expires_in) == simdjson::SUCCESS && expires_in > 0
            ? now + expires_in
            : 0;
    if (auto s = string_member(o, "scope"); !s.empty()) c.scope = std::move(s);
    return true;
}

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

void discover_authorization(http_client& http, const std::string& mcp_url,
                            std::vector<std::string> headers,
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
    h.on_done = [&http, mcp_url, done = std::move(done)](http_outcome out) mutable {
        if (!out.error.empty())
            return done(std::nullopt, fmt::format("{}: {}", mcp_url, out.described()));
        if (out.head.status != 401)
            return done(std::nullopt,
                        fmt::format("{} answered HTTP {} without a token: it asks for no OAuth "
                                    "login (static `headers` may be what it wants)",
                                    mcp_url, out.head.status));
        const auto challenge = parse_bearer_challenge(out.head.header("www-authenticate"));
        auto auth = std::make_shared<server_auth>();
        auth->resource = canonical_resource(mcp_url);
        auth->scope = challenge.scope;
        auto prm_urls = std::make_shared<std::vector<std::string>>(
            challenge.resource_metadata.empty()
                ? protected_resource_metadata_urls(mcp_url)
                : std::vector<std::string>{challenge.resource_metadata});
        first_json(
            http, prm_urls, 0, "",
            [&http, auth, done = std::move(done)](std::string body, std::string why) mutable {
                if (body.empty())
                    return done(std::nullopt, "no protected-resource metadata (RFC 9728): " + why);
                simdjson::dom::parser p;
                simdjson::dom::object o;
                parse_object(p, body, o);
                simdjson::dom::array servers;
                std::string_view first;
                if (o["authorization_servers"].get_array().get(servers) != simdjson::SUCCESS ||
                    servers.size() == 0 ||
                    servers.at(0).get_string().get(first) != simdjson::SUCCESS)
                    return done(std::nullopt,
                                "the protected-resource metadata names no authorization_servers");
                if (auto r = string_member(o, "resource"); !r.empty()) auth->resource = r;
                if (auth->scope.empty()) {
                    simdjson::dom::array scopes;
                    if (o["scopes_supported"].get_array().get(scopes) == simdjson::SUCCESS)
                        for (auto s : scopes) {
                            std::string_view v;
                            if (s.get_string().get(v) == simdjson::SUCCESS)
                                auth->scope += (auth->scope.empty() ? "" : " ") + std::string(v);
                        }
                }
                auth->issuer = std::string(first);
                auto as_urls = std::make_shared<std::vector<std::string>>(
                    authorization_server_metadata_urls(auth->issuer));
                first_json(
                    http, as_urls, 0, "",
                    [auth, done = std::move(done)](std::string body, std::string why) {
                        if (body.empty())
                            return done(std::nullopt,
                                        "no authorization-server metadata (RFC 8414): " + why);
                        simdjson::dom::parser p;
                        simdjson::dom::object o;
                        parse_object(p, body, o);
                        auth->authorization_endpoint = string_member(o, "authorization_endpoint");
                        auth->token_endpoint = string_member(o, "token_endpoint");
                        auth->registration_endpoint = string_member(o, "registration_endpoint");
                        bool cimd = false;
                        if (o["client_id_metadata_document_supported"].get_bool().get(cimd) ==
                            simdjson::SUCCESS)
                            auth->client_id_metadata_documents = cimd;
                        bool s256 = false;
                        simdjson::dom::array methods;
                        if (o["code_challenge_methods_supported"].get_array().get(methods) ==
                            simdjson::SUCCESS)
                            for (auto m : methods) {
                                std::string_view v;
                                if (m.get_string().get(v) == simdjson::SUCCESS && v == "S256")
                                    s256 = true;
                            }
                        if (auth->authorization_endpoint.empty() || auth->token_endpoint.empty())
                            return done(std::nullopt, "the authorization server's metadata has no "
                                                      "authorization_endpoint or token_endpoint");
                        if (!s256)
                            return done(std::nullopt,
                                        "the authorization server does not list PKCE S256 in "
                                        "code_challenge_methods_supported; meith will not log in "
                                        "without it (MCP authorization spec)");
                        done(*auth, "");
                    });
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
    req.body = R"({"client_name":"meith","redirect_uris":[)";
    append_json_string(req.body, redirect_uri);
    req.body +=
        R"(],"grant_types":["authorization_code","refresh_token"],"response_types":["code"],"token_endpoint_auth_method":"none")";
    if (!as.scope.empty()) {
        req.body += R"(,"scope":)";
        append_json_string(req.body, as.scope);
    }
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

void exchange_code(http_client& http, credentials base, const std::string& code,
                   const std::string& redirect_uri, const std::string& verifier,
                   std::function<void(std::optional<credentials>, std::string)> done) {
    std::vector<std::pair<std::string, std::string>> f = {
        {"grant_type", "authorization_code"}, {"code", code},
        {"redirect_uri", redirect_uri},       {"client_id", base.client_id},
        {"code_verifier", verifier},          {"resource", base.resource}};
    if (!base.client_secret.empty()) f.emplace_back("client_secret", base.client_secret);
    const auto endpoint = base.token_endpoint;
    post_form(http, endpoint, f,
              [base = std::move(base), done = std::move(done)](http_outcome out,
                                                               std::string body) mutable {
                  if (!out.error.empty())
                      return done(std::nullopt, base.token_endpoint + ": " + out.described());
                  std::string why;
                  bool invalid = false;
                  if (!apply_token_response(base, out.head.status, body, unix_now(), why, invalid))
                      return done(std::nullopt, why);
                  done(std::move(base), "");
              });
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

void refresh_grant(http_client& http, credentials c, std::function<void(refresh_outcome)> done) {
    if (c.refresh_token.empty() || c.token_endpoint.empty())
        return done({std::nullopt, true, "the grant has no refresh token"});
    std::vector<std::pair<std::string, std::string>> f = {{"grant_type", "refresh_token"},
                                                          {"refresh_token", c.refresh_token},
                                                          {"client_id", c.client_id}};
    if (!c.resource.empty()) f.emplace_back("resource", c.resource);
    if (!c.client_secret.empty()) f.emplace_back("client_secret", c.client_secret);
    const auto endpoint = c.token_endpoint;
    post_form(
        http, endpoint, f,
        [c = std::move(c), done = std::move(done)](http_outcome out, std::string body) mutable {
            refresh_outcome r;
            if (!out.error.empty()) {
                r.why = c.token_endpoint + ": " + out.described();
                return done(std::move(r));
            }
            if (!apply_token_response(c, out.head.status, body, unix_now(), r.why, r.invalid_grant))
                return done(std::move(r));
            r.creds = std::move(c);
            done(std::move(r));
        });
}

} // namespace meith::remote
