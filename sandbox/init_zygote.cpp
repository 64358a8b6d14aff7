// meith-sandbox-init --zygote: a source's sandbox prepared once (docs/protocol.md §15
// "Zygote"). meithd starts it as it starts any confined child — its user, mount and IPC
// namespaces entered, the mounts made, the cgroup joined — but keeps CAP_SYS_ADMIN in its
// user namespace (restrict.hpp keep_namespace_admin) in place of the rest of the
// confinement, and gives it the rest to apply to each run:
//
//   meith-sandbox-init --zygote --control-fd=N [--ruleset-fd=N] [--seccomp=HEX]
//       [--rlimit-nproc=N] [--rlimit-data=N] [--proc] [--tmp=PATH --tmp-options=OPTS]
//       [--exec-once] [--net [--listen=PORT...]] [--pin=PATH...] [--protect=PATH...]
//       [--hide-dir=PATH...] [--hide-file=PATH... --empty-file=PATH]
//
// It is the PID 1 of its PID namespace, not dumpable, and runs nothing of a tool's. On the
// control socket (SOCK_SEQPACKET) each message asks for one run: four descriptors (the run's
// stdin, stdout, stderr and its channel to meithd) and
//   u32 argc, u32 envc, then NUL-terminated: PROGRAM (absolute), CWD ("" for /), argv..., env...
// For each it clones a run init into fresh PID, IPC and mount namespaces (a copy of the
// prepared tree: no mount of it is made again), which mounts a /proc of its own and a fresh
// tmpfs at --tmp (the run's TMPDIR), mounts again each pinned, protected or hidden path whose
// mount the host detached since (mount_steps.hpp: a file replaced by rename), takes the run's
// descriptors as 0-2, enters a session of
// its own, drops every capability and applies the rlimits, the Landlock ruleset and the
// seccomp filter (the same restrict_self as meithd's direct start) — with --net, in a network
// namespace of its own too, loopback up and a listener on 127.0.0.1:PORT for each --listen (the
// egress proxy's, then the forwarded ports), each sent to meithd on the channel — and then is the
// run's init (run_tool: exec-once, reaping, the status on the channel). When it exits the kernel
// ends every process of the run, and its namespaces go with it: nothing of one run is left
// for the next. EOF on the control socket (meithd stopped it, or is gone) ends the zygote and
// with it every run.
#include "sandbox/fd_passing.hpp"
#include "sandbox/init_run.hpp"
#include "sandbox/mount_steps.hpp"
#include "sandbox/restrict.hpp"

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <vector>

#include <arpa/inet.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

