// autostart: connecting to meithd, starting it first when nobody answers (docs/protocol.md §12),
// the way watchman's client does. Every command that talks to the daemon comes through here.
#pragma once

#include "cli/discovery.hpp"
#include "cli/options.hpp"
#include "protocol/client_channel.hpp"

#include <chrono>
#include <filesystem>
#include <optional>

namespace meith::cli {

/// How long a command waits for a daemon it started (or found starting) to answer.
inline constexpr std::chrono::seconds autostart_timeout{30};

/// A connected channel, not yet past hello.
struct daemon_connection {
    daemon_location where;
    protocol::client_channel channel;
    bool started = false; ///< this command started the daemon
};

/// False when `--no-autostart` was given or env MEITH_NO_AUTOSTART is set to anything but ""
/// or "0".
bool autostart_enabled(const options& opts);

/// Locates and connects to meithd. When nobody answers (no socket, connection refused) and
/// auto-start is enabled, starts it — `systemctl --user start meithd.service` when the user
/// unit is installed and the home and socket are the defaults, else `meithd --detach` (the
/// meithd next to this binary, else from PATH) with this command's --home and --socket — then
/// reconnects with bounded backoff (10 ms doubling to 250 ms, up to autostart_timeout) while a
/// daemon holds the home's lock. Says "meith: started meithd ..." on stderr (never stdout: it
/// may be an MCP channel). Throws protocol::client_error(not_running) when disabled, or
/// cli_error naming the log when the started daemon did not come up.
daemon_connection connect_daemon(const options& opts);

/// connect_daemon that starts meithd when nobody answers whatever auto-start says (`meith
/// restart`); `config` (when given) is passed to meithd --detach as --config.
daemon_connection start_and_connect(const options& opts,
                                    const std::optional<std::filesystem::path>& config);

/// True when the user unit `meith service install` wrote serves this command's home and socket
/// (Linux, systemctl on PATH): then systemctl starts and stops meithd.
bool unit_serves(const options& opts);

} // namespace meith::cli
