// mcp_session: the registry as an MCP server (docs/protocol.md §10, §17), for either host.
//
// Every MCP family is passed through: tools as list_tools/tool_call frames; resources, prompts,
// completions and logging as mcp_request frames; the servers' own requests (sampling,
// elicitation, roots) arrive as client_request frames and go to the client as JSON-RPC
// requests (2025-11-25) or as an `input_required` result answered on the retry (2026-07-28);
// notifications as mcp_notification frames. Both revisions are spoken, chosen per client: an
// `initialize` gives 2025-11-25 or older; `server/discover` or a request carrying the
// 2026-07-28 `_meta` envelope gives 2026-07-28 (subscriptions/listen for notifications).
//
// One JSON-RPC 2.0 message a line from and to the client (MCP stdio transport). Each MCP
// request becomes socket frames to meithd on one connection (hello subscribed to
// `tools_changed`); many requests are in flight at once, matched to their replies by
// requestId. When meithd does not answer, every request gets a JSON-RPC error that says how to
// start it, and the session tries again on the next request: it never hangs.
#include "bridge/mcp_session.hpp"

#include "protocol/json_writer.hpp"

#include <algorithm>
#include <cerrno>
#include <utility>

#include <fmt/core.h>

namespace meith::bridge {

void mcp_session::input_ended(bool clean) {
    if (in_eof_) return;
    in_eof_ = true;
    // A last message without its newline is still a message (not one cut by an error); a
    // last one over the limit is still answered.
    if (clean && (!in_.partial().empty() || in_.discarding())) {
        in_.prepare()[0] = '\n';
        in_.commit(1);
    }
}

void mcp_session::pump() {
    while (hello_wait_.empty()) {
        if (held_) {
            const json msg = std::move(*held_);
            held_.reset();
            dispatch_safely(msg);
        } else if (auto line = next_input_line()) {
            handle_message(*line);
        } else {
            return;
        }
    }
}

void mcp_session::begin_drain() {
    // What the client can no longer answer is refused now, so no call waits for it. Moved
    // out first: a failed send ends the connection (daemon_gone), which clears the map.
    const auto asked = std::exchange(to_daemon_request_, {});
    for (const auto& [id, crid] : asked)
        if (!link_.connected() || !refuse_client_request(crid, "the MCP client closed its input"))
            break;
}

bool mcp_session::awaited() const {
    return link_.connected() && (tasks_.has_waiting() ||
                                 std::any_of(pending_.begin(), pending_.end(), [](const auto& e) {
                                     return !e.second.cancelled && !e.second.mcp_id.is_null();
                                 }));
}

std::optional<std::string_view> mcp_session::next_input_line() {
    for (;;) {
        const auto st = in_.next();
        if (st == protocol::line_framer::status::need_more) return std::nullopt;
        if (st == protocol::line_framer::status::frame) return in_.line();
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

void mcp_session::write_client(const json& msg) {
    std::string text = compact(msg);
    text.push_back('\n');
    link_.write_client(text);
}

void mcp_session::send_result(const json& id, json result) {
    // Written as text around the result: no object built to wrap it.
    std::string& text = out_text_;
    text.assign(R"({"jsonrpc":"2.0","id":)");
    append_compact(text, id);
    text.append(R"(,"result":)");
    append_compact(text, result);
    text.append("}\n");
    link_.write_client(text);
}

void mcp_session::send_error(const json& id, int code, const std::string& message) {
    write_client(
        json{{"jsonrpc", "2.0"}, {"id", id}, {"error", {{"code", code}, {"message", message}}}});
}

void mcp_session::notify(std::string_view method, json params) {
    write_client(json{{"jsonrpc", "2.0"}, {"method", method}, {"params", std::move(params)}});
}

json mcp_session::hello_frame(const std::string& id) const {
    json client{{"name", "meith mcp"}, {"caller", settings_.caller}};
    if (!agent_.empty()) client["agent"] = agent_;
    if (settings_.client) client["client"] = *settings_.client;
    return {{"type", "hello"},
            {"protocol", 1},
            {"requestId", id},
            {"clientInfo", std::move(client)},
            {"subscribe", {"tools_changed", "mcp_notifications"}},
            {"capabilities", client_caps_}};
}

bool mcp_session::connect() {
    if (link_.connected()) return true;
    const std::string id = ids_.next();
    std::string why;
    if (auto hello = link_.connect(compact(hello_frame(id)), id, why)) {
        apply_hello(*hello);
        return true;
    }
    down_ = why;
    link_.note("meith mcp: " + down_);
    return false;
}

void mcp_session::set_client(const json& caps, const json* info) {
    bool renamed = false; // the MCP client's name may select a client profile (§23)
    if (info != nullptr && info->is_object())
        if (auto name = get_string(*info, "name"); name && *name != agent_) {
            agent_ = *name;
            renamed = true;
        }
    if (!renamed && caps.is_object() && caps == client_caps_) return;
    client_caps_ = caps.is_object() ? caps : json::object();
    if (link_.connected()) hello_now();
}

void mcp_session::apply_hello(const json& hello_result) {
    const json* client = get_field(hello_result, "client");
    pinned_.clear();
    search_mode_ = settings_.search;
    if (client == nullptr || !client->is_object()) return;
    if (const json* s = get_field(*client, "search"); s && s->is_boolean() && s->get<bool>())
        search_mode_ = true;
    if (const json* p = get_field(*client, "pinned"); p && p->is_array())
        for (const json& n : *p)
            if (n.is_string()) pinned_.push_back(n.get<std::string>());
}

void mcp_session::hello_now() {
    const std::string id = ids_.next();
    if (send_to_daemon(hello_frame(id))) hello_wait_ = id;
}

void mcp_session::daemon_gone(const std::string& why) {
    link_.note("meith mcp: " + why);
    link_.disconnect();
    hello_wait_.clear();
    down_ = why + settings_.when_down;
    for (auto& [rid, p] : pending_)
        if (!p.cancelled && !p.mcp_id.is_null()) send_error(p.mcp_id, internal_error, down_);
    pending_.clear();
    by_mcp_id_.clear();
    to_daemon_request_.clear();
}

bool mcp_session::send_to_daemon(const json& frame) {
    return send_frame_text(compact(frame));
}

bool mcp_session::send_frame_text(const std::string& frame) {
    std::string why;
    if (link_.send(frame, why)) return true;
    daemon_gone(why);
    return false;
}

void mcp_session::on_daemon_frame(std::string_view line) {
    if (fast_tool_result(line)) return;
    json f = json::parse(line, nullptr, false);
    if (!f.is_object()) return;
    try {
        handle_daemon_frame(f);
    } catch (const json::exception& e) {
        // A member of an unexpected type (a source's error code that is no number): said,
        // and the session goes on.
        link_.note(std::string("meith mcp: a frame from meithd could not be read: ") + e.what());
    }
}

void mcp_session::handle_daemon_frame(json& f) {
    const std::string type = get_string(f, "type").value_or("");
    if (type == "tools_changed") return list_changed("notifications/tools/list_changed");
    if (type == "mcp_notification") return on_mcp_notification(f);
    if (type == "client_request") return on_client_request(f);
    const auto rid = get_string(f, "requestId");
    if (!hello_wait_.empty() && rid == hello_wait_) {
        // The hello hello_now sent: its profile applies to the messages that waited for it.
        hello_wait_.clear();
        if (type == "hello_result")
            apply_hello(f);
        else
            link_.note("meith mcp: meithd: " + get_string(f, "message").value_or(""));
        return pump();
    }
    auto it = rid ? pending_.find(*rid) : pending_.end();
    if (it == pending_.end()) {
        if (type == "error")
            link_.note("meith mcp: meithd: " + get_string(f, "message").value_or(""));
        return;
    }
    pending& p = it->second;
    const auto task = tasks_.task_of(it->first);
    if (type == "tool_event") {
        const json event = shapes::take(f, "event");
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

json mcp_session::daemon_answer::error() const {
    json err{{"code", code}, {"message", message}};
    if (!error_data.is_null()) err["data"] = error_data;
    return err;
}

std::optional<mcp_session::daemon_answer> mcp_session::answer_of(json& f, const std::string& type,
                                                                 const pending& p) {
    daemon_answer a;
    if (type == "tools_list") {
        json tools = shapes::take(f, "tools");
        if (tools.is_null()) tools = json::array();
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
        a.result = shapes::call_result(shapes::take(f, "result"), unknown, a.message);
        if (unknown) a.failed = true, a.code = invalid_params;
    } else if (type == "mcp_result") {
        if (const json* e = get_field(f, "error"); e != nullptr && e->is_object()) {
            a.failed = true;
            const json* code = get_field(*e, "code");
            a.code =
                code != nullptr && code->is_number_integer() ? code->get<int>() : internal_error;
            a.message = get_string(*e, "message").value_or("error");
            if (e->contains("data")) a.error_data = (*e)["data"];
        } else {
            json result = shapes::take(f, "result");
            if (result.is_null()) result = json::object();
            a.result = page_of(p.method, std::move(result), p.offset);
        }
    } else if (type == "error") {
        a.failed = true;
        a.message = "meithd: " + get_string(f, "message").value_or("error");
    } else {
        return std::nullopt;
    }
    return a;
}

json mcp_session::pinned_listing(const json& tools) {
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

void mcp_session::deliver(std::map<std::string, pending, std::less<>>::iterator it,
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
    write_client(json{{"jsonrpc", "2.0"}, {"id", mcp_id}, {"error", a.error()}});
}

void mcp_session::on_event(pending& p, const json& event) {
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

void mcp_session::handle_message(std::string_view line) {
    if (fast_tools_call(line)) return;
    const json msg = json::parse(line, nullptr, false);
    if (msg.is_discarded()) return send_error(nullptr, parse_error, "parse error: not JSON");
    dispatch_safely(msg);
}

void mcp_session::dispatch_safely(const json& msg) {
    try {
        dispatch_message(msg);
    } catch (const json::exception& e) {
        const json* id = get_field(msg, "id");
        send_error(id != nullptr && (id->is_string() || id->is_number_integer()) ? *id : json(),
                   internal_error, std::string("meith mcp could not handle it: ") + e.what());
    }
}

void mcp_session::dispatch_message(const json& msg) {
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
    if (!hello_wait_.empty()) {
        // The envelope named a new client (or capabilities): this request, too, waits for
        // meithd's answer to the hello, which may select a client profile (§23).
        held_ = msg;
        return;
    }
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

void mcp_session::on_notification(const std::string& method, const json& params) {
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

void mcp_session::initialize(const json& id, const json& params) {
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

std::string mcp_session::track(const json& mcp_id, kind k, std::string method, bool modern,
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

} // namespace meith::bridge
