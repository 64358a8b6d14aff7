// limits: what one confined process tree may take of the machine, so that a fork loop, a
// memory hog or an inotify hoarder in a tool leaves meithd, the other tools and the user's
// shell working (docs/protocol.md §15 "Limits", docs/security.md).
//
// Three mechanisms, each where it works:
//   - RLIMIT_NPROC, set in the child: in its own user namespace (Linux >= 5.14 counts it per
//     user namespace) it bounds the tool's own processes and threads, not the user's. The
//     kernel does not apply it to uid 0 of the initial namespace, so meithd run as root
//     needs the next one;
//   - a pids (and memory) cgroup of its own: a cgroup v1 hierarchy meithd may write
//     (/sys/fs/cgroup/pids, /sys/fs/cgroup/memory: meithd as root). A v2 subtree delegated by
//     the user manager is not used yet;
//   - the per-user-namespace sysctls of inotify (/proc/sys/user/max_inotify_*), written by the
//     child as the owner of its namespace: the tool's instances also count against the user's
//     128, so its own bound keeps some for everyone else.
// Without a memory cgroup, RLIMIT_DATA bounds the heap instead (RLIMIT_AS is not used: V8 and
// wasm reserve far more address space than they use).
#pragma once

#include <cstdint>
#include <string>

namespace meith::sandbox {

/// The bounds of one process tree. Zero: not bounded.
struct resource_limits {
    std::uint64_t processes = 1024;          ///< tasks (processes and threads)
    std::uint64_t memory_bytes = 8ull << 30; ///< resident memory (cgroup) or heap (RLIMIT_DATA)
    std::uint64_t inotify_instances = 32;    ///< the user's default is 128
    std::uint64_t inotify_watches = 65536;
};

/// A cgroup v1 pids (and memory) group for one plan: made under meithd's group of each
/// hierarchy (`meith-PID`, under meithd's own group; the ones of daemons no longer running are
/// removed when the first is made), with the bounds written; `procs_fd` are its cgroup.procs files,
/// opened for the child to write "0" (itself) into before it executes anything. Removed (rmdir)
/// when destroyed; a group that still holds processes stays until they are gone.
class limit_group {
  public:
    /// Makes the groups `name` (a number) under the writable hierarchies; nothing where
    /// none is writable (an ordinary user on a v1 or hybrid system, any user on pure v2).
    limit_group(const std::string& name, const resource_limits& l);
    ~limit_group();
    limit_group(const limit_group&) = delete;
    limit_group& operator=(const limit_group&) = delete;

    int pids_procs_fd = -1;
    int memory_procs_fd = -1;
    /// "pids,memory" / "pids" / "none": what the status shows.
    std::string controllers = "none";

  private:
    std::string pids_dir_, memory_dir_;
};

} // namespace meith::sandbox
