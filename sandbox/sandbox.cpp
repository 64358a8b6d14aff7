#include "sandbox/sandbox.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <stdexcept>

#include <elf.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/landlock.h>
#include <linux/seccomp.h>
#include <seccomp.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
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

constexpr capability_set bit(capability c) {
    return static_cast<capability_set>(1u << static_cast<unsigned>(c));
}

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

/// The seccomp filter that makes socket(AF_INET | AF_INET6, ...) fail with EACCES, as BPF.
std::vector<unsigned char> ip_socket_filter() {
    scmp_filter_ctx ctx = ::seccomp_init(SCMP_ACT_ALLOW);
    if (ctx == nullptr) throw std::runtime_error("seccomp_init failed");
    std::vector<unsigned char> out;
    // The kernel reads `family` as a 32-bit int: compare only the low 32 bits, or a raw
    // socket(0x100000002, ...) would slip past an equality on the whole register
    // (libseccomp issue #383).
    const scmp_arg_cmp inet{0, SCMP_CMP_MASKED_EQ, 0xffffffffULL, AF_INET};
    const scmp_arg_cmp inet6{0, SCMP_CMP_MASKED_EQ, 0xffffffffULL, AF_INET6};
    bool ok = ::seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EACCES), SCMP_SYS(socket), 1, inet) == 0 &&
              ::seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EACCES), SCMP_SYS(socket), 1, inet6) == 0 &&
              // io_uring can open sockets without socket(2): not for a tool without network.
              ::seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EACCES), SCMP_SYS(io_uring_setup), 0) == 0;
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
        return s;
    }();
    return k;
}

std::string describe(const kernel_support& k) {
    std::string out = k.landlock_abi > 0 ? "Landlock ABI " + std::to_string(k.landlock_abi)
                                         : std::string("no Landlock (files and exec unconfined)");
    out += k.seccomp ? ", seccomp" : ", no seccomp (network unconfined)";
    return out;
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

} // namespace

std::shared_ptr<const plan> prepare(const request& r, const kernel_support& k) {
    auto p = std::make_shared<plan>();
    p->capabilities = r.capabilities;
    const bool writes =
        (r.capabilities & (bit(capability::writes_files) | bit(capability::destructive))) != 0;
    const bool network = (r.capabilities & bit(capability::accesses_network)) != 0;
    const bool spawns = (r.capabilities & bit(capability::starts_process)) != 0;
    bool complete = true;

    if (k.landlock_abi > 0) {
        const int abi = k.landlock_abi;
        std::uint64_t handled = write_rights(abi);
        if (!spawns) handled |= LANDLOCK_ACCESS_FS_EXECUTE;
        landlock_ruleset_attr attr{};
        attr.handled_access_fs = handled;
        const long fd = ll_create(&attr, sizeof attr, 0);
        if (fd < 0)
            throw std::runtime_error(std::string("landlock_create_ruleset: ") +
                                     std::strerror(errno));
        p->ruleset_fd = static_cast<int>(fd);
        ::fcntl(p->ruleset_fd, F_SETFD, FD_CLOEXEC);
        const std::uint64_t w = write_rights(abi);
        allow_path(p->ruleset_fd, r.tmp_dir, w, handled, abi);
        allow_path(p->ruleset_fd, "/dev/null", LANDLOCK_ACCESS_FS_WRITE_FILE, handled, abi);
        if (writes) {
            if (!r.cwd.empty()) allow_path(p->ruleset_fd, r.cwd, w, handled, abi);
            if (r.root) allow_path(p->ruleset_fd, *r.root, w, handled, abi);
            for (const auto& path : r.extra.write)
                allow_path(p->ruleset_fd, path, w, handled, abi);
        }
        if (!spawns) {
            const std::string path_value = program_search_path();
            const std::uint64_t x = LANDLOCK_ACCESS_FS_EXECUTE;
            // The program, and each program sandbox_paths.exec names, with what executing it
            // takes (its #! interpreter, env's program, the ELF loader).
            std::vector<fs::path> programs{r.program};
            programs.insert(programs.end(), r.extra.exec.begin(), r.extra.exec.end());
            for (const auto& prog : programs) {
                allow_path(p->ruleset_fd, prog, x, handled, abi);
                if (fs::is_regular_file(prog))
                    for (const auto& i : interpreters_of(prog, path_value))
                        allow_path(p->ruleset_fd, i, x, handled, abi);
            }
        }
        // Before ABI 3 truncate(2) and O_TRUNC are not a Landlock right: a process without
        // writes-files could still empty a file. Not complete, and `require` says so.
        if (abi < 3 && !writes) complete = false;
        p->fs = "landlock-abi-" + std::to_string(abi);
        p->exec = spawns ? "allowed" : "landlock";
    } else {
        p->exec = spawns ? "allowed" : "none";
        complete = false;
    }
    if (network) {
        p->net = "allowed";
    } else if (k.seccomp) {
        p->seccomp_bpf = ip_socket_filter();
        p->net = "seccomp";
    } else {
        complete = false;
    }
    p->complete = complete;
    return p;
}

int apply(const plan& p) noexcept {
    // Raw system calls only: this runs in a child sharing the daemon's address space.
    if (::syscall(SYS_prctl, PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return errno;
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