namespace meith::sandbox::init {

namespace {

struct zygote_options {
    int control = -1;
    restriction limits;
    std::vector<unsigned char> bpf;
    bool proc = false;
    const char* tmp = nullptr;
    const char* tmp_options = "";
    bool exec_once = false;
    bool net = false;                   ///< a network namespace per run
    std::vector<unsigned short> listen; ///< its listeners' ports, in order
    /// The plan's pinned folders, protected paths and hidden folders and files (enter()'s
    /// steps), checked again for every run; the empty file bound over hidden files.
    std::vector<const char*> pin, protect, hide_dir, hide_file;
    const char* empty_file = "";
};

/// One run's request, parsed in place: the pointers are into the message buffer.
struct run_request {
    int fds[4] = {-1, -1, -1, -1}; ///< stdin, stdout, stderr, channel
    const char* program = nullptr;
    const char* cwd = nullptr;
    std::vector<char*> argv, envp; ///< null-terminated
};

/// The request in `buf` (`n` bytes): false when it is not one (then nothing is started).
bool parse_request(char* buf, std::size_t n, run_request& q) {
    std::uint32_t argc = 0, envc = 0;
    if (n < 8 || buf[n - 1] != '\0') return false;
    std::memcpy(&argc, buf, 4);
    std::memcpy(&envc, buf + 4, 4);
    if (argc == 0 || argc > 65536 || envc > 65536) return false;
    std::vector<char*> strings;
    for (std::size_t at = 8; at < n;) {
        strings.push_back(buf + at);
        at += std::strlen(buf + at) + 1;
    }
    if (strings.size() != 2 + std::size_t{argc} + envc || strings[0][0] != '/') return false;
    q.program = strings[0];
    q.cwd = strings[1][0] != '\0' ? strings[1] : "/";
    q.argv.assign(strings.begin() + 2, strings.begin() + 2 + argc);
    q.argv.push_back(nullptr);
    q.envp.assign(strings.begin() + 2 + argc, strings.end());
    q.envp.push_back(nullptr);
    return true;
}

/// In the run init: says why it cannot run the tool on its stderr (the run's), reports the
/// exit status 127 on the channel, and exits.
[[noreturn]] void run_failed(int channel, const char* what, int code) {
    std::fprintf(stderr, "meith-sandbox-init: %s: %s\n", what, std::strerror(code));
    const int status = 127 << 8; // as waitpid reports exit(127)
    char msg[1 + sizeof status] = {'X'};
    std::memcpy(msg + 1, &status, sizeof status);
    ::send(channel, msg, sizeof msg, MSG_NOSIGNAL);
    std::_Exit(127);
}

/// In the run's own network namespace: loopback up, and a listener on 127.0.0.1:PORT for each
/// of `ports`, each sent over `channel` (one byte and the descriptor, fd_passing.hpp) to
/// meithd, which serves them (docs/protocol.md §19). 0, or the errno.
int open_listeners(const std::vector<unsigned short>& ports, int channel) {
    const int probe = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (probe < 0) return errno;
    ifreq lo{};
    std::strcpy(lo.ifr_name, "lo");
    int code = ::ioctl(probe, SIOCGIFFLAGS, &lo) != 0 ? errno : 0;
    lo.ifr_flags = static_cast<short>(lo.ifr_flags | IFF_UP);
    if (code == 0 && ::ioctl(probe, SIOCSIFFLAGS, &lo) != 0) code = errno;
    ::close(probe);
    for (std::size_t i = 0; code == 0 && i < ports.size(); ++i) {
        const int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (s < 0) return errno;
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_port = htons(ports[i]);
        addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (::bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
            ::listen(s, 128) != 0)
            code = errno;
        else
            code = send_fd(channel, s);
        ::close(s);
    }
    return code;
}

/// The run init, PID 1 of the run's fresh namespaces (a clone of the zygote): see the top.
[[noreturn]] void start_run(const zygote_options& z, run_request& q, int sigfd) {
    ::close(z.control);
    ::close(sigfd);
    const int channel = q.fds[3];
    for (int target = 0; target < 3; ++target) {
        if (::dup2(q.fds[target], target) < 0) std::_Exit(127);
    }
    for (int i = 0; i < 3; ++i)
        if (q.fds[i] > 2) ::close(q.fds[i]);
    // Signals back to what the run's init expects (the zygote blocked SIGCHLD for its fd).
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    if (::setsid() < 0) run_failed(channel, "setsid", errno);
    if (z.proc && ::mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0)
        run_failed(channel, "cannot mount its /proc", errno);
    if (z.tmp != nullptr &&
        ::mount("none", z.tmp, "tmpfs", MS_NOSUID | MS_NODEV, z.tmp_options) != 0)
        run_failed(channel, "cannot mount its temporary folder", errno);
    // What enter() mounted over single paths, again where the host's rename or unlink has
    // detached it since the zygote was made (in this run's copy of the tree only).
    for (const char* path : z.pin)
        if (!is_mount_root(path))
            if (const int e = remount_over_itself(path, false))
                run_failed(channel, "cannot pin a folder", e);
    for (const char* path : z.protect)
        if (!is_mount_root(path))
            if (const int e = remount_over_itself(path, true))
                run_failed(channel, "cannot keep a protected path read-only", e);
    for (const char* path : z.hide_dir)
        if (!is_mount_root(path))
            if (const int e = hide_folder(path)) run_failed(channel, "cannot hide a folder", e);
    for (const char* path : z.hide_file)
        if (!is_mount_root(path))
            if (const int e = hide_file(path, z.empty_file))
                run_failed(channel, "cannot hide a file", e);
    if (z.net && !z.listen.empty())
        if (const int e = open_listeners(z.listen, channel))
            run_failed(channel, "cannot open its egress listener", e);
    if (::chdir(q.cwd) != 0) run_failed(channel, "cannot enter its working folder", errno);
    restriction r = z.limits;
    r.bounding = zygote_bounding; // all the zygote kept (the test of §15 attack 5 reads CapBnd)
    r.bpf = z.bpf.data();
    r.bpf_bytes = z.bpf.size();
    if (const int e = restrict_self(r)) run_failed(channel, "cannot confine the run", e);
    if (r.ruleset_fd >= 0) ::close(r.ruleset_fd);
    run_options o;
    o.program = q.program;
    o.argv = q.argv.data();
    o.envp = q.envp.data();
    o.exec_once = z.exec_once;
    o.channel = channel;
    run_tool(o);
}

/// Receives one request on the control socket and starts its run. False at EOF.
bool serve_control(const zygote_options& z, int sigfd) {
    static char buf[256 * 1024];
    iovec iov{buf, sizeof buf};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 4)] = {};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    const ssize_t n = ::recvmsg(z.control, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
    if (n == 0) return false;
    if (n < 0) return errno == EAGAIN || errno == EINTR;
    run_request q;
    int got = 0;
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
        const std::size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (std::size_t i = 0; i < count; ++i) {
            int fd;
            std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
            if (got < 4)
                q.fds[got++] = fd;
            else
                ::close(fd);
        }
    }
    const bool whole = (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) == 0 && got == 4;
    if (whole && parse_request(buf, static_cast<std::size_t>(n), q)) {
        // A fork into new PID, IPC and mount namespaces (raw clone: glibc's wrapper wants a
        // stack, and nothing in the child relies on glibc's cached thread id).
        const long flags = CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWNS | (z.net ? CLONE_NEWNET : 0);
        const long pid = ::syscall(SYS_clone, flags | SIGCHLD, nullptr, nullptr, nullptr, nullptr);
        if (pid == 0) start_run(z, q, sigfd);
        if (pid < 0) {
            const int e = errno;
            std::fprintf(stderr, "meith-sandbox-init: cannot start a run: %s\n", std::strerror(e));
        }
    } else {
        std::fprintf(stderr, "meith-sandbox-init: a malformed run request was dropped\n");
    }
    for (int fd : q.fds)
        if (fd >= 0) ::close(fd); // the run has its own copies; a dropped run sees EOF
    // Nothing of this run's request (its environment: secrets) stays for a later run's copy.
    std::memset(buf, 0, static_cast<std::size_t>(n));
    return true;
}

