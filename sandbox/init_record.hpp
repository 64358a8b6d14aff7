// init_record: meith-sandbox-init's recording mode for `meith sources learn` (docs/protocol.md
// §15 "Learned profiles"). The tool's process installs a seccomp filter that turns the system
// calls which write a path, execute a program, connect a socket or send a name lookup into
// user notifications for the init program, which reads their arguments from the tool's memory
// (/proc/TID/mem), appends one line per new fact to the record and lets every call through
// (SECCOMP_USER_NOTIF_FLAG_CONTINUE): the kernel then checks it as usual.
//
// The record: one line per distinct fact, never contents:
//   w PATH       a path written, created, removed or renamed (absolute, as the tool named it)
//   x PATH       a program executed
//   u PATH       a Unix socket connected to (`@NAME` for an abstract one)
//   n ADDR:PORT  an IPv4 or IPv6 (`[…]:PORT`) address connected to
//   d NAME       a name looked up (a DNS query sent)
// Bounded: at most record_max_lines distinct lines and record_max_bytes of them, then one
// `! truncated` line.
#pragma once

#include <cstddef>

namespace meith::sandbox {

inline constexpr std::size_t record_max_lines = 4096;
inline constexpr std::size_t record_max_bytes = 1 << 20;

/// In the tool's process, before its execve: the recording filter; its listener goes to the
/// init program over `sock` (SCM_RIGHTS). Exits 127 saying why when it cannot.
void install_record_filter(int sock);

/// In the init program: answers one notification from `listener`, appending what it names
/// to `record_fd` (once per distinct line). Never blocks the tool past its own reads.
void answer_recorded(int listener, int record_fd);

} // namespace meith::sandbox
