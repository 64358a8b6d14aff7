// fuzz_egress_host: what a confined process sends meith's egress proxy (egress/, docs/protocol.md
// §19): the host parser canonical_host, the rule parser and matcher, the HTTP request-head
// parser (CONNECT and absolute-form) and the SOCKS5 request parser.
//
// The input is fed whole to each; the first byte also picks a port. Invariants: a host that is
// accepted is canonical (parsing it again gives it back), holds only lower-case letters, digits,
// '-', '_', '.' (':' in an IPv6 literal), never a NUL or other byte, is at most 253 bytes, and
// its exact rule ("host:port", what a person's "allow always" writes) is one parse_rule reads
// back as that very target; a wildcard matches only a name that ends in "." and its suffix; a
// refused host's printable form holds only printable ASCII; the request parsers' offsets stay
// inside the input and their targets are canonical.
#include "fuzz_common.hpp"

#include "egress/request.hpp"
#include "egress/rules.hpp"

#include <algorithm>
#include <string>
#include <string_view>

using meith::fuzz::check;
namespace egress = meith::egress;

namespace {

bool canonical_byte(char c, bool literal) {
    if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.') return true;
    return literal ? c == ':' : c == '-' || c == '_';
}

void check_printable(std::string_view shown) {
    std::string_view body = shown;
    if (body.ends_with("…")) body.remove_suffix(std::string_view("…").size());
    check(std::all_of(body.begin(), body.end(), [](char c) { return c > 0x20 && c < 0x7f; }),
          "a shown host holds a byte that is not printable ASCII", shown);
}

/// A host canonical_host accepted (or a parser gave out): canonical in every way.
void check_host(const std::string& host, bool literal, std::uint16_t port) {
    check(!host.empty() && host.size() <= 253, "an accepted host is empty or too long", host);
    check(std::all_of(host.begin(), host.end(),
                      [literal](char c) { return canonical_byte(c, literal); }),
          "an accepted host holds a byte no canonical host has", host);
    std::string why;
    const auto again = egress::canonical_host(host, why);
    check(again && again->text == host && again->literal == literal,
          "canonical_host is not idempotent", host);
    const std::uint16_t p = port == 0 ? 443 : port;
    const auto rule_text = egress::exact_rule(host, p, why);
    check(rule_text.has_value(), "a canonical host has no exact rule", host);
    const auto r = egress::parse_rule(*rule_text, why);
    check(r && r->host == host && r->port == p && r->literal == literal && r->matches(host, p),
          "the exact rule does not read back as the target", *rule_text);
    // The wildcard over its parent domain matches it, and only as a subdomain.
    if (!literal) {
        const auto dot = host.find('.');
        if (dot != std::string::npos && dot + 1 < host.size()) {
            const auto w = egress::parse_rule("*." + host.substr(dot + 1), why);
            if (w) {
                check(w->matches(host, p), "a wildcard misses its subdomain", host);
                check(!w->matches(host.substr(dot + 1), p), "a wildcard matches its own domain",
                      host);
            }
        }
    }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    const std::uint16_t port = size == 0 ? 0 : static_cast<std::uint16_t>(data[0] * 257);

    std::string why;
    if (const auto h = egress::canonical_host(text, why)) {
        check(text.find('\0') == std::string_view::npos, "a host with a NUL was accepted", text);
        check_host(h->text, h->literal, port);
    } else {
        check(!why.empty(), "a refused host says no why", text);
    }
    check_printable(egress::printable_host(text));

    // A rule: its host is canonical too; a name rule matches its own host only.
    if (const auto r = egress::parse_rule(text, why)) {
        check(r->host.find('\0') == std::string::npos, "a rule's host holds a NUL", text);
        if (!r->any) {
            check(!r->host.empty() && r->host.size() <= 253, "a rule's host is empty or long",
                  text);
            std::string w2;
            const auto h = egress::canonical_host(r->host, w2);
            check(h && h->text == r->host && h->literal == r->literal,
                  "a rule's host is not canonical", text);
            if (!r->wildcard)
                check(r->matches(r->host, r->port == 0 ? 1 : r->port), "a rule misses its own host",
                      text);
        }
    }

    // The request parsers.
    if (const auto end = text.find("\r\n\r\n"); end != std::string_view::npos) {
        const auto head = egress::parse_http_head(text);
        check(head.head_end == end + 4 && head.line_end <= head.head_end,
              "the head's offsets are off", text);
        if (head.why.empty()) {
            check(head.protocol == "connect" || head.protocol == "http", "no protocol", text);
            check(head.target.port != 0, "a target without a port", text);
            check_host(head.target.host, head.target.literal, head.target.port);
        } else {
            check(head.target.host.empty(), "a refused head names a host", text);
            check_printable(head.target.shown);
        }
    }
    const auto q = egress::parse_socks5_request(text);
    using st = egress::socks5_request::state;
    if (q.st == st::incomplete) {
        check(q.size > size, "an incomplete request that is long enough", text);
    } else if (q.st == st::ok) {
        check(q.size <= size, "a request longer than its bytes", text);
        check(q.target.port != 0, "a SOCKS5 target without a port", text);
        check_host(q.target.host, q.target.literal, q.target.port);
    } else {
        check(q.reply == 1 || q.reply == 8, "a refusal with an unknown reply code", text);
        check(q.target.host.empty(), "a refused request names a host", text);
        check_printable(q.target.shown);
    }
    return 0;
}
