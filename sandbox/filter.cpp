// filter: the seccomp filter of a confined child (tool_filter), built in the daemon as BPF.
#include "sandbox/internal.hpp"

#include <cerrno>
#include <initializer_list>
#include <stdexcept>
#include <string_view>

#include <linux/netlink.h>
#include <sched.h>
#include <seccomp.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

namespace meith::sandbox {

namespace {

/// fchmodat2(2) (Linux 6.6), for a libseccomp that does not know it yet; -1 where unknown.
#if defined(__x86_64__) || defined(__aarch64__)
constexpr int fchmodat2_nr = 452;
#else
constexpr int fchmodat2_nr = -1;
#endif

} // namespace

namespace detail {

// Stays whole (~85 lines): the seccomp rule list read top to bottom, as the kernel applies it.
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

} // namespace detail

} // namespace meith::sandbox
