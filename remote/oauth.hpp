// oauth: the OAuth 2.1 client a remote MCP source needs (MCP spec 2025-11-25, "Authorization"):
// protected-resource metadata discovery (RFC 9728, from the 401's `WWW-Authenticate` or the
// well-known URIs), authorization-server metadata (RFC 8414, OpenID Connect Discovery),
// dynamic client registration (RFC 7591), authorization code + PKCE S256 (RFC 7636) with a
// loopback redirect (RFC 8252 §7.3), resource indicators (RFC 8707), refresh (RFC 6749 §6).
// `meith login` runs the flow (cli/commands/login.cpp); meith-remote refreshes.
//
// Token values never go into an error text from here: errors name endpoints and OAuth error
// codes (RFC 6749 §5.2), never a token or a code.
#pragma once

#include "remote/credentials.hpp"
#include "remote/http_client.hpp"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace meith::remote {

/// A token endpoint's answer (RFC 6749 §5.1) applied to `c`: a new access token, expiry and,
/// when rotated, refresh token. False, with `why` (RFC 6749 §5.2 `error` and description), for
/// an error answer or one without an access token. `now` in Unix seconds.
bool apply_token_response(credentials& c, long status, std::string_view body, std::int64_t now,
                          std::string& why, bool& invalid_grant);

/// PKCE (RFC 7636 §4.1, §4.2): a 64-character verifier and its S256 challenge.
struct pkce_pair {
    std::string verifier, challenge;
};
pkce_pair make_pkce();

/// 32 random bytes, base64url without padding (state parameters, verifiers).
std::string random_token();

/// base64url without padding of SHA-256(text).
std::string sha256_base64url(std::string_view text);

/// The `resource_metadata`, `scope` and `error` parameters of a Bearer `WWW-Authenticate`
/// challenge (RFC 9728 §5.1, RFC 6750 §3); empty when absent. (The struct: credentials.hpp.)
bearer_challenge parse_bearer_challenge(std::string_view header);

/// RFC 9728 §3.1 and RFC 8414 §3.1 well-known URIs to try, in order, for `url`'s origin and
/// path. Empty when `url` is not an absolute http(s) URL.
std::vector<std::string> protected_resource_metadata_urls(const std::string& mcp_url);
std::vector<std::string> authorization_server_metadata_urls(const std::string& issuer);

/// The canonical URI of the MCP server for RFC 8707's `resource` (scheme and host lower-case,
/// no fragment). The input when curl cannot parse it.
std::string canonical_resource(const std::string& mcp_url);

/// What discovery found about a server's authorization.
struct server_auth {
    std::string resource;
    std::string issuer, authorization_endpoint, token_endpoint, registration_endpoint;
    bool client_id_metadata_documents = false;
    std::string scope; ///< from the challenge, else the resource's scopes_supported
    /// RFC 8414 §2 lists, as the server gave them; empty when it did not.
    std::vector<std::string> token_endpoint_auth_methods, grant_types;
    bool pkce_s256 = false; ///< `S256` in code_challenge_methods_supported
    /// The 2025-03-26 revision's fallbacks were taken (no protected-resource metadata): the
    /// authorization server is the MCP server's origin, its endpoints possibly the defaults.
    bool legacy = false;
    /// The challenge that started discovery was 403 `insufficient_scope` (a step-up).
    bool step_up = false;
};

/// Whether `resource`, a protected resource's `resource` (RFC 9728 §2), names the MCP server
/// at `mcp_url`: the same scheme, host and port, and a path that is the server's path or one
/// of its parent folders (MCP spec 2025-11-25, "Authorization": the resource "MUST match" the
/// server; RFC 9728 §3.3; the official SDKs' prefix rule). Both are canonicalised first.
bool resource_allowed(const std::string& mcp_url, const std::string& resource);

