// internal: what sandbox.cpp, filter.cpp and mounts.cpp share; not part of the public API.
//
// Everything here runs in the daemon (allocating, throwing) while a plan is prepared; nothing
// of it is called between clone and exec.
#pragma once

#include "sandbox/sandbox.hpp"

#include <cstddef>
#include <filesystem>
#include <string_view>
#include <vector>

namespace meith::sandbox::detail {

/// At most this many writable roots are mounted again (cwd, root and sandbox_paths.write); a
/// plan holds at most twice as many mount steps, and at most this many pinned and read-only
/// paths each (enter() keeps one descriptor per step on its stack).
inline constexpr std::size_t max_writable = 64;

/// The seccomp filter of a confined child (docs/protocol.md §15), as BPF (struct
/// sock_filter[], for plan::seccomp_bpf). Refused with EACCES: io_uring (it opens files and
/// sockets without the system calls below), ptrace and process_vm_readv/writev; without
/// `network` every socket(2) and every socketpair(2) but AF_UNIX's; with it every family but
/// AF_INET, AF_INET6 and NETLINK_ROUTE, and raw IP sockets; socket(AF_UNIX) only with
/// `unix_sockets` (declared socket paths). Without `namespaces` (no read-only tree) and without
/// `writes`, chmod, chown, utimes and xattr changes anywhere. Other architectures' system calls
/// kill the process (libseccomp's default). Throws std::runtime_error when libseccomp cannot
/// build or export it.
std::vector<unsigned char> tool_filter(bool network, bool unix_sockets, bool writes,
                                       bool namespaces);

/// The mount steps of `r` into `p.steps` (docs/protocol.md §15): each writable root bound
/// read-write over the read-only tree (only with `writes`); each private place
/// (default_private_places() and r.private_places) under an empty read-only tmpfs; inside
/// those, the paths the process needs bound back read-only (program, interpreters, `init`, cwd,
/// root, tmp_dir, extra paths, declared sockets, /etc/resolv.conf's target). Sorted shallow to
/// deep; a mask lists the mount points of the binds that lie directly in it. Paths that do not
/// exist are skipped. Throws std::runtime_error past max_writable writable roots or
/// 2 * max_writable steps.
void plan_mounts(plan& p, const request& r, const std::filesystem::path& init, bool writes);

/// True when `h` (lexically normal) lies in a private place of `p.steps` (plan_mounts first)
/// and no bind brings it back: nothing to hide there. A bind at `h` itself: false.
bool masked_away(const plan& p, const std::filesystem::path& h);

/// True when MEITH_SANDBOX_TEST_ABSENT (a comma-separated test switch) names `what`:
/// "limits" or "private-places" leave that protection out, for bench (k) to measure its cost.
bool switched_off(std::string_view what);

} // namespace meith::sandbox::detail
