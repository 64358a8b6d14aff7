// call: one tool_call in flight, from dispatch to its single reply.
//
// A call is resolved exactly once (the first of: the tool's result, its timeout, a cancel,
// the client going away, daemon shutdown); later outcomes and late tool output are dropped.
// Resolution runs its owner's finishing step (the registry's: audit line, then reply)
// synchronously.
// Shared between the connection (to cancel it), the registry (to time it out) and the source
// (to deliver events and the result). I/O-thread only.
#pragma once

#include "permissions/client_profile.hpp"
#include "permissions/policy.hpp"
#include "protocol/tool_result.hpp"

#include <asio/any_io_executor.hpp>
#include <asio/steady_timer.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace meith::tools {

struct tool;
class call;
class call_list;
using call_ptr = std::shared_ptr<call>;

/// Who finishes a call: the registry (registry/registry.hpp), which takes it at dispatch
/// (`call::adopt`). A call without an owner (unit tests) sends its result straight to its sink.
class call_owner {
  public:
    /// The tool has answered `c` with `r`: the after_execution hooks, then `c->finalize`.
    virtual void after_tool(const call_ptr& c, protocol::tool_result r) = 0;
    /// The call is resolved with `r`, which may be replaced by what the client receives (a
    /// result over the size limit becomes an error); the audit line is written here, before
    /// the call hands `r` to its sink.
    virtual void finish(call& c, protocol::tool_result& r) = 0;

  protected:
    ~call_owner() = default;
};

/// A JSON-RPC answer passed through unchanged (docs/protocol.md §17): a `result` object when
/// `ok`, else an error object `{"code","message","data"?}`.
struct mcp_answer {
    bool ok = false;
    std::string json;
};
/// An error answer `{"code":code,"message":message}` (message escaped).
mcp_answer mcp_error(int code, std::string_view message);

/// Where a call's events and result go: the client connection that made it.
class call_sink {
  public:
    virtual ~call_sink() = default;
    /// A server's request (sampling/createMessage, elicitation/create, roots/list) to the
    /// client that made call `request_id`, as a client_request frame (docs/protocol.md §17).
    /// False, without calling `done`, when that client's hello did not declare the capability
    /// the method needs; otherwise `done` runs exactly once (the client's answer, or an error
    /// when it leaves first).
    virtual bool ask_client(std::string_view request_id, std::string_view method,
                            std::string_view params_json, std::function<void(mcp_answer)> done) {
        (void)request_id, (void)method, (void)params_json, (void)done;
        return false;
    }
    /// A server's notification that belongs to call `request_id` (elicitation/complete).
    virtual void notify_client(std::string_view request_id, std::string_view source,
                               std::string_view method, std::string_view params_json) {
        (void)request_id, (void)source, (void)method, (void)params_json;
    }
    /// A tool_event's `event` object (JSON text) for call `request_id`.
    virtual void on_tool_event(std::string_view request_id, std::string_view event_json) = 0;
    /// The call's one result; after this the call is gone.
    virtual void on_tool_result(std::string_view request_id, const protocol::tool_result& r) = 0;
};

/// Why a call ended, for the audit line.
enum class call_end { tool, timeout, cancel, disconnect, shutdown, refused };

/// Each way a call ends, by its names: the one table every text about a call's end comes from.
struct call_end_names {
    call_end how;
    std::string_view audit;  ///< the audit line's `end` (docs/protocol.md §6)
    std::string_view reason; ///< told to the tool when it ends without its result (§16); ""
                             ///< for an end that is the tool's own
    std::string_view words;  ///< in a sentence: an MCP server's notifications/cancelled reason
};
inline constexpr call_end_names call_end_table[] = {
    {call_end::tool, "tool", "", "answered"},
    {call_end::timeout, "timeout", "timeout", "timeout"},
    {call_end::cancel, "cancel", "cancelled", "cancelled by the client"},
    {call_end::disconnect, "client_disconnected", "disconnected", "the client disconnected"},
    {call_end::shutdown, "shutdown", "shutdown", "meithd is shutting down"},
    {call_end::refused, "refused", "", "refused"},
};

/// The names of `how` (its row of call_end_table).
constexpr const call_end_names& names_of(call_end how) {
    for (const auto& row : call_end_table)
        if (row.how == how) return row;
    return call_end_table[0];
}

/// The reason a source tells the tool when a call ends without its result (docs/protocol.md
/// §16, PROTOCOL.md §14): "cancelled", "timeout", "disconnected" or "shutdown" ("" for an end
/// that is the tool's own).
constexpr std::string_view cancel_reason(call_end how) {
    return names_of(how).reason;
}

class call : public std::enable_shared_from_this<call> {
  public:
    call(asio::any_io_executor ex, std::shared_ptr<call_sink> sink);
    ~call();
    call(const call&) = delete;
    call& operator=(const call&) = delete;

