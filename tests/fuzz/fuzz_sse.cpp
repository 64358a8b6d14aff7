// fuzz_sse: what a remote MCP server or a browser sends meith (remote/): the SSE parser
// (remote/sse.hpp) over a response body, and the OAuth texts parse_callback_request (the
// loopback redirect's request head), parse_bearer_challenge (a 401's WWW-Authenticate) and
// apply_token_response (a token endpoint's answer).
//
// The input is an event stream fed whole, in two chunks split at a byte the first input byte
// chooses, in chunks of a size the last byte chooses with an empty chunk after each, and (short
// inputs) a byte at a time. Invariants: every way gives the same events, last_event_id and
// dropped count; an event's type is never empty and holds no line break, its data no CR and
// at most max_event_bytes, its id no line break or NUL. With a small bound (32 bytes) the
// same holds while no line can outgrow the parser's line buffer. The OAuth parsers never
// crash, answer only a GET and only a Bearer challenge, and a token answer's error text never
// repeats the grant's tokens.
#include "fuzz_common.hpp"

#include "remote/oauth.hpp"
#include "remote/sse.hpp"

#include <algorithm>
#include <cctype>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

using meith::fuzz::check;
namespace remote = meith::remote;

namespace {

struct seen_event {
    std::string type, data, id;
    std::optional<long> retry_ms;
    bool operator==(const seen_event&) const = default;
};

struct outcome {
    std::vector<seen_event> events;
    std::string last_id;
    std::size_t dropped = 0;
    bool operator==(const outcome&) const = default;
};

outcome feed(const std::vector<std::string_view>& chunks, std::size_t max) {
    remote::sse_parser p(max);
    outcome out;
    for (const auto c : chunks)
        p.feed(c, [&](remote::sse_event& e) {
            out.events.push_back({e.type, e.data, e.id, e.retry_ms});
        });
    out.last_id = p.last_event_id();
    out.dropped = p.dropped();
    return out;
}

bool has_line_break(std::string_view s) {
    return s.find_first_of("\r\n") != std::string_view::npos;
}

void check_events(const outcome& o, std::size_t max, std::string_view text) {
    for (const auto& e : o.events) {
        check(!e.type.empty(), "an event type is empty", text);
        check(!has_line_break(e.type), "an event type holds a line break", e.type);
        check(e.data.find('\r') == std::string::npos, "event data holds a CR", e.data);
        check(e.data.size() <= max, "event data over max_event_bytes", e.data);
        check(!has_line_break(e.id) && e.id.find('\0') == std::string::npos,
              "an event id holds a line break or NUL", e.id);
        check(!e.retry_ms || *e.retry_ms >= 0, "a negative retry", text);
    }
    check(!has_line_break(o.last_id) && o.last_id.find('\0') == std::string::npos,
          "last_event_id holds a line break or NUL", o.last_id);
}

/// The input fed every way with bound `max`; all must agree.
void check_parser(std::string_view text, const std::uint8_t* data, std::size_t size,
                  std::size_t max) {
    const outcome whole = feed({text}, max);
    check_events(whole, max, text);

    const std::size_t split = size == 0 ? 0 : data[0] % (size + 1);
    check(feed({text.substr(0, split), text.substr(split)}, max) == whole,
          "two chunks differ from one", text);

    const std::size_t step = size == 0 ? 1 : 1 + data[size - 1] % 64;
    std::vector<std::string_view> chunks;
    for (std::size_t at = 0; at < size; at += step) {
        chunks.push_back(text.substr(at, step));
        chunks.push_back({});
    }
    check(feed(chunks, max) == whole, "chunks of a fixed size differ from one", text);

    if (size <= 4096) {
        chunks.clear();
        for (std::size_t at = 0; at < size; ++at)
            chunks.push_back(text.substr(at, 1));
        check(feed(chunks, max) == whole, "a byte at a time differs from one chunk", text);
    }
}

bool starts_with_bearer(std::string_view s) {
    if (s.size() < 6) return false;
    for (std::size_t i = 0; i < 6; ++i)
        if (std::tolower(static_cast<unsigned char>(s[i])) != "bearer"[i]) return false;
    return true;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);

    // A large bound: no line outgrows the parser's line buffer, every split must agree.
    check_parser(text, data, size, std::size_t{1} << 20);
    // A small bound: events over it are dropped; the line buffer holds 32 + 1024 bytes, so
    // splits agree while the whole input fits.
    if (size <= 32 + 1024) {
        check_parser(text, data, size, 32);
    } else {
        const outcome small = feed({text}, 32);
        check_events(small, 32, text);
        std::vector<std::string_view> chunks;
        for (std::size_t at = 0; at < size; at += 7)
            chunks.push_back(text.substr(at, 7));
        check_events(feed(chunks, 32), 32, text);
    }

    // The loopback redirect: only a GET with a request target.
    const auto cb = remote::parse_callback_request(text);
    const bool is_get = text.starts_with("GET ") && text.find(' ', 4) != std::string_view::npos;
    check(cb.has_value() == is_get, "parse_callback_request answers other than a GET", text);
    if (cb) {
        check(cb->path.find(' ') == std::string::npos, "the callback path holds a space", text);
        check(cb->path.size() + cb->code.size() <= size, "the callback grew", text);
    }

    // A 401's challenge: only a Bearer one.
    const auto bc = remote::parse_bearer_challenge(text);
    if (!starts_with_bearer(text))
        check(bc.resource_metadata.empty() && bc.scope.empty() && bc.error.empty(),
              "a non-Bearer challenge gave parameters", text);
    check(bc.resource_metadata.size() <= size && bc.scope.size() <= size && bc.error.size() <= size,
          "a challenge parameter is longer than the header", text);

    // A token endpoint's answer: the error text never repeats the grant.
    remote::credentials c;
    c.access_token = "at_ACCESSTOKENVALUE";
    c.refresh_token = "rt_REFRESHTOKENVALUE";
    c.client_secret = "cs_CLIENTSECRETVALUE";
    std::string why;
    bool invalid_grant = false;
    const long status = size == 0 ? 200 : (data[0] & 1) != 0 ? 200 : 400;
    if (!remote::apply_token_response(c, status, text, 1000, why, invalid_grant)) {
        for (const auto& secret :
             {"at_ACCESSTOKENVALUE", "rt_REFRESHTOKENVALUE", "cs_CLIENTSECRETVALUE"})
            check(why.find(secret) == std::string::npos, "a token in the token error text", why);
        check(c.refresh_token == "rt_REFRESHTOKENVALUE", "a failed answer changed the grant", text);
    } else {
        check(!c.access_token.empty(), "an applied answer without an access token", text);
    }
    return 0;
}
