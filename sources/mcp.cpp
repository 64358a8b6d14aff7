// mcp_source: an MCP server over stdio as a tool source (`kind = "mcp"`, docs/protocol.md §7).
//
// One long-running child per source, spoken to through an rpc_peer (dialect jsonrpc). Start:
// `initialize` (the newest revision meithd speaks; an older one of its list is accepted, any
// other fails the start), `notifications/initialized`, then `tools/list` page by page; the
// source is ready once the tools are registered. Calls are `tools/call` requests carrying a
// progress token, so `notifications/progress` become `progress` tool events; a cancelled or
// timed-out call is forgotten and `notifications/cancelled` tells the server.
// `notifications/tools/list_changed` re-lists and re-registers (calls in flight keep their
// tool). The server's own requests get answers: `ping`, `roots/list`, and -32601 for anything
// else. Supervision (restart with backoff, `failed`) is the shared supervisor's; shutdown closes
// stdin first and signals only after `tools.kill_grace_ms` (MCP spec 2025-11-25, lifecycle).
#include "audit/redactor.hpp"
#include "process/confinement.hpp"
#include "process/rpc_peer.hpp"
#include "process/subprocess.hpp"
#include "process/supervisor.hpp"
#include "protocol/json_writer.hpp"
#include "sources/child_source.hpp"
#include "sources/factory.hpp"
#include "sources/mcp_wire.hpp"

#include <set>
#include <unordered_map>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace meith::registry {

namespace {

using protocol::append_json_string;
using protocol::error_code;
using protocol::tool_result;

/// Pages of one tools/list walk; a server that keeps handing out cursors fails past this.
constexpr std::size_t max_list_pages = 1000;
/// A log message from the server is cut to this many bytes in the daemon log.
constexpr std::size_t max_log_message = 16 * 1024;

spdlog::level::level_enum log_level_of(std::string_view level) {
    // MCP logging levels (RFC 5424 names), server/utilities/logging.
    if (level == "debug") return spdlog::level::debug;
    if (level == "info" || level == "notice") return spdlog::level::info;
    if (level == "warning") return spdlog::level::warn;
    if (level == "error") return spdlog::level::err;
    if (level == "critical" || level == "alert" || level == "emergency")
        return spdlog::level::critical;
    return spdlog::level::info;
}

class mcp_source final : public child_source, public mcp_peer {
  public:
    mcp_source(asio::any_io_executor ex, child_reaper& reaper, const config::source_config& cfg,
               const config::config& whole)
        : child_source(ex, reaper, cfg, whole, "MCP server '" + cfg.name + "'", "mcp", "{}",
                       started_with(cfg), rpc_dialect::jsonrpc, make_policy(cfg, whole)),
          resource_caps_(permissions::capability_set_from(cfg.resource_capabilities)),
          envelope_(mcp::envelope_members(MEITH_VERSION, cfg.forward_roots)), probe_timer_(ex) {}

    // ---- mcp_peer: the families beyond tools (docs/protocol.md §17) -------------------------

    mcp_peer* mcp() override { return this; }

    bool offers(std::string_view capability) const override {
        if (!ready_) return false;
        if (capability == "resources") return server_caps_.resources;
        if (capability == "resources.subscribe") return server_caps_.subscribe;
        if (capability == "prompts") return server_caps_.prompts;
        if (capability == "completions") return server_caps_.completions;
        if (capability == "logging") return server_caps_.logging;
        return false;
    }

    permissions::capability_set resource_capabilities() const override { return resource_caps_; }

