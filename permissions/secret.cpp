#include "permissions/secret.hpp"

#include <cerrno>
#include <system_error>
#include <vector>

#include <sys/random.h>

namespace meith::permissions {

std::string random_hex(std::size_t bytes) {
    std::vector<unsigned char> buf(bytes);
    std::size_t got = 0;
    while (got < bytes) {
        const auto n = ::getrandom(buf.data() + got, bytes - got, 0);
        if (n > 0)
            got += static_cast<std::size_t>(n);
        else if (errno != EINTR)
            throw std::system_error(errno, std::generic_category(), "getrandom");
    }
    static constexpr char hex[] = "0123456789abcdef";
    std::string out;
    out.reserve(2 * bytes);
    for (unsigned char b : buf) {
        out.push_back(hex[b >> 4]);
        out.push_back(hex[b & 0xF]);
    }
    return out;
}

bool constant_time_equal(std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    unsigned char diff = 0;
    for (std::size_t i = 0; i < a.size(); ++i)
        diff = static_cast<unsigned char>(diff | (a[i] ^ b[i]));
    return diff == 0;
}

} // namespace meith::permissions
