#include "sandbox/limits.hpp"

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <string_view>
#include <sys/stat.h>
#include <unistd.h>

namespace meith::sandbox {

namespace {

/// meithd's own group in the v1 hierarchy `controller` (from /proc/self/cgroup), as a folder
/// under /sys/fs/cgroup/CONTROLLER; empty when there is none or it is not writable.
std::string own_group(std::string_view controller) {
    std::ifstream in("/proc/self/cgroup");
    std::string line;
    while (std::getline(in, line)) {
        // "4:memory:/process_api/x" (v1) or "0::/user.slice/..." (v2, not used here)
        const auto a = line.find(':');
        const auto b = a == std::string::npos ? a : line.find(':', a + 1);
        if (b == std::string::npos) continue;
        const std::string_view list(line.data() + a + 1, b - a - 1);
        bool named = false;
        for (std::size_t at = 0; at <= list.size();) {
            const auto comma = list.find(',', at);
            const auto item = list.substr(at, comma == std::string_view::npos ? comma : comma - at);
            if (item == controller) named = true;
            if (comma == std::string_view::npos) break;
            at = comma + 1;
        }
        if (!named) continue;
        const std::string dir = "/sys/fs/cgroup/" + std::string(controller) + line.substr(b + 1);
        struct stat st {};
        const std::string procs = dir + "/cgroup.procs";
        if (::stat(procs.c_str(), &st) != 0 || ::access(dir.c_str(), W_OK) != 0) return {};
        return dir;
    }
    return {};
}

bool write_value(const std::string& file, const std::string& value) {
    const int fd = ::open(file.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) return false;
    const bool ok = ::write(fd, value.data(), value.size()) == static_cast<ssize_t>(value.size());
    ::close(fd);
    return ok;
}

/// Makes `parent/name` with `file` set to `value`; its cgroup.procs opened for writing.
int make_group(const std::string& parent, const std::string& name, const std::string& file,
               const std::string& value, std::string& dir) {
    if (parent.empty()) return -1;
    dir = parent + "/" + name;
    if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
        dir.clear();
        return -1;
    }
    const int fd = write_value(dir + "/" + file, value)
                       ? ::open((dir + "/cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC)
                       : -1;
    if (fd < 0) {
        ::rmdir(dir.c_str());
        dir.clear();
    }
    return fd;
}

/// Removes the groups of meithds that are gone ("meith-PID" folders under `parent` whose PID
/// no longer runs, with their plan groups): a daemon killed, or one that exited without
/// destroying its plans, leaves them. Then makes this daemon's own; its path, or empty.
std::string daemon_group(const std::string& parent) {
    if (parent.empty()) return {};
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(parent, ec)) {
        const std::string name = entry.path().filename().string();
        if (!name.starts_with("meith-") || !entry.is_directory(ec)) continue;
        const long pid = std::strtol(name.c_str() + 6, nullptr, 10);
        if (pid <= 0 || name.find('-', 6) != std::string::npos ||
            (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH)) {
            for (const auto& child : std::filesystem::directory_iterator(entry.path(), ec))
                if (child.is_directory(ec)) ::rmdir(child.path().c_str());
            ::rmdir(entry.path().c_str()); // EBUSY while a process is left in it: kept
        }
    }
    const std::string mine = parent + "/meith-" + std::to_string(::getpid());
    if (::mkdir(mine.c_str(), 0755) != 0 && errno != EEXIST) return {};
    return mine;
}

} // namespace

limit_group::limit_group(const std::string& name, const resource_limits& l) {
    static const std::string pids_parent = daemon_group(own_group("pids"));
    static const std::string memory_parent = daemon_group(own_group("memory"));
    if (l.processes != 0)
        pids_procs_fd =
            make_group(pids_parent, name, "pids.max", std::to_string(l.processes), pids_dir_);
    if (l.memory_bytes != 0)
        memory_procs_fd = make_group(memory_parent, name, "memory.limit_in_bytes",
                                     std::to_string(l.memory_bytes), memory_dir_);
    controllers = pids_procs_fd >= 0 && memory_procs_fd >= 0 ? "pids,memory"
                  : pids_procs_fd >= 0                       ? "pids"
                  : memory_procs_fd >= 0                     ? "memory"
                                                             : "none";
}

limit_group::~limit_group() {
    for (int fd : {pids_procs_fd, memory_procs_fd})
        if (fd >= 0) ::close(fd);
    for (const auto* dir : {&pids_dir_, &memory_dir_})
        if (!dir->empty()) ::rmdir(dir->c_str()); // EBUSY while processes remain: left behind
}

} // namespace meith::sandbox