    void forward(std::string_view method, std::string params_json,
                 std::function<void(mcp_answer)> done) override {
        if (!ready_)
            return done(mcp_error(
                -32603, fmt::format("{} is not running ({})", label_, to_string(state()))));
        if (modern_) {
            // 2026-07-28: the log level travels per request, subscriptions on the listen.
            if (method == "logging/setLevel") return done(mcp_answer{true, "{}"});
            if (method == "resources/subscribe" || method == "resources/unsubscribe")
                return subscribe_on_listen(method == "resources/subscribe", params_json,
                                           std::move(done));
            params_json = mcp::with_envelope(params_json, envelope_);
        }
        auto shared = std::make_shared<std::function<void(mcp_answer)>>(std::move(done));
        rpc_peer::callbacks cb;
        cb.on_message = [shared](simdjson::dom::object msg, bool) {
            simdjson::dom::element v;
            if (msg["result"].get(v) == simdjson::SUCCESS && v.is_object())
                (*shared)(mcp_answer{true, simdjson::minify(v)});
            else if (msg["error"].get(v) == simdjson::SUCCESS && v.is_object())
                (*shared)(mcp_answer{false, simdjson::minify(v)});
            else
                (*shared)(mcp_error(-32603, "the MCP server's answer has neither a result "
                                            "object nor an error object"));
        };
        cb.on_failure = [shared, label = label_](rpc_failure, const std::string& how) {
            (*shared)(mcp_error(-32603, fmt::format("{} did not answer: {}", label,
                                                    how.empty() ? "it stopped" : how)));
        };
        if (!peer_.request(method, params_json, std::move(cb)))
            (*shared)(mcp_error(-32603, fmt::format("{} is not accepting requests", label_)));
    }

    std::string capabilities_hint(std::string_view remote_name) const override {
        return fmt::format(
            "MCP server '{}' declares no capabilities for '{}': add `trust_annotations = true` "
            "to its [[sources]] entry (its readOnlyHint/destructiveHint/openWorldHint then "
            "decide), or a table naming what it does, e.g. `capabilities = {{ \"{}\" = "
            "[\"read-only\"] }}` (docs/configuration.md)",
            cfg_.name, remote_name, remote_name);
    }

  private:
    static supervised_process::policy make_policy(const config::source_config& cfg,
                                                  const config::config& whole) {
        auto p = default_policy(cfg, whole);
        p.stdin_first = true; // MCP stdio shutdown: EOF, then SIGTERM, then SIGKILL
        return p;
    }

    void on_spawn() override {
        ++spawns_;
        server_caps_ = {};
        modern_ = false;
        listen_id_.reset();
        send_discover();
    }
    std::size_t tool_count() const override { return tool_names_.size(); }

    void append_status(std::string& out) const override {
        out += R"(,"protocolVersion":)";
        if (revision_.empty())
            out += "null";
        else
            append_json_string(out, revision_);
    }

    // ---- start: server/discover (2026-07-28), else initialize; then tools/list ---------------

    /// How long a server may take to answer server/discover before meithd falls back to
    /// initialize (a server that ignores unknown methods before initialize).
    static constexpr std::chrono::milliseconds discover_timeout{3000};

    /// Asks `server/discover` first (docs/protocol.md §17): a server offering 2026-07-28 is
    /// spoken to in it; an error, another answer or silence falls back to `initialize`.
    void send_discover() {
        ready_ = false;
        revision_.clear();
        rpc_peer::callbacks cb;
        const auto gen = spawns_;
        cb.on_message = [this, gen](simdjson::dom::object msg, bool) {
            if (gen == spawns_) on_discovered(msg);
        };
        cb.on_failure = [](rpc_failure, const std::string&) {}; // the exit handler decides
        const auto id =
            peer_.request("server/discover", mcp::discover_params(envelope_), std::move(cb));
        if (!id) return proc_.fail_start("could not send server/discover");
        probe_timer_.expires_after(discover_timeout);
        probe_timer_.async_wait(
            [this, gen, id = *id, alive = std::weak_ptr<bool>(alive_)](const std::error_code& ec) {
                if (ec || !alive.lock() || gen != spawns_ || !revision_.empty()) return;
                peer_.abandon(id);
                spdlog::info("{}: no answer to server/discover within {} ms; using initialize",
                             label_, discover_timeout.count());
                send_initialize();
            });
    }

    void on_discovered(simdjson::dom::object msg) {
        probe_timer_.cancel();
        simdjson::dom::element result;
        if (msg["result"].get(result) != simdjson::SUCCESS || !mcp::offers_modern(result))
            return send_initialize();
        modern_ = true;
        revision_ = std::string(mcp::modern_revision);
        server_caps_ = read_capabilities(result);
        spdlog::info("{}: discovered, protocol revision {}", label_, revision_);
        start_listing();
    }

