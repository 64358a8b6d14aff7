#include "sandbox/sandbox.hpp"

#include "sandbox/fd_passing.hpp"
#include "sandbox/internal.hpp"
#include "sandbox/restrict.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/landlock.h>
#include <linux/seccomp.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

// Rights newer than Debian 12's kernel headers (Linux 6.1: ABI 2).
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14)
#endif

namespace meith::sandbox {

namespace fs = std::filesystem;
using detail::masked_away;
using detail::max_writable;
using detail::plan_mounts;
using detail::tool_filter;
using permissions::capability;
using permissions::capability_set;

namespace {

long ll_create(const landlock_ruleset_attr* attr, std::size_t size, std::uint32_t flags) {
    return ::syscall(SYS_landlock_create_ruleset, attr, size, flags);
}
long ll_add_rule(int fd, landlock_rule_type type, const void* attr, std::uint32_t flags) {
    return ::syscall(SYS_landlock_add_rule, fd, type, attr, flags);
}

/// Every right that writes (ABI 1 + REFER from ABI 2 + TRUNCATE from ABI 3).
std::uint64_t write_rights(int abi) {
    std::uint64_t r = LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_REMOVE_DIR |
                      LANDLOCK_ACCESS_FS_REMOVE_FILE | LANDLOCK_ACCESS_FS_MAKE_CHAR |
                      LANDLOCK_ACCESS_FS_MAKE_DIR | LANDLOCK_ACCESS_FS_MAKE_REG |
                      LANDLOCK_ACCESS_FS_MAKE_SOCK | LANDLOCK_ACCESS_FS_MAKE_FIFO |
                      LANDLOCK_ACCESS_FS_MAKE_BLOCK | LANDLOCK_ACCESS_FS_MAKE_SYM;
    if (abi >= 2) r |= LANDLOCK_ACCESS_FS_REFER;
    if (abi >= 3) r |= LANDLOCK_ACCESS_FS_TRUNCATE;
    return r;
}
/// The rights that apply to a file (not only to a folder's entries).
std::uint64_t file_rights(int abi) {
    std::uint64_t r =
        LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_EXECUTE;
    if (abi >= 3) r |= LANDLOCK_ACCESS_FS_TRUNCATE;
    return r;
}

/// Allows `rights` (masked to what applies) beneath `path`; false when it cannot be opened.
bool allow_path(int ruleset, const fs::path& path, std::uint64_t rights, std::uint64_t handled,
                int abi) {
    const int fd = ::open(path.c_str(), O_PATH | O_CLOEXEC);
    if (fd < 0) return false;
    struct stat st {};
    if (::fstat(fd, &st) == 0 && !S_ISDIR(st.st_mode)) rights &= file_rights(abi);
    landlock_path_beneath_attr attr{};
    attr.allowed_access = rights & handled;
    attr.parent_fd = fd;
    const long rc =
        attr.allowed_access == 0 ? 0 : ll_add_rule(ruleset, LANDLOCK_RULE_PATH_BENEATH, &attr, 0);
    ::close(fd);
    return rc == 0;
}

/// The namespaces every confined child gets (network: see prepare).
constexpr int base_namespaces = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC;

/// The trial child of detect(): enters what a tool's child enters, minus the paths.
int trial_child(void* arg) {
    ::syscall(SYS_exit, enter(*static_cast<const plan*>(arg)));
    return 0;
}

/// Whether a child can be given its namespaces here: "" or why not.
std::string namespaces_problem() {
    plan trial;
    trial.clone_flags = base_namespaces | CLONE_NEWNET;
    trial.uid_map = std::to_string(::geteuid()) + " " + std::to_string(::geteuid()) + " 1";
    trial.gid_map = std::to_string(::getegid()) + " " + std::to_string(::getegid()) + " 1";
    constexpr std::size_t stack_size = 64 * 1024;
    void* stack = ::mmap(nullptr, stack_size, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (stack == MAP_FAILED) return std::string("mmap: ") + std::strerror(errno);
    const pid_t pid = ::clone(trial_child, static_cast<char*>(stack) + stack_size,
                              CLONE_VM | CLONE_VFORK | SIGCHLD | trial.clone_flags, &trial);
    const int clone_errno = errno;
    int status = 0;
    if (pid > 0)
        while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
        }
    ::munmap(stack, stack_size);
    if (pid < 0)
        return std::string("clone(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET): ") +
               std::strerror(clone_errno);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return std::string("entering the namespaces failed: ") +
               std::strerror(WIFEXITED(status) ? WEXITSTATUS(status) : EIO);
    return "";
}

} // namespace

plan::~plan() {
    if (ruleset_fd >= 0) ::close(ruleset_fd);
}

namespace detail {
bool switched_off(std::string_view what) {
    const char* absent = std::getenv("MEITH_SANDBOX_TEST_ABSENT");
    if (absent == nullptr) return false;
    const std::string_view list = absent;
    for (std::size_t at = 0; at <= list.size();) {
        const auto comma = list.find(',', at);
        if (list.substr(at, comma == std::string_view::npos ? comma : comma - at) == what)
            return true;
        if (comma == std::string_view::npos) break;
        at = comma + 1;
    }
    return false;
}
} // namespace detail

const kernel_support& detect() {
    static const kernel_support k = [] {
        kernel_support s;
        const char* absent = std::getenv("MEITH_SANDBOX_TEST_ABSENT");
        const std::string off = absent ? absent : "";
        const long abi = ll_create(nullptr, 0, LANDLOCK_CREATE_RULESET_VERSION);
        if (abi > 0 && off.find("landlock") == std::string::npos)
            s.landlock_abi = static_cast<int>(abi);
        s.seccomp =
            ::prctl(PR_GET_SECCOMP, 0, 0, 0, 0) >= 0 && off.find("seccomp") == std::string::npos;
        if (off.find("namespaces") != std::string::npos) {
            s.namespaces_problem = "switched off (MEITH_SANDBOX_TEST_ABSENT)";
        } else {
            s.namespaces_problem = namespaces_problem();
            s.namespaces = s.namespaces_problem.empty();
        }
        return s;
    }();
    return k;
}

std::string describe(const kernel_support& k) {
    std::string out = k.landlock_abi > 0 ? "Landlock ABI " + std::to_string(k.landlock_abi)
                                         : std::string("no Landlock (files and exec unconfined)");
    out += k.seccomp ? ", seccomp" : ", no seccomp (network unconfined)";
    out += k.namespaces ? ", namespaces"
                        : ", no namespaces (home and credentials readable, no read-only tree, "
                          "other processes visible: " +
                              k.namespaces_problem + ")";
    return out;
}

namespace {

/// The Landlock ruleset of `r` at `abi`: writes only where `writes` grants, execution only of
/// the program (and its interpreters) unless `spawns`; sets the plan's fs and exec rows.
/// False when the ruleset leaves a hole `sandbox = "require"` refuses.
bool plan_landlock(plan& p, const request& r, int abi, const fs::path& init, bool writes,
                   bool spawns) {
    std::uint64_t handled = write_rights(abi);
    if (!spawns) handled |= LANDLOCK_ACCESS_FS_EXECUTE;
    // ABI 6 adds scopes: no abstract Unix socket (an X server's, a session's) and no
    // signal outside the tool's own domain. Debian 12's headers predate the field.
    struct {
        std::uint64_t handled_access_fs, handled_access_net, scoped;
    } attr{handled, 0, abi >= 6 ? 0x3u /* ABSTRACT_UNIX_SOCKET | SIGNAL */ : 0u};
    const std::size_t attr_size =
        abi >= 6 ? sizeof attr : sizeof(landlock_ruleset_attr); // fs only before ABI 6
    const long fd = ll_create(reinterpret_cast<const landlock_ruleset_attr*>(&attr), attr_size, 0);
    if (fd < 0)
        throw std::runtime_error(std::string("landlock_create_ruleset: ") + std::strerror(errno));
    p.ruleset_fd = static_cast<int>(fd);
    ::fcntl(p.ruleset_fd, F_SETFD, FD_CLOEXEC);
    const std::uint64_t w = write_rights(abi);
    allow_path(p.ruleset_fd, r.tmp_dir, w, handled, abi);
    allow_path(p.ruleset_fd, "/dev/null", LANDLOCK_ACCESS_FS_WRITE_FILE, handled, abi);
    for (const auto& path : r.own)
        allow_path(p.ruleset_fd, path, w, handled, abi);
    if (writes) {
        if (!r.cwd.empty()) allow_path(p.ruleset_fd, r.cwd, w, handled, abi);
        if (r.root) allow_path(p.ruleset_fd, *r.root, w, handled, abi);
        for (const auto& path : r.extra.write)
            allow_path(p.ruleset_fd, path, w, handled, abi);
    }
    if (!spawns) {
        const std::string path_value = program_search_path();
        const std::uint64_t x = LANDLOCK_ACCESS_FS_EXECUTE;
        // The program, the init program, and each program sandbox_paths.exec names, with
        // what executing it takes (its #! interpreter, env's program, the ELF loader).
        std::vector<fs::path> programs{r.program};
        if (!init.empty()) programs.push_back(init);
        programs.insert(programs.end(), r.extra.exec.begin(), r.extra.exec.end());
        for (const auto& prog : programs) {
            allow_path(p.ruleset_fd, prog, x, handled, abi);
            if (fs::is_regular_file(prog))
                for (const auto& i : interpreters_of(prog, path_value))
                    allow_path(p.ruleset_fd, i, x, handled, abi);
        }
    }
    // Before ABI 3 truncate(2) and O_TRUNC are not a Landlock right: a process without
    // writes-files could still empty a file. Not complete, and `require` says so.
    bool complete = !(abi < 3 && !writes);
    p.fs = "landlock-abi-" + std::to_string(abi);
    p.exec = spawns ? "allowed" : p.exec_once ? "landlock,once" : "landlock";
    return complete;
}

/// The namespaces of `r` (user, mount, IPC, PID when the init program is there, network where
/// seccomp cannot refuse sockets), the writable binds, hidden paths and private /tmp; sets the
/// plan's ns and home rows. False when a protection is missing.
bool plan_namespaces(plan& p, const request& r, const kernel_support& k, const fs::path& init,
                     bool writes, bool network) {
    // The init program is the PID namespace's PID 1; without it the tool would be, and
    // PID 1 ignores the signals that stop it: no PID namespace then (and no fresh /proc).
    // A network namespace only where seccomp cannot refuse sockets: with it, a tool
    // without accesses-network opens no socket at all, and an empty namespace would add
    // only its cost (its creation and the kernel's teardown: half of a one-shot call's
    // sandbox cost in bench (k)).
    p.clone_flags = base_namespaces | (network || k.seccomp ? 0 : CLONE_NEWNET);
    bool complete = true;
    if (init.empty()) {
        p.clone_flags &= ~CLONE_NEWPID;
        complete = false;
    }
    p.uid_map = std::to_string(::geteuid()) + " " + std::to_string(::geteuid()) + " 1";
    p.gid_map = std::to_string(::getegid()) + " " + std::to_string(::getegid()) + " 1";
    std::error_code ec;
    plan_mounts(p, r, init, writes);
    // Its own folders (a profile's) are writable whatever its capabilities: what must stay
    // read-only or pinned inside them stays so too.
    if (writes || !r.own.empty()) {
        for (const auto& path : r.pinned)
            if (fs::is_directory(path, ec)) p.pinned.push_back(path.string());
        for (const auto& path : r.read_only)
            if (fs::exists(fs::symlink_status(path, ec)) &&
                !fs::is_symlink(fs::symlink_status(path, ec)))
                p.read_only.push_back(path.string());
    }
    if (p.pinned.size() > max_writable || p.read_only.size() > max_writable)
        throw std::runtime_error("too many protected paths");
    // A path inside a hidden folder is hidden with it (and could not be mounted over:
    // it is not in the empty tmpfs).
    std::vector<fs::path> dirs;
    for (const auto& h : r.hidden)
        if (fs::is_directory(h, ec)) dirs.push_back(h.lexically_normal());
    const auto inside_hidden = [&](const fs::path& h) {
        return std::any_of(dirs.begin(), dirs.end(), [&](const fs::path& d) {
            const auto [m, end] = std::mismatch(d.begin(), d.end(), h.begin(), h.end());
            (void)end;
            return m == d.end() && d != h;
        });
    };
    for (const auto& raw : r.hidden) {
        const fs::path h = raw.lexically_normal();
        const auto st = fs::status(h, ec);
        if (ec || inside_hidden(h) || masked_away(p, h)) continue;
        if (fs::is_directory(st))
            p.hidden_dirs.push_back(h.string());
        else if (!r.empty_file.empty())
            p.hidden_files.push_back(h.string());
    }
    p.empty_file = r.empty_file.string();
    if (!r.tmp_mount.empty() && fs::is_directory(r.tmp_mount, ec)) {
        p.tmp_dir = r.tmp_mount.string();
        p.tmp_options = "size=" + std::to_string(r.tmp_bytes) + ",mode=0700";
    }
    p.ns = "user,mount,ipc";
    if (p.clone_flags & CLONE_NEWPID) p.ns += ",pid";
    if (p.clone_flags & CLONE_NEWNET) p.ns += ",net";
    // Without its own PID namespace (no init program) another process's /proc/<pid>/root
    // shows the home where Landlock does not scope ptrace.
    p.home = (p.clone_flags & CLONE_NEWPID) != 0 || k.landlock_abi > 0 ? "hidden" : "readable";
    return complete;
}

} // namespace

/// The resource limits of `l` (limits.hpp): a cgroup where one is writable, else the rlimits;
/// the inotify sysctls where the child has a user namespace of its own.
void plan_limits(plan& p, const resource_limits& l, bool namespaces) {
    static std::atomic<unsigned> next{0};
    p.group = std::make_shared<limit_group>(std::to_string(next++), l);
    if (p.group->controllers == "none") p.group.reset();
    const bool pids = p.group && p.group->pids_procs_fd >= 0;
    const bool memory = p.group && p.group->memory_procs_fd >= 0;
    // RLIMIT_NPROC counts per user namespace only with one of its own (else it would count
    // every process of the user); it is set with the cgroup too, for the root-less case.
    if (namespaces) p.rlimit_nproc = l.processes;
    if (!memory) p.rlimit_data = l.memory_bytes;
    if (namespaces && l.inotify_instances != 0) {
        p.inotify_instances = std::to_string(l.inotify_instances);
        p.inotify_watches = std::to_string(l.inotify_watches);
    }
    p.limits = p.group ? "cgroup:" + p.group->controllers : std::string();
    if (!pids && p.rlimit_nproc != 0) p.limits += p.limits.empty() ? "rlimit" : ",rlimit";
    if (p.limits.empty()) p.limits = "none";
}

std::shared_ptr<const plan> prepare(const request& r, const kernel_support& k) {
    auto p = std::make_shared<plan>();
    p->capabilities = r.capabilities;
    const bool writes =
        (r.capabilities & (bit(capability::writes_files) | bit(capability::destructive))) != 0;
    const bool network = (r.capabilities & bit(capability::accesses_network)) != 0;
    const bool spawns = (r.capabilities & bit(capability::starts_process)) != 0;
    bool complete = true;
    const fs::path& init = init_program();
    if (!init.empty()) {
        p->init = init.string();
        p->record = r.record.string();
        // A source that names programs in sandbox_paths.exec runs them: Landlock alone decides.
        p->exec_once = !spawns && k.seccomp && r.extra.exec.empty();
    }

    if (k.landlock_abi > 0) {
        complete = plan_landlock(*p, r, k.landlock_abi, init, writes, spawns) && complete;
    } else {
        p->exec = spawns ? "allowed" : p->exec_once ? "once" : "none";
        complete = false;
    }
    // Without the init program the loader or a memfd can run a program Landlock allowed.
    if (!spawns && !p->exec_once && r.extra.exec.empty()) complete = false;

    if (k.namespaces) {
        complete = plan_namespaces(*p, r, k, init, writes, network) && complete;
    } else {
        complete = false;
    }
    if (!detail::switched_off("limits")) plan_limits(*p, r.limits, k.namespaces);
    // Declared socket paths give socket(AF_UNIX) only where the socket places are private:
    // without namespaces every socket of the user would be in reach, so it stays refused.
    if (!r.extra.sockets.empty()) {
        p->unix_sockets = k.namespaces;
        p->unix = k.namespaces ? "declared" : "refused";
        if (!k.namespaces) complete = false;
    }

    if (r.egress_proxy) {
        // Fail closed: without a network namespace of its own the process would reach every
        // address directly.
        if (!k.namespaces)
            throw std::runtime_error(
                "a source with a `network` table runs in a network namespace of its own, and "
                "this kernel gives no user namespaces (" +
                k.namespaces_problem + "): it is not started");
        p->clone_flags |= CLONE_NEWNET;
        if (p->ns.find(",net") == std::string::npos) p->ns += ",net";
        p->egress_port = r.egress_port;
        for (const auto port : r.loopback_forwards)
            if (port != r.egress_port) p->forward_ports.push_back(port);
    }
    if (k.seccomp) {
        p->seccomp_bpf = tool_filter(network, p->unix_sockets, writes, k.namespaces);
        p->net = network ? (r.egress_proxy ? "proxy" : "allowed") : "seccomp";
    } else {
        p->net = network ? "allowed" : k.namespaces ? "netns" : "none";
        complete = false;
    }
    p->complete = complete;
    return p;
}

int open_egress_listener(const plan& p, int channel) noexcept {
    // Raw system calls only (see enter).
    const long probe = ::syscall(SYS_socket, AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (probe < 0) return errno;
    ifreq lo{};
    lo.ifr_name[0] = 'l';
    lo.ifr_name[1] = 'o';
    int code = 0;
    if (::syscall(SYS_ioctl, probe, SIOCGIFFLAGS, &lo) != 0) code = errno;
    lo.ifr_flags = static_cast<short>(lo.ifr_flags | IFF_UP);
    if (code == 0 && ::syscall(SYS_ioctl, probe, SIOCSIFFLAGS, &lo) != 0) code = errno;
    ::syscall(SYS_close, probe);
    if (code != 0) return code;
    const auto listen_and_send = [channel](std::uint16_t port) {
        const long s = ::syscall(SYS_socket, AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (s < 0) return errno;
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_port = htons(port); // pure byte swaps: safe here
        addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        int err = 0;
        if (::syscall(SYS_bind, s, &addr, sizeof addr) != 0 || ::syscall(SYS_listen, s, 128) != 0)
            err = errno;
        else
            err = send_fd(channel, static_cast<int>(s));
        ::syscall(SYS_close, s);
        return err;
    };
    code = listen_and_send(p.egress_port);
    for (std::size_t i = 0; code == 0 && i < p.forward_ports.size(); ++i)
        code = listen_and_send(p.forward_ports[i]);
    return code;
}

int apply(const plan& p) noexcept {
    // Raw system calls only: this runs in a child sharing the daemon's address space.
    restriction r;
    r.ruleset_fd = p.ruleset_fd;
    r.bpf = p.seccomp_bpf.data();
    r.bpf_bytes = p.seccomp_bpf.size();
    r.rlimit_nproc = p.rlimit_nproc;
    r.rlimit_data = p.rlimit_data;
    return restrict_self(r);
}

} // namespace meith::sandbox
