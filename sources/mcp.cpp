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
#include "sources/factory.hpp"
#include "sources/mcp_wire.hpp"

#include <deque>
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

std::string_view cancel_message(call_end how) {
    switch (how) {
    case call_end::timeout:
        return "timeout";
    case call_end::cancel:
        return "cancelled by the client";
    case call_end::disconnect:
        return "the client disconnected";
    case call_end::shutdown:
        return "meithd is shutting down";
    case call_end::tool:
    case call_end::refused:
        break;
    }
    return "abandoned";
}

class mcp_source final : public tool_source {
  public:
    mcp_source(asio::any_io_executor ex, child_reaper& reaper, const config::source_config& cfg,
               const config::config& whole)
        : cfg_(cfg), whole_(whole), label_("MCP server '" + cfg.name + "'"),
          conf_(confine(cfg.name, cfg.sandbox, cfg.sandbox_paths, started_with(cfg), cfg.command,
                        cfg.cwd)),
          peer_(std::move(ex), reaper, make_spec(cfg, whole, label_, conf_),
                make_policy(cfg, whole), rpc_dialect::jsonrpc, label_, make_handlers()),
          proc_(peer_.process()) {}

    const std::string& name() const override { return cfg_.name; }
    const std::string& prefix() const override { return cfg_.prefix; }
    source_state state() const override {
        if (!started_) return source_state::starting;
        return state_of(proc_.state());
    }

    void start(source_events events) override {
        events_ = std::move(events);
        started_ = true;
        if (conf_.refusal) {
            spdlog::error("{} not started: {}", label_, *conf_.refusal);
            proc_.fail_permanently(*conf_.refusal);
            return;
        }
        proc_.start();
    }

    void execute(const call_ptr& c, const tool& t) override {
        switch (state()) {
        case source_state::ready:
            send_call(c, t);
            return;
        case source_state::starting:
        case source_state::restarting:
            // Wait for the server within the call's own timeout (§7).
            waiting_.push_back(c);
            c->on_abandon([this, raw = c.get()] {
                std::erase_if(waiting_, [raw](const call_ptr& w) { return w.get() == raw; });
            });
            return;
        case source_state::failed:
        case source_state::stopped:
            c->resolve(tool_result::failure(
                error_code::tool_failed,
                fmt::format("{} is {}: {}", label_, to_string(state()),
                            proc_.last_error().empty() ? "not running" : proc_.last_error())));
            return;
        }
    }

    void stop(std::chrono::milliseconds kill_grace, std::function<void()> done) override {
        fail_waiting("the daemon is shutting down");
        proc_.stop(kill_grace, std::move(done));
    }

    void restart() override { proc_.restart(); }
    void fail(std::string why) override { proc_.fail_permanently(std::move(why)); }