    void send_initialize() {
        ready_ = false;
        revision_.clear();
        rpc_peer::callbacks cb;
        cb.on_message = [this](simdjson::dom::object msg, bool) { on_initialized(msg); };
        cb.on_failure = [](rpc_failure, const std::string&) {}; // the exit handler decides
        if (!peer_.request("initialize", mcp::initialize_params(MEITH_VERSION, cfg_.forward_roots),
                           std::move(cb)))
            proc_.fail_start("could not send initialize");
    }

    void on_initialized(simdjson::dom::object msg) {
        simdjson::dom::element result, error;
        if (msg["error"].get(error) == simdjson::SUCCESS) {
            const auto r = mcp::error_answer(error);
            proc_.fail_start(fmt::format("initialize failed: {}", r.error->message));
            return;
        }
        if (msg["result"].get(result) != simdjson::SUCCESS) {
            proc_.fail_start("initialize: JSON-RPC response has neither result nor error");
            return;
        }
        auto n = mcp::negotiate(result);
        if (!n.error.empty()) {
            proc_.fail_start(std::move(n.error));
            return;
        }
        revision_ = std::move(n.revision);
        server_caps_ = read_capabilities(result);
        spdlog::info("{}: initialized, protocol revision {}", label_, revision_);
        peer_.notify("notifications/initialized", "{}");
        start_listing();
    }

    void start_listing() {
        listing_ = true;
        relist_ = false;
        pages_ = 0;
        listed_.clear();
        request_page(std::nullopt);
    }

    void request_page(std::optional<std::string> cursor) {
        std::string params = "{}";
        if (cursor) {
            params = R"({"cursor":)";
            append_json_string(params, *cursor);
            params += '}';
        }
        rpc_peer::callbacks cb;
        cb.on_message = [this](simdjson::dom::object msg, bool) { on_page(msg); };
        cb.on_failure = [](rpc_failure, const std::string&) {}; // the exit handler decides
        if (!peer_.request("tools/list", params_for(params), std::move(cb)))
            listing_failed("could not send tools/list");
    }

    void on_page(simdjson::dom::object msg) {
        simdjson::dom::element result, error;
        simdjson::dom::array tools;
        if (msg["error"].get(error) == simdjson::SUCCESS) {
            listing_failed(
                fmt::format("tools/list failed: {}", mcp::error_answer(error).error->message));
            return;
        }
        if (msg["result"].get(result) != simdjson::SUCCESS ||
            result["tools"].get_array().get(tools) != simdjson::SUCCESS) {
            listing_failed("tools/list did not return a tools array");
            return;
        }
        for (auto item : tools) {
            std::string why;
            if (auto def = mcp::definition_of(item, cfg_, why))
                listed_.push_back(std::move(*def));
            else
                spdlog::warn("{}: tool skipped: {}", label_, why);
        }
        std::string_view cursor;
        if (result["nextCursor"].get_string().get(cursor) == simdjson::SUCCESS) {
            if (++pages_ >= max_list_pages) {
                listing_failed(fmt::format("tools/list gave more than {} pages", max_list_pages));
                return;
            }
            request_page(std::string(cursor));
            return;
        }
        finish_listing();
    }

    /// PROTOCOL.md §13, as for tool hosts: the first listing's tools decide the sandbox; a
    /// server started in another one is started again in theirs before they are registered.
    void listing_failed(std::string why) {
        listing_ = false;
        listed_.clear();
        if (!ready_) {
            proc_.fail_start(std::move(why));
            return;
        }
        // A failed re-list keeps the tools registered before.
        spdlog::warn("{}: {}; keeping its {} tool(s)", label_, why, tool_names_.size());
    }

