#include "protocol/server_frames.hpp"

#include "protocol/json_writer.hpp"

#include <iterator>

#include <fmt/format.h>

namespace meith::protocol {

namespace {
void append_head(std::string& out, std::string_view type) {
    out.append(R"({"type":")");
    out.append(type);
    out.append(R"(","protocol":1)");
}
void append_request_id(std::string& out, std::string_view id) {
    out.append(R"(,"requestId":)");
    append_json_string(out, id);
}
void append_string_or_null(std::string& out, std::optional<std::string_view> s) {
    if (s)
        append_json_string(out, *s);
    else
        out.append("null");
}
} // namespace

std::string_view to_string(refusal code) {
    switch (code) {
    case refusal::protocol_error:
        return "PROTOCOL_ERROR";
    case refusal::frame_too_large:
        return "FRAME_TOO_LARGE";
    case refusal::not_allowed:
        return "NOT_ALLOWED";
    case refusal::not_an_approver:
        return "NOT_AN_APPROVER";
    case refusal::approver_refused:
        return "APPROVER_REFUSED";
    case refusal::no_such_grant:
        return "NO_SUCH_GRANT";
    case refusal::no_such_approval:
        return "NO_SUCH_APPROVAL";
    case refusal::no_such_source:
        return "NO_SUCH_SOURCE";
    case refusal::unknown_tool:
        return "UNKNOWN_TOOL";
    case refusal::limit_reached:
        return "LIMIT_REACHED";
    case refusal::tool_process:
        return "TOOL_PROCESS";
    }
    return "PROTOCOL_ERROR";
}

void append_error_frame(std::string& out, std::optional<std::string_view> request_id,
                        std::string_view message, refusal code) {
    append_head(out, "error");
    if (request_id) append_request_id(out, *request_id);
    out.append(R"(,"code":")");
    out.append(to_string(code));
    out.append(R"(","message":)");
    append_json_string(out, message);
    out.append("}\n");
}

void append_hello_result(std::string& out, std::optional<std::string_view> request_id,
                         std::string_view session_id, std::string_view caller,
                         std::string_view server_version, std::string_view client_json) {
    append_head(out, "hello_result");
    if (request_id) append_request_id(out, *request_id);
    out.append(R"(,"sessionId":)");
    append_json_string(out, session_id);
    out.append(R"(,"caller":)");
    append_json_string(out, caller);
    out.append(R"(,"server":{"name":"meithd","version":)");
    append_json_string(out, server_version);
    out.push_back('}');
    if (!client_json.empty()) {
        out.append(R"(,"client":)");
        out.append(client_json);
    }
    out.append("}\n");
}

void append_tool_event(std::string& out, std::string_view request_id, std::string_view event_json) {
    append_head(out, "tool_event");
    append_request_id(out, request_id);
    out.append(R"(,"event":)");
    out.append(event_json);
    out.append("}\n");
}

void append_tool_result_frame(std::string& out, std::string_view request_id,
                              const tool_result& result) {
    append_head(out, "tool_result");
    append_request_id(out, request_id);
    out.append(R"(,"result":)");
    append_tool_result(out, result);
    out.append("}\n");
}

void append_sources_list(std::string& out, std::optional<std::string_view> request_id,
                         std::string_view sources_json) {
    append_head(out, "sources_list");
    if (request_id) append_request_id(out, *request_id);
    out.append(R"(,"sources":)");
    out.append(sources_json);
    out.append("}\n");
}

void append_source_restarted(std::string& out, std::optional<std::string_view> request_id,
                             std::string_view name) {
    append_head(out, "source_restarted");
    if (request_id) append_request_id(out, *request_id);
    out.append(R"(,"name":)");
    append_json_string(out, name);
    out.append("}\n");
}

void append_config_reloaded(std::string& out, std::optional<std::string_view> request_id,
                            std::string_view members_json) {
    append_reply(out, "config_reloaded", request_id, members_json);
}

void append_reply(std::string& out, std::string_view type,
                  std::optional<std::string_view> request_id, std::string_view members_json) {
    append_head(out, type);
    if (request_id) append_request_id(out, *request_id);
    if (!members_json.empty()) out.push_back(',');
    out.append(members_json);
    out.append("}\n");
}

void append_approver_hello_result(std::string& out, std::optional<std::string_view> request_id,
                                  std::string_view session_id, std::uint64_t held) {
    std::string members;
    json_members(members).string("sessionId", session_id).number("held", held);
    append_reply(out, "approver_hello_result", request_id, members);
}

void append_grant_result(std::string& out, std::string_view type,
                         std::optional<std::string_view> request_id, std::string_view grant_id) {
    std::string members;
    json_members(members).string("grantId", grant_id);
    append_reply(out, type, request_id, members);
}

void append_grants_list(std::string& out, std::optional<std::string_view> request_id,
                        std::string_view grants_json) {
    std::string members;
    json_members(members).raw("grants", grants_json);
    append_reply(out, "grants_list", request_id, members);
}

void append_tool_accepted(std::string& out, std::optional<std::string_view> request_id,
                          std::string_view tool_name) {
    std::string members;
    json_members(members).string("toolName", tool_name);
    append_reply(out, "tool_accepted", request_id, members);
}

void append_policy_decision(std::string& out, std::optional<std::string_view> request_id,
                            std::string_view members_json) {
    append_reply(out, "policy_decision", request_id, members_json);
}

void append_policy_explanation(std::string& out, const policy_explanation& e) {
    out.append(R"("toolName":)");
    append_json_string(out, e.tool_name);
    out.append(R"(,"caller":)");
    append_json_string(out, e.caller);
    if (e.client) {
        out.append(R"(,"client":)");
        append_json_string(out, *e.client);
    }
    if (e.original_name) {
        out.append(R"(,"originalName":)");
        append_json_string(out, *e.original_name);
    }
    out.append(e.known ? R"(,"known":true)" : R"(,"known":false)");
    if (e.hidden) out.append(R"(,"hidden":true)");
    if (e.quarantined) out.append(R"(,"quarantined":true)");
    out.append(R"(,"capabilities":)");
    out.append(e.capabilities_json);
    out.append(R"(,"decision":)");
    append_json_string(out, e.decision);
    out.append(R"(,"reason":)");
    append_json_string(out, e.reason);
    if (e.known) out.append(e.grantable ? R"(,"grantable":true)" : R"(,"grantable":false)");
    out.append(R"(,"filterHooks":[)");
    for (std::size_t i = 0; i < e.filter_hooks.size(); ++i) {
        if (i > 0) out.push_back(',');
        append_json_string(out, e.filter_hooks[i]);
    }
    out.push_back(']');
}

void append_tools_list_head(std::string& out, std::optional<std::string_view> request_id) {
    append_head(out, "tools_list");
    if (request_id) append_request_id(out, *request_id);
    out.append(R"(,"tools":[)");
}

void append_tool_preview(std::string& out, std::string_view request_id, std::string_view tool_name,
                         std::string_view text, std::string_view permission) {
    out.append(R"({"type":"tool_preview","protocol":1,"requestId":)");
    append_json_string(out, request_id);
    out.append(R"(,"toolName":)");
    append_json_string(out, tool_name);
    out.append(R"(,"text":)");
    append_json_string(out, text);
    out.append(R"(,"permission":)");
    append_json_string(out, permission);
    out.append("}\n");
}

void append_tools_changed(std::string& out) {
    out.append(R"({"type":"tools_changed","protocol":1})"
               "\n");
}

void append_mcp_result(std::string& out, std::optional<std::string_view> request_id, bool ok,
                       std::string_view json) {
    append_head(out, "mcp_result");
    if (request_id) append_request_id(out, *request_id);
    out.append(ok ? R"(,"result":)" : R"(,"error":)");
    out.append(json);
    out.append("}\n");
}

void append_client_request(std::string& out, std::string_view request_id,
                           std::string_view client_request_id, std::string_view method,
                           std::string_view params_json) {
    append_head(out, "client_request");
    append_request_id(out, request_id);
    out.append(R"(,"clientRequestId":)");
    append_json_string(out, client_request_id);
    out.append(R"(,"method":)");
    append_json_string(out, method);
    out.append(R"(,"params":)");
    out.append(params_json);
    out.append("}\n");
}

void append_mcp_notification(std::string& out, std::string_view source, std::string_view method,
                             std::string_view params_json,
                             std::optional<std::string_view> request_id) {
    append_head(out, "mcp_notification");
    if (request_id) append_request_id(out, *request_id);
    out.append(R"(,"source":)");
    append_json_string(out, source);
    out.append(R"(,"method":)");
    append_json_string(out, method);
    out.append(R"(,"params":)");
    out.append(params_json);
    out.append("}\n");
}

void append_tools_list_tail(std::string& out, std::optional<std::size_t> total,
                            std::optional<std::string_view> client,
                            std::optional<std::size_t> hidden) {
    out.push_back(']');
    if (total) {
        out.append(R"(,"total":)");
        append_uint(out, *total);
    }
    if (client) {
        out.append(R"(,"client":)");
        append_json_string(out, *client);
    }
    if (hidden) {
        out.append(R"(,"hidden":)");
        append_uint(out, *hidden);
    }
    out.append("}\n");
}

void append_approval_request(std::string& out, const approval_request_frame& f) {
    append_head(out, "approval_request");
    out.append(R"(,"approvalId":)");
    append_json_string(out, f.approval_id);
    append_request_id(out, f.request_id);
    out.append(R"(,"sessionId":)");
    append_json_string(out, f.session_id);
    out.append(R"(,"caller":)");
    append_json_string(out, f.caller);
    out.append(R"(,"agent":)");
    append_string_or_null(out, f.agent);
    if (f.client) {
        out.append(R"(,"client":)");
        append_json_string(out, *f.client);
    }
    out.append(R"(,"toolName":)");
    append_json_string(out, f.tool_name);
    out.append(R"(,"capabilities":)");
    out.append(f.capabilities_json);
    out.append(R"(,"reason":)");
    append_json_string(out, f.reason);
    out.append(R"(,"args":)");
    out.append(f.args_json);
    out.append(R"(,"preview":)");
    append_json_string(out, f.preview);
    out.append(R"(,"timeoutMs":)");
    append_uint(out, f.timeout_ms);
    out.append("}\n");
}

void append_egress_request(std::string& out, const egress_request_frame& f) {
    append_head(out, "approval_request");
    out.append(R"(,"approvalId":)");
    append_json_string(out, f.approval_id);
    out.append(R"(,"kind":"egress","source":)");
    append_json_string(out, f.source);
    out.append(R"(,"host":)");
    append_json_string(out, f.host);
    out.append(R"(,"port":)");
    append_uint(out, f.port);
    out.append(R"(,"target":)");
    append_json_string(out, f.target);
    out.append(R"(,"via":)");
    append_json_string(out, f.via);
    out.append(R"(,"requestId":)");
    append_string_or_null(out, f.request_id);
    out.append(R"(,"sessionId":)");
    append_string_or_null(out, f.session_id);
    out.append(R"(,"caller":)");
    append_string_or_null(out, f.caller);
    out.append(R"(,"toolName":)");
    append_string_or_null(out, f.tool_name);
    out.append(R"(,"reason":)");
    append_json_string(out, f.reason);
    out.append(R"(,"decisions":["allow_once","allow_session","allow_always","deny"],"timeoutMs":)");
    append_uint(out, f.timeout_ms);
    out.append("}\n");
}

void append_approval_resolved(std::string& out, std::string_view approval_id,
                              std::string_view decision, std::string_view reason) {
    append_head(out, "approval_resolved");
    out.append(R"(,"approvalId":)");
    append_json_string(out, approval_id);
    out.append(R"(,"decision":)");
    append_json_string(out, decision);
    out.append(R"(,"reason":)");
    append_json_string(out, reason);
    out.append("}\n");
}

void append_tool_quarantined(std::string& out, std::string_view tool_name, std::string_view source,
                             bool is_new) {
    append_head(out, "tool_quarantined");
    out.append(R"(,"toolName":)");
    append_json_string(out, tool_name);
    out.append(R"(,"source":)");
    append_json_string(out, source);
    out.append(is_new ? R"(,"new":true})" : R"(,"new":false})");
    out.push_back('\n');
}

void append_approval_pending_event(std::string& out, std::string_view approval_id,
                                   std::uint64_t timeout_ms, std::string_view message) {
    out.append(R"({"type":"approval_pending","approvalId":)");
    append_json_string(out, approval_id);
    out.append(R"(,"timeoutMs":)");
    append_uint(out, timeout_ms);
    out.append(R"(,"message":)");
    append_json_string(out, message);
    out.push_back('}');
}

void append_events_dropped_event(std::string& out, std::uint64_t count, std::string_view reason) {
    out.append(R"({"type":"events_dropped","count":)");
    append_uint(out, count);
    out.append(R"(,"reason":)");
    append_json_string(out, reason);
    out.push_back('}');
}

void append_task_status_event(std::string& out, std::string_view status,
                              std::optional<std::string_view> message) {
    out.append(R"({"type":"task_status","status":)");
    append_json_string(out, status);
    if (message) {
        out.append(R"(,"message":)");
        append_json_string(out, *message);
    }
    out.push_back('}');
}

void append_progress_event(std::string& out, std::string_view progress_json,
                           std::optional<std::string_view> total_json,
                           std::optional<double> fraction,
                           std::optional<std::string_view> message) {
    out.append(R"({"type":"progress","progress":)");
    out.append(progress_json);
    if (total_json) {
        out.append(R"(,"total":)");
        out.append(*total_json);
    }
    if (fraction) fmt::format_to(std::back_inserter(out), R"(,"fraction":{})", *fraction);
    if (message) {
        out.append(R"(,"message":)");
        append_json_string(out, *message);
    }
    out.push_back('}');
}

void append_network_violation_event(std::string& out, std::string_view host, std::uint16_t port,
                                    std::string_view message, std::string_view rule) {
    out.append(R"({"type":"sandbox_violation","kind":"network","host":)");
    append_json_string(out, host);
    out.append(R"(,"port":)");
    append_uint(out, port);
    out.append(R"(,"message":)");
    append_json_string(out, message);
    if (!rule.empty()) {
        out.append(R"(,"rule":)");
        append_json_string(out, rule);
    }
    out.push_back('}');
}

} // namespace meith::protocol
