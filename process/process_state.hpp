// process_state: the lifecycle of a supervised child, which is also the lifecycle of the source
// it serves (`meith sources` shows it: docs/protocol.md §7). One enum for both, so a source's
// state is its child's with no mapping between them.
#pragma once

#include <string_view>

namespace meith::process {

/// `idle` is a source's alone (a child never is): it starts on demand and is not running now,
/// its tools listed from their pins (docs/configuration.md "Starting on demand").
enum class process_state { starting, ready, restarting, failed, stopped, idle };

/// "starting", "ready", "restarting", "failed", "stopped", "idle".
constexpr std::string_view to_string(process_state s) {
    switch (s) {
    case process_state::starting:
        return "starting";
    case process_state::ready:
        return "ready";
    case process_state::restarting:
        return "restarting";
    case process_state::failed:
        return "failed";
    case process_state::stopped:
        return "stopped";
    case process_state::idle:
        return "idle";
    }
    return "unknown";
}

} // namespace meith::process
