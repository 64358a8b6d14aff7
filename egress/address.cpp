// egress: the special-use address table (IANA IPv4/IPv6 Special-Purpose Address Registries,
// RFC 6890) as far as a request to a remote MCP server must not reach it by default.
#include "egress/address.hpp"

#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <vector>

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

/// An address as 16 bytes: IPv6, or IPv4 in its IPv4-mapped form; false for other families.
bool as_v6(const sockaddr* addr, std::array<std::uint8_t, 16>& out) {
    if (addr == nullptr) return false;
    if (addr->sa_family == AF_INET) {
        sockaddr_in in{};
        std::memcpy(&in, addr, sizeof in);
        out = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
        std::memcpy(out.data() + 12, &in.sin_addr, 4);
        return true;
    }
    if (addr->sa_family == AF_INET6) {
        sockaddr_in6 in6{};
        std::memcpy(&in6, addr, sizeof in6);
        std::memcpy(out.data(), in6.sin6_addr.s6_addr, 16);
        return true;
    }
    return false;
}

} // namespace

bool is_own_address(const sockaddr* addr) {
    std::array<std::uint8_t, 16> wanted{};
    if (!as_v6(addr, wanted)) return false;
    static std::mutex m;
    static std::vector<std::array<std::uint8_t, 16>> own;
    static std::chrono::steady_clock::time_point read_at;
    static bool read = false;
    std::lock_guard lock(m);
    const auto now = std::chrono::steady_clock::now();
    if (!read || now - read_at >= std::chrono::seconds(1)) {
        read = true;
        read_at = now;
        own.clear();
        ifaddrs* list = nullptr;
        if (::getifaddrs(&list) == 0) {
            // The loopback interface's addresses are not counted: 127.0.0.0/8 and ::1 are
            // "loopback" by the table already, and another address put on lo (a test host's
            // 203.0.113.5, an anycast service address) is served by that host, not a way in.
            for (auto* i = list; i != nullptr; i = i->ifa_next) {
                std::array<std::uint8_t, 16> a{};
                if ((i->ifa_flags & IFF_LOOPBACK) == 0 && as_v6(i->ifa_addr, a)) own.push_back(a);
            }
            ::freeifaddrs(list);
        }
    }
    for (const auto& a : own)
        if (a == wanted) return true;
    return false;
}

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
