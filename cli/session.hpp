// session: the JSON layer over the protocol's client channel (protocol/client_channel.hpp)
// shared by every subcommand — connect and hello, wait for the reply to one request, small
// accessors for frames from the daemon, and the one place where the channel's client_error
// becomes a cli_error.
#pragma once

#include "bridge/json.hpp"
#include "cli/discovery.hpp"
#include "cli/errors.hpp"
#include "cli/options.hpp"
#include "protocol/client_channel.hpp"
#include "protocol/client_frames.hpp"

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace meith::cli {

// ordered: `--json` output keeps the daemon's field order, and our frames read type-first.
using json = bridge::json;
using bridge::compact;
using bridge::get_field;
using bridge::get_string;

/// How long status/tools/hello wait for a reply; tool calls themselves wait without limit.
inline constexpr std::chrono::seconds reply_timeout{10};

/// A connected client that has completed hello.
struct session {
    daemon_location where;
    protocol::client_channel conn;
    /// "cli_<pid>_<n>", unique per process.
    protocol::request_id_generator ids;
    json hello; ///< the hello_result frame
};

/// The channel's failures as the CLI reports them: exit_error, the channel's message, and for
/// `not_running` the command that starts meithd for this home (its path, --home/--socket as
/// given, the config it would read or `--config FILE`). main applies it to every command.
cli_error to_cli_error(const protocol::client_error& e, const options& opts);

/// Connects (starting meithd when nobody answers and auto-start is on, cli/autostart.hpp)
/// and says hello as `opts.caller`. Throws cli_error(exit_error).
session open_session(const options& opts);

/// Parses one frame; anything but a JSON object is a protocol error (cli_error).
json parse_frame(const std::string& line);

/// Throws cli_error(error_exit) if `frame` is an error frame for `request_id` or for the
/// whole connection (no requestId).
void check_error_frame(const json& frame, const std::string& request_id,
                       int error_exit = exit_error);

/// Reads frames until one of `type` answers `request_id`, skipping unrelated ones. Throws on
/// an error frame for it (cli_error(error_exit)), and on close and on timeout (exit_error).
json await_reply(protocol::client_channel& conn, const std::string& request_id,
                 std::string_view type, std::chrono::milliseconds timeout = reply_timeout,
                 int error_exit = exit_error);

/// JSON for stdout: indented when stdout is a terminal, else compact (one line per value, for
/// scripts). Invalid UTF-8 is replaced rather than thrown on.
std::string pretty(const json& j);

/// Replaces control characters (terminal escapes from tool output) with '?'; keeps `\n` and
/// `\t` when `keep_newlines`, else turns them into spaces.
std::string sanitize(std::string_view text, bool keep_newlines);

} // namespace meith::cli