    void finish_listing() {
        listing_ = false;
        if (!ready_ && reconfine(listed_)) {
            listed_.clear();
            return;
        }
        std::set<std::string> names;
        for (const auto& d : listed_)
            names.insert(cfg_.prefix + d.name);
        if (auto err = events_.registered(*this, std::move(listed_))) {
            listed_.clear();
            proc_.fail_permanently(*err);
            return;
        }
        listed_.clear();
        const auto before = std::exchange(tool_names_, std::move(names));
        if (!ready_) {
            became_ready();
            if (modern_) relisten();
        } else if (events_.lifecycle) {
            events_.lifecycle(*this, "source_tools_changed", tools_changed_details(before));
        }
        if (relist_) start_listing();
    }

    std::string tools_changed_details(const std::set<std::string>& before) const {
        const auto& redactor = audit::default_redactor();
        auto list = [&](const std::set<std::string>& a, const std::set<std::string>& b) {
            std::string out = "[";
            for (const auto& n : a) {
                if (b.count(n)) continue;
                if (out.size() > 1) out += ',';
                append_json_string(out, redactor.redact_text(n));
            }
            return out + "]";
        };
        return fmt::format(R"("tools":{},"added":{},"removed":{})", tool_names_.size(),
                           list(tool_names_, before), list(before, tool_names_));
    }

    void became_ready() {
        ready_ = true;
        child_source::became_ready();
    }

    void on_child_exit() override {
        // Calls in flight were failed by the peer; their progress tokens went with them.
        probe_timer_.cancel();
        listen_id_.reset();
        ready_ = false;
        listing_ = false;
        relist_ = false;
        listed_.clear();
        progress_.clear();
        tasks_.clear();
        tool_names_.clear();
    }

    // ---- calls ------------------------------------------------------------------------------

    void send_execute(const call_ptr& c, const tool& t) override {
        if (t.task_required && !modern_) {
            // A tool that runs only as a task (2025-11-25 basic/utilities/tasks): the call is
            // task-augmented, and its result fetched with tasks/result (docs/protocol.md §17).
            const std::uint64_t ttl = c->timeout_ms != 0 ? c->timeout_ms : 300000;
            return send_call(c, t.remote_name, fmt::format(R"("task":{{"ttl":{}}})", ttl), 0);
        }
        send_call(c, t.remote_name, {}, 0);
    }

    /// A task-augmented call answered CreateTaskResult: tasks/result waits for the task's end
    /// and answers the call's result; a cancel or timeout is tasks/cancel. The call stays the
    /// one the server's requests belong to while the task runs.
    void follow_task(const call_ptr& c, std::string task_id) {
        const std::uint64_t token = ++next_token_;
        progress_.emplace(token, c);
        tasks_[task_id] = c;
        std::string params = R"({"taskId":)";
        append_json_string(params, task_id);
        params += '}';
        rpc_peer::callbacks cb;
        cb.on_message = [this, c, token, task_id](simdjson::dom::object msg, bool) {
            progress_.erase(token);
            tasks_.erase(task_id);
            simdjson::dom::element result, error;
            if (msg["result"].get(result) == simdjson::SUCCESS)
                c->resolve(mcp::call_result(result));
            else if (msg["error"].get(error) == simdjson::SUCCESS)
                c->resolve(mcp::error_answer(error));
            else
                c->resolve(tool_result::failure(error_code::tool_failed,
                                                "tasks/result: neither result nor error"));
        };
        cb.on_failure = [this, c, token, task_id](rpc_failure failure, const std::string& how) {
            progress_.erase(token);
            tasks_.erase(task_id);
            c->resolve(request_failed(failure, how));
        };
        const auto id = peer_.request("tasks/result", params, std::move(cb));
        if (!id) {
            progress_.erase(token);
            tasks_.erase(task_id);
            return c->resolve(tool_result::failure(
                error_code::tool_failed, fmt::format("{} is not accepting requests", label_)));
        }
        c->on_abandon([this, id = *id, token, task_id, params] {
            peer_.abandon(id);
            progress_.erase(token);
            tasks_.erase(task_id);
            rpc_peer::callbacks ignore;
            ignore.on_message = [](simdjson::dom::object, bool) {};
            ignore.on_failure = [](rpc_failure, const std::string&) {};
            peer_.request("tasks/cancel", params, std::move(ignore));
        });
    }

