#include "platform/peer.hpp"

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <fcntl.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace meith::platform {

namespace {

/// Descriptors kept open for the check, closed while it runs: a daemon out of descriptors
/// (limits, a flood of clients) can still tell who connected, instead of refusing everyone.
int reserve[2] = {-1, -1};

void release_reserve() {
    for (int& fd : reserve)
        if (fd >= 0) ::close(std::exchange(fd, -1));
}

void take_reserve() {
    for (int& fd : reserve)
        if (fd < 0) fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
}

/// The parent of `pid` from /proc/<pid>/stat; nullopt when it is gone or unreadable.
std::optional<pid_t> parent_of(pid_t pid) {
    char path[32];
    std::snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid));
    const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return std::nullopt;
    char stat[1024]; // "pid (comm) state ppid ...": comm is at most 64 bytes
    const ssize_t n = ::read(fd, stat, sizeof stat - 1);
    ::close(fd);
    if (n <= 0) return std::nullopt;
    stat[n] = '\0';
    // comm may hold spaces and parentheses: the fields start after the last ')'.
    const char* close = std::strrchr(stat, ')');
    if (close == nullptr || close[1] != ' ' || close[2] == '\0') return std::nullopt;
    const char* ppid = std::strchr(close + 3, ' '); // past "state"
    if (ppid == nullptr) return std::nullopt;
    char* end = nullptr;
    const long v = std::strtol(ppid + 1, &end, 10);
    if (end == ppid + 1 || v < 0) return std::nullopt;
    return static_cast<pid_t>(v);
}

enum class lineage { descendant, other, unknown };

std::optional<std::string> lineage_problem(pid_t pid, int pidfd);

/// One walk up from `pid`: meithd reached, init reached, or a link vanished on the way.
lineage walk(pid_t pid) {
    const pid_t self = ::getpid();
    pid_t p = pid;
    for (int depth = 0; depth < 4096; ++depth) {
        if (p == self) return lineage::descendant;
        if (p <= 1) return lineage::other;
        const auto parent = parent_of(p);
        if (!parent) return lineage::unknown;
        p = *parent;
    }
    return lineage::unknown; // a loop of reused pids: fail closed
}

} // namespace

std::optional<peer_identity> peer_identity_of(int socket) {
    ucred cred{};
    socklen_t len = sizeof cred;
    if (::getsockopt(socket, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return std::nullopt;
    return peer_identity{cred.pid, cred.uid};
}

std::uint64_t accept_time() {
    timespec now{};
    ::clock_gettime(CLOCK_BOOTTIME, &now);
    const auto hz = static_cast<std::uint64_t>(::sysconf(_SC_CLK_TCK));
    return static_cast<std::uint64_t>(now.tv_sec) * hz +
           static_cast<std::uint64_t>(now.tv_nsec) * hz / 1'000'000'000;
}

std::optional<std::string> controlling_terminal_problem(pid_t pid, std::uint64_t accepted_ticks) {
    if (pid <= 0) return "the peer's process id is unknown";
    std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string stat = ss.str();
    // "pid (comm) state ppid pgrp session tty_nr ...": comm may hold spaces and parentheses,
    // so fields are counted after the last ')'.
    const auto close = stat.rfind(')');
    if (!in || close == std::string::npos) return "the peer process is gone";
    std::istringstream fields(stat.substr(close + 1));
    std::string field;
    std::vector<std::string> f; // f[0] = field 3 (state) ... f[19] = field 22 (starttime)
    while (f.size() < 20 && fields >> field)
        f.push_back(field);
    if (f.size() < 20) return "the peer process's status cannot be read";
    // The pid SO_PEERCRED gave names the process that connected only if that process started
    // before the connection was accepted (1 s of slack for rounding between the clocks).
    const auto hz = static_cast<std::uint64_t>(::sysconf(_SC_CLK_TCK));
    if (std::strtoull(f[19].c_str(), nullptr, 10) > accepted_ticks + hz)
        return "the process that connected is gone (its pid names a newer process)";
    if (std::strtol(f[4].c_str(), nullptr, 10) == 0)
        return "the peer process has no controlling terminal";
    return std::nullopt;
}

void become_subreaper() {
    if (::prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0)
        spdlog::warn("cannot become a child subreaper ({}): a tool's daemonised process could "
                     "connect to meithd unrecognised",
                     std::strerror(errno));
    take_reserve();
}

std::optional<std::string> tool_peer_problem(int socket, pid_t pid) {
    release_reserve();
    int pidfd = -1;
#if defined(SO_PEERPIDFD) || defined(__linux__)
#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77 // Linux 6.5
#endif
    socklen_t len = sizeof pidfd;
    if (::getsockopt(socket, SOL_SOCKET, SO_PEERPIDFD, &pidfd, &len) != 0) pidfd = -1;
#endif
    auto why = lineage_problem(pid, pidfd);
    if (pidfd >= 0) ::close(pidfd);
    take_reserve();
    return why;
}

namespace {

std::optional<std::string> lineage_problem(pid_t pid, int pidfd) {
    if (pid <= 0) return std::string("the peer's process id is unknown");
    lineage l = lineage::unknown;
    // A parent that exits during the walk re-parents its children (to a subreaper or init):
    // walk again from the peer, which is still there.
    for (int attempt = 0; attempt < 3 && l == lineage::unknown; ++attempt)
        l = walk(pid);
    if (pidfd >= 0 && ::syscall(SYS_pidfd_send_signal, pidfd, 0, nullptr, 0) != 0)
        return fmt::format("the process that connected (pid {}) is gone", pid);
    switch (l) {
    case lineage::descendant:
        return fmt::format("pid {} is a process meithd started (a tool, or a process of a tool's)",
                           pid);
    case lineage::unknown:
        return fmt::format("the ancestry of pid {} cannot be read", pid);
    case lineage::other:
        break;
    }
    return std::nullopt;
}

} // namespace

} // namespace meith::platform
