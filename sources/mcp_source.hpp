// mcp_source: the class of an MCP server as a tool source (`kind = "mcp"`, docs/protocol.md §7,
// §17), shared by its two files: sources/mcp.cpp (start, listing, calls, tasks) and
// sources/mcp_requests.cpp (what meith's clients ask of it beyond tools, the server's own
// requests and notifications, 2026-07-28's listen and input rounds). Internal to sources/.
#pragma once

#include "audit/redactor.hpp"
#include "process/rpc_peer.hpp"
#include "process/subprocess.hpp"
#include "process/supervisor.hpp"
#include "protocol/json_writer.hpp"
#include "remote/credentials.hpp"
#include "sandbox/confinement.hpp"
#include "sources/child_source.hpp"
#include "sources/mcp_wire.hpp"

#include <asio/steady_timer.hpp>

#include <optional>
#include <set>
#include <unordered_map>

namespace meith::sources {

using protocol::append_json_string;
using protocol::error_code;
using protocol::tool_result;

class mcp_source final : public child_source, public tools::mcp_peer {
  public:
    mcp_source(asio::any_io_executor ex, process::child_reaper& reaper,
               const config::source_config& cfg, const config::config& whole)
        : child_source(ex, reaper, cfg.url.empty() ? cfg : bridge_config(cfg, whole), whole,
                       (cfg.url.empty() ? "MCP server '" : "remote MCP server '") + cfg.name + "'",
                       "mcp", "{}",
                       cfg.url.empty() ? sandbox::started_with(cfg) : bridge_capabilities(),
                       process::rpc_dialect::jsonrpc, make_policy(cfg, whole)),
          resource_caps_(permissions::capability_set_from(cfg.resource_capabilities)),
          envelope_(mcp::envelope_members(MEITH_VERSION, cfg.forward_roots)), probe_timer_(ex) {}

    // ---- mcp_peer: the families beyond tools (docs/protocol.md §17) -------------------------

    tools::mcp_peer* mcp() override { return this; }

    bool offers(std::string_view capability) const override;

    permissions::capability_set resource_capabilities() const override { return resource_caps_; }

    void forward(std::string_view method, std::string params_json,
                 std::function<void(tools::mcp_answer)> done) override;

    std::string capabilities_hint(std::string_view remote_name) const override;

  private:
    static process::supervised_process::policy make_policy(const config::source_config& cfg,
                                                           const config::config& whole);

    // ---- a remote server (`url`, docs/protocol.md §18): sources/mcp_remote.cpp ------------

    bool remote() const { return !cfg_.url.empty(); }

    /// `cfg` with meith-remote as its command: the bridge to the server's Streamable HTTP.
    static config::source_config bridge_config(const config::source_config& cfg,
                                               const config::config& whole);

    /// The bridge's sandbox: the network, nothing else (its tools run on the server).
    static permissions::capability_set bridge_capabilities();

    std::optional<std::string> before_start() override;

    /// Answers the bridge's `meith/credentials`: the static headers (secrets resolved) and
    /// the stored grant, each secret added to the redactor's exact values.
    void answer_credentials(const std::string& id_json);

    /// `meith/credentials_refreshed` and `meith/login_required` from the bridge.
    void on_bridge_notification(std::string_view method, simdjson::dom::object params);

    void append_remote_status(std::string& out) const;

    // What `meith sources` shows of the grant last read or refreshed (never a token):
    bool grant_held_ = false;           ///< a grant was read or refreshed (remote sources)
    std::int64_t grant_expires_at_ = 0; ///< its expiry, s since the epoch (0: none given)
    std::string grant_where_;           ///< where it is kept, in words (secrets/grants.hpp)
    /// The server's last Bearer challenge the bridge met (RFC 6750 §3: `error`, `scope`,
    /// `resource_metadata`), for `meith login`: a server that lets `initialize` through asks
    /// on a later request, where only the bridge sees it. Empty members: not given.
    remote::bearer_challenge challenge_;