    /// One round of a call: `input_members` (members without braces) carry the answers of the
    /// previous round's input requests (2026-07-28 multi-round-trip requests).
    void send_call(const call_ptr& c, const std::string& remote, const std::string& input_members,
                   int round) {
        const std::uint64_t token = ++next_token_;
        rpc_peer::callbacks cb;
        cb.on_message = [this, c, token, remote, round](simdjson::dom::object msg, bool) {
            progress_.erase(token);
            on_call_answer(c, msg, remote, round);
        };
        cb.on_failure = [this, c, token](rpc_failure failure, const std::string& how) {
            progress_.erase(token);
            c->resolve(request_failed(failure, how));
        };
        std::string params = mcp::call_params(remote, c->args_json, token, c->traceparent,
                                              modern_ ? envelope_ : std::string_view());
        if (!input_members.empty()) {
            params.pop_back();
            params += ',';
            params += input_members;
            params += '}';
        }
        const auto id = peer_.request("tools/call", params, std::move(cb));
        if (!id) {
            c->resolve(tool_result::failure(error_code::tool_failed,
                                            fmt::format("{} is not accepting requests", label_)));
            return;
        }
        progress_.emplace(token, c);
        // Cancel and timeout resolve the call at once; the server is told, its late answer is
        // dropped (basic/utilities/cancellation).
        c->on_abandon([this, id = *id, token, raw = c.get()] {
            peer_.abandon(id);
            progress_.erase(token);
            peer_.notify("notifications/cancelled",
                         params_for(mcp::cancelled_params(id, names_of(raw->end()).words)));
        });
    }

    void on_call_answer(const call_ptr& c, simdjson::dom::object msg, const std::string& remote,
                        int round) {
        simdjson::dom::element result, error;
        std::string_view result_type;
        if (modern_ && msg["result"].get(result) == simdjson::SUCCESS &&
            result["resultType"].get_string().get(result_type) == simdjson::SUCCESS &&
            result_type == "input_required")
            ask_inputs(c, result, remote, round);
        else if (std::string_view task_id;
                 msg["result"].get(result) == simdjson::SUCCESS &&
                 result["task"]["taskId"].get_string().get(task_id) == simdjson::SUCCESS)
            follow_task(c, std::string(task_id));
        else if (msg["result"].get(result) == simdjson::SUCCESS)
            c->resolve(mcp::call_result(result));
        else if (msg["error"].get(error) == simdjson::SUCCESS)
            c->resolve(mcp::error_answer(error));
        else
            c->resolve(tool_result::failure(error_code::tool_failed,
                                            "JSON-RPC response has neither result nor error"));
    }

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
    void relisten() {
        if (listen_id_) {
            peer_.abandon(*listen_id_);
            peer_.notify("notifications/cancelled",
                         params_for(R"({"requestId":)" + std::to_string(*listen_id_) + "}"));
            listen_id_.reset();
        }
        std::string n = R"({"notifications":{"toolsListChanged":true)";
        if (server_caps_.prompts) n += R"(,"promptsListChanged":true)";
        if (server_caps_.resources) n += R"(,"resourcesListChanged":true)";
        if (!listen_uris_.empty()) {
            n += R"(,"resourceSubscriptions":[)";
            bool first = true;
            for (const auto& uri : listen_uris_) {
                if (!first) n += ',';
                first = false;
                append_json_string(n, uri);
            }
            n += ']';
        }
        n += "}}";
        rpc_peer::callbacks cb; // answered only when the server ends the listen
        cb.on_message = [](simdjson::dom::object, bool) {};
        cb.on_failure = [](rpc_failure, const std::string&) {};
        listen_id_ = peer_.request("subscriptions/listen", params_for(n), std::move(cb));
    }

    void subscribe_on_listen(bool on, std::string_view params_json,
                             std::function<void(mcp_answer)> done) {
        thread_local simdjson::dom::parser parser;
        std::string_view uri;
        simdjson::dom::element params;
        if (parser.parse(params_json).get(params) != simdjson::SUCCESS ||
            params["uri"].get_string().get(uri) != simdjson::SUCCESS)
            return done(mcp_error(-32602, "params need a string \"uri\""));
        const bool changed = on ? listen_uris_.insert(std::string(uri)).second
                                : listen_uris_.erase(std::string(uri)) > 0;
        if (changed) relisten();
        done(mcp_answer{true, "{}"});
    }

