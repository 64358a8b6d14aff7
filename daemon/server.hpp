// server: meithd's life from startup checks to a clean exit (docs/protocol.md §1, §5).
//
// Startup: home checks, config, single-instance lock, audit log (torn tail repaired), sources
// started; once every source has registered or failed, the socket is bound (0600), the
// runtime and instance records are written, and connections are accepted. Each accepted peer
// is checked with SO_PEERCRED before a byte is read. SIGTERM/SIGINT start the graceful
// shutdown: stop accepting, refuse new calls, give calls in flight `shutdown_grace_ms`, stop
// sources, flush the audit log, remove the instance record and socket, exit 0.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

namespace meith::daemon {

struct daemon_options {
    std::optional<std::filesystem::path> home;   ///< --home
    std::optional<std::filesystem::path> config; ///< --config
    std::optional<std::filesystem::path> socket; ///< --socket
    std::string log_level = "info";              ///< --log-level
};

/// Runs the daemon until shutdown. Returns the process exit status: 0 after a clean
/// shutdown, 1 after a startup error (already printed to stderr).
int run_daemon(const daemon_options& opts);

} // namespace meith::daemon
