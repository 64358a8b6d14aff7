// restrict: the last step of a confined child's start, shared by meithd's spawn (apply(),
// between clone and exec) and meith-sandbox-init's zygote (each run, after its fork): no
// capability, no new privileges, the rlimits, the Landlock ruleset and the seccomp filter
// (docs/protocol.md §15). Raw system calls only: async-signal-safe, no allocation.
#pragma once

#include <cstddef>
#include <cstdint>

namespace meith::sandbox {

/// What restrict_self applies; every member is optional (-1, null or 0: not applied).
struct restriction {
    int ruleset_fd = -1;                ///< a Landlock ruleset (landlock_restrict_self)
    const unsigned char* bpf = nullptr; ///< struct sock_filter[], bpf_bytes long
    std::size_t bpf_bytes = 0;
    std::uint64_t rlimit_nproc = 0, rlimit_data = 0; ///< never raised past the hard limit
    /// The capabilities that may be in the bounding set (bit N: capability N), each dropped:
    /// all by default; a zygote's run has only the four its zygote kept (zygote_bounding;
    /// 64 prctl calls cost 2 % of a one-shot call's CPU in bench (k)).
    std::uint64_t bounding = ~std::uint64_t{0};
};

/// In the calling process, in this order: empties the capability bounding set (where it
/// may), clears the ambient set and every capability set, PR_SET_NO_NEW_PRIVS, the rlimits,
/// landlock_restrict_self, the seccomp filter. 0, or the errno of the step that failed.
int restrict_self(const restriction& r) noexcept;

/// In a zygote's clone child before its exec (docs/protocol.md §15 "Zygote"): keeps only
/// the capabilities of zygote_bounding of those its new user namespace gave it, in the
/// bounding and the ambient set, so that meith-sandbox-init keeps it across execve to make each
/// run's PID, IPC and mount namespaces (capabilities(7) "Ambient capability set"). 0, or the errno.
int keep_namespace_admin() noexcept;

/// The bounding set keep_namespace_admin leaves: CAP_SYS_ADMIN (21), CAP_SETPCAP (8),
/// CAP_NET_ADMIN (12) and CAP_NET_BIND_SERVICE (10).
inline constexpr std::uint64_t zygote_bounding =
    (std::uint64_t{1} << 21) | (std::uint64_t{1} << 8) | (std::uint64_t{1} << 12) |
    (std::uint64_t{1} << 10);

} // namespace meith::sandbox
