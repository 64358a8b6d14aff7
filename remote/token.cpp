// token: the token endpoint (see oauth.hpp): token answers, client authentication (RFC 6749
// §2.3.1, RFC 7523 §2.2) and the grants meith asks for there — authorization code, refresh,
// client credentials and cross-app access.
#include "remote/oauth.hpp"

#include "remote/oauth_internal.hpp"

#include "protocol/json_writer.hpp"

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/ecdsa.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <simdjson.h>

#include <fmt/format.h>

#include <algorithm>
#include <memory>

namespace meith::remote {

using namespace detail;
using protocol::append_json_string;

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

std::string choose_auth_method(const server_auth& as, const credentials& c, std::string& why) {
    const auto& methods = as.token_endpoint_auth_methods;
    auto ok = [&](std::string_view m) { return methods.empty() || listed(methods, m); };
    if (!c.auth_method.empty() && ok(c.auth_method)) return c.auth_method;
    if (!c.private_key.empty()) {
        if (ok("private_key_jwt")) return "private_key_jwt";
    } else if (!c.client_secret.empty()) {
        if (methods.empty() || listed(methods, "client_secret_basic")) return "client_secret_basic";
        if (listed(methods, "client_secret_post")) return "client_secret_post";
    }
    // A secret the server does not take (a registration may issue one to a public client) is
    // left out: the client is public there.
    if (ok("none")) return "none";
    std::string list;
    for (const auto& m : methods)
        list += (list.empty() ? "" : ", ") + m;
    why = fmt::format("the authorization server authenticates clients at its token endpoint by "
                      "{} only, and meith holds {} for this client: {}",
                      list,
                      !c.private_key.empty()     ? "a private key"
                      : !c.client_secret.empty() ? "a client secret"
                                                 : "no secret",
                      c.private_key.empty() && c.client_secret.empty()
                          ? "keep the client's secret with `meith secret set NAME` and set "
                            "`oauth.client_secret = \"${secret:NAME}\"`"
                          : "register the client for one of those methods");
    return {};
}

namespace {

std::string base64(std::string_view text) {
    std::string out(4 * ((text.size() + 2) / 3) + 1, '\0');
    const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                  reinterpret_cast<const unsigned char*>(text.data()),
                                  static_cast<int>(text.size()));
    out.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
    return out;
}

/// `c`'s client authentication on a token request (RFC 6749 §2.3.1: Basic with the
/// form-encoded id and secret, or both in the body; RFC 7523 §2.2: a signed assertion; a
/// public client sends its id). False, with `why`, when the key cannot sign.
bool add_client_auth(const credentials& c, std::vector<std::pair<std::string, std::string>>& f,
                     std::vector<std::string>& headers, std::string& why) {
    const std::string method = !c.auth_method.empty()     ? c.auth_method
                               : !c.private_key.empty()   ? "private_key_jwt"
                               : !c.client_secret.empty() ? "client_secret_post"
                                                          : "none";
    if (method == "client_secret_basic") {
        auto enc = [](const std::string& v) { return form_encode({{"", v}}).substr(1); };
        headers.push_back("Authorization: Basic " +
                          base64(enc(c.client_id) + ":" + enc(c.client_secret)));
    } else if (method == "client_secret_post") {
        f.emplace_back("client_id", c.client_id);
        f.emplace_back("client_secret", c.client_secret);
    } else if (method == "private_key_jwt") {
        auto assertion = make_client_assertion(c.client_id, c.issuer, c.private_key, why);
        if (assertion.empty()) return false;
        f.emplace_back("client_id", c.client_id);
        f.emplace_back("client_assertion_type",
                       "urn:ietf:params:oauth:client-assertion-type:jwt-bearer");
        f.emplace_back("client_assertion", std::move(assertion));
    } else {
        f.emplace_back("client_id", c.client_id);
    }
    return true;
}

/// POSTs a token request with `c`'s client authentication and applies the answer to `c`.
void token_request(http_client& http, credentials c,
                   std::vector<std::pair<std::string, std::string>> f,
                   std::function<void(std::optional<credentials>, std::string, bool)> done) {
    std::vector<std::string> headers;
    std::string why;
    if (!add_client_auth(c, f, headers, why)) return done(std::nullopt, why, false);
    const auto endpoint = c.token_endpoint;
    post_form(
        http, endpoint, f,
        [c = std::move(c), done = std::move(done)](http_outcome out, std::string body) mutable {
            if (!out.error.empty())
                return done(std::nullopt, c.token_endpoint + ": " + out.described(), false);
            std::string why;
            bool invalid = false;
            if (!apply_token_response(c, out.head.status, body, unix_now(), why, invalid))
                return done(std::nullopt, why, invalid);
            done(std::move(c), "", false);
        },
        std::move(headers));
}

/// The JWS algorithm for a client's key (RFC 7518 §3): RS256, ES256 or ES384; `name` empty
/// for another key.
struct jws_algorithm {
    std::string name;
    const EVP_MD* md = EVP_sha256();
    std::size_t ec_half = 0; ///< bytes of r and of s in a JOSE ECDSA signature (RFC 7518 §3.4)
};

jws_algorithm jws_algorithm_of(EVP_PKEY* key) {
    jws_algorithm a;
    switch (EVP_PKEY_get_base_id(key)) {
    case EVP_PKEY_RSA:
        a.name = "RS256";
        break;
    case EVP_PKEY_EC:
        if (EVP_PKEY_get_bits(key) == 256) {
            a.name = "ES256";
            a.ec_half = 32;
        } else if (EVP_PKEY_get_bits(key) == 384) {
            a.name = "ES384";
            a.md = EVP_sha384();
            a.ec_half = 48;
        }
        break;
    default:
        break;
    }
    return a;
}

/// `input` signed with `key`, base64url-encoded as a JWS signature (an ECDSA one as R || S);
/// empty with `why` set when the key cannot sign.
std::string jws_signature(EVP_PKEY* key, const jws_algorithm& alg, const std::string& input,
                          std::string& why) {
    const EVP_MD* md = alg.md;
    const std::size_t ec_half = alg.ec_half;
    std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
    std::size_t n = 0;
    if (!ctx || EVP_DigestSignInit(ctx.get(), nullptr, md, nullptr, key) != 1 ||
        EVP_DigestSign(ctx.get(), nullptr, &n, reinterpret_cast<const unsigned char*>(input.data()),
                       input.size()) != 1) {
        why = "the client's private_key cannot sign";
        return {};
    }
    std::vector<unsigned char> sig(n);
    if (EVP_DigestSign(ctx.get(), sig.data(), &n,
                       reinterpret_cast<const unsigned char*>(input.data()), input.size()) != 1) {
        why = "the client's private_key cannot sign";
        return {};
    }
    sig.resize(n);
    if (ec_half > 0) { // DER ECDSA-Sig-Value to JOSE's R || S
        const unsigned char* p = sig.data();
        std::unique_ptr<ECDSA_SIG, void (*)(ECDSA_SIG*)> es(
            d2i_ECDSA_SIG(nullptr, &p, static_cast<long>(sig.size())), ECDSA_SIG_free);
        if (!es) {
            why = "the client's private_key made no ECDSA signature";
            return {};
        }
        std::vector<unsigned char> raw(2 * ec_half);
        if (BN_bn2binpad(ECDSA_SIG_get0_r(es.get()), raw.data(), static_cast<int>(ec_half)) < 0 ||
            BN_bn2binpad(ECDSA_SIG_get0_s(es.get()), raw.data() + ec_half,
                         static_cast<int>(ec_half)) < 0) {
            why = "the client's private_key made no ECDSA signature";
            return {};
        }
        sig = std::move(raw);
    }
    return base64url(sig.data(), sig.size());
}

} // namespace