    void on_spawn() override;
    std::size_t tool_count() const override { return tool_names_.size(); }
    /// A task followed or a subscription open on the listen keeps it from an idle stop.
    bool holds_work() const override { return !tasks_.empty() || !listen_uris_.empty(); }

    void append_status(std::string& out) const override;

    // ---- start: server/discover (2026-07-28), else initialize; then tools/list ---------------

    /// How long a server that answers nothing may take to answer server/discover before
    /// meithd falls back to initialize (a server slow to start, or one that ignores both the
    /// probe and the ping after it).
    static constexpr std::chrono::milliseconds discover_timeout{3000};
    /// A stdio server that has not answered server/discover after this long is sent a `ping`
    /// (the one request allowed before initialize, MCP basic/lifecycle).
    static constexpr std::chrono::milliseconds ping_after{250};
    /// How long server/discover's answer may trail the answer to that ping (a server whose
    /// handlers answer out of order) before meithd takes the probe as ignored.
    static constexpr std::chrono::milliseconds discover_after_ping{100};

    /// Asks `server/discover` first (docs/protocol.md §17): a server offering 2026-07-28 is
    /// spoken to in it; an error, another answer or silence falls back to `initialize`. A
    /// stdio server silent for ping_after is pinged: one that answers the ping but not the
    /// probe ignored the probe, and initialize follows within discover_after_ping instead of
    /// after discover_timeout.
    void send_discover();
    /// Sends the probe's ping (see send_discover).
    void send_probe_ping(std::uint64_t discover_id);
    /// (Re)arms the probe's deadline: `after` from now, server/discover request `id`.
    void arm_probe(std::chrono::milliseconds after, std::uint64_t id);
    /// The probe is over (answered or given up): its deadline and its ping are dropped.
    void end_probe();

    void on_discovered(simdjson::dom::object msg);

    void send_initialize();

    void on_initialized(simdjson::dom::object msg);

    void start_listing();

    void request_page(std::optional<std::string> cursor);

    void on_page(simdjson::dom::object msg);

    /// PROTOCOL.md §13, as for tool hosts: the first listing's tools decide the sandbox; a
    /// server started in another one is started again in theirs before they are registered.
    void listing_failed(std::string why);

    void finish_listing();

    std::string tools_changed_details(const std::set<std::string>& before) const;

    void became_ready();

    void on_child_exit() override;

    // ---- calls ------------------------------------------------------------------------------

    void send_execute(const tools::call_ptr& c, const tools::tool& t) override;

    /// A task-augmented call answered CreateTaskResult: tasks/result waits for the task's end
    /// and answers the call's result; a cancel or timeout is tasks/cancel. The call stays the
    /// one the server's requests belong to while the task runs.
    void follow_task(const tools::call_ptr& c, std::string task_id);

    /// One round of a call: `input_members` (members without braces) carry the answers of the
    /// previous round's input requests (2026-07-28 multi-round-trip requests).
    void send_call(const tools::call_ptr& c, const std::string& remote,
                   const std::string& input_members, int round);

    void on_call_answer(const tools::call_ptr& c, simdjson::dom::object msg,
                        const std::string& remote, int round);

    /// What the server's initialize result declares (server capabilities, lifecycle).
    struct server_capabilities {
        bool resources = false, subscribe = false, prompts = false, completions = false,
             logging = false;
    };
    static server_capabilities read_capabilities(simdjson::dom::element result) {
        server_capabilities c;
        simdjson::dom::object caps, res;
        if (result["capabilities"].get_object().get(caps) != simdjson::SUCCESS) return c;
        simdjson::dom::element v;
        c.resources = caps["resources"].get(v) == simdjson::SUCCESS && v.is_object();
        bool sub = false;
        if (c.resources && caps["resources"].get_object().get(res) == simdjson::SUCCESS &&
            res["subscribe"].get_bool().get(sub) == simdjson::SUCCESS)
            c.subscribe = sub;
        c.prompts = caps["prompts"].get(v) == simdjson::SUCCESS && v.is_object();
        c.completions = caps["completions"].get(v) == simdjson::SUCCESS && v.is_object();
        c.logging = caps["logging"].get(v) == simdjson::SUCCESS && v.is_object();
        return c;
    }

