// peer: whether the process on the other end of a connection is one of meithd's own tools
// (docs/security.md, "The control plane is not reachable from a tool").
//
// meithd is a child subreaper (PR_SET_CHILD_SUBREAPER): every process a tool starts stays
// its descendant, even one that daemonises (an orphan is re-parented to the tool's sandbox
// init or to meithd, never to init(1)). So a peer is a tool's exactly when meithd is among
// its ancestors, which /proc/<pid>/stat tells, parent by parent.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <sys/types.h>

namespace meith::platform {

/// Who is on the other end of a Unix socket: SO_PEERCRED on Linux (unix(7)); pid is 0 when
/// the system does not tell it.
struct peer_identity {
    pid_t pid = 0;
    uid_t uid = 0;
};

/// The peer of the connected Unix socket `socket`; nullopt when the system cannot tell.
std::optional<peer_identity> peer_identity_of(int socket);

/// The time a connection is accepted, in the unit the process table gives a process's start
/// (Linux: clock ticks since boot, proc(5) starttime), for controlling_terminal_problem.
std::uint64_t accept_time();

/// Why process `pid`, which connected at `accepted_ticks` (accept_time()), cannot be taken for
/// a person at a terminal: it has no controlling terminal, it is gone, or its pid names a
/// newer process than the one that connected. nullopt: it has one (PROTOCOL.md §12, an
/// approver proves itself from a terminal).
std::optional<std::string> controlling_terminal_problem(pid_t pid, std::uint64_t accepted_ticks);

/// Makes this process a child subreaper (prctl(2) PR_SET_CHILD_SUBREAPER), logging on failure,
/// and keeps two descriptors in reserve for tool_peer_problem.
void become_subreaper();

/// Why `pid` (the SO_PEERCRED pid of the accepted connection `socket`) may not use meithd's
/// socket: it is meithd's descendant ("pid 123 is a process meithd started (a tool, or a
/// process of a tool's)"), or it cannot be told (gone before it was checked: its pid may name
/// another process by now). nullopt: not meithd's. The peer's pidfd (SO_PEERPIDFD, Linux 6.5)
/// pins the connecting process, so a pid reused during the walk is noticed. Runs on the
/// reserve descriptors, so it works when the daemon is otherwise out of them.
std::optional<std::string> tool_peer_problem(int socket, pid_t pid);

} // namespace meith::platform
