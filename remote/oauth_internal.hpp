// oauth_internal: what remote/oauth.cpp (discovery, registration) and remote/token.cpp (the
// token endpoint) share: JSON and URL helpers and the two kinds of HTTP exchange they make.
// Not a public header.
#pragma once

#include "remote/http_client.hpp"

#include <simdjson.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace meith::remote::detail {

/// base64url without padding (RFC 4648 §5).
std::string base64url(const unsigned char* data, std::size_t n);

/// The string member `key` of `o`, or "".
std::string string_member(simdjson::dom::object o, std::string_view key);

/// Whether `list` holds `v`.
bool listed(const std::vector<std::string>& list, std::string_view v);

/// Parses `body` as a JSON object into `parser`'s document.
bool parse_object(simdjson::dom::parser& parser, std::string_view body, simdjson::dom::object& o);

struct url_parts {
    std::string scheme, host, port, path;
};
/// An absolute http(s) URL's parts (curl's parser); a lone "/" path is empty.
std::optional<url_parts> split_url(const std::string& url);
std::string origin(const url_parts& p);

/// GETs each URL in turn until one answers 200 with a JSON object; `done(body, "")` then, or
/// `done("", why)` naming every URL tried. Metadata only: redirects to other origins followed.
void first_json(http_client& http, std::shared_ptr<std::vector<std::string>> urls, std::size_t i,
                std::string tried, std::function<void(std::string, std::string)> done);

/// POSTs `fields` form-encoded to `url` (a token endpoint: no redirect followed), with
/// `headers` besides Accept and Content-Type; `done(outcome, body)`.
void post_form(http_client& http, const std::string& url,
               const std::vector<std::pair<std::string, std::string>>& fields,
               std::function<void(http_outcome, std::string)> done,
               std::vector<std::string> headers = {});

/// Unix seconds now.
std::int64_t unix_now();

} // namespace meith::remote::detail