std::string make_client_assertion(const std::string& client_id, const std::string& audience,
                                  const std::string& pem, std::string& why) {
    std::unique_ptr<BIO, void (*)(BIO*)> bio(
        BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())), BIO_free_all);
    std::unique_ptr<EVP_PKEY, void (*)(EVP_PKEY*)> key(
        bio ? PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr) : nullptr,
        EVP_PKEY_free);
    if (!key) {
        why = "the client's private_key is not a PEM private key (an EC P-256/P-384 or RSA key, "
              "unencrypted)";
        return {};
    }
    const jws_algorithm alg = jws_algorithm_of(key.get());
    if (alg.name.empty()) {
        why = "the client's private_key is neither an RSA key nor an EC P-256 or P-384 key";
        return {};
    }
    const auto now = unix_now();
    // RFC 7523 §3: the client's own assertion, valid for five minutes.
    std::string header = "{";
    protocol::json_members(header).string("alg", alg.name).string("typ", "JWT");
    header += '}';
    std::string claims = "{";
    protocol::json_members(claims)
        .string("iss", client_id)
        .string("sub", client_id)
        .string("aud", audience)
        .number("iat", static_cast<std::uint64_t>(now))
        .number("exp", static_cast<std::uint64_t>(now + 300))
        .string("jti", random_token());
    claims += '}';
    auto b64 = [](const std::string& t) {
        return base64url(reinterpret_cast<const unsigned char*>(t.data()), t.size());
    };
    const std::string input = b64(header) + "." + b64(claims);
    const std::string sig = jws_signature(key.get(), alg, input, why);
    if (sig.empty()) return {};
    return input + "." + sig;
}

