// detach: `meithd --detach`, how `meith` auto-starts a daemon (docs/protocol.md §12) — the
// daemon goes to the background, in its own session, logging to a file; the command returns
// only once the daemon is ready, or has failed, so its caller needs no polling.
#pragma once

#include <cstdint>
#include <filesystem>

namespace meith::daemon {

/// Largest log file kept before it is rotated to `<log>.1` at the next detached start.
inline constexpr std::uintmax_t detached_log_rotate_bytes = 10u << 20; // 10 MiB

/// Forks. In the parent, which never returns: waits until the child writes "ready\n" to the
/// pipe (exit 0, printing "meithd <pid> ready; log <file>"), or closes it without (exit 1,
/// printing what the child logged since the fork, e.g. "another meithd (pid N) ...").
/// In the child: setsid(2), stdin from /dev/null, stdout and stderr appended to `log_file`
/// (mode 0600, rotated once past detached_log_rotate_bytes), working folder the log's folder
/// (the home); returns the pipe's write end
/// (close-on-exec) for daemon_options::ready_fd.
/// Must run before any thread starts. Throws std::runtime_error if the log cannot be opened.
int detach(const std::filesystem::path& log_file);

} // namespace meith::daemon
