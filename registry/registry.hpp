// registry: the tools of every source and the one dispatch path every call takes.
//
// dispatch(): lookup -> validate arguments against the tool's inputSchema -> permission (a
// grant, or a person's approval for an `ask`) -> hooks -> run on the source raced against its
// timeout, a cancel, the client leaving and shutdown -> after_execution hooks -> audit line ->
// reply. This is the only place that owns those cross-cutting duties; sources only run tools and
// connections only move frames. I/O-thread only.
//
// One class, its jobs in one file each:
//   registry.cpp          construction, policy and status queries
//   tool_table.*          the tools: registration, name clashes, prefixes, lookup, descriptors
//   call_pipeline.cpp     `call` and dispatch -> validate -> permission -> hooks -> source ->
//                         after_tool -> finish
//   call_audit.*          the call's audit record (tool_call / tool_call_rejected lines)
//   source_lifecycle.cpp  start and readiness, live add/remove, retiring, restart, stop
//   approvals.*           calls held for a person's decision, grants
//   agent_features.cpp    previews, required tags, result shaping for a model or a display
//   tool_formats.cpp      list_tools in the model vendors' formats
//   hooks.*               filter and observe hooks
// It owns the audit trail (audit/audit_trail.hpp: event lines, the group commit, replies
// waiting for their lines), which connections use directly; the source kinds are in sources/.
#pragma once

#include "approvals/approvals.hpp"
#include "audit/audit_log.hpp"
#include "audit/audit_trail.hpp"
#include "audit/redactor.hpp"
#include "config/config.hpp"
#include "permissions/policy.hpp"
#include "permissions/rate_limits.hpp"
#include "registry/call_audit.hpp"
#include "tools/call.hpp"
#include "tools/tool_pins.hpp"
#include "tools/tool_source.hpp"
#include "tools/tool_table.hpp"

#include <asio/any_io_executor.hpp>

#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_set>
#include <vector>

#include <simdjson.h>

namespace meith::hooks {
class hook_set;
} // namespace meith::hooks

namespace meith::registry {

using tools::call;
using tools::tool;

/// Who hears what a source says outside calls: the MCP gateway (gateway/mcp_gateway.hpp), which
/// sits above the registry and sets itself once.
class source_observer {
  public:
    /// A source's MCP notification (tools::source_events::mcp_notification).
    virtual void on_notification(tools::tool_source& src, std::string_view method,
                                 std::string_view params_json) = 0;
    /// A source was removed (a reload): whatever routes to it is forgotten.
    virtual void on_removed(const tools::tool_source& src) = 0;

  protected:
    ~source_observer() = default;
};

class registry final : public tools::call_owner {
  public:
    /// `audit` may be null (unit tests); it must outlive the registry otherwise.
    registry(asio::any_io_executor ex, const config::config& cfg, audit::audit_log* audit);
    ~registry();
    registry(const registry&) = delete;
    registry& operator=(const registry&) = delete;

    void add_source(std::shared_ptr<tools::tool_source> source);

    /// Starts every source; `on_ready` runs once each has registered its tools or failed its
    /// first start (docs/protocol.md §1 readiness). A source whose listing takes a name another
    /// source registered first fails alone (named in the log and list_sources); the daemon
    /// starts: a listing is the program's, not the config's (docs/protocol.md §7).
    void start(std::function<void()> on_ready);

    /// Runs call `c` (identity fields filled in by the connection) with `args`, an object
    /// element valid only during this call. Always ends in exactly one result to the sink.
    void dispatch(const tools::call_ptr& c, simdjson::dom::element args);

    /// Resolves `c` as failed without running anything (frame-level VALIDATION_ERROR);
    /// `args` (any JSON type, may be null) is what the frame carried, for the audit line.
    void reject(const tools::call_ptr& c, protocol::error_code code, std::string message,
                const simdjson::dom::element* args);

    /// Audits a tool_call frame refused before it became a call (`tool_call_rejected`, the
    /// call record's keys with null outcome).
    void audit_rejected_call(const rejected_call& r);

