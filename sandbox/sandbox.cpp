#include "sandbox/sandbox.hpp"

#include "sandbox/fd_passing.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <string_view>

#include <arpa/inet.h>
#include <elf.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/landlock.h>
#include <linux/mount.h> // not <sys/mount.h>: the two clash on glibc 2.36; raw calls only
#include <linux/netlink.h>
#include <linux/seccomp.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <seccomp.h>
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

/// fchmodat2(2) (Linux 6.6), for a libseccomp that does not know it yet; -1 where unknown.
#if defined(__x86_64__) || defined(__aarch64__)
constexpr int fchmodat2_nr = 452;
#else
constexpr int fchmodat2_nr = -1;
#endif

/// The seccomp filter of a confined child (docs/protocol.md §15), as BPF. Refused with EACCES:
/// io_uring (it opens files and sockets without the system calls below), ptrace and
/// process_vm_readv/writev; without `network` every socket(2) and every socketpair(2) but
/// AF_UNIX's; with it every family but AF_INET, AF_INET6 and NETLINK_ROUTE, and raw IP
/// sockets; socket(AF_UNIX) only with `unix_sockets` (declared socket paths). Without `namespaces`
/// (no read-only tree) and without `writes`, chmod, chown, utimes and xattr changes anywhere. Other
/// architectures' system calls kill the process (libseccomp's default).
std::vector<unsigned char> tool_filter(bool network, bool unix_sockets, bool writes,
                                       bool namespaces) {
    scmp_filter_ctx ctx = ::seccomp_init(SCMP_ACT_ALLOW);
    if (ctx == nullptr) throw std::runtime_error("seccomp_init failed");
    std::vector<unsigned char> out;
    const std::uint32_t deny = SCMP_ACT_ERRNO(EACCES);
    bool ok = true;
    const auto refuse_with = [&](std::uint32_t action, int sys,
                                 std::initializer_list<scmp_arg_cmp> args) {
        // A name this libseccomp does not know resolves to a negative number and would pass
        // (the default is to allow): the raw number is given for the ones that matter.
        if (sys < 0) return;
        ok = ok && ::seccomp_rule_add_array(ctx, action, sys, static_cast<unsigned>(args.size()),
                                            args.begin()) == 0;
    };
    const auto refuse = [&](int sys, std::initializer_list<scmp_arg_cmp> args = {}) {
        refuse_with(deny, sys, args);
    };
    // The kernel reads `family` and `type` as 32-bit ints: compare only the low 32 bits, or a
    // raw socket(0x100000002, ...) would slip past an equality on the whole register
    // (libseccomp issue #383).
    const auto low32 = [](unsigned arg, scmp_datum_t v) {
        return scmp_arg_cmp{arg, SCMP_CMP_MASKED_EQ, 0xffffffffULL, v};
    };
    for (int sys : {SCMP_SYS(io_uring_setup), SCMP_SYS(io_uring_enter), SCMP_SYS(io_uring_register),
                    SCMP_SYS(ptrace), SCMP_SYS(process_vm_readv), SCMP_SYS(process_vm_writev),
                    SCMP_SYS(pidfd_getfd), SCMP_SYS(kcmp), SCMP_SYS(process_madvise),
                    SCMP_SYS(keyctl), SCMP_SYS(add_key), SCMP_SYS(request_key)})
        refuse(sys);
    // No nested user namespace (its capabilities open much of the kernel to a tool): clone and
    // unshare with CLONE_NEWUSER are refused; clone3, whose flags a filter cannot read, fails
    // ENOSYS, and libc falls back to clone.
    refuse_with(SCMP_ACT_ERRNO(EPERM), SCMP_SYS(unshare),
                {scmp_arg_cmp{0, SCMP_CMP_MASKED_EQ, CLONE_NEWUSER, CLONE_NEWUSER}});
    refuse_with(SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone),
                {scmp_arg_cmp{0, SCMP_CMP_MASKED_EQ, CLONE_NEWUSER, CLONE_NEWUSER}});
    refuse_with(SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), {});
    if (!network) {
        if (unix_sockets)
            // Exactly AF_UNIX, as for socketpair below.
            refuse(SCMP_SYS(socket), {scmp_arg_cmp{0, SCMP_CMP_NE, AF_UNIX, 0}});
        else
            refuse(SCMP_SYS(socket));
        // Anything but exactly AF_UNIX (upper bits set count as "not AF_UNIX": refused too).
        refuse(SCMP_SYS(socketpair), {scmp_arg_cmp{0, SCMP_CMP_NE, AF_UNIX, 0}});
    } else {
        // A path Unix socket is its own right (sandbox_paths.sockets), not part of the
        // network: without it, socket(AF_UNIX) is refused like any family not listed.
        for (int family = 0; family < AF_MAX; ++family)
            if ((family != AF_UNIX || !unix_sockets) && family != AF_INET && family != AF_INET6 &&
                family != AF_NETLINK)
                refuse(SCMP_SYS(socket), {low32(0, static_cast<scmp_datum_t>(family))});
        // Families newer than these headers, and any value with its upper half set.
        refuse(SCMP_SYS(socket), {scmp_arg_cmp{0, SCMP_CMP_GE, AF_MAX, 0}});
        refuse(SCMP_SYS(socket),
               {low32(0, AF_NETLINK), scmp_arg_cmp{2, SCMP_CMP_NE, NETLINK_ROUTE, 0}});
        for (int family : {AF_INET, AF_INET6})
            refuse(SCMP_SYS(socket), {low32(0, static_cast<scmp_datum_t>(family)),
                                      scmp_arg_cmp{1, SCMP_CMP_MASKED_EQ, 0xf, SOCK_RAW}});
        for (int family = 0; family < AF_MAX; ++family)
            if (family != AF_UNIX)
                refuse(SCMP_SYS(socketpair), {low32(0, static_cast<scmp_datum_t>(family))});
    }
    if (!namespaces && !writes)
        for (const char* name :
             {"chmod", "fchmod", "fchmodat", "fchmodat2", "chown", "fchown", "fchownat", "lchown",
              "utime", "utimes", "utimensat", "futimesat", "setxattr", "lsetxattr", "fsetxattr",
              "removexattr", "lremovexattr", "fremovexattr"})
            refuse(std::string_view(name) == "fchmodat2" && ::seccomp_syscall_resolve_name(name) < 0
                       ? fchmodat2_nr
                       : ::seccomp_syscall_resolve_name(name));
    const int mfd = ok ? ::memfd_create("meith-seccomp", MFD_CLOEXEC) : -1;
    ok = mfd >= 0 && ::seccomp_export_bpf(ctx, mfd) == 0;
    if (ok) {
        const off_t size = ::lseek(mfd, 0, SEEK_END);
        out.resize(static_cast<std::size_t>(size > 0 ? size : 0));
        ok = size > 0 && ::pread(mfd, out.data(), out.size(), 0) == size;
    }
    if (mfd >= 0) ::close(mfd);
    ::seccomp_release(ctx);
    if (!ok) throw std::runtime_error("cannot build the seccomp filter");
    return out;
}