/// Asks `mcp_url` (POST initialize, no token) for its challenge and follows the metadata to
/// the authorization server. `headers`: the source's static headers. `known`: the challenge
/// meithd last saw on a later request (a server that lets `initialize` through and answers
/// 401, or 403 `insufficient_scope`, on `tools/list` or a call); used when the probe gets none.
/// Without protected-resource metadata, a server that asked for authorization is taken as a
/// 2025-03-26 one (`legacy`). `done(nullopt, why)` when the server asks for no authorization,
/// the metadata is unusable, or its `resource` names another server (resource_allowed).
void discover_authorization(http_client& http, const std::string& mcp_url,
                            std::vector<std::string> headers, bearer_challenge known,
                            std::function<void(std::optional<server_auth>, std::string)> done);

/// The token endpoint authentication method for `c` at `as` (RFC 8414 §2, RFC 7591 §2): the
/// one registration gave when the server lists it; with a secret, client_secret_basic, else
/// client_secret_post, as listed (basic when the server lists none: RFC 8414's default); with a
/// private key, private_key_jwt; else none. Empty, with `why`, when the server lists no method
/// meith can use with what it holds.
std::string choose_auth_method(const server_auth& as, const credentials& c, std::string& why);

/// A signed JWT for private_key_jwt client authentication (RFC 7523 §2.2, §3): iss and sub
/// `client_id`, aud `audience` (the authorization server's issuer), a 5-minute lifetime and a
/// random jti; ES256/ES384 for a P-256/P-384 key, RS256 for an RSA one. Empty, with `why`,
/// when `pem` holds no such private key.
std::string make_client_assertion(const std::string& client_id, const std::string& audience,
                                  const std::string& pem, std::string& why);

/// The client credentials grant (RFC 6749 §4.4) with `c`'s client authentication, resource
/// and scope: a token without a person. `c` carries the token endpoint, client id, method and
/// secret or key; the answer's token is applied to a copy of it.
void client_credentials_grant(http_client& http, credentials c,
                              std::function<void(std::optional<credentials>, std::string)> done);

/// Dynamic client registration (RFC 7591) of a public client for `redirect_uri`.
void register_client(http_client& http, const server_auth& as, const std::string& redirect_uri,
                     std::function<void(std::optional<credentials>, std::string)> done);

/// Enterprise-managed cross-app access (MCP extension SEP-990; RFC 8693 token exchange,
/// RFC 7523 §2.1 JWT bearer grant): the user's ID token from their identity provider is
/// exchanged there for an identity assertion grant (ID-JAG) naming `c.issuer` and
/// `c.resource`, which the authorization server takes, with `c`'s client authentication, for
/// an access token. No browser; a new token needs a new ID token (a new `meith login`).
struct identity_provider {
    std::string token_endpoint, client_id, id_token;
};
void cross_app_access_grant(http_client& http, credentials c, const identity_provider& idp,
                            std::function<void(std::optional<credentials>, std::string)> done);

/// The authorization request URL (RFC 6749 §4.1.1 + PKCE + RFC 8707 `resource`).
std::string authorization_url(const server_auth& as, const std::string& client_id,
                              const std::string& redirect_uri, const pkce_pair& pkce,
                              const std::string& state);

/// Exchanges `code` at the token endpoint; `base` carries client id/secret, endpoint, resource.
void exchange_code(http_client& http, credentials base, const std::string& code,
                   const std::string& redirect_uri, const std::string& verifier,
                   std::function<void(std::optional<credentials>, std::string)> done);

/// The authorization server's redirect to meith's loopback listener (RFC 6749 §4.1.2,
/// §4.1.2.1): the request line's path and the query's `code`, `state`, `error` and
/// `error_description`, percent-decoded. Nullopt when `head` is not a GET request.
struct loopback_callback {
    std::string path, code, state, error, error_description;
};
std::optional<loopback_callback> parse_callback_request(std::string_view head);

/// What a refresh came to. `invalid_grant`: the grant is revoked or expired (RFC 6749 §5.2):
/// only a new login helps.
struct refresh_outcome {
    std::optional<credentials> creds;
    bool invalid_grant = false;
    std::string why;
};

/// Refreshes `c` (RFC 6749 §6, with RFC 8707 `resource`); a client-credentials grant asks for
/// a new token instead (RFC 6749 §4.4.1: it has no refresh token).
void refresh_grant(http_client& http, credentials c, std::function<void(refresh_outcome)> done);

} // namespace meith::remote
