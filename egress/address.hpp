// address: which addresses meith's own connections may reach: a remote MCP source's
// (docs/security.md, "Remote MCP servers") and the egress proxy's (docs/protocol.md §19). A
// request to a loopback, private, link-local, shared (CGNAT), multicast,
// unspecified or cloud-metadata address is refused unless the source says
// `allow_private_network = true`; the check runs on the address actually connected to, after
// DNS resolution and for every connection a redirect opens (http_client's open-socket hook),
// so a name that resolves (or rebinds) to 127.0.0.1 is refused as the literal address is.
#pragma once

#include <string_view>

struct sockaddr;

namespace meith::egress {

/// The kind of special-use address `addr` is ("loopback", "private", "link-local",
/// "cloud metadata", "shared (CGNAT)", "multicast", "unspecified", "reserved",
/// "unique-local"), or an empty view for an ordinary public address. IPv4-mapped and NAT64
/// (64:ff9b::/96) IPv6 addresses are judged by their IPv4 address; the deprecated
/// IPv4-compatible form (::a.b.c.d, RFC 4291 §2.5.5.1) is "reserved" unless its IPv4 address is
/// special itself (RFC 6890 registries). Non-IP families are "not IP".
std::string_view special_address_kind(const sockaddr* addr);

/// Whether `addr` (AF_INET or AF_INET6; IPv4-mapped judged as IPv4) is assigned to one of this
/// machine's interfaces: a service bound to 0.0.0.0 answers there. From getifaddrs, read again
/// at most once a second; false when it fails. Thread-safe.
bool is_own_address(const sockaddr* addr);

} // namespace meith::egress