    // Identity, fixed at dispatch (docs/protocol.md §3, §5).
    std::string request_id;
    std::string session_id;
    permissions::caller caller = permissions::caller::plugin;
    std::string claimed_caller; ///< the raw clientInfo.caller claim ("" when none)
    std::string agent;          ///< clientInfo.agent: who acts through the client ("" when none,
                                ///< docs/protocol.md §10)
    /// The connection's client profile (docs/protocol.md §23): the tools it may reach and the
    /// names it knows them by. Null: none.
    std::shared_ptr<const permissions::client_profile> profile;
    /// W3C trace context (`traceparent`, 55 characters) the client passed: audited and given
    /// to an MCP source in the call's _meta (docs/protocol.md §17). "" when none.
    std::string traceparent;
    /// The instance of a source run per session or per client that ran it (`session:ID`,
    /// `agent:NAME`, …; sources/instance_pool.hpp), audited; "" for any other source.
    std::string instance;
    std::string tool_name;              ///< as requested
    std::string args_json;              ///< the arguments object, minified JSON text
    std::string args_summary;           ///< its redacted audit summary, made at dispatch
    std::shared_ptr<const tool> target; ///< null when the tool is unknown
    std::uint64_t timeout_ms = 0;
    bool result_model = false;   ///< add modelContent to the result (docs/protocol.md §13)
    bool result_display = false; ///< add result.meta.display
    std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
    bool decided = false;           ///< the permission decision was reached
    permissions::decision decision; ///< valid when `decided`
    /// The egress proxy's last refusal of a connection this call made, in words (docs/
    /// protocol.md §19): a failed result says it, since "fetch failed" does not.
    std::string egress_refusal;
    std::string grant_id;    ///< the grant that let the call through, if one did
    std::string approval_id; ///< the approval that decided the call, if it was held
    /// Held for a person's answer (from the ask decision until the answer): a timeout then
    /// says no approver answered, not that the tool did not finish.
    bool awaiting_approval = false;

    /// Forwards one event (JSON text of the `event` object) unless the call is resolved.
    void emit(std::string_view event_json);

    /// call_sink::ask_client for this call; false when it is resolved or the client lacks the
    /// capability.
    bool ask_client(std::string_view method, std::string_view params_json,
                    std::function<void(mcp_answer)> done) {
        return !resolved_ && sink_ &&
               sink_->ask_client(request_id, method, params_json, std::move(done));
    }
    /// call_sink::notify_client for this call, unless it is resolved.
    void notify_client(std::string_view source, std::string_view method,
                       std::string_view params_json) {
        if (!resolved_ && sink_) sink_->notify_client(request_id, source, method, params_json);
    }

    /// Resolves the call: the first resolution wins, later ones are ignored. Runs the
    /// source's abandon hook when the result did not come from the tool. A result from the
    /// tool (`how == call_end::tool`) first passes the after_execution hooks, during which the
    /// call can still time out or be cancelled.
    void resolve(protocol::tool_result result, call_end how = call_end::tool);

    /// The final step, for the owner (after_tool, or a result a filter hook withheld): no
    /// hooks, no second chances. The first resolution wins.
    void finalize(protocol::tool_result result, call_end how);

    /// Makes `owner` finish this call (before any resolution).
    void adopt(call_owner* owner) { owner_ = owner; }

    bool resolved() const { return resolved_; }
    /// The tool has answered (the call may still be in its after_execution hooks).
    bool tool_done() const { return tool_done_; }

    /// Hook outcomes for the audit line: JSON objects {"name","phase","kind","decision",
    /// "reason"}, comma-separated (docs/protocol.md §7).
    std::string hooks_json;
    call_end end() const { return end_; }

    /// Set by the source when it starts work: undoes it (forget the request id, kill the
    /// process group) when the call ends some other way.
    void on_abandon(std::function<void()> fn) { abandon_ = std::move(fn); }

    /// The call's timeout timer, created on first use: calls that finish at once never need one
    /// (a timer's construction looks its service up under a lock).
    asio::steady_timer& deadline() {
        if (!deadline_) deadline_.emplace(ex_);
        return *deadline_;
    }

  private:
    friend class call_list;
    call_owner* owner_ = nullptr;
    std::shared_ptr<call_sink> sink_;
    asio::any_io_executor ex_;
    std::optional<asio::steady_timer> deadline_;
    std::function<void()> abandon_;
    bool resolved_ = false;
    bool tool_done_ = false;
    call_end end_ = call_end::tool;
    /// Its place in a call_list: a call joins and leaves it without an allocation.
    call_list* list_ = nullptr;
    call* prev_ = nullptr;
    call* next_ = nullptr;
};

/// The calls in flight (the registry's): an intrusive list through the calls, which a call
/// leaves when it is destroyed. I/O-thread only.
class call_list {
  public:
    call_list() = default;
    call_list(const call_list&) = delete;
    call_list& operator=(const call_list&) = delete;
    ~call_list();

    /// Adds `c` unless it is in a list already.
    void add(call& c);
    /// Removes `c` if it is in this list.
    void remove(call& c);
    std::size_t size() const { return size_; }
    /// A strong reference to each call in the list, so a caller may resolve them in turn.
    std::vector<call_ptr> snapshot() const;

  private:
    call* head_ = nullptr;
    std::size_t size_ = 0;
};

} // namespace meith::tools
