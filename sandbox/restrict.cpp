#include "sandbox/restrict.hpp"

#include <cerrno>
#include <utility>

#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace meith::sandbox {

int restrict_self(const restriction& r) noexcept {
    // No capability survives the exec, whoever runs meithd (root included): the bounding set
    // is emptied where we may (root, or a user namespace's owner), then every set.
    for (int cap = 0; cap <= 63; ++cap)
        if ((r.bounding >> cap) & 1u) ::syscall(SYS_prctl, PR_CAPBSET_DROP, cap, 0, 0, 0);
    ::syscall(SYS_prctl, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
    __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct none[2] = {};
    if (::syscall(SYS_capset, &header, none) != 0) return errno;
    if (::syscall(SYS_prctl, PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return errno;
    for (auto [resource, value] :
         {std::pair{RLIMIT_NPROC, r.rlimit_nproc}, std::pair{RLIMIT_DATA, r.rlimit_data}}) {
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
    if (r.ruleset_fd >= 0 && ::syscall(SYS_landlock_restrict_self, r.ruleset_fd, 0) != 0)
        return errno;
    if (r.bpf_bytes != 0) {
        sock_fprog prog{};
        prog.len = static_cast<unsigned short>(r.bpf_bytes / sizeof(sock_filter));
        prog.filter = reinterpret_cast<sock_filter*>(const_cast<unsigned char*>(r.bpf));
        if (::syscall(SYS_prctl, PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) != 0)
            return errno;
    }
    return 0;
}

static_assert(zygote_bounding ==
              ((std::uint64_t{1} << CAP_SYS_ADMIN) | (std::uint64_t{1} << CAP_SETPCAP) |
               (std::uint64_t{1} << CAP_NET_ADMIN) | (std::uint64_t{1} << CAP_NET_BIND_SERVICE)));

int keep_namespace_admin() noexcept {
    // CAP_SYS_ADMIN makes the namespaces and mounts; CAP_SETPCAP lets each run empty its
    // bounding set again (PR_CAPBSET_DROP) before restrict_self clears every set; with a
    // `network` table, CAP_NET_ADMIN brings each run's loopback up and CAP_NET_BIND_SERVICE
    // lets it listen on a forwarded port under 1024, as a direct start may.
    constexpr int kept[] = {CAP_SYS_ADMIN, CAP_SETPCAP, CAP_NET_ADMIN, CAP_NET_BIND_SERVICE};
    const auto is_kept = [&](int cap) {
        for (const int k : kept)
            if (k == cap) return true;
        return false;
    };
    for (int cap = 0; cap <= 63; ++cap)
        if (!is_kept(cap)) ::syscall(SYS_prctl, PR_CAPBSET_DROP, cap, 0, 0, 0);
    __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct sets[2] = {};
    for (const int cap : kept) {
        const unsigned bit = 1u << (cap % 32);
        sets[cap / 32].effective |= bit;
        sets[cap / 32].permitted |= bit;
        sets[cap / 32].inheritable |= bit;
    }
    if (::syscall(SYS_capset, &header, sets) != 0) return errno;
    for (const int cap : kept)
        if (::syscall(SYS_prctl, PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, cap, 0, 0) != 0)
            return errno;
    return 0;
}

} // namespace meith::sandbox
