// server_frames: the frames meithd sends (docs/protocol.md §3) and the kinds of event a
// tool_event carries (§4), one encoder each. Every encoder appends one complete frame, "\n"
// included (an event: one object, no newline), to an output buffer; nothing outside protocol/
// writes a frame's keys.
#pragma once

#include "protocol/tool_result.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace meith::protocol {

/// The `code` of an error frame (docs/protocol.md §3): PROTOCOL_ERROR for a frame that is
/// malformed; the others name the refusal of a well-formed request, so a client can tell them
/// apart without reading the message.
enum class refusal : std::uint8_t {
    protocol_error,   ///< PROTOCOL_ERROR: malformed, or of the wrong shape
    frame_too_large,  ///< FRAME_TOO_LARGE: over limits.max_frame_bytes
    not_allowed,      ///< NOT_ALLOWED: an operator's frame from a caller other than cli, or
                      ///< a preview of a tool the client profile hides
    not_an_approver,  ///< NOT_AN_APPROVER: grant, revoke or approve before approver_hello
    approver_refused, ///< APPROVER_REFUSED: approver_hello without the secret or a terminal
    no_such_grant,    ///< NO_SUCH_GRANT: revoke of a grant revoked, used up or expired
    no_such_approval, ///< NO_SUCH_APPROVAL: approve of a call decided, withdrawn or unknown
    no_such_source,   ///< NO_SUCH_SOURCE: restart_source naming no source
    unknown_tool,     ///< UNKNOWN_TOOL: preview_tool_call naming no tool
    limit_reached,    ///< LIMIT_REACHED: max_connections, max_calls_in_flight_per_connection
    tool_process,     ///< TOOL_PROCESS: a connection from a process of a tool meithd runs
};

/// Wire name, e.g. "FRAME_TOO_LARGE".
std::string_view to_string(refusal code);

/// `{"type":"error","protocol":1,"requestId"?,"code":CODE,"message"}`
void append_error_frame(std::string& out, std::optional<std::string_view> request_id,
                        std::string_view message, refusal code = refusal::protocol_error);

/// `{"type":"hello_result","protocol":1,"requestId"?,"sessionId","caller","server":{...}}`
/// `client_json`, when not empty, is the `"client"` member's value (the profile in use).
void append_hello_result(std::string& out, std::optional<std::string_view> request_id,
                         std::string_view session_id, std::string_view caller,
                         std::string_view server_version, std::string_view client_json = {});

/// `{"type":"tool_event","protocol":1,"requestId","event":<event_json>}`
void append_tool_event(std::string& out, std::string_view request_id, std::string_view event_json);

/// `{"type":"tool_result","protocol":1,"requestId","result":<ToolResult>}`
void append_tool_result_frame(std::string& out, std::string_view request_id,
                              const tool_result& result);

/// `{"type":"sources_list","protocol":1,"requestId"?,"sources":<sources_json>}`
void append_sources_list(std::string& out, std::optional<std::string_view> request_id,
                         std::string_view sources_json);

/// `{"type":"config_reloaded","protocol":1,"requestId"?,` + members_json + `}` (members:
/// `"ok"`, and `"error"` or what changed; docs/configuration.md "Reloading").
void append_config_reloaded(std::string& out, std::optional<std::string_view> request_id,
                            std::string_view members_json);

/// `{"type":"source_restarted","protocol":1,"requestId"?,"name"}`
void append_source_restarted(std::string& out, std::optional<std::string_view> request_id,
                             std::string_view name);

/// `{"type":<type>,"protocol":1,"requestId"?,` + `members_json` + `}`: a reply whose members
/// the caller rendered (grant_result, grants_list, approver_hello_result, ...).
void append_reply(std::string& out, std::string_view type,
                  std::optional<std::string_view> request_id, std::string_view members_json);

/// approver_hello_result (docs/protocol.md §14): `"sessionId":…,"held":N` (calls waiting).
void append_approver_hello_result(std::string& out, std::optional<std::string_view> request_id,
                                  std::string_view session_id, std::uint64_t held);

