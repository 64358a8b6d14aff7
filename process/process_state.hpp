// process_state: the lifecycle of a supervised child, which is also the lifecycle of the source
// it serves (`meith sources` shows it: docs/protocol.md §7). One enum for both, so a source's
// state is its child's with no mapping between them.
#pragma once

#include <string_view>

namespace meith::process {

enum class process_state { starting, ready, restarting, failed, stopped };

/// "starting", "ready", "restarting", "failed", "stopped".
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
    }
    return "unknown";
}

} // namespace meith::process
