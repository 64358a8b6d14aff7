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
#include "sources/mcp_source.hpp"
#include "sources/revision_memory.hpp"

#include "protocol/json_writer.hpp"
#include "sources/factory.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace meith::sources {

namespace {
/// Pages of one tools/list walk; a server that keeps handing out cursors fails past this.
constexpr std::size_t max_list_pages = 1000;
} // namespace

bool mcp_source::offers(std::string_view capability) const {
    if (!ready_) return false;
    if (capability == "resources") return server_caps_.resources;
    if (capability == "resources.subscribe") return server_caps_.subscribe;
    if (capability == "prompts") return server_caps_.prompts;
    if (capability == "completions") return server_caps_.completions;
    if (capability == "logging") return server_caps_.logging;
    return false;
}

std::string mcp_source::capabilities_hint(std::string_view remote_name) const {
    return fmt::format(
        "MCP server '{}' declares no capabilities for '{}': add `trust_annotations = true` "
        "to its [[sources]] entry (its readOnlyHint/destructiveHint/openWorldHint then "
        "decide), or a table naming what it does, e.g. `capabilities = {{ \"{}\" = "
        "[\"read-only\"] }}` (docs/configuration.md)",
        cfg_.name, remote_name, remote_name);
}

process::supervised_process::policy mcp_source::make_policy(const config::source_config& cfg,
                                                            const config::config& whole) {
    auto p = default_policy(cfg, whole);
    p.stdin_first = true; // MCP stdio shutdown: EOF, then SIGTERM, then SIGKILL
    return p;
}

void mcp_source::on_spawn() {
    ++spawns_;
    probing_ = false;
    probe_ping_.reset(); // the peer forgot the last child's requests
    server_caps_ = {};
    modern_ = false;
    listen_id_.reset();
    // A server that answered server/discover with nothing usable last time is opened with
    // initialize at once: the probe, and its wait when the server ignores it, only once.
    if (!remote())
        if (const auto known = remembered_revision(cfg_); known && *known != mcp::modern_revision) {
            spdlog::info("{}: opening with initialize, as it negotiated {} when it last started",
                         label_, *known);
            return send_initialize();
        }
    send_discover();
}

void mcp_source::append_status(std::string& out) const {
    protocol::json_members m(out);
    if (revision_.empty())
        m.null("protocolVersion");
    else
        m.string("protocolVersion", revision_);
    if (remote()) append_remote_status(out);
}

void mcp_source::send_discover() {
    ready_ = false;
    revision_.clear();
    process::rpc_peer::callbacks cb;
    const auto gen = spawns_;
    cb.on_message = [this, gen](simdjson::dom::object msg, bool) {
        if (gen == spawns_) on_discovered(msg);
    };
    cb.on_failure = [](process::rpc_failure, const std::string&) {}; // the exit handler decides
    const auto id =
        peer_.request("server/discover", mcp::discover_params(envelope_), std::move(cb));
    if (!id) return proc_.fail_start("could not send server/discover");
    probing_ = true;
    pinged_ = ping_answered_ = false;
    arm_probe(remote() ? discover_timeout : ping_after, *id);
}

void mcp_source::send_probe_ping(std::uint64_t discover_id) {
    // Answered (a result or an error) while the probe is not: the server read the probe and
    // ignored it. Servers answer in order; discover_after_ping covers one whose handlers do
    // not. A server that answers the probe at once never sees the ping.
    process::rpc_peer::callbacks ping;
    ping.on_message = [this, gen = spawns_, discover_id](simdjson::dom::object, bool) {
        if (gen != spawns_ || !probing_) return;
        ping_answered_ = true;
        arm_probe(discover_after_ping, discover_id);
    };
    ping.on_failure = [](process::rpc_failure, const std::string&) {};
    // With the probe's envelope: a 2026-07-28 server serves an unenveloped request in an older
    // revision, and one slow to read would take the connection for a legacy one.
    probe_ping_ = peer_.request("ping", mcp::with_envelope("{}", envelope_), std::move(ping));
}

void mcp_source::end_probe() {
    probing_ = false;
    probe_timer_.cancel();
    // A ping the server ignores must not stay in flight: it would keep an idle stop away.
    if (const auto ping = std::exchange(probe_ping_, std::nullopt)) peer_.abandon(*ping);
}

void mcp_source::arm_probe(std::chrono::milliseconds after, std::uint64_t id) {
    probe_timer_.expires_after(after); // cancels a wait armed before
    probe_timer_.async_wait(
        [this, gen = spawns_, id, alive = std::weak_ptr<bool>(alive_)](const std::error_code& ec) {
            if (ec || !alive.lock() || gen != spawns_ || !probing_) return;
            if (!remote() && !std::exchange(pinged_, true)) {
                // Not answered within ping_after: is the server there at all? A ping says.
                send_probe_ping(id);
                arm_probe(discover_timeout - ping_after, id);
                return;
            }
            end_probe();
            peer_.abandon(id);
            if (ping_answered_)
                spdlog::info("{}: answered a ping but not server/discover, sent before it; using "
                             "initialize",
                             label_);
            else
                spdlog::info("{}: no answer to server/discover within {} ms; using initialize",
                             label_, discover_timeout.count());
            send_initialize();
        });
}

