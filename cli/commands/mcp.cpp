// mcp_bridge: `meith mcp` — the registry as an MCP server on stdio (docs/protocol.md §10, §17).
//
// Every MCP family is passed through: tools as list_tools/tool_call frames; resources, prompts,
// completions and logging as mcp_request frames; the servers' own requests (sampling,
// elicitation, roots) arrive as client_request frames and go to the client as JSON-RPC
// requests (2025-11-25) or as an `input_required` result answered on the retry (2026-07-28);
// notifications as mcp_notification frames. Both revisions are spoken, chosen per client: an
// `initialize` gives 2025-11-25 or older; `server/discover` or a request carrying the
// 2026-07-28 `_meta` envelope gives 2026-07-28 (subscriptions/listen for notifications).
//
// One JSON-RPC 2.0 message a line on stdin and stdout (MCP stdio transport), nothing else on
// stdout, logs on stderr. Each MCP request becomes socket frames to meithd on one connection
// (hello subscribed to `tools_changed`); many requests are in flight at once, matched to their
// replies by requestId. One thread: the daemon's channel is read with stdin as its wake fd, so
// neither side can starve the other. When meithd does not answer, every request gets a
// JSON-RPC error that says how to start it, and the bridge tries again on the next request:
// it never hangs.
#include "cli/commands/mcp_bridge.hpp"

#include "cli/autostart.hpp"
#include "cli/discovery.hpp"

#include <algorithm>
#include <cerrno>
#include <utility>

#include <unistd.h>

#include <fmt/core.h>
#include <poll.h>