    /// Appends the tools, comma-separated, as `who` would see them: ToolDescriptors (§3), or
    /// a provider's `format` (tool_formats.hpp).
    /// With `profile`, only its tools, as it shows them (rendered afresh, not cached).
    void append_tool_descriptors(std::string& out, permissions::caller who,
                                 tools::list_format format = tools::list_format::meith,
                                 const permissions::client_profile* profile = nullptr);
    /// A page of that listing (docs/protocol.md §5 "Pages"): in name order, only the tools
    /// `who` may call or ask for when `permitted` (always, for a provider's format), those from
    /// `offset`, at most `limit`, rendered afresh. Returns how many tools the listing holds in
    /// all (the page's `total`).
    std::size_t append_tool_page(std::string& out, permissions::caller who,
                                 tools::list_format format,
                                 const permissions::client_profile* profile, std::size_t offset,
                                 std::size_t limit, bool permitted);
    /// Tool search (docs/protocol.md §20): the tools `who` may call or ask for, ranked for
    /// `query`, at most `limit`, rendered as append_tool_descriptors does. Returns how many.
    std::size_t append_tool_search(std::string& out, std::string_view query, std::size_t limit,
                                   permissions::caller who,
                                   tools::list_format format = tools::list_format::meith,
                                   const permissions::client_profile* profile = nullptr) {
        return tools_.append_search(out, query, limit, who, policy_, format, profile);
    }

    /// Status objects of every source, as a JSON array.
    std::string sources_json() const;

    /// The audit trail (docs/protocol.md §6): event lines, the group commit, and the replies
    /// that wait for their lines. The daemon's connections talk to it directly.
    audit::audit_trail& audit_trail() { return audit_; }

    /// Shutdown, step 1: refuse new calls with RUNTIME_SHUTTING_DOWN; calls held for approval
    /// end now (RUNTIME_SHUTTING_DOWN, withdrawn), nobody may approve them any more.
    void begin_shutdown();
    bool shutting_down() const { return shutting_down_; }
    std::size_t calls_in_flight() const { return calls_.size(); }
    /// Shutdown, step 2: resolve every call still in flight.
    void abort_all(protocol::error_code code, const std::string& message, tools::call_end how);
    /// Shutdown, step 3: stop every source; `done` runs when all are stopped.
    void stop_sources(std::function<void()> done);

    /// Hooks asked about calls and told about sessions; may be null (none configured).
    void set_hooks(hooks::hook_set* hooks) { hooks_ = hooks; }
    hooks::hook_set* hooks() const { return hooks_; }

    /// Tells observe hooks about a session (connection) starting or ending.
    void observe_session(std::string_view phase, std::string_view session_id, pid_t pid, uid_t uid);

    /// Explains the permission decision for `tool_name` and `who` (for `meith policy check`):
    /// JSON members `"toolName","caller","known","capabilities","decision" (allow, deny or
    /// ask),"reason","grantable","filterHooks"` (the phases in which filter hooks would still
    /// be asked). The static policy: grants of a session are not consulted. With `profile`,
    /// `tool_name` is as the profile shows it, and a tool it hides is denied, saying why
    /// (`"client"` and `"hidden":true` are added).
    std::string explain_policy(std::string_view tool_name, permissions::caller who,
                               const permissions::client_profile* profile = nullptr) const;

    /// The permission decision on a call of `t` by `who` through client profile `profile`
    /// (may be null), on the tool as it is now.
    struct call_decision {
        /// The policy's decision; for a refusal below, a deny (not grantable) saying why.
        permissions::decision decision;
        bool hidden = false;      ///< the profile hides the tool (docs/protocol.md §23)
        bool quarantined = false; ///< its definition waits for a person (docs/protocol.md §22)
    };
    /// The one decision dispatch, preview_tool_call, check_policy (explain_policy) and every
    /// re-decision of a held call make, so none of them can answer differently: a tool the
    /// profile hides is denied, then a quarantined one, then the policy decides. Grants are
    /// not consulted (dispatch looks for one after a decision that does not allow).
    call_decision decide_call(const tool& t, permissions::caller who,
                              const permissions::client_profile* profile = nullptr) const;
    /// The same decision on a request of MCP's other families (docs/protocol.md §17, §23): a
    /// source whose families `profile` does not reach is hidden (denied, saying why), else the
    /// policy decides `target` (a URI or prompt name) with the source's resource_capabilities.
    /// The gateway refuses `ask` itself (a person approves tool calls only).
    call_decision decide_family_request(tools::tool_source& src, std::string_view target,
                                        permissions::caller who,
                                        const permissions::client_profile* profile) const;

    /// Restarts the source (or server-mode hook) named `name`; false when there is none.
    bool restart_source(std::string_view name);

