// discovery: where the running meithd listens — `--socket`, else `socketPath` from the instance
// record `$MEITH_HOME/config.json` that meithd writes while it runs — and where it audits.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

namespace meith::cli {

struct daemon_location {
    std::filesystem::path home;
    std::filesystem::path socket;
    std::optional<long> pid;  ///< from config.json, only when it describes this socket
    bool from_record = false; ///< the socket came from config.json (not --socket or a default)
    /// config.json's `log`: the daemon's log file, "journal" or "stderr" (absent: older
    /// daemons)
    std::optional<std::string> log;
    /// config.json's `configPath`: the file the running daemon's reload re-reads.
    std::optional<std::filesystem::path> config;
};

/// Where a person reads the daemon's log, for messages: its file ("~/.meith/meithd.log"),
/// "journalctl --user -u meithd", or "meithd's standard error".
std::string log_hint(const daemon_location& where);

/// Whether `home` is the default home, `$HOME/.meith` (the one whose daemon listens on the
/// runtime folder's socket when no record says otherwise).
bool is_default_home(const std::filesystem::path& home);

/// `home_flag` (--home) > env MEITH_HOME > `$HOME/.meith` (same rule as config/paths.hpp).
std::filesystem::path resolve_home(const std::optional<std::filesystem::path>& home_flag);

/// Finds the socket: `--socket`, else `socketPath` from config.json, else (no record yet, e.g.
/// a socket-activated daemon not started) the default socket path: for the default home
/// `$XDG_RUNTIME_DIR/meith/meithd.sock`, for any other home (and without XDG_RUNTIME_DIR)
/// `HOME/meithd.sock`. Throws cli_error(exit_error) when config.json is unreadable.
daemon_location locate_daemon(const std::optional<std::filesystem::path>& socket_flag,
                              const std::optional<std::filesystem::path>& home_flag);

/// The audit log `meith audit` reads: `file_flag` (--file), else `auditPath` from the home's
/// config.json (written by meithd; kept after it stops), else HOME/audit.jsonl.
std::filesystem::path locate_audit_log(const std::optional<std::filesystem::path>& file_flag,
                                       const std::optional<std::filesystem::path>& home_flag);

/// `path` with a leading $HOME shown as "~", for messages.
std::string display_path(const std::filesystem::path& path);

} // namespace meith::cli