/// grant_result and revoke_result (§14): `"grantId":…`. `type` is one of the two.
void append_grant_result(std::string& out, std::string_view type,
                         std::optional<std::string_view> request_id, std::string_view grant_id);

/// grants_list (§14): `"grants":` + `grants_json` (a JSON array of grant objects).
void append_grants_list(std::string& out, std::optional<std::string_view> request_id,
                        std::string_view grants_json);

/// tool_accepted (§22): `"toolName":…`.
void append_tool_accepted(std::string& out, std::optional<std::string_view> request_id,
                          std::string_view tool_name);

/// `{"type":"policy_decision","protocol":1,"requestId"?,` + `members_json` + `}`
void append_policy_decision(std::string& out, std::optional<std::string_view> request_id,
                            std::string_view members_json);

/// What a call of a tool would meet now (docs/protocol.md §11, check_policy): the members of
/// a policy_decision reply. Every view must outlive the append.
struct policy_explanation {
    std::string_view tool_name;             ///< as the caller named it
    std::string_view caller;                ///< "agent", "cli", ...
    std::optional<std::string_view> client; ///< the client profile's name
    std::optional<std::string_view>
        original_name;        ///< the tool's own name, when a profile renames it
    bool known = false;       ///< false: no such tool (nothing below but the reason)
    bool hidden = false;      ///< the client profile hides it
    bool quarantined = false; ///< §22: its definition changed
    std::string_view capabilities_json = "null"; ///< a JSON array, or null when unknown
    std::string_view decision;                   ///< allow, deny or ask
    std::string_view reason;
    bool grantable = false;                     ///< written only for a known tool
    std::vector<std::string_view> filter_hooks; ///< the phases whose filter hooks still ask
};

/// `"toolName":…,"caller":…[,"client"][,"originalName"],"known":…[,"hidden":true]
/// [,"quarantined":true],"capabilities":…,"decision":…,"reason":…[,"grantable":…],
/// "filterHooks":[…]` (no braces: append_policy_decision wraps them).
void append_policy_explanation(std::string& out, const policy_explanation& e);

/// Opening of a tools_list frame up to and including `"tools":[`; the caller appends the
/// descriptors separated by commas and then the tail.
void append_tools_list_head(std::string& out, std::optional<std::string_view> request_id);

/// The end of a tools_list frame after its descriptors: `]`, then `"total"` (a page's count
/// of the whole listing, docs/protocol.md §5), `"client"` (the client profile, §23) and
/// `"hidden"` (how many tools it hides), each when given, then `}\n`.
void append_tools_list_tail(std::string& out, std::optional<std::size_t> total = std::nullopt,
                            std::optional<std::string_view> client = std::nullopt,
                            std::optional<std::size_t> hidden = std::nullopt);

/// `{"type":"tool_preview","protocol":1,"requestId","toolName","text","permission"}`
/// (docs/protocol.md §13).
void append_tool_preview(std::string& out, std::string_view request_id, std::string_view tool_name,
                         std::string_view text, std::string_view permission);

/// `{"type":"tools_changed","protocol":1}`: sent on connections whose hello subscribed to
/// `tools_changed` whenever the set of tools or their descriptors changed (docs/protocol.md
/// §3). Coalesced: one per I/O turn at most.
void append_tools_changed(std::string& out);

/// `{"type":"mcp_result","protocol":1,"requestId"?,"result":<object>}` when `ok`, else
/// `…,"error":<JSON-RPC error object>}` (docs/protocol.md §17).
void append_mcp_result(std::string& out, std::optional<std::string_view> request_id, bool ok,
                       std::string_view json);

/// `{"type":"client_request","protocol":1,"requestId":<the call's>,"clientRequestId",
/// "method","params":<object>}`: a server's request to the client that made call
/// `request_id` (sampling, elicitation, roots; docs/protocol.md §17).
void append_client_request(std::string& out, std::string_view request_id,
                           std::string_view client_request_id, std::string_view method,
                           std::string_view params_json);