    /// learn_source (learning.cpp, docs/protocol.md §15 "Learned profiles"). Start: the source
    /// `name` restarts in the learning confinement, recording to HOME/learn/NAME.record (made
    /// anew). Stop: it restarts as configured, and the reply's members say the profile that
    /// covers the record (`"name","learned":{…},"keys":[[KEY,TOML],…],"config"`: the keys to
    /// set in its entry of that config file). `error` in words when it cannot.
    struct learn_outcome {
        std::string members;
        std::optional<std::string> error;
    };
    learn_outcome learn_source(std::string_view name, bool stop);

    // ---- Config reload (docs/configuration.md "Reloading") --------------------------------

    /// Adds `source` after start() and starts it; its tools appear when it registers them.
    void add_live_source(std::shared_ptr<tools::tool_source> source);
    /// Removes the source named `name`: its tools are unregistered at once (new calls get
    /// UNKNOWN_TOOL), then it is stopped (calls in flight on it fail as on its exit) and
    /// destroyed once its process is gone. False when there is none.
    bool remove_source(std::string_view name);
    /// State of the source named `name`, if there is one.
    std::optional<tools::source_state> source_state_of(std::string_view name) const;
    // ---- pinned tool definitions (registry.cpp, tool_pins.hpp, docs/protocol.md §22) ----
    /// Pins tool definitions in `file` from now on (loaded now); an error in words when the
    /// file cannot be trusted (pins then start empty).
    std::optional<std::string> pin_tools_in(std::filesystem::path file);
    /// A person accepts quarantined tool `name`'s definition (approver session `by`); an
    /// error in words when there is no such tool or it is not quarantined.
    std::optional<std::string> accept_tool(std::string_view name, std::string_view by);
    /// The members `"toolName","pinned":{…}|null,"held":{…}` of quarantined tool `name`'s
    /// diff; an error in words when it is not quarantined.
    std::optional<std::string> append_held_definition(std::string& out, std::string_view name);

    /// Replaces the `[[limits.rates]]` rules (a reload): every bucket starts full again.
    void set_rate_limits(const std::vector<config::rate_limit_config>& rates) {
        rates_.configure(rates);
    }
    /// A session ended: its grants, its per-session rate buckets and (after their grace) the
    /// source instances only it used go.
    void end_session(std::string_view session) {
        approvals_.end_session(session);
        rates_.end_session(session);
        for (const auto& s : sources_)
            s->session_ended(session); // an instance of it may stop (instance_pool.hpp)
    }
    /// Replaces the client profiles (`[clients.NAME]`, docs/protocol.md §23); a connection
    /// looks its profile up by name for each frame, so the next frame uses the new one.
    void set_clients(const std::vector<config::client_config>& clients);
    using profile_ptr = std::shared_ptr<const permissions::client_profile>;
    /// The profile named `name`, or null.
    profile_ptr client_profile(std::string_view name) const {
        auto it = profiles_.find(name);
        return it == profiles_.end() ? nullptr : it->second;
    }
    /// Why MCP source `src`'s families are out of `profile` (client_profile::source_hidden,
    /// with whether the profile shows one of its tools now), or nullopt when they are in.
    std::optional<std::string> source_hidden(const permissions::client_profile& profile,
                                             const tools::tool_source& src) const;
    /// The profile whose `agents` lists MCP client name `agent`, or null.
    profile_ptr profile_for_agent(std::string_view agent) const {
        if (agent.empty()) return nullptr;
        auto it = profile_by_agent_.find(agent);
        return it == profile_by_agent_.end() ? nullptr : it->second;
    }
    /// How many tools `profile` hides.
    std::size_t count_hidden(const permissions::client_profile& profile) const;
    /// The profiles' names, comma-separated ("none" when there are none).
    std::string client_profile_names() const;
    /// Replaces the permission policy; decisions of later calls and list_tools use it.
    void set_permissions(const config::permissions_config& permissions);
    /// Decides every held call again under the current policy, on its tool as it is now (a
    /// reload): a call now denied (or whose tool is gone or quarantined) is withdrawn from the
    /// approvers and fails as a fresh call would, one now allowed runs.
    void redecide_held_calls();
    /// The daemon's reload: returns the members of a `config_reloaded` reply
    /// (`"ok":...,"changed":[...],...`). Set by the daemon; without it reloading is refused.
    void set_reload_handler(std::function<std::string()> handler) {
        reload_handler_ = std::move(handler);
    }
    /// Runs the reload handler; nullopt when there is none.
    std::optional<std::string> reload_config() {
        if (!reload_handler_) return std::nullopt;
        return reload_handler_();
    }