    // ---- 2026-07-28: the envelope, subscriptions/listen, input_required ---------------------

    /// Request params as this server's revision wants them: with the envelope in 2026-07-28.
    std::string params_for(std::string_view params) const {
        return modern_ ? mcp::with_envelope(params, envelope_) : std::string(params);
    }

    /// (Re)opens the one subscriptions/listen a 2026-07-28 server pushes its notifications on:
    /// list changes, and resources/updated for the URIs meith's clients subscribed to.
    void relisten();

    void subscribe_on_listen(bool on, std::string_view params_json,
                             std::function<void(tools::mcp_answer)> done);

    /// Rounds of input one call may ask for (the TypeScript SDK client's own bound).
    static constexpr int max_input_rounds = 10;

    /// A 2026-07-28 `input_required` result: each input request goes to the client of the call,
    /// as a server's request would (docs/protocol.md §17); the call is then sent again with
    /// `inputResponses` and the server's `requestState`.
    void ask_inputs(const tools::call_ptr& c, simdjson::dom::element result,
                    const std::string& remote, int round);

    // ---- the server's own requests and notifications ----------------------------------------

    /// The call a server's request or notification belongs to: stdio carries no link between
    /// them, so it is the newest call in flight on this server when every call in flight is
    /// one client's (docs/protocol.md §17); null, with `why`, otherwise.
    tools::call_ptr owning_call(std::string& why) const;

    /// sampling/createMessage, elicitation/create, roots/list: to the client of the call in
    /// flight when it declared the capability; roots/list otherwise gets the source's cwd.
    void forward_to_client(const std::string& id_json, std::string_view method,
                           std::string params_json);

    std::string own_roots() const;

    void on_incoming(simdjson::dom::object msg) override;

    void answer_request(const std::string& id_json, std::string_view method,
                        std::string params_json);

    /// A task's status, as a `task_status` tool event of its call (docs/protocol.md §17).
    void on_task_status(simdjson::dom::object params);

    void on_progress(simdjson::dom::object params);

    void on_list_changed();

    void on_log(simdjson::dom::object params);

    bool ready_ = false;   ///< initialized and tools registered, for this child
    bool listing_ = false; ///< a tools/list walk is under way
    bool relist_ = false;  ///< list_changed came during the walk: walk again after it
    std::size_t pages_ = 0;
    std::vector<tools::tool_definition> listed_; ///< the walk's tools so far
    std::set<std::string> tool_names_;           ///< registered (prefixed) names
    std::string revision_;                       ///< negotiated protocol revision
    server_capabilities server_caps_;            ///< what this child's initialize result declared
    permissions::capability_set resource_caps_;
    std::uint64_t spawns_ = 0; ///< children started: an answer for an earlier one is dropped
    std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
    bool modern_ = false;            ///< this child speaks 2026-07-28 (server/discover offered it)
    std::string envelope_;           ///< the 2026-07-28 `_meta` members, made once
    asio::steady_timer probe_timer_; ///< server/discover's answer deadline
    bool probing_ = false;           ///< server/discover sent, neither answered nor given up
    std::optional<std::uint64_t> probe_ping_; ///< the ping sent after it, until the probe ends
    bool pinged_ = false;                     ///< the probe's ping was sent (or tried)
    bool ping_answered_ = false;              ///< the server answered that ping, not the probe
    std::optional<std::uint64_t> listen_id_;  ///< the open subscriptions/listen (2026-07-28)
    std::set<std::string> listen_uris_;       ///< resources subscribed to on it
    /// Calls running as tasks on this server, by taskId (2025-11-25 tasks).
    std::unordered_map<std::string, tools::call_ptr> tasks_;
    std::uint64_t next_token_ = 0;
    /// Calls in flight by progress token (tokens are meithd's own, 1, 2, …).
    std::unordered_map<std::uint64_t, tools::call_ptr> progress_;
};

} // namespace meith::sources