    /// Rounds of input one call may ask for (the TypeScript SDK client's own bound).
    static constexpr int max_input_rounds = 10;

    /// A 2026-07-28 `input_required` result: each input request goes to the client of the call,
    /// as a server's request would (docs/protocol.md §17); the call is then sent again with
    /// `inputResponses` and the server's `requestState`.
    void ask_inputs(const call_ptr& c, simdjson::dom::element result, const std::string& remote,
                    int round) {
        if (round + 1 >= max_input_rounds)
            return c->resolve(tool_result::failure(
                error_code::tool_failed,
                fmt::format("{} asked for input {} times in one call", label_, max_input_rounds)));
        struct gather {
            std::size_t pending = 0;
            std::string responses;
            std::string state;
        };
        auto g = std::make_shared<gather>();
        std::string_view state;
        if (result["requestState"].get_string().get(state) == simdjson::SUCCESS)
            g->state = std::string(state);
        struct ask {
            std::string key, method, params;
        };
        std::vector<ask> asks;
        simdjson::dom::object requests;
        if (result["inputRequests"].get_object().get(requests) == simdjson::SUCCESS)
            for (auto [key, req] : requests) {
                std::string_view method;
                simdjson::dom::object params;
                if (req["method"].get_string().get(method) != simdjson::SUCCESS) continue;
                asks.push_back({std::string(key), std::string(method),
                                req["params"].get_object().get(params) == simdjson::SUCCESS
                                    ? simdjson::minify(params)
                                    : std::string("{}")});
            }
        g->pending = asks.size();
        auto alive = std::weak_ptr<bool>(alive_);
        auto finish = [this, c, remote, round, g, alive] {
            if (!alive.lock() || c->resolved()) return;
            std::string members = R"("inputResponses":{)" + g->responses + "}";
            if (!g->state.empty()) {
                members += R"(,"requestState":)";
                append_json_string(members, g->state);
            }
            send_call(c, remote, members, round + 1);
        };
        if (asks.empty()) return finish();
        for (const auto& a : asks) {
            auto answered = [this, c, g, key = a.key, method = a.method, finish,
                             alive](mcp_answer answer) {
                if (!alive.lock() || c->resolved()) return;
                if (!answer.ok)
                    return c->resolve(tool_result::failure(
                        error_code::tool_failed,
                        fmt::format("{} asked the client for {}, which answered an error", label_,
                                    method),
                        answer.json));
                if (!g->responses.empty()) g->responses += ',';
                append_json_string(g->responses, key);
                g->responses += ':';
                g->responses += answer.json;
                if (--g->pending == 0) finish();
            };
            if (c->ask_client(a.method, a.params, answered)) continue;
            if (a.method == "roots/list") {
                answered(mcp_answer{true, own_roots()});
                continue;
            }
            return c->resolve(tool_result::failure(
                error_code::tool_failed,
                fmt::format("{} needs {} answered (input_required), and the client that made "
                            "the call did not declare it (docs/protocol.md §17)",
                            label_, a.method)));
        }
    }

    // ---- the server's own requests and notifications ----------------------------------------

    /// The call a server's request or notification belongs to: stdio carries no link between
    /// them, so it is the newest call in flight on this server when every call in flight is
    /// one client's (docs/protocol.md §17); null, with `why`, otherwise.
    call_ptr owning_call(std::string& why) const {
        call_ptr newest;
        std::uint64_t newest_token = 0;
        for (const auto& [token, c] : progress_) {
            if (newest && c->session_id != newest->session_id) {
                why = "calls of more than one client are in flight on this server, so meithd "
                      "cannot tell whose call asks";
                return nullptr;
            }
            if (!newest || token > newest_token) {
                newest = c;
                newest_token = token;
            }
        }
        if (!newest) why = "no call is in flight on this server";
        return newest;
    }

