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

/// Parses one rule; nullopt, with `why` in words, when it is not one.
std::optional<rule> parse_rule(std::string_view text, std::string& why);

/// `host` lower-cased, without a trailing dot and IPv6 brackets.
std::string normal_host(std::string_view host);

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