namespace meith::cli {

namespace mcp_bridge {

int bridge::run() {
    connect(); // failures are answered per request
    for (;;) {
        while (auto line = next_stdin_line())
            handle_message(*line);
        if (in_eof_) return drain(); // the client closed our stdin: it sends nothing more
        if (conn_) {
            const auto r = conn_->read_frame(std::nullopt, STDIN_FILENO);
            if (r.status == protocol::client_channel::read_status::frame) {
                on_daemon_frame(r.frame);
            } else if (r.status == protocol::client_channel::read_status::closed) {
                daemon_gone("meithd closed the connection");
            } else if (r.status == protocol::client_channel::read_status::woken) {
                read_stdin();
            }
        } else {
            pollfd p{STDIN_FILENO, POLLIN, 0};
            if (::poll(&p, 1, -1) > 0) read_stdin();
        }
    }
}

int bridge::drain() {
    // The client may still read stdout (a script that wrote its requests and closed its end,
    // or a client waiting for its answers before it signals us, MCP stdio "Shutdown"). What it
    // can no longer answer is refused now, so no call waits for it.
    // Moved out first: a failed send ends the connection (daemon_gone), which clears the map.
    const auto asked = std::exchange(to_daemon_request_, {});
    for (const auto& [id, crid] : asked)
        if (!conn_ || !refuse_client_request(crid, "the MCP client closed its input")) break;
    const auto awaited = [this] {
        return tasks_.has_waiting() ||
               std::any_of(pending_.begin(), pending_.end(), [](const auto& e) {
                   return !e.second.cancelled && !e.second.mcp_id.is_null();
               });
    };
    // Bounded: past drain_grace (or once nobody reads stdout) the bridge leaves, and closing
    // its connection cancels what is still running.
    const auto until = std::chrono::steady_clock::now() + drain_grace;
    while (conn_ && awaited()) {
        const auto now = std::chrono::steady_clock::now();
        if (now >= until) {
            fmt::print(stderr,
                       "meith mcp: stdin closed; {} s later requests are still in flight: "
                       "leaving them (their calls are cancelled)\n",
                       drain_grace.count());
            break;
        }
        pollfd out{STDOUT_FILENO, 0, 0};
        if (::poll(&out, 1, 0) > 0 && (out.revents & (POLLERR | POLLHUP | POLLNVAL)) != 0)
            break; // nobody reads the answers any more
        const auto r = conn_->read_frame(std::min(until, now + std::chrono::milliseconds(200)));
        if (r.status == protocol::client_channel::read_status::frame)
            on_daemon_frame(r.frame);
        else if (r.status == protocol::client_channel::read_status::closed)
            daemon_gone("meithd closed the connection");
    }
    return exit_ok;
}

void bridge::read_stdin() {
    auto buf = in_.prepare();
    const ssize_t n = ::read(STDIN_FILENO, buf.data(), buf.size());
    if (n > 0) {
        in_.commit(static_cast<std::size_t>(n));
    } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
        in_eof_ = true;
        // A last message without its newline is still a message (not one cut by an error);
        // a last one over the limit is still answered.
        if (n == 0 && (!in_.partial().empty() || in_.discarding())) {
            in_.prepare()[0] = '\n';
            in_.commit(1);
        }
    }
}

std::optional<std::string> bridge::next_stdin_line() {
    for (;;) {
        const auto st = in_.next();
        if (st == protocol::line_framer::status::need_more) return std::nullopt;
        if (st == protocol::line_framer::status::frame) return std::string(in_.line());
        // Over the limit: dropped as it streamed in, never read in part as a message of its
        // own; its request is answered (with its id when one came before the limit) so the
        // client's call fails now.
        const auto& id = in_.oversized_member(0);
        json jid = nullptr;
        if (id.k == protocol::top_level_scanner::value::kind::string)
            jid = id.text;
        else if (id.k == protocol::top_level_scanner::value::kind::number)
            jid = json::parse(id.text, nullptr, false);
        if (jid.is_discarded()) jid = nullptr;
        send_error(jid, parse_error,
                   fmt::format("message of {} bytes is longer than 64 MiB, the most meith mcp "
                               "reads; it was dropped",
                               in_.dropped_bytes()));
    }
}

void bridge::write_stdout(const json& msg) {
    std::string text = compact(msg);
    text.push_back('\n');
    for (std::size_t done = 0; done < text.size();) {
        const ssize_t n = ::write(STDOUT_FILENO, text.data() + done, text.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) throw cli_error(exit_error, "stdout closed");
        done += static_cast<std::size_t>(n);
    }
}

void bridge::send_result(const json& id, json result) {
    write_stdout(json{{"jsonrpc", "2.0"}, {"id", id}, {"result", std::move(result)}});
}

void bridge::send_error(const json& id, int code, const std::string& message) {
    write_stdout(
        json{{"jsonrpc", "2.0"}, {"id", id}, {"error", {{"code", code}, {"message", message}}}});
}

void bridge::notify(std::string_view method, json params) {
    write_stdout(json{{"jsonrpc", "2.0"}, {"method", method}, {"params", std::move(params)}});
}

json bridge::hello_frame(const std::string& id) const {
    json client{{"name", "meith mcp"}, {"caller", caller_}};
    if (!agent_.empty()) client["agent"] = agent_;
    if (opts_.client) client["client"] = *opts_.client;
    return {{"type", "hello"},
            {"protocol", 1},
            {"requestId", id},
            {"clientInfo", std::move(client)},
            {"subscribe", {"tools_changed", "mcp_notifications"}},
            {"capabilities", client_caps_}};
}

bool bridge::connect() {
    if (conn_) return true;
    try {
        daemon_connection dc = connect_daemon(opts_);
        protocol::client_channel ch = std::move(dc.channel);
        const std::string id = ids_.next();
        ch.send_frame(compact(hello_frame(id)));
        apply_hello(await_reply(ch, id, "hello_result"));
        conn_ = std::move(ch);
        return true;
    } catch (const protocol::client_error& e) {
        down_ = to_cli_error(e, opts_).what();
    } catch (const cli_error& e) {
        down_ = e.what();
    }
    fmt::print(stderr, "meith mcp: {}\n", down_);
    return false;
}

void bridge::set_client(const json& caps, const json* info) {
    bool renamed = false; // the MCP client's name may select a client profile (§23)
    if (info != nullptr && info->is_object())
        if (auto name = get_string(*info, "name"); name && *name != agent_) {
            agent_ = *name;
            renamed = true;
        }
    if (!renamed && caps.is_object() && caps == client_caps_) return;
    client_caps_ = caps.is_object() ? caps : json::object();
    if (conn_) hello_now();
}

void bridge::apply_hello(const json& hello_result) {
    const json* client = get_field(hello_result, "client");
    pinned_.clear();
    search_mode_ = opts_.search.has_value();
    if (client == nullptr || !client->is_object()) return;
    if (const json* s = get_field(*client, "search"); s && s->is_boolean() && s->get<bool>())
        search_mode_ = true;
    if (const json* p = get_field(*client, "pinned"); p && p->is_array())
        for (const json& n : *p)
            if (n.is_string()) pinned_.push_back(n.get<std::string>());
}

void bridge::hello_now() {
    const std::string id = ids_.next();
    if (!send_to_daemon(hello_frame(id))) return;
    const auto deadline = protocol::client_channel::clock::now() + std::chrono::seconds(10);
    while (conn_) {
        const auto r = conn_->read_frame(deadline);
        if (r.status == protocol::client_channel::read_status::closed)
            return daemon_gone("meithd closed the connection");
        if (r.status != protocol::client_channel::read_status::frame) return; // timed out
        const json f = json::parse(r.frame, nullptr, false);
        if (get_string(f, "requestId") != id) {
            on_daemon_frame(r.frame);
            continue;
        }
        if (get_string(f, "type") == "hello_result")
            apply_hello(f);
        else
            fmt::print(stderr, "meith mcp: meithd: {}\n", get_string(f, "message").value_or(""));
        return;
    }
}

void bridge::daemon_gone(const std::string& why) {
    fmt::print(stderr, "meith mcp: {}\n", why);
    conn_.reset();
    down_ = why + (autostart_enabled(opts_) ? "; the next request starts it again"
                                            : "; start it again with: meithd");
    for (auto& [rid, p] : pending_)
        if (!p.cancelled && !p.mcp_id.is_null()) send_error(p.mcp_id, internal_error, down_);
    pending_.clear();
    by_mcp_id_.clear();
    to_daemon_request_.clear();
}

bool bridge::send_to_daemon(const json& frame) {
    try {
        conn_->send_frame(compact(frame));
        return true;
    } catch (const protocol::client_error& e) {
        daemon_gone(e.what());
        return false;
    }
}

void bridge::on_daemon_frame(const std::string& line) {
    const json f = json::parse(line, nullptr, false);
    if (!f.is_object()) return;
    const std::string type = get_string(f, "type").value_or("");
    if (type == "tools_changed") return list_changed("notifications/tools/list_changed");
    if (type == "mcp_notification") return on_mcp_notification(f);
    if (type == "client_request") return on_client_request(f);
    const auto rid = get_string(f, "requestId");
    auto it = rid ? pending_.find(*rid) : pending_.end();
    if (it == pending_.end()) {
        if (type == "error")
            fmt::print(stderr, "meith mcp: meithd: {}\n", get_string(f, "message").value_or(""));
        return;
    }
    pending& p = it->second;
    const auto task = tasks_.task_of(it->first);
    if (type == "tool_event") {
        const json event = f.value("event", json());
        if (task && get_string(event, "type") == "task_status")
            tasks_.working(*task, get_string(event, "message").value_or(""));
        if (!p.cancelled && !p.progress_token.is_null()) on_event(p, event);
        return;
    }
    auto a = answer_of(f, type, p);
    if (!a) return;
    if (p.modern && !a->failed) shapes::mark_modern(a->result, p.method);
    deliver(it, task, std::move(*a));
}

json bridge::daemon_answer::error() const {
    json err{{"code", code}, {"message", message}};
    if (!error_data.is_null()) err["data"] = error_data;
    return err;
}

std::optional<bridge::daemon_answer> bridge::answer_of(const json& f, const std::string& type,
                                                       const pending& p) {
    daemon_answer a;
    if (type == "tools_list") {
        const json tools = f.value("tools", json::array());
        if (p.k == kind::search) {
            a.result = search_result(tools);
        } else if (p.k == kind::pinned) {
            a.result = pinned_listing(tools);
        } else {
            const json* total = get_field(f, "total");
            a.result = total != nullptr && total->is_number_unsigned()
                           ? tools_page_cut(tools, p.offset, total->get<std::size_t>())
                           : tools_page(tools, p.offset);
        }
    } else if (type == "tool_result") {
        bool unknown = false;
        a.result = shapes::call_result(f.value("result", json::object()), unknown, a.message);
        if (unknown) a.failed = true, a.code = invalid_params;
    } else if (type == "mcp_result") {
        if (const json* e = get_field(f, "error"); e != nullptr && e->is_object()) {
            a.failed = true;
            a.code = e->value("code", internal_error);
            a.message = get_string(*e, "message").value_or("error");
            if (e->contains("data")) a.error_data = (*e)["data"];
        } else {
            a.result = page_of(p.method, f.value("result", json::object()), p.offset);
        }
    } else if (type == "error") {
        a.failed = true;
        a.message = "meithd: " + get_string(f, "message").value_or("error");
    } else {
        return std::nullopt;
    }
    return a;
}

json bridge::pinned_listing(const json& tools) {
    // Search mode with the profile's pinned tools beside the meta-tools.
    json answer = search_mode_tools();
    for (const json& d : tools)
        if (d.is_object() && std::find(pinned_.begin(), pinned_.end(),
                                       get_string(d, "name").value_or("")) != pinned_.end()) {
            const std::string permission = get_string(d, "permission").value_or("");
            if (permission != "allow" && permission != "ask") continue;
            if (get_string(d, "payloadKind") == "text")
                text_tools_.insert(get_string(d, "name").value_or(""));
            answer["tools"].push_back(shapes::tool_of(d));
        }
    return answer;
}

void bridge::deliver(std::map<std::string, pending>::iterator it,
                     const std::optional<std::string>& task, daemon_answer a) {
    pending& p = it->second;
    if (task) {
        // A task's call ended: its waiting tasks/result requests get the answer.
        pending_.erase(it);
        for (const json& waiting : tasks_.finish(*task, a.failed ? a.error() : a.result, a.failed))
            send_task_result(waiting, *task);
        if (auto t = tasks_.get(*task)) notify("notifications/tasks/status", *t);
        return;
    }
    if (p.mcp_id.is_null()) {
        // A 2026-07-28 call between rounds keeps its answer for the retry.
        if (p.k == kind::call && !p.asked.empty() && !a.failed)
            p.final = std::move(a.result);
        else
            pending_.erase(it);
        return;
    }
    const json mcp_id = p.mcp_id;
    const bool cancelled = p.cancelled;
    by_mcp_id_.erase(mcp_id.dump());
    pending_.erase(it);
    if (cancelled) return;
    if (!a.failed) return send_result(mcp_id, std::move(a.result));
    write_stdout(json{{"jsonrpc", "2.0"}, {"id", mcp_id}, {"error", a.error()}});
}

void bridge::on_event(pending& p, const json& event) {
    json params{{"progressToken", p.progress_token}};
    if (event.is_object() && get_string(event, "type") == "approval_pending") {
        // The call waits for a person (docs/protocol.md §14): said as progress, so the
        // client can show it.
        params["progress"] = p.progress;
        params["message"] = get_string(event, "message").value_or("waiting for approval");
    } else if (event.is_object() && get_string(event, "type") == "progress" &&
               event.contains("progress") && event["progress"].is_number()) {
        params["progress"] = event["progress"];
        if (event.contains("total")) params["total"] = event["total"];
        if (event.contains("message")) params["message"] = event["message"];
    } else {
        // Other events (a host's streamed parts) count up, their JSON as the message.
        p.progress += 1;
        params["progress"] = p.progress;
        params["message"] = compact(event);
    }
    notify("notifications/progress", std::move(params));
}

void bridge::handle_message(const std::string& line) {
    const json msg = json::parse(line, nullptr, false);
    if (msg.is_discarded()) return send_error(nullptr, parse_error, "parse error: not JSON");
    try {
        dispatch_message(msg);
    } catch (const json::exception& e) {
        const json* id = get_field(msg, "id");
        send_error(id != nullptr && (id->is_string() || id->is_number_integer()) ? *id : json(),
                   internal_error, std::string("meith mcp could not handle it: ") + e.what());
    }
}

void bridge::dispatch_message(const json& msg) {
    if (!msg.is_object() || get_string(msg, "jsonrpc") != "2.0")
        return send_error(msg.is_object() ? msg.value("id", json()) : json(), invalid_request,
                          "not a JSON-RPC 2.0 message");
    const bool has_id = msg.contains("id");
    const json id = msg.value("id", json());
    if (!msg.contains("method") || !msg["method"].is_string()) {
        if (!has_id) return;
        if (msg.contains("result") || msg.contains("error")) return on_client_answer(msg);
        return send_error(id, invalid_request, "\"method\" must be a string");
    }
    if (has_id && !(id.is_string() || id.is_number_integer()))
        return send_error(nullptr, invalid_request, "\"id\" must be a string or an integer");
    const std::string method = msg["method"];
    json params = msg.value("params", json::object());
    if (!has_id) return on_notification(method, params);
    if (!params.is_object()) return send_error(id, invalid_params, "\"params\" must be an object");
    const bool modern = read_envelope(id, params);
    if (modern && params.is_null()) return; // refused: answered
    if (method == "initialize") return initialize(id, params);
    if (method == "server/discover") return send_result(id, shapes::discover_result());
    if (method == "ping") return send_result(id, json::object());
    if (method == "tools/list") return tools_list(id, params, modern);
    if (method == "tools/call") return tools_call(id, params, modern);
    if (method == "subscriptions/listen") return listen(id, params);
    if (method.starts_with("tasks/") && !modern) return task_request(id, method, params);
    if (method == "resources/list" || method == "resources/templates/list" ||
        method == "resources/read" || method == "resources/subscribe" ||
        method == "resources/unsubscribe" || method == "prompts/list" || method == "prompts/get" ||
        method == "completion/complete" || method == "logging/setLevel")
        return mcp_request(id, method, std::move(params), modern);
    send_error(id, method_not_found, "method not found: " + method);
}

void bridge::on_notification(const std::string& method, const json& params) {
    if (method != "notifications/cancelled" || !params.is_object()) return;
    const json request_id = params.value("requestId", json());
    if (auto l = listens_.find(request_id.dump()); l != listens_.end()) {
        for (const auto& uri : l->second.uris)
            subscribe_uri(uri, false);
        listens_.erase(l);
        return;
    }
    auto it = by_mcp_id_.find(request_id.dump());
    if (it == by_mcp_id_.end()) return; // finished already, or never ours: nothing to do
    auto p = pending_.find(it->second);
    if (p == pending_.end() || p->second.cancelled) return;
    p->second.cancelled = true;
    if (p->second.k == kind::call)
        send_to_daemon({{"type", "cancel_tool_call"}, {"protocol", 1}, {"requestId", it->second}});
}

void bridge::initialize(const json& id, const json& params) {
    std::string_view chosen = shapes::legacy_revisions.front();
    const json* asked = get_field(params, "protocolVersion");
    if (asked != nullptr && !asked->is_string())
        return send_error(id, invalid_params, "\"protocolVersion\" must be a string");
    for (auto r : shapes::legacy_revisions)
        if (asked != nullptr && asked->get_ref<const std::string&>() == r) chosen = r;
    const json* info = get_field(params, "clientInfo");
    if (info != nullptr) {
        const json* name = get_field(*info, "name");
        if (!info->is_object() || (name != nullptr && !name->is_string()))
            return send_error(id, invalid_params,
                              "\"clientInfo\" must be an object with a string \"name\"");
    }
    const json caps = params.value("capabilities", json::object());
    if (!caps.is_object())
        return send_error(id, invalid_params, "\"capabilities\" must be an object");
    modern_ = false;
    set_client(caps, info);
    if (!connect()) return send_error(id, internal_error, down_);
    send_result(id, {{"protocolVersion", chosen},
                     {"capabilities", shapes::server_capabilities()},
                     {"serverInfo", shapes::server_info()},
                     {"instructions", "Tools of the local meith registry (meithd), with its "
                                      "permissions and audit trail."}});
}

std::string bridge::track(const json& mcp_id, kind k, std::string method, bool modern,
                          std::size_t offset) {
    const std::string rid = ids_.next();
    pending p;
    p.mcp_id = mcp_id;
    p.k = k;
    p.method = std::move(method);
    p.modern = modern;
    p.offset = offset;
    pending_.emplace(rid, std::move(p));
    if (!mcp_id.is_null()) by_mcp_id_[mcp_id.dump()] = rid;
    return rid;
}

} // namespace mcp_bridge

int run_mcp(const options& opts) {
    if (opts.search && !opts.search->empty())
        throw usage_error("meith mcp --search takes no words: the MCP client searches with the "
                          "search_tools tool (to search here: meith tools --search WORDS)");
    if (opts.search && opts.all) throw usage_error("meith mcp --search lists no tools: drop --all");
    return mcp_bridge::bridge(opts).run();
}

} // namespace meith::cli