int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

} // namespace

int zygote_main(int argc, char** argv) {
    zygote_options z;
    for (int i = 2; i < argc; ++i) {
        const std::string_view a = argv[i];
        const auto value = [&](std::string_view name) { return argv[i] + name.size(); };
        if (a.starts_with("--control-fd="))
            z.control = std::atoi(value("--control-fd="));
        else if (a.starts_with("--ruleset-fd="))
            z.limits.ruleset_fd = std::atoi(value("--ruleset-fd="));
        else if (a.starts_with("--rlimit-nproc="))
            z.limits.rlimit_nproc = std::strtoull(value("--rlimit-nproc="), nullptr, 10);
        else if (a.starts_with("--rlimit-data="))
            z.limits.rlimit_data = std::strtoull(value("--rlimit-data="), nullptr, 10);
        else if (a.starts_with("--seccomp=")) {
            const std::string_view hex = a.substr(10);
            for (std::size_t k = 0; k + 1 < hex.size(); k += 2) {
                const int hi = hex_digit(hex[k]), lo = hex_digit(hex[k + 1]);
                if (hi < 0 || lo < 0) {
                    std::fprintf(stderr, "meith-sandbox-init: --seccomp is not hex\n");
                    return 127;
                }
                z.bpf.push_back(static_cast<unsigned char>(hi * 16 + lo));
            }
        } else if (a == "--proc")
            z.proc = true;
        else if (a.starts_with("--tmp="))
            z.tmp = value("--tmp=");
        else if (a.starts_with("--tmp-options="))
            z.tmp_options = value("--tmp-options=");
        else if (a == "--exec-once")
            z.exec_once = true;
        else if (a == "--net")
            z.net = true;
        else if (a.starts_with("--listen="))
            z.listen.push_back(static_cast<unsigned short>(std::atoi(value("--listen="))));
        else if (a.starts_with("--pin="))
            z.pin.push_back(value("--pin="));
        else if (a.starts_with("--protect="))
            z.protect.push_back(value("--protect="));
        else if (a.starts_with("--hide-dir="))
            z.hide_dir.push_back(value("--hide-dir="));
        else if (a.starts_with("--hide-file="))
            z.hide_file.push_back(value("--hide-file="));
        else if (a.starts_with("--empty-file="))
            z.empty_file = value("--empty-file=");
        else {
            std::fprintf(stderr, "meith-sandbox-init: unknown zygote option '%s'\n", argv[i]);
            return 127;
        }
    }
    if (z.control < 0) {
        std::fprintf(stderr, "meith-sandbox-init: --zygote needs --control-fd=N\n");
        return 127;
    }
    // Not dumpable: nothing may take its control socket or its capability (ptrace,
    // pidfd_getfd, /proc/N/fd); no run sees it anyway (each has a PID namespace of its own).
    ::prctl(PR_SET_DUMPABLE, 0);
    ::fcntl(z.control, F_SETFD, FD_CLOEXEC);
    if (z.limits.ruleset_fd >= 0) ::fcntl(z.limits.ruleset_fd, F_SETFD, FD_CLOEXEC);
    const int sigfd = reaper_signals();
    // Ready: meithd sends runs only to a zygote that said so (a broken one is given up on).
    const char ready = 'R';
    if (::send(z.control, &ready, 1, MSG_NOSIGNAL) != 1) die("cannot say it is ready");
    for (;;) {
        pollfd fds[2] = {{z.control, POLLIN, 0}, {sigfd, POLLIN, 0}};
        if (::poll(fds, 2, -1) < 0) {
            if (errno == EINTR) continue;
            die("poll");
        }
        if ((fds[1].revents & POLLIN) != 0) {
            signalfd_siginfo info;
            while (::read(sigfd, &info, sizeof info) > 0) {
            }
            while (::waitpid(-1, nullptr, WNOHANG) > 0) {
            }
        }
        // EOF: meithd stopped this zygote or is gone. Its exit ends every run (PID 1).
        if (fds[0].revents != 0 && !serve_control(z, sigfd)) std::_Exit(0);
    }
}

} // namespace meith::sandbox::init