void mcp_source::on_discovered(simdjson::dom::object msg) {
    end_probe();
    simdjson::dom::element result;
    if (msg["result"].get(result) != simdjson::SUCCESS || !mcp::offers_modern(result))
        return send_initialize();
    modern_ = true;
    revision_ = std::string(mcp::modern_revision);
    server_caps_ = read_capabilities(result);
    spdlog::info("{}: discovered, protocol revision {}", label_, revision_);
    if (!remote()) remember_revision(cfg_, revision_);
    start_listing();
}

void mcp_source::send_initialize() {
    ready_ = false;
    revision_.clear();
    process::rpc_peer::callbacks cb;
    cb.on_message = [this](simdjson::dom::object msg, bool) { on_initialized(msg); };
    cb.on_failure = [](process::rpc_failure, const std::string&) {}; // the exit handler decides
    if (!peer_.request("initialize", mcp::initialize_params(MEITH_VERSION, cfg_.forward_roots),
                       std::move(cb)))
        proc_.fail_start("could not send initialize");
}

void mcp_source::on_initialized(simdjson::dom::object msg) {
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
    if (!remote()) remember_revision(cfg_, revision_);
    peer_.notify("notifications/initialized", "{}");
    start_listing();
}

void mcp_source::start_listing() {
    listing_ = true;
    relist_ = false;
    pages_ = 0;
    listed_.clear();
    request_page(std::nullopt);
}

void mcp_source::request_page(std::optional<std::string> cursor) {
    std::string params = "{}";
    if (cursor) {
        params = "{";
        protocol::json_members(params).string("cursor", *cursor);
        params += '}';
    }
    process::rpc_peer::callbacks cb;
    cb.on_message = [this](simdjson::dom::object msg, bool) { on_page(msg); };
    cb.on_failure = [](process::rpc_failure, const std::string&) {}; // the exit handler decides
    if (!peer_.request("tools/list", params_for(params), std::move(cb)))
        listing_failed("could not send tools/list");
}

void mcp_source::on_page(simdjson::dom::object msg) {
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

void mcp_source::listing_failed(std::string why) {
    listing_ = false;
    listed_.clear();
    if (!ready_) {
        proc_.fail_start(std::move(why));
        return;
    }
    // A failed re-list keeps the tools registered before.
    spdlog::warn("{}: {}; keeping its {} tool(s)", label_, why, tool_names_.size());
}

void mcp_source::finish_listing() {
    listing_ = false;
    // A remote server's tools run on the server: the bridge keeps its network-only sandbox.
    if (!ready_ && !remote() && reconfine(listed_)) {
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

std::string mcp_source::tools_changed_details(const std::set<std::string>& before) const {
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
    std::string out;
    protocol::json_members(out)
        .number("tools", tool_names_.size())
        .raw("added", list(tool_names_, before))
        .raw("removed", list(before, tool_names_));
    return out;
}

void mcp_source::became_ready() {
    ready_ = true;
    child_source::became_ready();
}

void mcp_source::on_child_exit() {
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

void mcp_source::send_execute(const tools::call_ptr& c, const tools::tool& t) {
    if (t.task_required && !modern_) {
        // A tool that runs only as a task (2025-11-25 basic/utilities/tasks): the call is
        // task-augmented, and its result fetched with tasks/result (docs/protocol.md §17).
        const std::uint64_t ttl = c->timeout_ms != 0 ? c->timeout_ms : 300000;
        std::string members;
        protocol::json_members m(members);
        m.key("task").push_back('{');
        m.number("ttl", ttl);
        members += '}';
        return send_call(c, t.remote_name, members, 0);
    }
    send_call(c, t.remote_name, {}, 0);
}

void mcp_source::send_call(const tools::call_ptr& c, const std::string& remote,
                           const std::string& input_members, int round) {
    const std::uint64_t token = ++next_token_;
    process::rpc_peer::callbacks cb;
    cb.on_message = [this, c, token, remote, round](simdjson::dom::object msg, bool) {
        progress_.erase(token);
        on_call_answer(c, msg, remote, round);
    };
    cb.on_failure = [this, c, token](process::rpc_failure failure, const std::string& how) {
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
                     params_for(mcp::cancelled_params(id, tools::names_of(raw->end()).words)));
    });
}

void mcp_source::on_call_answer(const tools::call_ptr& c, simdjson::dom::object msg,
                                const std::string& remote, int round) {
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

std::shared_ptr<tools::tool_source> make_mcp_source(asio::any_io_executor ex,
                                                    process::child_reaper& reaper,
                                                    const config::source_config& cfg,
                                                    const config::config& whole) {
    return std::make_shared<mcp_source>(std::move(ex), reaper, cfg, whole);
}

} // namespace meith::sources