/// Writes `text` to `path` with raw system calls (no allocation: the vfork child); 0 or errno.
int write_file(const char* path, std::string_view text) noexcept {
    const long fd = ::syscall(SYS_openat, AT_FDCWD, path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) return errno;
    const long n = ::syscall(SYS_write, fd, text.data(), text.size());
    const int e = errno;
    ::syscall(SYS_close, fd);
    return n == static_cast<long>(text.size()) ? 0 : (n < 0 ? e : EIO);
}

long sys_mount(const char* source, const char* target, const char* type, unsigned long flags,
               const char* data) noexcept {
    return ::syscall(SYS_mount, source, target, type, flags, data);
}

/// At most this many writable roots are mounted again (cwd, root and sandbox_paths.write).
constexpr std::size_t max_writable = 64;

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

bool executable_file(const fs::path& p) {
    struct stat st {};
    return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(p.c_str(), X_OK) == 0;
}

} // namespace

plan::~plan() {
    if (ruleset_fd >= 0) ::close(ruleset_fd);
}

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

const std::vector<fs::path>& default_private_places() {
    static const std::vector<fs::path> places{"/tmp", "/var/tmp", "/run", "/var/run", "/dev/shm"};
    return places;
}

const fs::path& init_program() {
    static const fs::path found = [] {
        if (const char* p = std::getenv("MEITH_SANDBOX_INIT"); p && *p) return fs::path(p);
        std::error_code ec;
        const fs::path self = fs::read_symlink("/proc/self/exe", ec);
        if (ec) return fs::path();
        const fs::path dir = self.parent_path();
        for (const fs::path& p :
             {dir / "meith-sandbox-init", dir / "../libexec/meith/meith-sandbox-init",
              dir / "../lib/meith/meith-sandbox-init"})
            if (executable_file(p)) return p.lexically_normal();
        return fs::path();
    }();
    return found;
}

