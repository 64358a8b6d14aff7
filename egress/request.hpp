// request: what a process asks meith's egress proxy (docs/protocol.md §19), parsed without
// I/O: the head of an HTTP request (`CONNECT host:port` or absolute-form `GET http://host/…`)
// and a SOCKS5 request (RFC 1928 §4). Every host goes through canonical_host (rules.hpp)
// before any rule sees it. Pure functions (tests/unit/egress_test.cpp,
// tests/fuzz/fuzz_egress_host.cpp).
#pragma once

#include "egress/rules.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace meith::egress {

/// The target a request names.
struct request_target {
    std::string host; ///< canonical (canonical_host); empty when refused
    bool literal = false;
    std::uint16_t port = 0;
    std::string shown; ///< the host as sent, printable_host'd: set when the host was refused
};

/// An HTTP request head: `why` empty, or the refusal (answer 400 with it).
struct http_head {
    std::string protocol;              ///< "connect" or "http"
    std::string method, path, version; ///< path: an http:// request's origin form ("/" at least)
    request_target target;
    std::size_t line_end = 0; ///< the request line's length with its CRLF
    std::size_t head_end = 0; ///< the head's length through the blank line
    std::string why;          ///< a refusal in words; empty when the target is to be decided
};

/// `head`: the bytes up to and including the first "\r\n\r\n" (more may follow; not read).
http_head parse_http_head(std::string_view head);

/// A SOCKS5 request: VER CMD RSV ATYP DST.ADDR DST.PORT.
struct socks5_request {
    enum class state { incomplete, bad, ok };
    state st = state::incomplete;
    std::size_t size = 0;      ///< incomplete: the length needed so far; else the request's
    unsigned char command = 0; ///< 1 CONNECT, 2 BIND, 3 UDP ASSOCIATE
    unsigned char reply = 0;   ///< bad: the reply code (1 general failure, 8 address type)
    request_target target;     ///< ok: the target; a refused host: bad, reply 1, `why`
    std::string why;           ///< bad: in words
};

/// `bytes`: what arrived of the request (after the method-selection greeting).
socks5_request parse_socks5_request(std::string_view bytes);

} // namespace meith::egress
