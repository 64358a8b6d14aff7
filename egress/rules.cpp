// rules: parsing and matching of egress rules (see rules.hpp).
#include "egress/rules.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstring>

#include <fmt/format.h>

namespace meith::egress {

namespace {

bool hex_digit(char c) {
    return std::isxdigit(static_cast<unsigned char>(c)) != 0;
}

/// An IPv6 address in text, without brackets: canonical text (IPv4-mapped: the IPv4 address).
std::optional<std::string> ipv6_text(std::string_view h) {
    if (h.empty() || h.size() > INET6_ADDRSTRLEN || !std::all_of(h.begin(), h.end(), [](char c) {
            return hex_digit(c) || c == ':' || c == '.';
        }))
        return std::nullopt;
    in6_addr a{};
    if (::inet_pton(AF_INET6, std::string(h).c_str(), &a) != 1) return std::nullopt;
    char text[INET6_ADDRSTRLEN];
    if (IN6_IS_ADDR_V4MAPPED(&a)) {
        in_addr v4{};
        std::memcpy(&v4, a.s6_addr + 12, 4);
        ::inet_ntop(AF_INET, &v4, text, sizeof text);
    } else {
        ::inet_ntop(AF_INET6, &a, text, sizeof text);
    }
    return std::string(text);
}

/// Digits only, or "0x" and hex digits: a label inet_aton would read as a number.
bool numeric_label(std::string_view l) {
    if (l.size() >= 2 && l[0] == '0' && (l[1] == 'x' || l[1] == 'X'))
        return std::all_of(l.begin() + 2, l.end(), hex_digit);
    return !l.empty() && std::all_of(l.begin(), l.end(), [](char c) {
        return std::isdigit(static_cast<unsigned char>(c)) != 0;
    });
}

bool name_byte(char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '-' || c == '_' || c == '.';
}

/// Why byte `c` (not a name byte) has no place in a host.
std::string bad_byte(unsigned char c) {
    if (c == 0) return "it holds a NUL byte";
    if (c < 0x20 || c == 0x7f) return fmt::format("it holds the control byte 0x{:02x}", c);
    if (c >= 0x80)
        return "it holds non-ASCII bytes: an internationalised name must come in its A-label "
               "(punycode) form, \"xn--…\"";
    if (c == ' ') return "it holds a space";
    return fmt::format("it holds '{}', which no host name has", static_cast<char>(c));
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

std::string printable_host(std::string_view raw) {
    std::string out;
    for (const char ch : raw.substr(0, 100)) {
        const auto c = static_cast<unsigned char>(ch);
        if (c >= 0x21 && c < 0x7f && c != '\\')
            out += ch;
        else
            out += fmt::format("\\x{:02x}", c);
    }
    if (raw.size() > 100) out += "…";
    return out;
}

std::optional<host_name> canonical_host(std::string_view raw, std::string& why) {
    auto refuse = [&](std::string reason) -> std::optional<host_name> {
        why = fmt::format("\"{}\" is no host name or IP address: {}", printable_host(raw),
                          std::move(reason));
        return std::nullopt;
    };
    if (raw.empty()) {
        why = "the host is empty";
        return std::nullopt;
    }
    if (raw.front() == '[') {
        if (raw.size() < 2 || raw.back() != ']')
            return refuse("an IPv6 address in brackets needs its ']'");
        if (auto v6 = ipv6_text(raw.substr(1, raw.size() - 2))) return host_name{*v6, true};
        return refuse("only an IPv6 address (without a zone) goes in brackets");
    }
    for (const char c : raw)
        if (!name_byte(c) && c != ':') return refuse(bad_byte(static_cast<unsigned char>(c)));
    if (raw.find(':') != std::string_view::npos) {
        if (auto v6 = ipv6_text(raw)) return host_name{*v6, true};
        return refuse("it holds ':' and is no IPv6 address");
    }
    std::string name(raw);
    for (auto& c : name)
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (name.back() == '.') name.pop_back();
    if (name.empty()) return refuse("it has no label");
    if (name.size() > 253) return refuse("a name is at most 253 bytes");
    std::string_view last;
    for (std::size_t at = 0;;) {
        const auto dot = name.find('.', at);
        last = std::string_view(name).substr(at, dot == std::string::npos ? dot : dot - at);
        if (last.empty()) return refuse("it has an empty label");
        if (last.size() > 63) return refuse("a label is at most 63 bytes");
        if (dot == std::string::npos) break;
        at = dot + 1;
    }
    // What the resolver would read as an IPv4 address is that address (decided as one).
    in_addr v4{};
    if (::inet_aton(name.c_str(), &v4) != 0) {
        char text[INET_ADDRSTRLEN];
        ::inet_ntop(AF_INET, &v4, text, sizeof text);
        return host_name{text, true};
    }
    if (numeric_label(last)) return refuse("it looks like a numeric IPv4 address but is none");
    return host_name{std::move(name), false};
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
    if (host == "*") {
        r.any = true;
        return r;
    }
    if (host.starts_with("*.")) {
        r.wildcard = true;
        const auto suffix = canonical_host(host.substr(2), why);
        if (!suffix || suffix->literal) {
            why = "a wildcard is \"*.\" then a domain, e.g. \"*.npmjs.org\"" +
                  (suffix ? std::string(", not an address") : ": " + why);
            return std::nullopt;
        }
        r.host = suffix->text;
        return r;
    }
    auto h = canonical_host(host, why);
    if (!h) {
        why = "a rule is a host name, \"*.domain\", \"*\" or an IP address, with an optional "
              ":PORT: " +
              why;
        return std::nullopt;
    }
    r.host = std::move(h->text);
    r.literal = h->literal;
    return r;
}

std::optional<std::string> exact_rule(std::string_view host, std::uint16_t port, std::string& why) {
    const auto h = canonical_host(host, why);
    if (!h) return std::nullopt;
    if (h->text != host) {
        why = fmt::format("\"{}\" is not in its canonical form \"{}\"", printable_host(host),
                          h->text);
        return std::nullopt;
    }
    if (port == 0) {
        why = "port 0 is no port";
        return std::nullopt;
    }
    const bool v6 = host.find(':') != std::string_view::npos;
    std::string text = fmt::format("{}{}{}:{}", v6 ? "[" : "", host, v6 ? "]" : "", port);
    const auto r = parse_rule(text, why);
    if (!r || r->any || r->wildcard || r->host != host || r->port != port) {
        if (r) why = fmt::format("\"{}\" reads back as another rule", text);
        return std::nullopt;
    }
    return text;
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