std::string program_search_path() {
    const char* p = std::getenv("PATH");
    return p != nullptr && *p != '\0' ? std::string(p) : std::string("/usr/bin:/bin");
}

std::optional<fs::path> resolve_program(const std::string& program, const std::string& path_env,
                                        const fs::path& base_dir) {
    if (program.empty()) return std::nullopt;
    if (program.find('/') != std::string::npos) {
        fs::path p = program;
        if (p.is_relative()) p = base_dir.empty() ? fs::absolute(p) : base_dir / p;
        p = p.lexically_normal();
        return executable_file(p) ? std::optional(p) : std::nullopt;
    }
    std::size_t start = 0;
    while (start <= path_env.size()) {
        const std::size_t colon = path_env.find(':', start);
        std::string dir =
            path_env.substr(start, colon == std::string::npos ? std::string::npos : colon - start);
        if (dir.empty()) dir = ".";
        const fs::path p = fs::absolute(fs::path(dir) / program);
        if (executable_file(p)) return p;
        if (colon == std::string::npos) break;
        start = colon + 1;
    }
    return std::nullopt;
}

namespace {

std::vector<fs::path> interpreters_at_depth(const fs::path& program, const std::string& path_env,
                                            int depth);

} // namespace

std::vector<fs::path> interpreters_of(const fs::path& program, const std::string& path_env) {
    return interpreters_at_depth(program, path_env, 0);
}