    /// sampling/createMessage, elicitation/create, roots/list: to the client of the call in
    /// flight when it declared the capability; roots/list otherwise gets the source's cwd.
    void forward_to_client(const std::string& id_json, std::string_view method,
                           std::string params_json) {
        std::string why;
        auto c = owning_call(why);
        const auto gen = spawns_;
        auto answer = [this, id_json, gen, alive = std::weak_ptr<bool>(alive_)](mcp_answer a) {
            if (!alive.lock() || gen != spawns_) return; // that child is gone
            if (a.ok)
                peer_.reply(id_json, a.json);
            else
                peer_.reply_error_object(id_json, a.json);
        };
        if (c && c->ask_client(method, params_json, answer)) return;
        if (method == "roots/list") return answer(mcp_answer{true, own_roots()});
        if (c) why = "the client that made the call did not declare the capability";
        const std::string shown(mcp::cut_utf8(method, 200));
        spdlog::info("{}: refused its request {}: {}", label_,
                     audit::default_redactor().redact_text(shown), why);
        peer_.reply_error(
            id_json, -32601,
            fmt::format("meithd cannot forward {}: {} (docs/protocol.md §17)", shown, why));
    }

    std::string own_roots() const {
        // current_path() throws when meithd's folder was removed: ask, never throw here.
        std::error_code ec;
        const auto dir = cfg_.cwd.empty() ? std::filesystem::current_path(ec) : cfg_.cwd;
        return ec ? std::string(R"({"roots":[]})") : mcp::roots_result(dir);
    }

    void on_incoming(simdjson::dom::object msg) override {
        std::string_view method;
        if (msg["method"].get_string().get(method) != simdjson::SUCCESS) {
            spdlog::warn("{}: a message whose method is not a string (skipped)", label_);
            return;
        }
        simdjson::dom::element id;
        simdjson::dom::object params;
        const bool has_params = msg["params"].get_object().get(params) == simdjson::SUCCESS;
        if (msg["id"].get(id) == simdjson::SUCCESS) {
            answer_request(simdjson::minify(id), method,
                           has_params ? simdjson::minify(params) : std::string("{}"));
            return;
        }
        if (method == "notifications/progress" && has_params) {
            on_progress(params);
        } else if (method == "notifications/tools/list_changed") {
            on_list_changed();
        } else if (method == "notifications/message" && has_params) {
            on_log(params);
            if (events_.mcp_notification)
                events_.mcp_notification(*this, method, simdjson::minify(params));
        } else if ((method == "notifications/resources/updated" ||
                    method == "notifications/resources/list_changed" ||
                    method == "notifications/prompts/list_changed") &&
                   events_.mcp_notification) {
            // A 2026-07-28 listen stamps its id in _meta: meithd's own, not passed on.
            events_.mcp_notification(*this, method,
                                     has_params ? mcp::without_meta_key(simdjson::minify(params),
                                                                        mcp::subscription_id_key)
                                                : std::string("{}"));
        } else if (method == "notifications/tasks/status" && has_params) {
            on_task_status(params);
        } else if (method == "notifications/elicitation/complete" && has_params) {
            std::string why;
            if (auto c = owning_call(why))
                c->notify_client(cfg_.name, method, simdjson::minify(params));
        } else {
            spdlog::debug("{}: notification {} ignored", label_,
                          audit::default_redactor().redact_text(mcp::cut_utf8(method, 200)));
        }
    }

    void answer_request(const std::string& id_json, std::string_view method,
                        std::string params_json) {
        if (method == "ping") {
            peer_.reply(id_json, "{}");
        } else if (method == "roots/list" || method == "sampling/createMessage" ||
                   method == "elicitation/create") {
            forward_to_client(id_json, method, std::move(params_json));
        } else {
            // Anything else (tasks/*, a newer revision's requests): meithd offers none.
            spdlog::info("{}: refused its request {} (meithd does not offer it)", label_,
                         audit::default_redactor().redact_text(mcp::cut_utf8(method, 200)));
            peer_.reply_error(id_json, -32601,
                              fmt::format("Method not found: meithd does not offer {}",
                                          mcp::cut_utf8(method, 200)));
        }
    }

