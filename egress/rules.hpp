// rules: a source's egress allow- and deny-list (`network = { allow = [...], deny = [...] }`,
// docs/protocol.md §19). A rule is HOST or HOST:PORT: a DNS name ("api.github.com"), a
// wildcard for its subdomains ("*.npmjs.org": registry.npmjs.org, not npmjs.org), "*" for any
// name, or an IP literal ("203.0.113.7", "[2001:db8::1]:443") that allows that address only.
// No port: any port. Deny rules win over allow rules. Names compare case-insensitively,
// without a trailing dot.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace meith::egress {

struct rule {
    std::string text;       ///< as written in the config
    std::string host;       ///< lower-case; for a wildcard the suffix after "*."; "" for "*"
    bool wildcard = false;  ///< "*.suffix"
    bool any = false;       ///< "*"
    bool literal = false;   ///< an IP address
    std::uint16_t port = 0; ///< 0: any port

    bool matches(std::string_view host, std::uint16_t port) const;
};

/// Parses one rule; nullopt, with `why` in words, when it is not one. Its host is checked as
/// canonical_host checks a connection's: "0xcb.0.113.7" is the literal 203.0.113.7 (`text`
/// keeps what was written), "1.2.3.4.5" or "bücher.example" is no rule.
std::optional<rule> parse_rule(std::string_view text, std::string& why);

/// `host` lower-cased, without a trailing dot and IPv6 brackets (no check: canonical_host).
std::string normal_host(std::string_view host);

/// A host as canonical_host gives it.
struct host_name {
    std::string text;     ///< lower-case name without trailing dot; canonical IP (v6 unbracketed)
    bool literal = false; ///< an IP address
};

/// `raw` (a connection's or a rule's host) as exactly one DNS name or one IP literal, or
/// nullopt with `why` in words. A name: '.'-separated labels of 1-63 letters, digits, '-', '_'
/// (253 bytes at most, one trailing dot allowed), lower-cased; never a NUL, control byte,
/// space or other punctuation, nor a non-ASCII byte (an internationalised name comes as its
/// A-label, "xn--…"). An address: whatever inet_aton takes ("3405803783", "0xcb.0.113.7",
/// "127.1") becomes its dotted quad, an IPv6 address ("::1", "[::1]", no zone) its inet_ntop
/// text, IPv4-mapped IPv6 its IPv4 address. A name whose last label is numeric and that is no
/// address ("1.2.3.4.5", "999.1.1.1", "0x1g.1") is refused.
std::optional<host_name> canonical_host(std::string_view raw, std::string& why);

/// `raw` for messages and audit lines: printable ASCII as is, other bytes as \xNN, at most
/// 100 bytes of `raw` shown ("…" after).
std::string printable_host(std::string_view raw);

/// The rule naming exactly `host`:`port` ("host:443", "[2001:db8::1]:443"), as a person's
/// "allow always" writes it; nullopt, with `why`, unless `host` is canonical (canonical_host)
/// and parse_rule reads the text back as a rule of exactly that host and port.
std::optional<std::string> exact_rule(std::string_view host, std::uint16_t port, std::string& why);

struct rule_set {
    std::vector<rule> allow, deny;
    /// Names may resolve to loopback, private, link-local and metadata addresses.
    bool allow_private = false;
    /// A target no rule decides is asked about (proxy_options::ask) instead of refused.
    bool ask = false;

    /// The first deny rule matching, else the first allow rule matching, with `denied` set
    /// accordingly; nullptr when none matches (refused: not allowed).
    const rule* decide(std::string_view host, std::uint16_t port, bool& denied) const;
};

} // namespace meith::egress
