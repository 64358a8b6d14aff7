// credentials: a grant's JSON text (see the header).
#include "remote/credentials.hpp"

#include "protocol/json_writer.hpp"
#include "remote/oauth_internal.hpp"

#include <simdjson.h>

#include <fmt/format.h>

namespace meith::remote {

using protocol::append_json_string;

using detail::string_member;

// Defined here, with the credentials meithd reads, not in oauth.cpp: meithd links this file
// and must not pull in the HTTP client (libcurl) with it.
std::string detail::string_member(simdjson::dom::object o, std::string_view key) {
    std::string_view v;
    if (o[key].get_string().get(v) != simdjson::SUCCESS) return {};
    return std::string(v);
}

std::string to_json(const credentials& c) {
    std::string out = "{";
    auto member = [&](std::string_view k, const std::string& v) {
        if (v.empty()) return;
        if (out.size() > 1) out += ',';
        append_json_string(out, k);
        out += ':';
        append_json_string(out, v);
    };
    member("access_token", c.access_token);
    member("refresh_token", c.refresh_token);
    if (c.expires_at > 0)
        out += fmt::format("{}\"expires_at\":{}", out.size() > 1 ? "," : "", c.expires_at);
    member("token_endpoint", c.token_endpoint);
    member("client_id", c.client_id);
    member("client_secret", c.client_secret);
    member("resource", c.resource);
    member("scope", c.scope);
    member("issuer", c.issuer);
    member("auth_method", c.auth_method);
    member("grant_type", c.grant_type);
    member("private_key", c.private_key);
    if (c.step_ups > 0)
        out += fmt::format("{}\"step_ups\":{}", out.size() > 1 ? "," : "", c.step_ups);
    return out + "}";
}

std::optional<credentials> credentials_from_json(std::string_view json, std::string& why) {
    simdjson::dom::parser p;
    simdjson::dom::object o;
    if (p.parse(json.data(), json.size()).get_object().get(o) != simdjson::SUCCESS) {
        why = "not a JSON object";
        return std::nullopt;
    }
    credentials c;
    c.access_token = string_member(o, "access_token");
    c.refresh_token = string_member(o, "refresh_token");
    std::int64_t at = 0;
    if (o["expires_at"].get_int64().get(at) == simdjson::SUCCESS) c.expires_at = at;
    c.token_endpoint = string_member(o, "token_endpoint");
    c.client_id = string_member(o, "client_id");
    c.client_secret = string_member(o, "client_secret");
    c.resource = string_member(o, "resource");
    c.scope = string_member(o, "scope");
    c.issuer = string_member(o, "issuer");
    c.auth_method = string_member(o, "auth_method");
    c.grant_type = string_member(o, "grant_type");
    c.private_key = string_member(o, "private_key");
    std::int64_t step_ups = 0;
    if (o["step_ups"].get_int64().get(step_ups) == simdjson::SUCCESS && step_ups > 0 &&
        step_ups < 100)
        c.step_ups = static_cast<int>(step_ups);
    if (c.access_token.empty() && c.refresh_token.empty()) {
        why = "it holds no token";
        return std::nullopt;
    }
    return c;
}

void append_json(std::string& out, const bearer_challenge& c) {
    out += '{';
    protocol::json_members(out)
        .string("error", c.error)
        .string("scope", c.scope)
        .string("resourceMetadata", c.resource_metadata);
    out += '}';
}

std::vector<std::string> secret_values(const credentials& c) {
    std::vector<std::string> out;
    for (const auto* v : {&c.access_token, &c.refresh_token, &c.client_secret, &c.private_key})
        if (!v->empty()) out.push_back(*v);
    return out;
}

namespace {

constexpr std::size_t min_piece = 8;

/// The length of the longest piece of `s` at the start of `rest` that is a prefix or a suffix of
/// `s` (the whole of it included) of min_piece bytes or more; 0 when there is none.
std::size_t piece_at(std::string_view rest, std::string_view s) {
    std::size_t best = 0;
    while (best < s.size() && best < rest.size() && rest[best] == s[best])
        ++best;
    if (best < min_piece) best = 0;
    // The suffixes s[j..], longest first: the first that matches is the longest.
    for (std::size_t j = 1; j + min_piece <= s.size() && s.size() - j > best; ++j)
        if (rest.substr(0, s.size() - j) == s.substr(j)) return s.size() - j;
    return best;
}

} // namespace

void redact_secret_pieces(std::string& text, const std::vector<std::string>& secrets) {
    for (const auto& s : secrets) {
        if (s.size() < min_piece) continue;
        std::string out;
        bool changed = false;
        for (std::size_t i = 0; i < text.size();) {
            if (const auto n = piece_at(std::string_view(text).substr(i), s); n > 0) {
                out += "[REDACTED]";
                i += n;
                changed = true;
            } else {
                out += text[i++];
            }
        }
        if (changed) text = std::move(out);
    }
}

} // namespace meith::remote
