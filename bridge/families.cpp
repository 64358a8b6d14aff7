// mcp_families: `meith mcp` beyond tools (docs/protocol.md §17) — resources, prompts,
// completions and logging as mcp_request frames, the servers' requests to the client (a
// JSON-RPC request in 2025-11-25, an input_required round in 2026-07-28), 2026-07-28's
// envelope and subscriptions/listen, and the tasks the bridge runs. The class is in
// bridge/mcp_session.hpp.
#include "bridge/mcp_session.hpp"

#include <fmt/core.h>

namespace meith::bridge {

void mcp_session::list_changed(std::string_view method) {
    if (!modern_) return notify(method, json::object());
    const std::string_view flag = method == "notifications/tools/list_changed" ? "toolsListChanged"
                                  : method == "notifications/prompts/list_changed"
                                      ? "promptsListChanged"
                                      : "resourcesListChanged";
    for (const auto& [key, l] : listens_)
        if (l.notifications.value(std::string(flag), false))
            notify(method, {{"_meta", {{std::string(shapes::subscription_id_key), l.id}}}});
}

void mcp_session::on_mcp_notification(const json& f) {
    const std::string method = get_string(f, "method").value_or("");
    json params = f.value("params", json::object());
    if (method == "notifications/resources/list_changed" ||
        method == "notifications/prompts/list_changed")
        return list_changed(method);
    if (!modern_) return notify(method, std::move(params));
    if (method != "notifications/resources/updated") return; // 2026: no unsolicited messages
    const std::string uri = get_string(params, "uri").value_or("");
    for (const auto& [key, l] : listens_)
        if (l.uris.count(uri)) {
            json p = params;
            p["_meta"] = {{std::string(shapes::subscription_id_key), l.id}};
            notify(method, std::move(p));
        }
}

void mcp_session::on_client_request(const json& f) {
    const std::string crid = get_string(f, "clientRequestId").value_or("");
    const std::string method = get_string(f, "method").value_or("");
    json params = f.value("params", json::object());
    auto it = pending_.find(get_string(f, "requestId").value_or(""));
    if (it == pending_.end() || it->second.cancelled) {
        refuse_client_request(crid, "the call is over");
        return;
    }
    if (in_eof_) {
        // The client closed its input: nobody can answer (the call goes on without it).
        refuse_client_request(crid, "the MCP client closed its input");
        return;
    }
    pending& p = it->second;
    if (!p.modern) {
        const std::string id = fmt::format("meith-{}", ++next_client_request_);
        to_daemon_request_[id] = crid;
        write_client(json{
            {"jsonrpc", "2.0"}, {"id", id}, {"method", method}, {"params", std::move(params)}});
        return;
    }
    // 2026-07-28: the client takes no requests; the call answers input_required and the
    // client's retry carries the answers (multi-round-trip requests).
    p.inputs[crid] = {{"method", method}, {"params", std::move(params)}};
    if (!p.mcp_id.is_null()) ask_inputs(it->first, p);
}

bool mcp_session::refuse_client_request(const std::string& crid, const std::string& message) {
    return send_to_daemon({{"type", "client_response"},
                           {"protocol", 1},
                           {"clientRequestId", crid},
                           {"error", {{"code", internal_error}, {"message", message}}}});
}

void mcp_session::ask_inputs(const std::string& rid, pending& p) {
    json result{
        {"resultType", "input_required"}, {"inputRequests", p.inputs}, {"requestState", rid}};
    shapes::mark_modern(result, "tools/call");
    for (auto& [key, v] : p.inputs.items())
        p.asked[key] = key;
    p.inputs = json::object();
    by_mcp_id_.erase(p.mcp_id.dump());
    send_result(p.mcp_id, std::move(result));
    p.mcp_id = json();
}

bool mcp_session::read_envelope(const json& id, json& params) {
    json* meta =
        params.contains("_meta") && params["_meta"].is_object() ? &params["_meta"] : nullptr;
    const std::string vkey(shapes::protocol_version_key);
    if (meta == nullptr || !meta->contains(vkey)) return false;
    const json version = (*meta)[vkey];
    if (!version.is_string() || version.get<std::string>() != shapes::modern_revision) {
        write_client(
            json{{"jsonrpc", "2.0"},
                 {"id", id},
                 {"error",
                  {{"code", -32022},
                   {"message", "Unsupported protocol version: " + compact(version)},
                   {"data", {{"supported", {shapes::modern_revision}}, {"requested", version}}}}}});
        params = json();
        return true;
    }
    modern_ = true;
    const json caps = meta->value(std::string(shapes::client_capabilities_key), json::object());
    const json* info = get_field(*meta, shapes::client_info_key);
    set_client(caps, info);
    for (auto key :
         {shapes::protocol_version_key, shapes::client_capabilities_key, shapes::client_info_key})
        meta->erase(std::string(key));
    if (meta->empty()) params.erase("_meta");
    return true;
}

void mcp_session::on_client_answer(const json& msg) {
    const json& id = msg["id"];
    if (!id.is_string()) return;
    auto it = to_daemon_request_.find(id.get<std::string>());
    if (it == to_daemon_request_.end()) return;
    json frame{{"type", "client_response"}, {"protocol", 1}, {"clientRequestId", it->second}};
    if (msg.contains("result") && msg["result"].is_object())
        frame["result"] = msg["result"];
    else
        frame["error"] =
            msg.value("error", json{{"code", internal_error}, {"message", "no result object"}});
    to_daemon_request_.erase(it);
    if (link_.connected()) send_to_daemon(frame);
}

std::optional<std::size_t> mcp_session::cursor_of(const json& params) {
    if (!params.contains("cursor")) return 0;
    const json& c = params["cursor"];
    try {
        if (!c.is_string()) return std::nullopt;
        std::size_t used = 0;
        const std::size_t offset = std::stoul(c.get<std::string>(), &used);
        if (used != c.get<std::string>().size()) return std::nullopt;
        return offset;
    } catch (const std::exception&) {
        return std::nullopt;
    }
}

json mcp_session::page_of(const std::string& method, json result, std::size_t offset) {
    const char* key = method == "resources/list"             ? "resources"
                      : method == "resources/templates/list" ? "resourceTemplates"
                      : method == "prompts/list"             ? "prompts"
                                                             : nullptr;
    if (key == nullptr || !result.contains(key) || !result[key].is_array()) return result;
    json& items = result[key];
    if (offset == 0 && items.size() <= page_size) return result;
    json page = json::array();
    for (std::size_t i = offset; i < items.size() && i < offset + page_size; ++i)
        page.push_back(std::move(items[i]));
    if (offset + page_size < items.size())
        result["nextCursor"] = std::to_string(offset + page_size);
    items = std::move(page);
    return result;
}

void mcp_session::mcp_request(const json& id, const std::string& method, json params, bool modern) {
    std::size_t offset = 0;
    if (method.ends_with("/list")) {
        const auto o = cursor_of(params);
        if (!o) return send_error(id, invalid_params, "invalid cursor");
        offset = *o;
        params.erase("cursor");
    }
    if (modern && (method == "resources/subscribe" || method == "resources/unsubscribe" ||
                   method == "logging/setLevel"))
        return send_error(id, method_not_found,
                          method + " is not in revision 2026-07-28 (subscriptions/listen "
                                   "replaces resource subscriptions)");
    if (!connect()) return send_error(id, internal_error, down_);
    const std::string rid = track(id, kind::mcp, method, modern, offset);
    send_to_daemon({{"type", "mcp_request"},
                    {"protocol", 1},
                    {"requestId", rid},
                    {"method", method},
                    {"params", std::move(params)},
                    {"clientInfo", {{"caller", settings_.caller}}}});
}

void mcp_session::subscribe_uri(const std::string& uri, bool on) {
    if (!connect()) return;
    const std::string method = on ? "resources/subscribe" : "resources/unsubscribe";
    const std::string rid = track(json(), kind::mcp, method, true);
    send_to_daemon({{"type", "mcp_request"},
                    {"protocol", 1},
                    {"requestId", rid},
                    {"method", method},
                    {"params", {{"uri", uri}}},
                    {"clientInfo", {{"caller", settings_.caller}}}});
}

void mcp_session::listen(const json& id, const json& params) {
    const json asked = params.value("notifications", json::object());
    if (!asked.is_object())
        return send_error(id, invalid_params, "\"notifications\" must be an object");
    if (!connect()) return send_error(id, internal_error, down_);
    listen_state l;
    l.id = id;
    json honored = json::object();
    for (const char* flag : {"toolsListChanged", "promptsListChanged", "resourcesListChanged"})
        if (asked.value(flag, false)) honored[flag] = true;
    if (asked.contains("resourceSubscriptions") && asked["resourceSubscriptions"].is_array()) {
        honored["resourceSubscriptions"] = json::array();
        for (const auto& u : asked["resourceSubscriptions"])
            if (u.is_string() && l.uris.insert(u.get<std::string>()).second) {
                honored["resourceSubscriptions"].push_back(u);
                subscribe_uri(u.get<std::string>(), true);
            }
    }
    l.notifications = honored;
    listens_[id.dump()] = std::move(l);
    notify(
        "notifications/subscriptions/acknowledged",
        {{"notifications", honored}, {"_meta", {{std::string(shapes::subscription_id_key), id}}}});
}

void mcp_session::task_request(const json& id, const std::string& method, const json& params) {
    if (method == "tasks/list") return send_result(id, tasks_.list());
    const std::string task_id = get_string(params, "taskId").value_or("");
    if (method == "tasks/result") {
        bool unknown = false;
        if (auto done = tasks_.result_or_wait(task_id, id, unknown)) {
            json reply{{"jsonrpc", "2.0"}, {"id", id}};
            reply.update(*done);
            return write_client(reply);
        }
        if (unknown) return send_error(id, invalid_params, "no task " + task_id);
        return; // answered when the task ends
    }
    if (method == "tasks/cancel") {
        if (auto rid = tasks_.cancel(task_id); rid && link_.connected())
            send_to_daemon({{"type", "cancel_tool_call"}, {"protocol", 1}, {"requestId", *rid}});
    } else if (method != "tasks/get") {
        return send_error(id, method_not_found, "method not found: " + method);
    }
    if (auto t = tasks_.get(task_id)) return send_result(id, *t);
    send_error(id, invalid_params, "no task " + task_id);
}

void mcp_session::send_task_result(const json& id, const std::string& task_id) {
    json reply{{"jsonrpc", "2.0"}, {"id", id}};
    reply.update(tasks_.result_of(task_id));
    write_client(reply);
}

void mcp_session::retry_call(const json& id, const json& params) {
    const json state = params["requestState"];
    auto it = state.is_string() ? pending_.find(state.get<std::string>()) : pending_.end();
    if (it == pending_.end() || !it->second.mcp_id.is_null())
        return send_error(id, invalid_params, "Invalid or expired requestState");
    pending& p = it->second;
    const json responses = params.value("inputResponses", json::object());
    if (responses.is_object())
        for (auto& [key, answer] : responses.items()) {
            auto a = p.asked.find(key);
            if (a == p.asked.end()) continue;
            json frame{
                {"type", "client_response"}, {"protocol", 1}, {"clientRequestId", a->second}};
            frame[answer.is_object() ? "result" : "error"] =
                answer.is_object() ? answer
                                   : json{{"code", invalid_params}, {"message", "no answer"}};
            p.asked.erase(a);
            if (link_.connected()) send_to_daemon(frame);
        }
    p.mcp_id = id;
    by_mcp_id_[id.dump()] = it->first;
    if (p.final) {
        json answer = std::move(*p.final);
        by_mcp_id_.erase(id.dump());
        pending_.erase(it);
        return send_result(id, std::move(answer));
    }
    if (!p.inputs.empty()) ask_inputs(it->first, p);
}

} // namespace meith::bridge
