// child_source: what the sources that run one supervised child share — tool hosts, MCP
// servers and exec servers (docs/protocol.md §7, §15).
//
// It owns the child (through its rpc_peer) and the lifecycle every such source has: start (or
// refuse to, when its sandbox cannot be had), calls that wait while the child starts or
// restarts and fail when it is failed or stopped, readiness counted once, the
// reconfinement step (a child first runs in the sandbox its config names, and is started again
// in its listed tools' union when that differs: once, never in a loop), `fail`, `restart`,
// and the common members of its `meith sources` status. A kind adds its protocol: the
// handshake on each spawn, how a call is sent, messages from the child, and status members of
// its own. I/O-thread only.
#pragma once

#include "process/rpc_peer.hpp"
#include "sandbox/confinement.hpp"
#include "tools/tool_source.hpp"

#include <asio/steady_timer.hpp>

#include <chrono>
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace meith::sources {

class child_source : public tools::tool_source {
  public:
    const std::string& name() const override { return cfg_.name; }
    const std::string& prefix() const override { return cfg_.prefix; }
    tools::source_state state() const override;
    void start(tools::source_events events) override;
    /// Sends the call when the child is ready; holds it while the child starts or restarts
    /// (within the call's own timeout); fails it at once when the child is failed or stopped.
    void execute(const tools::call_ptr& c, const tools::tool& t) override;
    void stop(std::chrono::milliseconds kill_grace, std::function<void()> done) override;
    /// An idle on-demand source starts now; any other restarts (`meith sources restart`).
    void restart() override;
    bool confine_again() override;
    std::string_view kind() const override { return kind_; }
    void fail(std::string why) override {
        idle_ = false;
        proc_.fail_permanently(std::move(why));
    }
    /// {"name","kind","state","pid","restarts","lastError","tools","sandbox"} and the kind's
    /// own members (append_status).
    std::string status_json() const final;
    std::string sandbox_hint(std::string_view error_text) const override {
        return sandbox::sandbox_hint(confinement(), error_text);
    }

  protected:
    /// `label` names the child in log lines and errors ("tool host 'fs'"); `kind` is its
    /// list_sources kind; `confine_config_json` is the host config whose `root` a sandbox makes
    /// writable ("{}" for a kind without one); `start_caps` the capabilities its first
    /// sandbox grants (`started_with(cfg)` for a kind that lists its tools once running, the
    /// declared tool's for an exec server).
    child_source(asio::any_io_executor ex, process::child_reaper& reaper,
                 const config::source_config& cfg, const config::config& whole, std::string label,
                 std::string_view kind, std::string confine_config_json,
                 permissions::capability_set start_caps, process::rpc_dialect dialect,
                 process::supervised_process::policy pol);

    /// The supervision policy both kinds start from: lines up to max_result_bytes + 1 MiB
    /// (the envelope's slack), the source's start_timeout_ms.
    static process::supervised_process::policy default_policy(const config::source_config& cfg,
                                                              const config::config& whole);

    // ---- what a kind provides ---------------------------------------------------------------

    /// Runs once at start(), before the sandbox check and the spawn; an error fails the source
    /// with it (an exec server registers its one declared tool here).
    virtual std::optional<std::string> before_start() { return std::nullopt; }
    /// The child was spawned (also after each restart): start the handshake.
    virtual void on_spawn() = 0;
    /// The child ended; calls in flight were failed by the peer. Forget per-child state.
    virtual void on_child_exit() {}
    /// A message with a "method" from the child (JSON-RPC dialect only).
    virtual void on_incoming(simdjson::dom::object msg) { (void)msg; }
    /// Sends call `c` for tool `t` to the ready child.
    virtual void send_execute(const tools::call_ptr& c, const tools::tool& t) = 0;
    /// Tools registered from this child now.
    virtual std::size_t tool_count() const = 0;
    /// Appends the kind's own status members (",\"name\":value…") after "sandbox".
    virtual void append_status(std::string& out) const { (void)out; }
    /// Its tools come from its config and were registered by before_start (an exec server):
    /// an on-demand start needs no pins to list them.
    virtual bool listed_before_start() const { return false; }
    /// Work in the child that a stop would lose although no request is in flight (an MCP
    /// task followed, a subscription open): an idle stop waits for it to end.
    virtual bool holds_work() const { return false; }

    // ---- what a kind calls ------------------------------------------------------------------

    /// The handshake is done and the tools registered: the child is ready, readiness is
    /// counted, and the calls that waited are sent.
    void became_ready();
    /// Counts the first start's outcome toward the daemon's readiness, once.
    void settle();
    /// The result of a call whose request the peer gave up on: over limits.max_result_bytes
    /// (`oversized`), else "LABEL HOW while the call was running" (the child exited, …).
    protocol::tool_result request_failed(process::rpc_failure failure,
                                         const std::string& how) const;
    /// Fails every waiting call: "LABEL: why".
    void fail_waiting(const std::string& why);
    /// The newest call waiting for the child's start when every waiting call is one
    /// session's (a server's request during its start is that client's: roots asked at
    /// `initialized`), else null.
    tools::call_ptr waiting_call_of_one_session() const;
    /// The source is used now (a call, an MCP request): an on-demand source's idle period
    /// starts again. An idle one is started (the caller waits for it as for any start).
    void touch();
    /// When `defs` need another sandbox than the one the child runs in, starts it again in
    /// theirs (once; a second change fails the source) and returns true: the listing is then
    /// not registered. False when the sandbox fits (and is remembered for the next start).
    bool reconfine(const std::vector<tools::tool_definition>& defs);

    const config::source_config cfg_; ///< a copy: a config reload replaces the daemon's
    const config::config& whole_;
    const std::string label_;
    tools::source_events events_;

  private:
    process::rpc_peer::handlers make_handlers();

    /// Its sandbox, worked out now if it was not yet (an on-demand source's before its first
    /// start).
    const sandbox::confinement& confinement() const;
    /// Its spawn spec runs in confinement() from now on. False (the source failed with the
    /// refusal) when its sandbox cannot be had.
    bool confine_spec();

    std::string kind_;
    std::string confine_config_json_;
    permissions::capability_set start_caps_; ///< what its first sandbox grants
    /// The sandbox it runs in (before peer_: its spec is made from it); worked out lazily for an
    /// on-demand source (confinement()), so it is mutable.
    mutable sandbox::confinement conf_;
    mutable bool confined_;   ///< conf_ is worked out
    bool spec_confined_;      ///< the child's spawn spec has conf_'s plan and environment
    bool reconfined_ = false; ///< started again in its tools' sandbox, not yet settled

  protected:
    process::rpc_peer peer_;
    process::supervised_process& proc_; ///< the peer's child

  private:
    /// Its proxied connections' owner (egress_events.hpp): the only call in flight, or null.
    tools::call_ptr sole_call_in_flight();
    /// Binds the proxy's callbacks to this source (after each confine).
    void bind_egress();

    // ---- start on demand (docs/configuration.md "Starting on demand") -----------------
    /// Starts the idle on-demand source's child (after an idle stop still under way, when
    /// that ends).
    void wake();
    /// Arms the idle timer for `last_use_ + idle_stop_ms`.
    void arm_idle();
    /// The idle timer fired: stops the child when nothing ran for idle_stop_ms.
    void on_idle_timer();

    bool started_ = false;
    bool settled_ = false;
    /// On demand and not running: its tools listed (from the pins, or its config), state idle.
    bool idle_ = false;
    bool idle_stopping_ = false; ///< an idle stop waits for the child's exit
    bool wake_pending_ = false;  ///< a call came during that stop: start when it ends
    /// Why a call waits for this start, told to its caller as progress until ready: a wake
    /// on demand, or a start behind its pinned listing. Empty: no note (a restart).
    std::string wait_note_;
    std::size_t listed_tools_ = 0; ///< what it listed while idle, for its status
    std::chrono::steady_clock::time_point last_use_ = std::chrono::steady_clock::now();
    asio::steady_timer idle_timer_;
    std::deque<std::pair<tools::call_ptr, const tools::tool*>> waiting_;
    /// Calls given to a source behind the egress proxy, to tell whose a connection is; pruned
    /// of finished ones at each call. Empty without a `network` table.
    std::vector<std::weak_ptr<tools::call>> egress_calls_;
};

} // namespace meith::sources
