// remote_config: a remote MCP source's keys (docs/configuration.md "Remote MCP servers",
// docs/protocol.md §18): the URL and when plain http:// may be used, request headers, the trust
// anchors, and the `oauth` table — whose secrets are only ever named, never written here.
#include "config/config.hpp"
#include "config/toml_checker.hpp"

#include <fmt/format.h>
#include <toml++/toml.h>

#include <string>
#include <utility>

namespace meith::config::detail {

namespace {

/// `url`: https://, or plain http:// to a server of the user's own network.
void parse_url(checker& c, const scope& s, const toml::table& t, const std::string& url,
               source_config& src) {
    if (url.starts_with("https://")) {
        src.url = url;
    } else if (url.starts_with("http://")) {
        if (!src.allow_private_network)
            c.fail(t.get("url")->source(),
                   fmt::format("the url of {} is plain http://: meith sends tokens only over "
                               "https://, or to a server of your own network with "
                               "`allow_private_network = true`",
                               s.name));
        else
            src.url = url;
    } else {
        c.fail(t.get("url")->source(), fmt::format("the url of {} must be an https:// URL (e.g. "
                                                   "\"https://mcp.example.com/mcp\")",
                                                   s.name));
    }
}

/// `headers`: HTTP field names and values without line breaks (secrets as references).
void parse_headers(checker& c, const scope& s, const toml::table& h, source_config& src) {
    for (auto&& [k, v] : h) {
        const std::string name(k.str());
        const bool token_chars =
            !name.empty() && std::all_of(name.begin(), name.end(), [](char ch) {
                return std::isalnum(static_cast<unsigned char>(ch)) != 0 || ch == '-' || ch == '_';
            });
        auto value = c.string_of(v, fmt::format("header '{}' in {}", name, s.name), false);
        if (!token_chars)
            c.fail(k.source(), fmt::format("header name '{}' in {} is not a valid HTTP field "
                                           "name (letters, digits, '-')",
                                           name, s.name));
        else if (value && value->find_first_of("\r\n") != std::string::npos)
            c.fail(v.source(), fmt::format("header '{}' in {} has a line break", name, s.name));
        else if (value)
            src.headers.emplace(name, std::move(*value));
    }
}

/// The `oauth` table: the grant and what it needs; secrets only named, never written here.
void parse_oauth(checker& c, const scope& s, const toml::table& table, source_config& src) {
    const auto* o = &table;
    const scope os{*o, fmt::format("the oauth table of {}", s.name)};
    c.check_keys(os, {"client_id", "scope", "client_secret", "private_key", "grant", "id_token",
                      "idp_token_endpoint", "idp_client_id"});
    assign(src.oauth_idp_token_endpoint, c.read_string(os, "idp_token_endpoint", true));
    assign(src.oauth_idp_client_id, c.read_string(os, "idp_client_id", true));
    assign(src.oauth_client_id, c.read_string(os, "client_id", true));
    assign(src.oauth_scope, c.read_string(os, "scope", false));
    // A client's secret or key lives in the secret store, never in this file: only a
    // reference to it is taken (docs/configuration.md, remote MCP servers).
    for (auto [key, into] : {std::pair{"client_secret", &src.oauth_client_secret},
                             std::pair{"private_key", &src.oauth_private_key},
                             std::pair{"id_token", &src.oauth_id_token}}) {
        const auto v = c.read_string(os, key, true);
        if (!v) continue;
        const bool reference = v->starts_with("${secret:") && v->ends_with("}") && v->size() > 10 &&
                               v->find('}') == v->size() - 1;
        if (!reference) {
            c.fail((*o)[key].node()->source(),
                   fmt::format("oauth.{} of {} must name a secret, as \"${{secret:NAME}}\": "
                               "keep the value with `meith secret set NAME` (it never goes "
                               "in meithd.toml)",
                               key, s.name));
            continue;
        }
        *into = v->substr(9, v->size() - 10);
    }
    if (!src.oauth_client_secret.empty() && !src.oauth_private_key.empty())
        c.fail(o->source(), fmt::format("the oauth table of {} names both a client_secret and "
                                        "a private_key: a client authenticates with one",
                                        s.name));
    if (const auto g = c.read_string(os, "grant", true)) {
        if (*g != "authorization_code" && *g != "client_credentials" && *g != "cross_app_access")
            c.fail((*o)["grant"].node()->source(),
                   fmt::format("oauth.grant of {} is \"{}\": it is \"authorization_code\" "
                               "(a login in the browser), \"client_credentials\" (a token "
                               "for the client itself, with its client_secret or private_key) "
                               "or \"cross_app_access\" (the user's ID token from their "
                               "identity provider, exchanged)",
                               s.name, *g));
        else if (*g == "cross_app_access" &&
                 (src.oauth_id_token.empty() || src.oauth_idp_token_endpoint.empty() ||
                  src.oauth_idp_client_id.empty()))
            c.fail((*o)["grant"].node()->source(),
                   fmt::format("oauth.grant = \"cross_app_access\" of {} needs id_token (as "
                               "\"${{secret:NAME}}\"), idp_token_endpoint and idp_client_id",
                               s.name));
        else if (*g == "client_credentials" && src.oauth_client_secret.empty() &&
                 src.oauth_private_key.empty())
            c.fail((*o)["grant"].node()->source(),
                   fmt::format("oauth.grant = \"client_credentials\" of {} needs the "
                               "client's client_secret or private_key (as "
                               "\"${{secret:NAME}}\") and its client_id",
                               s.name));
        else
            src.oauth_grant = *g;
    }
}

} // namespace

void parse_remote(checker& c, const scope& s, const toml::table& t, source_config& src) {
    assign(src.allow_private_network, c.read_bool(s, "allow_private_network"));
    // By reference: GCC 12 at -O2 took a string moved out of the optional for uninitialized.
    if (const auto url = c.read_string(s, "url", true)) parse_url(c, s, t, *url, src);
    if (const auto* env = t.get("env"); env != nullptr && t.get("url") != nullptr)
        c.fail(env->source(), fmt::format("'env' in {} has no process to reach: a remote MCP "
                                          "server gets `headers` (secrets as \"${{secret:NAME}}\")",
                                          s.name));
    for (const char* key : {"headers", "allow_private_network", "ca_file", "oauth"})
        if (const auto* node = t.get(key); node != nullptr && t.get("url") == nullptr)
            c.fail(node->source(), fmt::format("'{}' in {} is only for remote MCP sources (with "
                                               "a `url`)",
                                               key, s.name));
    if (const auto* h = c.read_table(s, "headers")) parse_headers(c, s, *h, src);
    assign(src.ca_file, c.read_path(s, "ca_file"));
    if (const auto* o = c.read_table(s, "oauth")) parse_oauth(c, s, *o, src);
}

} // namespace meith::config::detail
