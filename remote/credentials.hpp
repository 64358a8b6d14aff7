// credentials: a remote source's OAuth grant as meith keeps it (secrets/grants.hpp says where)
// and hands it to meith-remote over the pipe (docs/protocol.md §18): the struct and its JSON
// text. Apart from oauth.hpp so that meithd, which only reads, keeps and redacts grants, links
// neither libcurl nor the OAuth client.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace meith::remote {

/// One source's grant (token values never go into an error text or a log line).
struct credentials {
    std::string access_token;
    std::string refresh_token;
    std::int64_t expires_at = 0; ///< Unix seconds; 0: the server did not say
    std::string token_endpoint;
    std::string client_id;
    std::string client_secret; ///< from dynamic registration, when the server issued one
    std::string resource;      ///< RFC 8707 resource indicator: the MCP server's URL
    std::string scope;
    std::string issuer;
    /// How the client authenticates at the token endpoint (RFC 8414 §2
    /// `token_endpoint_auth_methods_supported`): "client_secret_basic", "client_secret_post",
    /// "private_key_jwt" or "none"; empty: post when there is a secret (grants kept before
    /// this member existed).
    std::string auth_method;
    /// The grant a new token comes from when this one expires: empty (a refresh token, RFC 6749
    /// §6) or "client_credentials" (RFC 6749 §4.4: asked again, no person involved).
    std::string grant_type;
    std::string private_key; ///< PEM, for private_key_jwt (RFC 7523 §2.2); a secret
    /// Logins in a row that asked again for a scope the grant already held, after the server
    /// answered 403 insufficient_scope (MCP spec, "Scope challenge handling"): bounded.
    int step_ups = 0;
};

/// A Bearer challenge's parameters (RFC 6750 §3, RFC 9728 §5.1): what the bridge tells meithd
/// and meithd keeps for `meith login` (docs/protocol.md §18). Empty members: not given.
struct bearer_challenge {
    std::string resource_metadata, scope, error;
    bool empty() const { return resource_metadata.empty() && scope.empty() && error.empty(); }
};

/// Appends `{"error":…,"scope":…,"resourceMetadata":…}` (every member, "" when not given).
void append_json(std::string& out, const bearer_challenge& c);

/// Whether meith-remote can get a new token for `c` without a person: with a refresh token
/// (RFC 6749 §6), or by asking again for a client-credentials grant (§4.4).
inline bool renewable(const credentials& c) {
    return !c.refresh_token.empty() || c.grant_type == "client_credentials";
}

/// JSON text of `c` (an object; empty members left out).
std::string to_json(const credentials& c);

/// Reads what to_json wrote. Nullopt, with `why`, when it is not such an object.
std::optional<credentials> credentials_from_json(std::string_view json, std::string& why);

/// Every secret value of `c` (tokens, client secret), for the redactor's exact values.
std::vector<std::string> secret_values(const credentials& c);

/// Replaces with "[REDACTED]", in `text`, every occurrence of each of `secrets` and of each
/// prefix and suffix of one that is 8 bytes or longer: what a server echoes of a token, cut
/// by it or by meith (an error page is shown cut at 200 bytes), gives nothing back that long.
/// Secrets under 8 bytes are ignored (as audit::add_exact_secret). For error text from a
/// server (docs/security.md "Remote MCP servers"); a piece from a token's middle is not found.
void redact_secret_pieces(std::string& text, const std::vector<std::string>& secrets);

} // namespace meith::remote