namespace {

std::vector<fs::path> interpreters_at_depth(const fs::path& program, const std::string& path_env,
                                            int depth) {
    std::vector<fs::path> out;
    // The kernel follows at most 4 levels of interpreters (binfmt_script); so do we, and a
    // loop of #! lines cannot recurse without end.
    if (depth > 4) return out;
    std::ifstream in(program, std::ios::binary);
    char head[4096] = {};
    in.read(head, sizeof head);
    const auto got = static_cast<std::size_t>(in.gcount());
    if (got > 2 && head[0] == '#' && head[1] == '!') {
        std::string line(head + 2, got - 2);
        line = line.substr(0, line.find('\n'));
        const auto first = line.find_first_not_of(" \t");
        if (first == std::string::npos) return out;
        const auto end = line.find_first_of(" \t", first);
        const fs::path interp = line.substr(first, end == std::string::npos ? end : end - first);
        out.push_back(interp);
        for (const auto& i : interpreters_at_depth(interp, path_env, depth + 1))
            out.push_back(i);
        if (interp.filename() == "env" && end != std::string::npos) {
            // #!/usr/bin/env node: env executes the named program too.
            const auto name_at = line.find_first_not_of(" \t", end);
            if (name_at != std::string::npos) {
                const auto name_end = line.find_first_of(" \t", name_at);
                if (auto p = resolve_program(line.substr(name_at, name_end == std::string::npos
                                                                      ? name_end
                                                                      : name_end - name_at),
                                             path_env)) {
                    out.push_back(*p);
                    for (const auto& i : interpreters_at_depth(*p, path_env, depth + 1))
                        out.push_back(i);
                }
            }
        }
        return out;
    }
    if (got >= sizeof(Elf64_Ehdr) && std::memcmp(head, ELFMAG, SELFMAG) == 0 &&
        head[EI_CLASS] == ELFCLASS64) {
        Elf64_Ehdr eh;
        std::memcpy(&eh, head, sizeof eh);
        for (unsigned i = 0; i < eh.e_phnum; ++i) {
            Elf64_Phdr ph;
            in.clear();
            in.seekg(static_cast<std::streamoff>(eh.e_phoff + i * eh.e_phentsize));
            if (!in.read(reinterpret_cast<char*>(&ph), sizeof ph)) break;
            if (ph.p_type != PT_INTERP || ph.p_filesz == 0 || ph.p_filesz > 4096) continue;
            std::string interp(ph.p_filesz, '\0');
            in.seekg(static_cast<std::streamoff>(ph.p_offset));
            if (!in.read(interp.data(), static_cast<std::streamsize>(interp.size()))) break;
            interp.resize(std::strlen(interp.c_str()));
            out.emplace_back(interp);
        }
    }
    return out;
}

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

/// True when `inner` is `outer` or lies beneath it (component-wise, both lexically normal).
bool within(const fs::path& inner, const fs::path& outer) {
    auto i = inner.begin();
    for (auto o = outer.begin(); o != outer.end(); ++o, ++i) {
        if (o->empty() && std::next(o) == outer.end()) break; // a trailing '/'
        if (i == inner.end() || *i != *o) return false;
    }
    return true;
}

std::size_t depth_of(const std::string& path) {
    return static_cast<std::size_t>(std::count(path.begin(), path.end(), '/'));
}

/// The deepest step of `steps` (other than `self`) that `path` lies within; nullptr if none.
const mount_step* enclosing_step(const std::vector<mount_step>& steps, const fs::path& path,
                                 const mount_step* self = nullptr) {
    const mount_step* best = nullptr;
    for (const auto& s : steps)
        if (&s != self && within(path, s.path) && s.path != path.string() &&
            (best == nullptr || depth_of(s.path) > depth_of(best->path) ||
             (depth_of(s.path) == depth_of(best->path) && s.what != mount_step::kind::mask)))
            best = &s;
    return best;
}

/// True when `h` lies in a private place and no bind brings it back: nothing to hide there.
bool masked_away(const plan& p, const fs::path& h) {
    if (std::any_of(p.steps.begin(), p.steps.end(),
                    [&](const mount_step& s) { return s.path == h.string(); }))
        return false; // a bind at h itself: hidden over it
    const mount_step* s = enclosing_step(p.steps, h);
    return s != nullptr && s->what == mount_step::kind::mask;
}

/// The mount steps of `r` (docs/protocol.md §15): each writable root bound read-write over
/// the read-only tree; each private place (default_private_places() and r.private_places)
/// under an empty read-only tmpfs; inside those, the paths the process needs bound back
/// read-only (program, interpreters, init, cwd, root, tmp_dir, extra paths, declared sockets,
/// /etc/resolv.conf's target). Sorted shallow to deep; a mask lists the mount points of the
/// binds that lie directly in it.
void plan_mounts(plan& p, const request& r, const fs::path& init, bool writes) {
    std::error_code ec;
    std::vector<mount_step> steps;
    const auto add_bind = [&](const fs::path& raw, mount_step::kind what) {
        if (raw.empty() || !raw.is_absolute()) return;
        const fs::path path = raw.lexically_normal();
        if (!fs::exists(path, ec)) return;
        if (what == mount_step::kind::bind_writable && !fs::is_directory(path, ec)) return;
        steps.push_back({what, path.string(), {}, {}});
    };
    if (writes) {
        add_bind(r.cwd, mount_step::kind::bind_writable);
        if (r.root) add_bind(*r.root, mount_step::kind::bind_writable);
        for (const auto& path : r.extra.write)
            add_bind(path, mount_step::kind::bind_writable);
    }
    const std::size_t writable = steps.size();
    if (writable > max_writable) throw std::runtime_error("too many writable paths");
    // The private places: a folder inside another one (or not a folder of its own: /var/run
    // is a symlink to /run) is covered by it.
    std::vector<fs::path> places;
    for (const auto* list : {&default_private_places(), &r.private_places})
        for (const auto& raw : *list) {
            if (raw.empty() || !raw.is_absolute()) continue;
            const fs::path place = raw.lexically_normal();
            if (fs::is_symlink(fs::symlink_status(place, ec)) || !fs::is_directory(place, ec))
                continue;
            places.push_back(place);
        }
    for (const auto& place : places)
        if (std::none_of(
                places.begin(), places.end(),
                [&](const fs::path& other) { return other != place && within(place, other); }) &&
            std::none_of(steps.begin(), steps.end(),
                         [&](const mount_step& s) { return s.path == place.string(); }))
            steps.push_back({mount_step::kind::mask, place.string(), {}, {}});
    // What the process needs inside them, read-only.
    std::vector<fs::path> kept{r.program, r.cwd, r.start_dir, r.tmp_dir, r.empty_file};
    if (!init.empty()) kept.push_back(init);
    if (r.root) kept.push_back(*r.root);
    for (const auto* list :
         {&r.given, &r.extra.read, &r.extra.exec, &r.extra.sockets, &r.extra.write})
        kept.insert(kept.end(), list->begin(), list->end());
    if (!r.program.empty())
        for (const auto& i : interpreters_of(r.program, program_search_path()))
            kept.push_back(i);
    if (fs::is_symlink(fs::symlink_status("/etc/resolv.conf", ec)))
        kept.push_back(fs::canonical("/etc/resolv.conf", ec));
    for (const auto& raw : kept) {
        if (raw.empty() || !raw.is_absolute()) continue;
        const fs::path path = raw.lexically_normal();
        // Only what a mask would take away (it lies in one, or is one), and not what a bind
        // already brings back.
        const auto same = std::find_if(steps.begin(), steps.end(), [&](const mount_step& s) {
            return s.path == path.string();
        });
        const mount_step* in = enclosing_step(steps, path);
        if (same != steps.end() ? same->what != mount_step::kind::mask
                                : in == nullptr || in->what != mount_step::kind::mask)
            continue;
        add_bind(path, mount_step::kind::bind_read_only);
    }
    // A read-only bind inside another bind is carried by that bind's clone.
    std::vector<mount_step> kept_steps;
    for (const auto& s : steps) {
        const mount_step* in = enclosing_step(steps, s.path, &s);
        if (s.what == mount_step::kind::bind_read_only && in != nullptr &&
            in->what != mount_step::kind::mask)
            continue;
        kept_steps.push_back(s);
    }
    steps = std::move(kept_steps);
    if (steps.size() > max_writable * 2) throw std::runtime_error("too many paths to keep");
    // Shallow to deep; at one path a mask before the bind that brings something back.
    std::stable_sort(steps.begin(), steps.end(), [](const mount_step& a, const mount_step& b) {
        const auto da = depth_of(a.path), db = depth_of(b.path);
        if (da != db) return da < db;
        return a.what == mount_step::kind::mask && b.what != mount_step::kind::mask;
    });
    // The mount points of the binds directly inside a mask, made in its tmpfs.
    for (const auto& s : steps) {
        if (s.what == mount_step::kind::mask) continue;
        const mount_step* in = enclosing_step(steps, s.path, &s);
        if (in == nullptr || in->what != mount_step::kind::mask) continue;
        auto& mask = const_cast<mount_step&>(*in);
        fs::path at = mask.path;
        const fs::path rel = fs::path(s.path).lexically_relative(mask.path);
        for (auto it = rel.begin(); it != rel.end(); ++it) {
            at /= *it;
            const bool leaf = std::next(it) == rel.end();
            if (leaf && !fs::is_directory(s.path, ec)) {
                mask.files.push_back(at.string());
            } else if (std::find(mask.dirs.begin(), mask.dirs.end(), at.string()) ==
                       mask.dirs.end()) {
                mask.dirs.push_back(at.string());
            }
        }
    }
    p.steps = std::move(steps);
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
    if (writes) {
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
    p.group = std::make_shared<limit_group>(
        "meith-" + std::to_string(::getpid()) + "-" + std::to_string(next++), l);
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
    plan_limits(*p, r.limits, k.namespaces);
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

namespace {
/// Mounts a clone of `path` (a file or a folder with what is mounted beneath it) over itself,
/// read-only when asked. Raw system calls only. 0, or the errno; a path gone since the plan was
/// made is no failure.
int remount_over_itself(const char* path, bool read_only) noexcept {
    const long fd = ::syscall(SYS_open_tree, AT_FDCWD, path,
                              OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
    if (fd < 0) return errno == ENOENT ? 0 : errno;
    int code = 0;
    if (read_only) {
        mount_attr ro{};
        ro.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID;
        if (::syscall(SYS_mount_setattr, static_cast<int>(fd), "", AT_EMPTY_PATH | AT_RECURSIVE,
                      &ro, sizeof ro) != 0)
            code = errno;
    }
    if (code == 0 && ::syscall(SYS_move_mount, static_cast<int>(fd), "", AT_FDCWD, path,
                               MOVE_MOUNT_F_EMPTY_PATH) != 0)
        code = errno;
    ::syscall(SYS_close, static_cast<int>(fd));
    return code;
}
} // namespace

namespace {
/// Mounts an empty tmpfs over `s.path`, makes the mount points of the binds it keeps, and
/// turns it read-only. Raw system calls only. 0, or the errno.
int mask_place(const mount_step& s) noexcept {
    if (sys_mount("none", s.path.c_str(), "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
                  "size=64k,mode=0755") != 0)
        return errno;
    for (const auto& d : s.dirs)
        if (::syscall(SYS_mkdirat, AT_FDCWD, d.c_str(), 0755) != 0 && errno != EEXIST) return errno;
    for (const auto& f : s.files) {
        const long fd = ::syscall(SYS_openat, AT_FDCWD, f.c_str(),
                                  O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
        if (fd < 0) return errno;
        ::syscall(SYS_close, fd);
    }
    mount_attr ro{};
    ro.attr_set = MOUNT_ATTR_RDONLY;
    if (::syscall(SYS_mount_setattr, AT_FDCWD, s.path.c_str(), 0, &ro, sizeof ro) != 0)
        return errno;
    return 0;
}
} // namespace

int enter(const plan& p) noexcept {
    // Raw system calls only: this runs in a child sharing the daemon's address space.
    // Into its cgroups before anything of it can fork ("0": the writer itself).
    if (p.group)
        for (int fd : {p.group->pids_procs_fd, p.group->memory_procs_fd})
            if (fd >= 0 && ::syscall(SYS_write, fd, "0", 1) != 1) return errno;
    if (p.clone_flags == 0) return 0;
    if ((p.clone_flags & CLONE_NEWUSER) != 0) {
        // setgroups first: an unprivileged process may write gid_map only after "deny".
        if (int e = write_file("/proc/self/setgroups", "deny"); e != 0 && e != ENOENT) return e;
        if (int e = write_file("/proc/self/uid_map", p.uid_map)) return e;
        if (int e = write_file("/proc/self/gid_map", p.gid_map)) return e;
        // Its namespace's own inotify bounds (the owner may set them: user_namespaces(7)).
        // Best effort: a container may mount /proc/sys read-only, and a tool that cannot be
        // bounded there still runs (docs/protocol.md §15 "Limits").
        if (!p.inotify_instances.empty()) {
            write_file("/proc/sys/user/max_inotify_instances", p.inotify_instances);
            write_file("/proc/sys/user/max_inotify_watches", p.inotify_watches);
        }
    }
    // Nothing mounted here may reach the daemon's namespace (it may be shared: systemd's /).
    if (sys_mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return errno;
    // The binds (writable roots read-write, kept paths read-only) are cloned before the tree
    // turns read-only and the private places are masked; then, shallow to deep, each mask is
    // mounted with the mount points of what it keeps, and each clone is put back.
    int clones[max_writable * 2];
    if (p.steps.size() > max_writable * 2) return E2BIG; // prepare() refuses more
    const std::size_t steps = p.steps.size();
    int code = 0;
    std::size_t n = 0;
    for (; n < steps && code == 0; ++n) {
        clones[n] = -1;
        const mount_step& s = p.steps[n];
        if (s.what == mount_step::kind::mask) continue;
        const long fd = ::syscall(SYS_open_tree, AT_FDCWD, s.path.c_str(),
                                  OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
        if (fd < 0) {
            code = errno;
            break;
        }
        clones[n] = static_cast<int>(fd);
        if (s.what == mount_step::kind::bind_read_only) {
            mount_attr ro{};
            ro.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID;
            if (::syscall(SYS_mount_setattr, clones[n], "", AT_EMPTY_PATH | AT_RECURSIVE, &ro,
                          sizeof ro) != 0)
                code = errno;
        }
    }
    mount_attr ro{};
    ro.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID;
    if (code == 0 && ::syscall(SYS_mount_setattr, AT_FDCWD, "/", AT_RECURSIVE, &ro, sizeof ro) != 0)
        code = errno;
    for (std::size_t i = 0; i < n; ++i) {
        const mount_step& s = p.steps[i];
        if (code == 0 && s.what == mount_step::kind::mask) code = mask_place(s);
        if (code == 0 && clones[i] >= 0 &&
            ::syscall(SYS_move_mount, clones[i], "", AT_FDCWD, s.path.c_str(),
                      MOVE_MOUNT_F_EMPTY_PATH) != 0)
            code = errno;
        if (clones[i] >= 0) ::syscall(SYS_close, clones[i]);
    }
    if (code != 0) return code;
    // Inside them: pinned folders (a mount point cannot be renamed or removed), then the
    // protected paths, each a clone of itself made read-only (mount_setattr adds the flag and
    // keeps the ones a user namespace may not drop).
    for (const auto& path : p.pinned)
        if (int e = remount_over_itself(path.c_str(), false)) return e;
    for (const auto& path : p.read_only)
        if (int e = remount_over_itself(path.c_str(), true)) return e;
    // Hidden after the writable roots are back, so a hidden path inside one stays hidden.
    // A path gone since the plan was made has nothing left to hide (ENOENT is no failure).
    for (const auto& d : p.hidden_dirs)
        if (sys_mount("none", d.c_str(), "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                      "size=4k,mode=0500") != 0 &&
            errno != ENOENT)
            return errno;
    for (const auto& f : p.hidden_files) {
        if (sys_mount(p.empty_file.c_str(), f.c_str(), nullptr, MS_BIND, nullptr) != 0) {
            if (errno == ENOENT) continue;
            return errno;
        }
        if (sys_mount(nullptr, f.c_str(), nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY, nullptr) != 0)
            return errno;
    }
    // A /proc of this PID namespace only: no other process's environ, cmdline or fds.
    if ((p.clone_flags & CLONE_NEWPID) != 0 &&
        sys_mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0)
        return errno;
    // Its own bounded temporary folder: filling it fills no disk of the daemon's.
    if (!p.tmp_dir.empty() && sys_mount("none", p.tmp_dir.c_str(), "tmpfs", MS_NOSUID | MS_NODEV,
                                        p.tmp_options.c_str()) != 0)
        return errno;
    return 0;
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
    const long s = ::syscall(SYS_socket, AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0) return errno;
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(p.egress_port); // pure byte swaps: safe here
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::syscall(SYS_bind, s, &addr, sizeof addr) != 0 || ::syscall(SYS_listen, s, 128) != 0) {
        code = errno;
        ::syscall(SYS_close, s);
        return code;
    }
    code = send_fd(channel, static_cast<int>(s));
    ::syscall(SYS_close, s);
    return code;
}

int apply(const plan& p) noexcept {
    // Raw system calls only: this runs in a child sharing the daemon's address space.
    // No capability survives the exec, whoever runs meithd (root included): the bounding set
    // is emptied where we may (root, or a user namespace's owner), then every set.
    for (int cap = 0; cap <= 63; ++cap)
        ::syscall(SYS_prctl, PR_CAPBSET_DROP, cap, 0, 0, 0);
    ::syscall(SYS_prctl, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
    __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct none[2] = {};
    if (::syscall(SYS_capset, &header, none) != 0) return errno;
    if (::syscall(SYS_prctl, PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return errno;
    for (auto [resource, value] :
         {std::pair{RLIMIT_NPROC, p.rlimit_nproc}, std::pair{RLIMIT_DATA, p.rlimit_data}}) {
        if (value == 0) continue;
        rlimit64 l{value, value};
        rlimit64 old{};
        // Never raised past what meithd has (a hard limit only root may raise).
        if (::syscall(SYS_prlimit64, 0, resource, nullptr, &old) == 0) {
            if (old.rlim_max < l.rlim_max) l.rlim_max = old.rlim_max;
            if (l.rlim_cur > l.rlim_max) l.rlim_cur = l.rlim_max;
        }
        if (::syscall(SYS_prlimit64, 0, resource, &l, nullptr) != 0) return errno;
    }
    if (p.ruleset_fd >= 0 && ::syscall(SYS_landlock_restrict_self, p.ruleset_fd, 0) != 0)
        return errno;
    if (!p.seccomp_bpf.empty()) {
        sock_fprog prog{};
        prog.len = static_cast<unsigned short>(p.seccomp_bpf.size() / sizeof(sock_filter));
        prog.filter =
            reinterpret_cast<sock_filter*>(const_cast<unsigned char*>(p.seccomp_bpf.data()));
        if (::syscall(SYS_prctl, PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) != 0)
            return errno;
    }
    return 0;
}

} // namespace meith::sandbox