void exchange_code(http_client& http, credentials base, const std::string& code,
                   const std::string& redirect_uri, const std::string& verifier,
                   std::function<void(std::optional<credentials>, std::string)> done) {
    std::vector<std::pair<std::string, std::string>> f = {{"grant_type", "authorization_code"},
                                                          {"code", code},
                                                          {"redirect_uri", redirect_uri},
                                                          {"code_verifier", verifier},
                                                          {"resource", base.resource}};
    token_request(http, std::move(base), std::move(f),
                  [done = std::move(done)](std::optional<credentials> c, std::string why, bool) {
                      done(std::move(c), std::move(why));
                  });
}

void client_credentials_grant(http_client& http, credentials c,
                              std::function<void(std::optional<credentials>, std::string)> done) {
    std::vector<std::pair<std::string, std::string>> f = {{"grant_type", "client_credentials"}};
    if (!c.resource.empty()) f.emplace_back("resource", c.resource);
    if (!c.scope.empty()) f.emplace_back("scope", c.scope);
    c.grant_type = "client_credentials";
    token_request(http, std::move(c), std::move(f),
                  [done = std::move(done)](std::optional<credentials> c, std::string why, bool) {
                      done(std::move(c), std::move(why));
                  });
}

void cross_app_access_grant(http_client& http, credentials c, const identity_provider& idp,
                            std::function<void(std::optional<credentials>, std::string)> done) {
    std::vector<std::pair<std::string, std::string>> f = {
        {"grant_type", "urn:ietf:params:oauth:grant-type:token-exchange"},
        {"requested_token_type", "urn:ietf:params:oauth:token-type:id-jag"},
        {"audience", c.issuer},
        {"resource", c.resource},
        {"subject_token", idp.id_token},
        {"subject_token_type", "urn:ietf:params:oauth:token-type:id_token"},
        {"client_id", idp.client_id}};
    if (!c.scope.empty()) f.emplace_back("scope", c.scope);
    const auto endpoint = idp.token_endpoint;
    const auto id_token = idp.id_token;
    post_form(
        http, endpoint, f,
        [&http, c = std::move(c), endpoint, id_token,
         done = std::move(done)](http_outcome out, std::string body) mutable {
            if (!out.error.empty()) return done(std::nullopt, endpoint + ": " + out.described());
            // The exchange's answer is a token response whose access_token is the ID-JAG.
            credentials jag;
            std::string why;
            bool invalid = false;
            if (!apply_token_response(jag, out.head.status, body, unix_now(), why, invalid)) {
                redact_secret_pieces(why, {id_token});
                return done(std::nullopt,
                            "the identity provider's token exchange (" + endpoint + "): " + why);
            }
            std::vector<std::pair<std::string, std::string>> g = {
                {"grant_type", "urn:ietf:params:oauth:grant-type:jwt-bearer"},
                {"assertion", jag.access_token}};
            if (!c.scope.empty()) g.emplace_back("scope", c.scope);
            token_request(http, std::move(c), std::move(g),
                          [done = std::move(done)](std::optional<credentials> n, std::string why,
                                                   bool) { done(std::move(n), std::move(why)); });
        });
}

void refresh_grant(http_client& http, credentials c, std::function<void(refresh_outcome)> done) {
    if (c.grant_type == "client_credentials" && !c.token_endpoint.empty()) {
        return client_credentials_grant(
            http, std::move(c),
            [done = std::move(done)](std::optional<credentials> n, std::string why) {
                refresh_outcome r;
                r.creds = std::move(n);
                r.why = std::move(why);
                // Refused client authentication is what only the user can mend.
                r.invalid_grant = !r.creds && r.why.find("invalid_client") != std::string::npos;
                done(std::move(r));
            });
    }
    if (c.refresh_token.empty() || c.token_endpoint.empty())
        return done({std::nullopt, true, "the grant has no refresh token"});
    std::vector<std::pair<std::string, std::string>> f = {{"grant_type", "refresh_token"},
                                                          {"refresh_token", c.refresh_token}};
    if (!c.resource.empty()) f.emplace_back("resource", c.resource);
    token_request(
        http, std::move(c), std::move(f),
        [done = std::move(done)](std::optional<credentials> n, std::string why, bool invalid) {
            refresh_outcome r;
            r.creds = std::move(n);
            r.why = std::move(why);
            r.invalid_grant = invalid;
            done(std::move(r));
        });
}

} // namespace meith::remote
