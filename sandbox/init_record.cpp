// init_record: what a learning run does, recorded by meith-sandbox-init (see the header).
#include "sandbox/init_record.hpp"

#include "sandbox/fd_passing.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <unordered_set>

#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/seccomp.h>
#include <netinet/in.h>
#include <seccomp.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

namespace meith::sandbox {

namespace {

/// Where each recorded system call keeps what it names: a path at `path` (relative to the
/// folder fd at `dir`, or none: -1), a sockaddr at `addr` with its length at `addr + 1`.
enum class kind { write, exec, connect, bind, sendto, sendmmsg };
struct watched {
    int nr;
    kind what;
    int dir, path;   ///< argument indexes; -1: none
    int dir2, path2; ///< a second path (rename's target, link's new name); -1: none
};

const std::array watched_calls = {
#ifdef __NR_open
    watched{SCMP_SYS(open), kind::write, -1, 0, -1, -1},
    watched{SCMP_SYS(creat), kind::write, -1, 0, -1, -1},
    watched{SCMP_SYS(mkdir), kind::write, -1, 0, -1, -1},
    watched{SCMP_SYS(rmdir), kind::write, -1, 0, -1, -1},
    watched{SCMP_SYS(unlink), kind::write, -1, 0, -1, -1},
    watched{SCMP_SYS(rename), kind::write, -1, 0, -1, 1},
    watched{SCMP_SYS(symlink), kind::write, -1, 1, -1, -1},
    watched{SCMP_SYS(link), kind::write, -1, 1, -1, -1},
    watched{SCMP_SYS(mknod), kind::write, -1, 0, -1, -1},
#endif
    watched{SCMP_SYS(openat), kind::write, 0, 1, -1, -1},
    watched{SCMP_SYS(mkdirat), kind::write, 0, 1, -1, -1},
    watched{SCMP_SYS(unlinkat), kind::write, 0, 1, -1, -1},
    watched{SCMP_SYS(renameat), kind::write, 0, 1, 2, 3},
    watched{SCMP_SYS(renameat2), kind::write, 0, 1, 2, 3},
    watched{SCMP_SYS(symlinkat), kind::write, 1, 2, -1, -1},
    watched{SCMP_SYS(linkat), kind::write, 2, 3, -1, -1},
    watched{SCMP_SYS(mknodat), kind::write, 0, 1, -1, -1},
    watched{SCMP_SYS(truncate), kind::write, -1, 0, -1, -1},
    watched{SCMP_SYS(execve), kind::exec, -1, 0, -1, -1},
    watched{SCMP_SYS(execveat), kind::exec, 0, 1, -1, -1},
    watched{SCMP_SYS(connect), kind::connect, -1, -1, -1, -1},
    watched{SCMP_SYS(bind), kind::bind, -1, -1, -1, -1},
    watched{SCMP_SYS(sendto), kind::sendto, -1, -1, -1, -1},
    watched{SCMP_SYS(sendmmsg), kind::sendmmsg, -1, -1, -1, -1},
};

[[noreturn]] void die(const char* what) {
    std::fprintf(stderr, "meith-sandbox-init: %s: %s\n", what, std::strerror(errno));
    std::_Exit(127);
}

/// Reads `len` bytes at `addr` of the process whose memory is `mem`; false when unmapped.
bool read_at(int mem, std::uint64_t addr, void* out, std::size_t len) {
    return addr != 0 &&
           ::pread(mem, out, len, static_cast<off_t>(addr)) == static_cast<ssize_t>(len);
}

/// The NUL-terminated string at `addr` (at most PATH_MAX bytes), read page by page so that a
/// string ending before an unmapped page is still read.
std::string read_string(int mem, std::uint64_t addr) {
    std::string out;
    char buf[4096];
    while (addr != 0 && out.size() < 4096) {
        const std::size_t chunk = 4096 - (addr % 4096);
        const ssize_t n = ::pread(mem, buf, chunk, static_cast<off_t>(addr));
        if (n <= 0) break;
        const auto* end = static_cast<const char*>(std::memchr(buf, '\0', n));
        out.append(buf, end != nullptr ? end - buf : n);
        if (end != nullptr) return out;
        addr += n;
    }
    return {};
}

std::string read_link(const std::string& path) {
    char buf[4096];
    const ssize_t n = ::readlink(path.c_str(), buf, sizeof buf);
    return n > 0 ? std::string(buf, n) : std::string();
}

/// `path` as the process `tid` means it: absolute, from its cwd or the folder `dirfd` names.
std::string absolute(pid_t tid, std::int64_t dirfd, std::string path) {
    if (path.empty() || path[0] == '/') return path;
    const std::string proc = "/proc/" + std::to_string(tid);
    const std::string base =
        static_cast<int>(dirfd) == AT_FDCWD
            ? read_link(proc + "/cwd")
            : read_link(proc + "/fd/" + std::to_string(static_cast<int>(dirfd)));
    if (base.empty() || base[0] != '/') return {};
    return base == "/" ? "/" + path : base + "/" + path;
}

/// The sockaddr at `addr` (`len` bytes) as a record line without its kind: a Unix path
/// (`@NAME` when abstract) or ADDR:PORT. Empty for other families.
std::string describe_address(int mem, std::uint64_t addr, std::uint64_t len, bool& unix_path) {
    sockaddr_storage sa{};
    len = std::min<std::uint64_t>(len, sizeof sa);
    if (len < sizeof(sa_family_t) || !read_at(mem, addr, &sa, len)) return {};
    unix_path = sa.ss_family == AF_UNIX;
    if (sa.ss_family == AF_UNIX) {
        const auto& un = reinterpret_cast<const sockaddr_un&>(sa);
        const std::size_t n = len - offsetof(sockaddr_un, sun_path);
        if (n == 0 || n > sizeof un.sun_path) return {};
        if (un.sun_path[0] == '\0') return "@" + std::string(un.sun_path + 1, n - 1);
        return std::string(un.sun_path, strnlen(un.sun_path, n));
    }
    char text[INET6_ADDRSTRLEN] = {};
    if (sa.ss_family == AF_INET) {
        const auto& in = reinterpret_cast<const sockaddr_in&>(sa);
        ::inet_ntop(AF_INET, &in.sin_addr, text, sizeof text);
        return std::string(text) + ":" + std::to_string(ntohs(in.sin_port));
    }
    if (sa.ss_family == AF_INET6) {
        const auto& in6 = reinterpret_cast<const sockaddr_in6&>(sa);
        ::inet_ntop(AF_INET6, &in6.sin6_addr, text, sizeof text);
        return "[" + std::string(text) + "]:" + std::to_string(ntohs(in6.sin6_port));
    }
    return {};
}

/// The name a DNS query (RFC 1035 §4.1: a header with QR = 0, one question, no answers)
/// asks for; empty when `msg` is no such query.
std::string dns_question(const unsigned char* msg, std::size_t len) {
    if (len < 17 || (msg[2] & 0x80) != 0 || msg[4] != 0 || msg[5] != 1 || msg[6] != 0 ||
        msg[7] != 0)
        return {};
    std::string name;
    std::size_t at = 12;
    while (at < len && msg[at] != 0) {
        const std::size_t label = msg[at];
        if (label > 63 || at + 1 + label >= len) return {};
        if (!name.empty()) name += '.';
        for (std::size_t i = 0; i < label; ++i) {
            const char ch = static_cast<char>(msg[at + 1 + i]);
            if (!(std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' || ch == '_'))
                return {};
            name += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
        }
        at += 1 + label;
    }
    // The root label, then QTYPE and QCLASS (IN).
    if (at + 5 > len || msg[at + 3] != 0 || msg[at + 4] != 1) return {};
    return name;
}

/// The distinct lines recorded so far, and whether the bound was reached.
struct record_state {
    std::unordered_set<std::string> seen;
    std::size_t bytes = 0;
    bool truncated = false;
};

record_state& state() {
    static record_state s;
    return s;
}

void record(int fd, char what, const std::string& value) {
    if (value.empty() || value.find('\n') != std::string::npos) return;
    auto& s = state();
    if (s.truncated) return;
    std::string line = std::string(1, what) + " " + value + "\n";
    if (s.seen.contains(line)) return;
    if (s.seen.size() >= record_max_lines || s.bytes + line.size() > record_max_bytes) {
        s.truncated = true;
        line = "! truncated\n";
    } else {
        s.bytes += line.size();
        s.seen.insert(line);
    }
    while (::write(fd, line.data(), line.size()) < 0 && errno == EINTR) {
    }
}

/// What one notification names, recorded.
void record_call(const seccomp_notif& req, int mem, int fd) {
    const auto* w = [&]() -> const watched* {
        for (const auto& c : watched_calls)
            if (c.nr == req.data.nr) return &c;
        return nullptr;
    }();
    if (w == nullptr) return;
    const auto* a = req.data.args;
    const pid_t tid = static_cast<pid_t>(req.pid);
    const auto path_at = [&](int dir, int path) {
        if (path < 0) return std::string();
        std::string p = read_string(mem, a[path]);
        // execveat(fd, "", AT_EMPTY_PATH): the program is the descriptor itself.
        if (p.empty() && dir >= 0)
            return read_link("/proc/" + std::to_string(tid) + "/fd/" +
                             std::to_string(static_cast<int>(a[dir])));
        return absolute(tid, dir >= 0 ? static_cast<std::int64_t>(a[dir]) : AT_FDCWD, p);
    };
    switch (w->what) {
    case kind::write:
        record(fd, 'w', path_at(w->dir, w->path));
        record(fd, 'w', path_at(w->dir2, w->path2));
        return;
    case kind::exec:
        record(fd, 'x', path_at(w->dir, w->path));
        return;
    case kind::connect:
    case kind::bind: {
        bool unix_path = false;
        const std::string where = describe_address(mem, a[1], a[2], unix_path);
        if (unix_path)
            record(fd, w->what == kind::bind ? 'w' : 'u',
                   where.starts_with("@") ? where : absolute(tid, AT_FDCWD, where));
        else if (w->what == kind::connect && !where.ends_with(":53")) // a resolver: see 'd'
            record(fd, 'n', where);
        return;
    }
    case kind::sendto:
    case kind::sendmmsg: {
        std::uint64_t buf = a[1], len = a[2];
        if (w->what == kind::sendmmsg) { // the first message's first buffer
            mmsghdr m{};
            iovec iov{};
            if (a[2] == 0 || !read_at(mem, a[1], &m, sizeof m) || m.msg_hdr.msg_iovlen == 0 ||
                !read_at(mem, reinterpret_cast<std::uint64_t>(m.msg_hdr.msg_iov), &iov, sizeof iov))
                return;
            buf = reinterpret_cast<std::uint64_t>(iov.iov_base);
            len = iov.iov_len;
        }
        unsigned char msg[512];
        len = std::min<std::uint64_t>(len, sizeof msg);
        if (len >= 17 && read_at(mem, buf, msg, len)) record(fd, 'd', dns_question(msg, len));
        return;
    }
    }
}

} // namespace

void install_record_filter(int sock) {
    scmp_filter_ctx ctx = ::seccomp_init(SCMP_ACT_ALLOW);
    if (ctx == nullptr) die("cannot make the recording filter");
    for (const auto& c : watched_calls) {
        // open and openat only when they may write: read-only opens are most of a program's.
        int flag_arg = -1;
        if (c.nr == SCMP_SYS(openat)) flag_arg = 2;
#ifdef __NR_open
        if (c.nr == SCMP_SYS(open)) flag_arg = 1;
#endif
        if (flag_arg < 0) {
            ::seccomp_rule_add(ctx, SCMP_ACT_NOTIFY, c.nr, 0); // absent on this arch: skipped
            continue;
        }
        for (const scmp_datum_t bit : {scmp_datum_t(O_WRONLY), scmp_datum_t(O_RDWR),
                                       scmp_datum_t(O_CREAT), scmp_datum_t(O_TRUNC)})
            ::seccomp_rule_add(
                ctx, SCMP_ACT_NOTIFY, c.nr, 1,
                SCMP_CMP(static_cast<unsigned>(flag_arg), SCMP_CMP_MASKED_EQ, bit, bit));
    }
    if (::seccomp_load(ctx) != 0) die("cannot install the recording filter");
    const int listener = ::seccomp_notify_fd(ctx);
    if (listener < 0 || send_fd(sock, listener) != 0) die("cannot hand over the recording filter");
    ::close(listener);
    ::seccomp_release(ctx);
}

void answer_recorded(int listener, int record_fd) {
    seccomp_notif req{};
    seccomp_notif_resp resp{};
    if (::ioctl(listener, SECCOMP_IOCTL_NOTIF_RECV, &req) != 0) return; // gone meanwhile
    const std::string mem_path = "/proc/" + std::to_string(req.pid) + "/mem";
    const int mem = ::open(mem_path.c_str(), O_RDONLY | O_CLOEXEC);
    // Still the call it was (its id valid) while its memory is read: a thread that died
    // meanwhile, or a pid reused, reads as nothing.
    if (mem >= 0 && ::ioctl(listener, SECCOMP_IOCTL_NOTIF_ID_VALID, &req.id) == 0)
        record_call(req, mem, record_fd);
    if (mem >= 0) ::close(mem);
    resp.id = req.id;
    resp.flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
    ::ioctl(listener, SECCOMP_IOCTL_NOTIF_SEND, &resp); // ENOENT: the caller is gone
}

} // namespace meith::sandbox