    /// What a person's `allow_always` for an egress target does beyond this run: the daemon
    /// adds `rule` to source `source`'s network.allow in its config file. Returns an error in
    /// words (the target is then allowed for this run only). Unset: this run only.
    void set_egress_always_handler(
        std::function<std::optional<std::string>(std::string_view source, std::string_view rule)>
            handler) {
        egress_always_ = std::move(handler);
    }

    const config::config& cfg() const { return cfg_; }
    const permissions::policy& policy() const { return policy_; }
    /// Grants, approvers and held calls (PROTOCOL.md §12).
    approvals::approval_service& approvals() { return approvals_; }
    const audit::redactor& redactor() const { return redactor_; }
    /// Appends `s` as a JSON string with secrets redacted: every client- or tool-supplied
    /// string an audit line carries goes through here (request ids, tool names, caller claims,
    /// hook and rejection reasons), not only arguments and results (§6).
    void append_redacted(std::string& out, std::string_view s) const;
    asio::any_io_executor executor() const { return ex_; }
    std::size_t tool_count() const { return tools_.size(); }
    /// The tool registered as `name`, or null.
    std::shared_ptr<const tool> find_tool(std::string_view name) const { return tools_.find(name); }

    /// list_tools with `tags` and/or `models` (docs/protocol.md §13): asks each source's
    /// get_tags for `models_json` (a JSON array; empty = not given), leaves out sources whose
    /// required_tags are not all in `tags` (when given), and hands `done` the rendered tools.
    void list_tools_filtered(permissions::caller who, tools::list_format format,
                             std::optional<std::vector<std::string>> tags, std::string models_json,
                             std::function<void(std::string tools)> done,
                             profile_ptr profile = nullptr);

    /// What preview_tool_call answers (docs/protocol.md §13).
    struct preview {
        std::string text;
        bool from_host = false; ///< the host's format_tool_call_preview, not the default
    };
    /// Previews a call of `t` with `args_json` (an object, or a JSON string for a text-payload
    /// tool) without running it: the host's format_tool_call_preview when it has one, else
    /// `name(<redacted compact arguments, cut to 200 characters>)`. `done` runs once.
    void preview_call(const std::shared_ptr<const tool>& t, const std::string& args_json,
                      std::function<void(preview)> done) const;
    /// Sources configured (the built-in one included), whatever their state.
    std::size_t source_count() const { return sources_.size(); }
    /// The sources, in config order (the built-in one first).
    const std::vector<std::shared_ptr<tools::tool_source>>& sources() const { return sources_; }
    /// Sets who hears sources' notifications and removals (null: nobody).
    void set_source_observer(source_observer* o) { observer_ = o; }

    /// Calls `fn` after the set of tools or their descriptors changed (a source registered,
    /// re-listed or removed, a source's state, a new policy): at most once per I/O turn, after
    /// it (docs/protocol.md §3 `tools_changed`). Returns a token for unsubscribe.
    std::uint64_t subscribe_tools_changed(std::function<void()> fn);
    void unsubscribe_tools_changed(std::uint64_t token) { tools_changed_subscribers_.erase(token); }

