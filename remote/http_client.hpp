// http_client: HTTP(S) requests for remote MCP sources and OAuth, on libcurl's multi interface
// driven by an Asio io_context (curl's socket and timer callbacks become async waits; no thread
// of its own). One client per io_context; I/O-thread only.
//
// Every connection passes the egress check (egress/address.hpp) on the address it connects to,
// after DNS and on every redirect; schemes are https only (http too with
// `allow_private_network`); TLS is verified against the system store; proxies from the
// environment are not used (a local proxy would be a way around the check).
#pragma once

#include <asio/any_io_executor.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace meith::remote {

/// Where requests may go. `allow_private_network` lifts the special-address refusal and allows
/// plain http:// (docs/configuration.md, `allow_private_network`).
struct egress_policy {
    bool allow_private_network = false;
    /// PEM file of extra trust anchors (the source's `ca_file`); empty: the system store only.
    std::string ca_file;
};

struct http_request {
    std::string method = "GET"; ///< GET, POST, DELETE
    std::string url;
    std::vector<std::string> headers; ///< "Name: value" lines
    std::string body;
    std::chrono::milliseconds connect_timeout{10000};
    /// Whole-transfer deadline; zero: none (a stream that stays open).
    std::chrono::milliseconds timeout{0};
    /// Response bodies over this many bytes fail the request (`too_large`).
    std::size_t max_body_bytes = 64u << 20;
    int max_redirects = 5; ///< 0: a redirect is answered as the 3xx it is
    /// A redirect to another origin (scheme, host and port) is refused (`refused`, saying
    /// where it led) unless this is true: the request's headers and body (a token, a
    /// `${secret:…}` header, a tool call) go to the origin of `url` only. Only requests that
    /// carry nothing secret set it (the OAuth metadata GETs). Same-origin redirects are
    /// followed (docs/protocol.md §18).
    bool cross_origin_redirects = false;
};

/// The status line and headers of the final response (after redirects).
struct http_head {
    long status = 0;
    std::vector<std::pair<std::string, std::string>> headers; ///< names lower-cased
    /// The first header named `lower_name`, or an empty view.
    std::string_view header(std::string_view lower_name) const;
};

/// How a request ended. `error` is empty when an HTTP response arrived (any status).
struct http_outcome {
    http_head head;
    std::string error; ///< curl's reason, or the egress refusal, in words
    /// Refused, never worth a retry: an address the egress check refuses, plain http:// (a URL
    /// or a redirect from https) without allow_private_network, a certificate whose issuer no
    /// trusted CA vouches for, a ca_file that cannot be read. Not an expired certificate or
    /// one for another name: those are errors (the server may mend them; restarts go on).
    bool refused = false;
    std::string remedy;     ///< with `refused`: what would allow it, in words
    bool transient = false; ///< connect, resolve or timeout failure: worth a retry
    bool too_large = false;

    /// `error`, and with a refusal what would allow it: "ERROR; REMEDY".
    std::string described() const { return remedy.empty() ? error : error + "; " + remedy; }
};

/// Callbacks of one request. `on_head` runs once before the first body bytes (and before
/// `on_done` when the body is empty); `on_body` gets the body as it arrives (SSE streams).
struct http_handlers {
    std::function<void(const http_head&)> on_head;
    std::function<void(std::string_view)> on_body;
    std::function<void(http_outcome)> on_done;
};

class http_client {
  public:
    /// Throws std::runtime_error when libcurl cannot be initialised.
    http_client(asio::any_io_executor ex, egress_policy policy);
    ~http_client();
    http_client(const http_client&) = delete;
    http_client& operator=(const http_client&) = delete;

    using request_id = std::uint64_t;

    /// Starts `req`; the handlers run on the executor, `on_done` exactly once (not after
    /// `cancel`). Never throws for a bad URL: `on_done` says what is wrong.
    request_id start(http_request req, http_handlers handlers);

    /// Ends a request without calling its `on_done`. Unknown ids are ignored.
    void cancel(request_id id);

    /// Requests in flight.
    std::size_t active() const;

    struct impl;

  private:
    std::unique_ptr<impl> impl_;
};

/// "application/x-www-form-urlencoded" body from name/value pairs (RFC 6749 §4.1.3).
std::string form_encode(const std::vector<std::pair<std::string, std::string>>& fields);

/// Percent-encodes `s` for a URL query or form value (RFC 3986 unreserved kept).
std::string url_encode(std::string_view s);

} // namespace meith::remote
