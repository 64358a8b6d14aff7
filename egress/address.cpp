// egress: the special-use address table (IANA IPv4/IPv6 Special-Purpose Address Registries,
// RFC 6890) as far as a request to a remote MCP server must not reach it by default.
#include "egress/address.hpp"

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>
#include <cstring>

namespace meith::egress {

namespace {

std::string_view ipv4_kind(std::uint32_t a) { // host byte order
    auto in = [a](std::uint32_t net, int bits) {
        const std::uint32_t mask = bits == 0 ? 0 : ~std::uint32_t{0} << (32 - bits);
        return (a & mask) == net;
    };
    if (a == 0xA9FEA9FE) return "cloud metadata"; // 169.254.169.254
    if (in(0x00000000, 8)) return "unspecified";  // 0.0.0.0/8
    if (in(0x7F000000, 8)) return "loopback";     // 127.0.0.0/8
    if (in(0x0A000000, 8) || in(0xAC100000, 12) || in(0xC0A80000, 16)) return "private";
    if (in(0xA9FE0000, 16)) return "link-local";     // 169.254.0.0/16
    if (in(0x64400000, 10)) return "shared (CGNAT)"; // 100.64.0.0/10
    if (in(0xC0000000, 24)) return "reserved";       // 192.0.0.0/24 (IETF protocol assignments)
    if (in(0xC6120000, 15)) return "reserved";       // 198.18.0.0/15 (benchmarking)
    if (in(0xE0000000, 4)) return "multicast";       // 224.0.0.0/4
    if (in(0xF0000000, 4)) return "reserved";        // 240.0.0.0/4, broadcast
    return {};
}

} // namespace

std::string_view special_address_kind(const sockaddr* addr) {
    if (addr == nullptr) return "not IP";
    if (addr->sa_family == AF_INET) {
        sockaddr_in in{};
        std::memcpy(&in, addr, sizeof in);
        return ipv4_kind(ntohl(in.sin_addr.s_addr));
    }
    if (addr->sa_family != AF_INET6) return "not IP";
    sockaddr_in6 in6{};
    std::memcpy(&in6, addr, sizeof in6);
    const std::uint8_t* b = in6.sin6_addr.s6_addr;
    auto zero = [b](int from, int to) {
        for (int i = from; i < to; ++i)
            if (b[i] != 0) return false;
        return true;
    };
    auto v4_at_12 = [b] {
        return std::uint32_t{b[12]} << 24 | std::uint32_t{b[13]} << 16 | std::uint32_t{b[14]} << 8 |
               std::uint32_t{b[15]};
    };
    if (zero(0, 15) && b[15] == 1) return "loopback"; // ::1
    if (zero(0, 16)) return "unspecified";            // ::
    if (zero(0, 10) && b[10] == 0xff && b[11] == 0xff) {
        const auto k = ipv4_kind(v4_at_12()); // ::ffff:a.b.c.d
        return k.empty() ? std::string_view{} : k;
    }
    if (zero(0, 12)) return ipv4_kind(v4_at_12()).empty() ? "reserved" : ipv4_kind(v4_at_12());
    // 64:ff9b::/96 (NAT64) carries an IPv4 address too.
    if (b[0] == 0x00 && b[1] == 0x64 && b[2] == 0xff && b[3] == 0x9b && zero(4, 12))
        return ipv4_kind(v4_at_12());
    // fd00:ec2::254, the AWS metadata service's IPv6 address, before unique-local.
    if (b[0] == 0xfd && b[1] == 0x00 && b[2] == 0x0e && b[3] == 0xc2 && zero(4, 14) &&
        b[14] == 0x02 && b[15] == 0x54)
        return "cloud metadata";
    if ((b[0] & 0xfe) == 0xfc) return "unique-local";               // fc00::/7
    if (b[0] == 0xfe && (b[1] & 0xc0) == 0x80) return "link-local"; // fe80::/10
    if (b[0] == 0xff) return "multicast";                           // ff00::/8
    return {};
}

} // namespace meith::egress
