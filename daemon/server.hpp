// server: meithd's life from startup checks to a clean exit (docs/protocol.md §1, §5).
//
// Startup: home checks, config, single-instance lock, audit log (torn tail repaired), sources
// started; once every source has registered or failed, the socket is bound (0600), the
// runtime and instance records are written, and connections are accepted. Each accepted peer
// is checked with SO_PEERCRED before a byte is read. SIGTERM/SIGINT start the graceful
// shutdown: stop accepting, refuse new calls, give calls in flight `shutdown_grace_ms`, stop
// sources, flush the audit log, remove the instance record and socket, exit 0.
//
// Under systemd (docs/protocol.md §12): a socket-activated listener (fd 3) is adopted instead of
// binding, is never unlinked, and is only accepted on once ready, so early frames wait in the
// kernel's queue; READY/STATUS/RELOADING/STOPPING/WATCHDOG go to NOTIFY_SOCKET.
#pragma once

#include "audit/audit_log.hpp"
#include "config/config.hpp"
#include "platform/service_manager.hpp"

#include <filesystem>
#include <optional>
#include <string>

namespace meith::daemon {

struct daemon_options {
    std::optional<std::filesystem::path> home;   ///< --home
    std::optional<std::filesystem::path> config; ///< --config
    std::optional<std::filesystem::path> socket; ///< --socket
    std::string log_level = "info";              ///< --log-level
    /// --detach: the write end of the pipe the waiting parent reads (daemon/detach.hpp);
    /// "ready\n" is written to it once the daemon is ready, then it is closed. -1: none.
    int ready_fd = -1;
    /// Where the daemon's log goes, for the runtime record's `log` (docs/protocol.md §1):
    /// the file of --detach; empty: standard error (the journal under systemd).
    std::filesystem::path log_file;
};

/// Runs the daemon until shutdown (startup.cpp). Returns the process exit status: 0 after a
/// clean shutdown, 1 after a startup error (already printed to stderr).
int run_daemon(const daemon_options& opts);

/// What startup hands the server: the settled config, home and socket, the open audit log and
/// the listener systemd passed, if any.
struct served_daemon {
    config::config& cfg;
    std::optional<std::filesystem::path> config_arg; ///< --config
    std::filesystem::path home;
    std::filesystem::path socket;
    audit::audit_log& audit;
    std::optional<platform::activated_listener> activated;
    int ready_fd = -1;
    std::filesystem::path log_file;
};

/// Runs the server (server.cpp) until shutdown: sources, the socket, connections, reloads,
/// the graceful stop. Returns the exit status; throws on a start-up failure (run_daemon
/// prints it).
int serve(served_daemon d);

} // namespace meith::daemon