    std::string status_json() const override {
        std::string out = R"({"name":)";
        append_json_string(out, cfg_.name);
        out += R"(,"kind":"mcp","state":")";
        out += to_string(state());
        out += R"(","pid":)";
        const auto pid = proc_.pid();
        out += pid ? std::to_string(*pid) : "null";
        out += R"(,"restarts":)";
        out += std::to_string(proc_.restarts());
        out += R"(,"lastError":)";
        if (proc_.last_error().empty())
            out += "null";
        else
            append_json_string(out, proc_.last_error());
        out += R"(,"tools":)";
        out += std::to_string(tool_names_.size());
        out += R"(,"sandbox":{)";
        out += conf_.status_members;
        out += R"(},"protocolVersion":)";
        if (revision_.empty())
            out += "null";
        else
            append_json_string(out, revision_);
        out += '}';
        return out;
    }

  private:
    static process_spec make_spec(const config::source_config& cfg, const config::config& whole,
                                  const std::string& label, const confinement& conf) {
        process_spec spec{label, cfg.command, cfg.cwd,
                          child_environment(whole.tools.env_allow, cfg.env), conf.plan};
        apply_env(conf, spec.env);
        return spec;
    }

    static supervised_process::policy make_policy(const config::source_config& cfg,
                                                  const config::config& whole) {
        supervised_process::policy p;
        p.max_line_bytes = whole.limits.max_result_bytes + 1024 * 1024; // envelope slack
        p.start_timeout = std::chrono::milliseconds(cfg.start_timeout_ms);
        p.stdin_first = true; // MCP stdio shutdown: EOF, then SIGTERM, then SIGKILL
        return p;
    }

    rpc_peer::handlers make_handlers() {
        rpc_peer::handlers h;
        h.on_spawn = [this] { send_initialize(); };
        h.on_exit = [this](const std::string&) { on_exit(); };
        h.on_lifecycle = [this](std::string_view event, const std::string& details) {
            if (events_.lifecycle) events_.lifecycle(*this, event, details);
            if (event == "source_failed") {
                settle();
                fail_waiting(proc_.last_error());
            }
        };
        h.on_incoming = [this](simdjson::dom::object msg) { on_incoming(msg); };
        return h;
    }

    // ---- start: initialize, initialized, tools/list ----------------------------------------

    void send_initialize() {
        ready_ = false;
        revision_.clear();
        rpc_peer::callbacks cb;
        cb.on_message = [this](simdjson::dom::object msg, bool) { on_initialized(msg); };
        cb.on_failure = [](rpc_failure, const std::string&) {}; // the exit handler decides
        if (!peer_.request("initialize", mcp::initialize_params(MEITH_VERSION), std::move(cb)))
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
        if (!peer_.request("tools/list", params, std::move(cb)))
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
    bool reconfine() {
        if (cfg_.sandbox == config::sandbox_mode::off) return false;
        std::vector<std::vector<std::string>> caps;
        for (const auto& d : listed_)
            caps.push_back(d.capabilities);
        const auto wanted = listed_.empty() ? conf_.capabilities : union_of(caps);
        if (wanted == conf_.capabilities) {
            reconfined_ = false;            // settled: a later restart may move it again
            remember_settled(cfg_, wanted); // the next daemon start begins here
            return false;
        }
        if (reconfined_) {
            // Its tools changed with its sandbox: no second try, no loop.
            proc_.fail_permanently("its tools' capabilities changed when it was started in "
                                   "their sandbox; declare them in the source's `capabilities` "
                                   "table");
            return true;
        }
        reconfined_ = true;
        conf_ =
            confine(cfg_.name, cfg_.sandbox, cfg_.sandbox_paths, wanted, cfg_.command, cfg_.cwd);
        if (conf_.refusal) {
            proc_.fail_permanently(*conf_.refusal);
            return true;
        }
        spdlog::info("{}: starting again in its tools' sandbox ({})", label_, conf_.status_members);
        auto env = proc_.spec().env;
        apply_env(conf_, env);
        proc_.respawn_confined(conf_.plan, std::move(env));
        return true;
    }

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
        if (!ready_ && reconfine()) {
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
        proc_.mark_ready();
        settle();
        auto waiting = std::move(waiting_);
        waiting_.clear();
        for (auto& c : waiting)
            if (!c->resolved() && c->target) send_call(c, *c->target);
    }

    void on_exit() {
        // Calls in flight were failed by the peer; their progress tokens went with them.
        ready_ = false;
        listing_ = false;
        relist_ = false;
        listed_.clear();
        progress_.clear();
        tool_names_.clear();
        settle(); // a first start that failed still counts toward readiness (§7)
    }

    void settle() {
        if (!settled_) {
            settled_ = true;
            if (events_.settled) events_.settled(*this);
        }
    }

    void fail_waiting(const std::string& why) {
        auto waiting = std::move(waiting_);
        waiting_.clear();
        for (auto& c : waiting)
            c->resolve(
                tool_result::failure(error_code::tool_failed, fmt::format("{}: {}", label_, why)));
    }

    // ---- calls ------------------------------------------------------------------------------

    void send_call(const call_ptr& c, const tool& t) {
        const std::uint64_t token = ++next_token_;
        rpc_peer::callbacks cb;
        cb.on_message = [this, c, token](simdjson::dom::object msg, bool) {
            progress_.erase(token);
            on_call_answer(c, msg);
        };
        cb.on_failure = [this, c, token](rpc_failure failure, const std::string& how) {
            progress_.erase(token);
            c->resolve(tool_result::failure(
                error_code::tool_failed,
                failure == rpc_failure::oversized
                    ? fmt::format("the tool's result is over limits.max_result_bytes ({} bytes)",
                                  whole_.limits.max_result_bytes)
                    : fmt::format("{} {} while the call was running", label_, how)));
        };
        const auto id = peer_.request(
            "tools/call", mcp::call_params(t.remote_name, c->args_json, token), std::move(cb));
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
                         mcp::cancelled_params(id, cancel_message(raw->end())));
        });
    }

    void on_call_answer(const call_ptr& c, simdjson::dom::object msg) {
        simdjson::dom::element result, error;
        if (msg["result"].get(result) == simdjson::SUCCESS)
            c->resolve(mcp::call_result(result));
        else if (msg["error"].get(error) == simdjson::SUCCESS)
            c->resolve(mcp::error_answer(error));
        else
            c->resolve(tool_result::failure(error_code::tool_failed,
                                            "JSON-RPC response has neither result nor error"));
    }

    // ---- the server's own requests and notifications ----------------------------------------

    void on_incoming(simdjson::dom::object msg) {
        std::string_view method;
        if (msg["method"].get_string().get(method) != simdjson::SUCCESS) {
            spdlog::warn("{}: a message whose method is not a string (skipped)", label_);
            return;
        }
        simdjson::dom::element id;
        if (msg["id"].get(id) == simdjson::SUCCESS) {
            answer_request(simdjson::minify(id), method);
            return;
        }
        simdjson::dom::object params;
        const bool has_params = msg["params"].get_object().get(params) == simdjson::SUCCESS;
        if (method == "notifications/progress" && has_params) {
            on_progress(params);
        } else if (method == "notifications/tools/list_changed") {
            on_list_changed();
        } else if (method == "notifications/message" && has_params) {
            on_log(params);
        } else {
            spdlog::debug("{}: notification {} ignored", label_,
                          audit::default_redactor().redact_text(mcp::cut_utf8(method, 200)));
        }
    }

    void answer_request(const std::string& id_json, std::string_view method) {
        if (method == "ping") {
            peer_.reply(id_json, "{}");
        } else if (method == "roots/list") {
            // current_path() throws when meithd's folder was removed: ask, never throw here.
            std::error_code ec;
            const auto dir = cfg_.cwd.empty() ? std::filesystem::current_path(ec) : cfg_.cwd;
            peer_.reply(id_json, ec ? std::string(R"({"roots":[]})") : mcp::roots_result(dir));
        } else {
            // sampling/createMessage, elicitation/create and the rest: meithd offers none.
            spdlog::info("{}: refused its request {} (meithd does not offer it)", label_,
                         audit::default_redactor().redact_text(mcp::cut_utf8(method, 200)));
            peer_.reply_error(id_json, -32601,
                              fmt::format("Method not found: meithd does not offer {}",
                                          mcp::cut_utf8(method, 200)));
        }
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

    const config::source_config cfg_; ///< a copy: a config reload replaces the daemon's
    const config::config& whole_;
    const std::string label_; ///< "MCP server 'NAME'" in log lines and messages
    confinement conf_;        ///< the sandbox it runs in (before peer_: its spec is made from it)
    bool reconfined_ = false; ///< started again in its tools' sandbox, not yet settled
    rpc_peer peer_;
    supervised_process& proc_; ///< the peer's child
    source_events events_;
    bool started_ = false;
    bool settled_ = false;
    bool ready_ = false;   ///< initialized and tools registered, for this child
    bool listing_ = false; ///< a tools/list walk is under way
    bool relist_ = false;  ///< list_changed came during the walk: walk again after it
    std::size_t pages_ = 0;
    std::vector<tool_definition> listed_; ///< the walk's tools so far
    std::set<std::string> tool_names_;    ///< registered (prefixed) names
    std::string revision_;                ///< negotiated protocol revision
    std::deque<call_ptr> waiting_;
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
