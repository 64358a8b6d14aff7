#include "platform/self.hpp"

#include <system_error>

#include <sys/stat.h>
#include <unistd.h>

namespace meith::platform {

std::filesystem::path executable_path() {
    std::error_code ec;
    auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
    return ec ? std::filesystem::path() : self;
}

std::filesystem::path installed_program(std::string_view name) {
    const auto self = executable_path();
    if (self.empty()) return {};
    const auto dir = self.parent_path();
    for (const auto& p :
         {dir / name, dir / "../libexec/meith" / name, dir / "../lib/meith" / name}) {
        struct stat st {};
        if (::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(p.c_str(), X_OK) == 0)
            return p.lexically_normal();
    }
    return {};
}

} // namespace meith::platform
