// rules: parsing and matching of egress rules (see rules.hpp).
#include "egress/rules.hpp"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>
#include <charconv>

namespace meith::egress {

namespace {

bool is_ip(const std::string& h) {
    unsigned char buf[16];
    return ::inet_pton(AF_INET, h.c_str(), buf) == 1 || ::inet_pton(AF_INET6, h.c_str(), buf) == 1;
}

bool valid_name(std::string_view h) {
    if (h.empty() || h.size() > 253) return false;
    return std::all_of(h.begin(), h.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '-' || c == '.' || c == '_';
    });
}

} // namespace

std::string normal_host(std::string_view host) {
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
        host = host.substr(1, host.size() - 2);
    while (!host.empty() && host.back() == '.')
        host.remove_suffix(1);
    std::string out(host);
    for (auto& c : out)
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
}

std::optional<rule> parse_rule(std::string_view text, std::string& why) {
    rule r;
    r.text = std::string(text);
    std::string_view host = text, port;
    if (!text.empty() && text.front() == '[') { // [IPv6]:port
        const auto close = text.find(']');
        if (close == std::string_view::npos) {
            why = "an IPv6 address in brackets needs its ']'";
            return std::nullopt;
        }
        host = text.substr(0, close + 1);
        if (close + 1 < text.size()) {
            if (text[close + 1] != ':') {
                why = "after ']' only :PORT may follow";
                return std::nullopt;
            }
            port = text.substr(close + 2);
        }
    } else if (const auto colon = text.rfind(':'); colon != std::string_view::npos) {
        if (text.find(':') != colon) {
            why = "write an IPv6 address in brackets, e.g. \"[2001:db8::1]:443\"";
            return std::nullopt;
        }
        host = text.substr(0, colon);
        port = text.substr(colon + 1);
    }
    if (!port.empty() && port != "*") {
        unsigned v = 0;
        const auto [p, ec] = std::from_chars(port.data(), port.data() + port.size(), v);
        if (ec != std::errc() || p != port.data() + port.size() || v == 0 || v > 65535) {
            why = "the port must be 1-65535 (or leave it out for any port)";
            return std::nullopt;
        }
        r.port = static_cast<std::uint16_t>(v);
    }
    const std::string h = normal_host(host);
    if (h == "*") {
        r.any = true;
    } else if (h.starts_with("*.")) {
        r.wildcard = true;
        r.host = h.substr(2);
        if (!valid_name(r.host) || r.host.find('*') != std::string::npos) {
            why = "a wildcard is \"*.\" then a domain, e.g. \"*.npmjs.org\"";
            return std::nullopt;
        }
    } else if (is_ip(h)) {
        r.literal = true;
        r.host = h;
    } else if (valid_name(h)) {
        r.host = h;
    } else {
        why = "a rule is a host name, \"*.domain\", \"*\" or an IP address, with an optional "
              ":PORT";
        return std::nullopt;
    }
    return r;
}

bool rule::matches(std::string_view h, std::uint16_t p) const {
    if (port != 0 && port != p) return false;
    if (any) return true;
    if (wildcard)
        return h.size() > host.size() + 1 && h.ends_with(host) &&
               h[h.size() - host.size() - 1] == '.';
    return h == host;
}

const rule* rule_set::decide(std::string_view host, std::uint16_t port, bool& denied) const {
    for (const auto& r : deny)
        if (r.matches(host, port)) {
            denied = true;
            return &r;
        }
    denied = false;
    for (const auto& r : allow)
        if (r.matches(host, port)) return &r;
    return nullptr;
}

} // namespace meith::egress
