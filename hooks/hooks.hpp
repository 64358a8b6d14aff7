// hooks: the user's own programs asked about calls (docs/protocol.md §7 "Hooks").
//
// Filter hooks (before_execution, after_execution) answer {"allow":bool,"reason"?} and fail
// closed: no answer, a bad answer, a crash or a timeout all deny. Observe hooks (session_start,
// session_end, before_execution, after_execution) answer {"ack":true}; they are handed their
// event and never delay a call, and their failures are only logged. Each hook runs one-shot (a
// process per event, payload on stdin) or as a server (one supervised process speaking
// JSON-RPC 2.0 lines, method "hook"). The payload keeps the arguments nested under
// request.args, never merged with the metadata. I/O-thread only.
#pragma once

#include "config/config.hpp"
#include "process/supervisor.hpp"

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace meith::hooks {

/// One hook's answer about one call.
struct hook_verdict {
    std::string name;
    std::string phase;
    bool allow = true;
    std::string reason; ///< empty when the hook gave none
};

class hook_runner;

class hook_set {
  public:
    hook_set(asio::any_io_executor ex, process::child_reaper& reaper, const config::config& cfg);
    ~hook_set();

    /// Starts server-mode hooks.
    void start();
    /// Stops them; `done` runs when every hook process is reaped.
    void stop(std::chrono::milliseconds grace, std::function<void()> done);

    /// True when a filter hook applies to `tool_name` in `phase`.
    bool has_filters(std::string_view phase, std::string_view tool_name) const;

    /// Runs the filter hooks of `phase` that match `tool_name`, one after another in config
    /// order, each until its timeout_ms or the call's `deadline`, whichever comes first (when
    /// it is the deadline, the call's own timer fires first: TIMEOUT, never a hook's deny);
    /// the first deny stops the chain.
    /// `done(verdicts)` runs once with every verdict reached (the last one denies, if any did).
    void filter(std::string_view phase, std::string_view tool_name, std::string payload,
                std::chrono::steady_clock::time_point deadline,
                std::function<void(std::vector<hook_verdict>)> done);

    /// Hands `payload` to every observe hook of `phase` matching `tool_name` (empty for
    /// session events). Returns the names of the hooks notified.
    std::vector<std::string> observe(std::string_view phase, std::string_view tool_name,
                                     const std::string& payload);

    /// Restarts the server-mode hook `name` (clearing a failed state); false if there is none.
    bool restart(std::string_view name);

    /// Receives the lifecycle events of server-mode hook processes ("source_start",
    /// "source_exit", ...), with the hook's name, for the audit log.
    void on_lifecycle(std::function<void(std::string_view hook, std::string_view event,
                                         const std::string& details)>
                          fn);

    /// Status objects of server-mode hooks, like sources' (for `meith sources`).
    void append_status(std::string& out, bool& first) const;

  private:
    std::vector<std::unique_ptr<hook_runner>> hooks_;
};

} // namespace meith::hooks