  private:
    // ---- call pipeline (call_pipeline.cpp) ----
    /// Why no call is taken now (shutting down, or the audit failing under fail_closed).
    std::optional<protocol::tool_result> closed_to_calls() const;
    /// After the decision: a covering grant, then the hold for `ask`, a refusal, or the run
    /// (PROTOCOL.md §12 order: deny -> a matching grant -> ask -> allow).
    void settle(const tools::call_ptr& c);
    /// After the permission: the deadline, before_execution hooks, then the source.
    void proceed(const tools::call_ptr& c);
    /// Arms the call's timeout, measured from its arrival.
    void arm_deadline(const tools::call_ptr& c);
    /// An `ask` decision: held for the approvers, or denied at once when there are none.
    void hold_for_approval(const tools::call_ptr& c);
    /// A person's answer `a` (with their `reason`) to held call `c`: run, refused, or failed as
    /// a fresh call would be when the tool or the config changed while it was held.
    void on_approval_answer(const tools::call_ptr& c, approvals::approval_answer a,
                            std::string reason);
    /// Fails `c` PERMISSION_DENIED, saying its decision's reason.
    void refuse(const tools::call_ptr& c);
    /// A held call decided again on its tool as it is now (looked up afresh: a reload or a
    /// re-listing may have removed, replaced or quarantined it): `failure` is what a fresh call
    /// would get instead of a decision (UNKNOWN_TOOL, VALIDATION_ERROR against the schema now,
    /// PERMISSION_DENIED for a hidden or quarantined tool; c->decision then says why), else
    /// `decision` is the policy's. Points c->target at the tool as it is now.
    struct held_recheck {
        std::optional<protocol::tool_result> failure;
        permissions::decision decision;
    };
    held_recheck recheck_held(call& c) const;
    /// A call decided again while it waited for a person (a reload, a re-listing, an answer)
    /// whose new decision `r` no longer asks: failed as a fresh call would be, run when it
    /// allows, refused otherwise; `why` says what made it decided again (for the reason).
    void settle_redecided(const tools::call_ptr& c, held_recheck r, std::string_view why);
    /// Tools changed (a re-listing, quarantine, a source removed): every held call whose tool
    /// is gone, hidden or quarantined now fails as a fresh call would, withdrawn from the
    /// approvers; at most once per I/O turn, after it.
    void post_held_recheck();
    bool held_recheck_posted_ = false;
    void run_on_source(const tools::call_ptr& c);
    void after_tool(const tools::call_ptr& c, protocol::tool_result r) override;
    /// The last step before a tool's result is final: modelContent and meta.display when the
    /// call asked for them (agent_features.cpp, docs/protocol.md §13), then finalize.
    void shape_result(const tools::call_ptr& c, protocol::tool_result r);
    void finish(call& c, protocol::tool_result& r) override;
    bool audit_refuses_calls() const { return audit_.refuses_calls(); }

    // ---- source lifecycle (source_lifecycle.cpp) ----
    std::optional<std::string> on_registered(tools::tool_source& src,
                                             std::vector<tools::tool_definition> defs);
    void on_settled();
    void on_lifecycle(tools::tool_source& src, std::string_view event, std::string_view details);
    /// Checks `src`'s tools just registered against their pins: a changed (or, with
    /// quarantine_new, new) one is quarantined and audited as tool_definition_changed.
    void check_pins(tools::tool_source& src);

    // ---- egress targets asked about (egress_asks.cpp, docs/protocol.md §19) ----
    /// A target no rule of `src`'s network table decides: allowed at once when a person
    /// allowed it for this run, else held for the approvers (refused when there are none).
    void on_egress_ask(tools::tool_source& src, const egress::connection_record& r,
                       tools::call_ptr owner, egress::ask_reply reply);
    /// Per source name: "host:port" targets a person allowed for this run of meithd.
    std::map<std::string, std::set<std::string>, std::less<>> egress_allowed_;
    std::function<std::optional<std::string>(std::string_view, std::string_view)> egress_always_;

    asio::any_io_executor ex_;
    const config::config& cfg_;
    permissions::policy policy_;
    std::map<std::string, profile_ptr, std::less<>> profiles_;         ///< [clients.NAME]
    std::map<std::string, profile_ptr, std::less<>> profile_by_agent_; ///< their `agents`
    audit::audit_trail audit_;
    const audit::redactor& redactor_;
    approvals::approval_service approvals_;
    permissions::rate_limiter rates_; ///< [[limits.rates]], taken after the policy allowed
    tools::tool_pins pins_;
    bool pinning_ = false; ///< pin_tools_in was called
    hooks::hook_set* hooks_ = nullptr;
    tools::tool_table tools_;
    std::map<std::uint64_t, std::function<void()>> tools_changed_subscribers_;
    std::uint64_t next_subscriber_ = 0;
    bool tools_changed_posted_ = false;
    void post_tools_changed();
    tools::call_list calls_; ///< dispatched and not yet finished
    bool shutting_down_ = false;
    std::function<std::string()> reload_handler_;

    // Source lifecycle.
    std::vector<std::shared_ptr<tools::tool_source>> sources_;
    tools::source_events events_; ///< what sources report through (set by start())
    /// Removed sources still stopping, destroyed when their stop completes.
    std::vector<std::shared_ptr<tools::tool_source>> retiring_;
    std::size_t unsettled_ = 0;
    bool started_ = false;
    std::function<void()> on_ready_;

    source_observer* observer_ = nullptr;

    std::shared_ptr<bool> alive_ = std::make_shared<bool>(true); ///< for posted handlers
};

} // namespace meith::registry