    /// A task's status, as a `task_status` tool event of its call (docs/protocol.md §17).
    void on_task_status(simdjson::dom::object params) {
        std::string_view task_id, status, message;
        if (params["taskId"].get_string().get(task_id) != simdjson::SUCCESS) return;
        auto it = tasks_.find(std::string(task_id));
        if (it == tasks_.end()) return;
        std::string event = R"({"type":"task_status","status":)";
        append_json_string(event, params["status"].get_string().get(status) == simdjson::SUCCESS
                                      ? status
                                      : std::string_view("unknown"));
        if (params["statusMessage"].get_string().get(message) == simdjson::SUCCESS) {
            event += R"(,"message":)";
            append_json_string(event, mcp::cut_utf8(message, 1024));
        }
        event += '}';
        it->second->emit(event);
    }

    void on_progress(simdjson::dom::object params) {
        const auto token = mcp::progress_token(params);
        if (!token) return;
        auto it = progress_.find(*token);
        if (it == progress_.end()) return; // the call is over
        const auto event = mcp::progress_event(params);
        if (!event.empty()) it->second->emit(event);
    }

    void on_list_changed() {
        if (!ready_ && !listing_) return; // the first listing is still to come
        if (listing_) {
            relist_ = true; // list again once this walk is done
            return;
        }
        spdlog::info("{}: tools changed; listing them again", label_);
        start_listing();
    }

    void on_log(simdjson::dom::object params) {
        std::string_view level = "info", logger;
        if (params["level"].get_string().get(level) != simdjson::SUCCESS) level = "info";
        if (params["logger"].get_string().get(logger) != simdjson::SUCCESS) logger = {};
        simdjson::dom::element data;
        std::string text;
        std::string_view s;
        if (params["data"].get(data) == simdjson::SUCCESS)
            text = data.get_string().get(s) == simdjson::SUCCESS ? std::string(s)
                                                                 : simdjson::minify(data);
        const auto& redactor = audit::default_redactor();
        spdlog::log(log_level_of(level), "[{}{}{}] {}", label_, logger.empty() ? "" : " ",
                    redactor.redact_text(mcp::cut_utf8(logger, 200)),
                    redactor.redact_text(mcp::cut_utf8(text, max_log_message)));
    }

    bool ready_ = false;   ///< initialized and tools registered, for this child
    bool listing_ = false; ///< a tools/list walk is under way
    bool relist_ = false;  ///< list_changed came during the walk: walk again after it
    std::size_t pages_ = 0;
    std::vector<tool_definition> listed_; ///< the walk's tools so far
    std::set<std::string> tool_names_;    ///< registered (prefixed) names
    std::string revision_;                ///< negotiated protocol revision
    server_capabilities server_caps_;     ///< what this child's initialize result declared
    permissions::capability_set resource_caps_;
    std::uint64_t spawns_ = 0; ///< children started: an answer for an earlier one is dropped
    std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
    bool modern_ = false;            ///< this child speaks 2026-07-28 (server/discover offered it)
    std::string envelope_;           ///< the 2026-07-28 `_meta` members, made once
    asio::steady_timer probe_timer_; ///< server/discover's answer deadline
    std::optional<std::uint64_t> listen_id_; ///< the open subscriptions/listen (2026-07-28)
    std::set<std::string> listen_uris_;      ///< resources subscribed to on it
    /// Calls running as tasks on this server, by taskId (2025-11-25 tasks).
    std::unordered_map<std::string, call_ptr> tasks_;
    std::uint64_t next_token_ = 0;
    /// Calls in flight by progress token (tokens are meithd's own, 1, 2, …).
    std::unordered_map<std::uint64_t, call_ptr> progress_;
};

} // namespace

std::shared_ptr<tool_source> make_mcp_source(asio::any_io_executor ex, child_reaper& reaper,
                                             const config::source_config& cfg,
                                             const config::config& whole) {
    return std::make_shared<mcp_source>(std::move(ex), reaper, cfg, whole);
}

} // namespace meith::registry