/// `{"type":"mcp_notification","protocol":1,"source","method","params":<object>}` plus
/// `"requestId"` when it belongs to a call (docs/protocol.md §17).
void append_mcp_notification(std::string& out, std::string_view source, std::string_view method,
                             std::string_view params_json,
                             std::optional<std::string_view> request_id = std::nullopt);

// ---- to approvers (docs/protocol.md §14, §19, §22) ----------------------------------------
// Text is written as given: the caller redacts what a tool or client supplied (an agent, the
// arguments' summary, a preview, an egress host).

/// A call held for a person: `{"type":"approval_request","protocol":1,"approvalId",
/// "requestId","sessionId","caller","agent"(null when absent),"client"?,"toolName",
/// "capabilities","reason","args","preview","timeoutMs"}`.
struct approval_request_frame {
    std::string_view approval_id;
    std::string_view request_id;
    std::string_view session_id;
    std::string_view caller;
    std::optional<std::string_view> agent;
    std::optional<std::string_view> client; ///< the client profile (§23); left out when absent
    std::string_view tool_name;
    std::string_view capabilities_json; ///< a JSON array of capability names
    std::string_view reason;
    std::string_view args_json; ///< the arguments' redacted summary (JSON)
    std::string_view preview;
    std::uint64_t timeout_ms = 0;
};
void append_approval_request(std::string& out, const approval_request_frame& f);

/// An egress target held for a person (§19): `{"type":"approval_request","protocol":1,
/// "approvalId","kind":"egress","source","host","port","target","via","requestId","sessionId",
/// "caller","toolName" (each null without a call),"reason","decisions":[…],"timeoutMs"}`.
struct egress_request_frame {
    std::string_view approval_id;
    std::string_view source;
    std::string_view host;
    std::uint16_t port = 0;
    std::string_view target; ///< "host:port", an IPv6 host in brackets
    std::string_view via;    ///< the proxy protocol the connection came through
    /// The call the connection belongs to, when there is one.
    std::optional<std::string_view> request_id, session_id, caller, tool_name;
    std::string_view reason;
    std::uint64_t timeout_ms = 0;
};
void append_egress_request(std::string& out, const egress_request_frame& f);

/// `{"type":"approval_resolved","protocol":1,"approvalId","decision","reason"}`: a held call
/// or target was answered (`decision` the answer) or withdrawn (`"withdrawn"`).
void append_approval_resolved(std::string& out, std::string_view approval_id,
                              std::string_view decision, std::string_view reason);

/// `{"type":"tool_quarantined","protocol":1,"toolName","source","new"}` (§22).
void append_tool_quarantined(std::string& out, std::string_view tool_name, std::string_view source,
                             bool is_new);

// ---- tool_event kinds (docs/protocol.md §4) -----------------------------------------------
// Each appends one event object (no newline), the `event` member of append_tool_event.

/// `{"type":"approval_pending","approvalId","timeoutMs","message"}`: a person is being asked.
void append_approval_pending_event(std::string& out, std::string_view approval_id,
                                   std::uint64_t timeout_ms, std::string_view message);

/// `{"type":"events_dropped","count","reason"}`: the client read slower than the tool wrote.
void append_events_dropped_event(std::string& out, std::uint64_t count, std::string_view reason);

/// `{"type":"task_status","status","message"?}` (an MCP task's status; §17).
void append_task_status_event(std::string& out, std::string_view status,
                              std::optional<std::string_view> message);

/// `{"type":"progress","progress","total"?,"fraction"?,"message"?}`: `progress_json` and
/// `total_json` are JSON numbers as the tool sent them; `fraction` their quotient, when given.
void append_progress_event(std::string& out, std::string_view progress_json,
                           std::optional<std::string_view> total_json,
                           std::optional<double> fraction, std::optional<std::string_view> message);

/// `{"type":"sandbox_violation","kind":"network","host","port","message","rule"?}` (§19).
void append_network_violation_event(std::string& out, std::string_view host, std::uint16_t port,
                                    std::string_view message, std::string_view rule);

} // namespace meith::protocol
