// request: the egress proxy's request parsers (see request.hpp).
#include "egress/request.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <charconv>
#include <cstring>

namespace meith::egress {

namespace {

/// `raw` checked into `t`; false, with `why`, when it is no host.
bool set_host(request_target& t, std::string_view raw, std::string& why) {
    auto h = canonical_host(raw, why);
    if (!h) {
        t.shown = printable_host(raw);
        return false;
    }
    t.host = std::move(h->text);
    t.literal = h->literal;
    return true;
}

} // namespace

http_head parse_http_head(std::string_view head) {
    http_head out;
    const auto end_line = head.find("\r\n");
    const auto end_head = head.find("\r\n\r\n");
    if (end_line == std::string_view::npos || end_head == std::string_view::npos) {
        out.why = "the request head is incomplete";
        return out;
    }
    out.line_end = end_line + 2;
    out.head_end = end_head + 4;
    const std::string_view line = head.substr(0, end_line);
    const auto sp1 = line.find(' ');
    const auto sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
    if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos) {
        out.why = "the request line is not METHOD TARGET VERSION";
        return out;
    }
    out.method = std::string(line.substr(0, sp1));
    const std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
    out.version = std::string(line.substr(sp2 + 1));
    std::string_view authority;
    std::uint16_t port = 443;
    if (out.method == "CONNECT") {
        out.protocol = "connect";
        authority = target;
    } else if (target.starts_with("http://")) {
        out.protocol = "http";
        port = 80;
        const auto rest = target.substr(7);
        const auto slash = rest.find('/');
        authority = rest.substr(0, slash);
        out.path = slash == std::string_view::npos ? "/" : std::string(rest.substr(slash));
    } else {
        out.why = "meith's egress proxy takes CONNECT and http:// requests";
        return out;
    }
    // host[:port], [v6][:port]
    std::string_view host = authority;
    const auto colon = authority.rfind(':');
    if (colon != std::string_view::npos && authority.find(']', colon) == std::string_view::npos &&
        (authority.front() == '[' || authority.find(':') == colon)) {
        host = authority.substr(0, colon);
        const auto digits = authority.substr(colon + 1);
        unsigned v = 0;
        const auto [p, perr] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
        port = perr == std::errc() && p == digits.data() + digits.size() && v <= 65535
                   ? static_cast<std::uint16_t>(v)
                   : 0;
    }
    if (!set_host(out.target, host, out.why)) return out;
    if (port == 0) {
        out.why = "the port must be 1-65535";
        out.target.shown = out.target.host;
        out.target.host.clear();
        return out;
    }
    out.target.port = port;
    return out;
}

socks5_request parse_socks5_request(std::string_view b) {
    socks5_request out;
    if (b.size() < 5) {
        out.size = 5;
        return out;
    }
    auto bad = [&out](unsigned char code, std::string why) {
        out.st = socks5_request::state::bad;
        out.reply = code;
        out.why = std::move(why);
        return out;
    };
    if (b[0] != 0x05) return bad(1, "not a SOCKS5 request");
    out.command = static_cast<unsigned char>(b[1]);
    const auto atyp = static_cast<unsigned char>(b[3]);
    const std::size_t addr_len = atyp == 1   ? 4
                                 : atyp == 4 ? 16
                                 : atyp == 3 ? 1 + static_cast<unsigned char>(b[4])
                                             : 0;
    if (addr_len == 0) return bad(8, "the address type is none of IPv4, name, IPv6");
    out.size = 4 + addr_len + 2;
    if (b.size() < out.size) return out;
    const char* a = b.data() + 4;
    std::string host;
    if (atyp == 3) {
        host.assign(a + 1, addr_len - 1);
    } else {
        char text[INET6_ADDRSTRLEN];
        ::inet_ntop(atyp == 1 ? AF_INET : AF_INET6, a, text, sizeof text);
        host = text;
    }
    out.target.port = static_cast<std::uint16_t>(static_cast<unsigned char>(a[addr_len]) << 8 |
                                                 static_cast<unsigned char>(a[addr_len + 1]));
    if (!set_host(out.target, host, out.why)) return bad(1, out.why);
    if (out.target.port == 0) {
        out.target.shown = std::move(out.target.host);
        out.target.host.clear();
        return bad(1, "the port must be 1-65535");
    }
    out.st = socks5_request::state::ok;
    return out;
}

} // namespace meith::egress
