// call_audit: the audit record of one tool call (docs/protocol.md §6).
//
// Owns the layout of the call record — the keys a `tool_call` line has, which a
// `tool_call_rejected` line (a frame refused before it became a call) shares with null
// values — and writes it in one place, straight into the audit log's pending batch: the head
// as text, the arguments' redacted summary made at dispatch (record_args), the result as a
// summary piece the audit writer redacts. Also the parts gathered while the call runs: the
// `hooks` array (record_filter_verdicts / record_observers). Every client- or tool-supplied
// string the record carries is redacted as it is appended. I/O-thread only.
#pragma once

#include "permissions/policy.hpp"
#include "protocol/tool_result.hpp"
#include "tools/call.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <simdjson.h>

namespace meith::audit {
class redactor;
class audit_trail;
} // namespace meith::audit

namespace meith::hooks {
struct hook_verdict;
} // namespace meith::hooks

namespace meith::registry {

using tools::call;

/// Appends `s` as a JSON string with secrets redacted.
void append_redacted_json_string(std::string& out, std::string_view s);

/// The `end` value of a call's line ("tool", "timeout", "client_disconnected", ...).
std::string_view to_string(tools::call_end how);

/// Makes the redacted summary of the call's arguments (`c.args_summary`) from the parsed
/// value and its text `c.args_json`, so the audit writer need not parse them again.
void record_args(const audit::redactor& redactor, call& c, simdjson::dom::element args);
/// Adds filter hooks' verdicts to the call's `hooks` array.
void record_filter_verdicts(call& c, const std::vector<hooks::hook_verdict>& verdicts);
/// Adds the observe hooks notified in `phase` to the call's `hooks` array.
void record_observers(call& c, std::string_view phase, const std::vector<std::string>& names);

/// Writes the `tool_call` line of call `c`, which ended with `r` (what its client receives).
/// Once per call, by registry::finish, before the reply is handed over.
void write_call_audit(audit::audit_trail& trail, const call& c, const protocol::tool_result& r);

/// A tool_call frame refused before it became a call (duplicate id, too many calls in flight,
/// a malformed frame). Views, valid while the line is written.
struct rejected_call {
    std::optional<std::string_view> request_id; ///< absent: null
    std::string_view session_id;
    permissions::caller caller = permissions::caller::plugin;
    std::string_view claimed_caller; ///< "" when none: null
    std::string_view agent;          ///< clientInfo.agent; "" when none: null
    std::string_view client;         ///< the client profile's name; "": not written
    std::string_view tool_name;      ///< "" when none: null
    std::string_view reason;         ///< why it was refused
    std::optional<std::uint64_t> timeout_ms;
    const simdjson::dom::element* arguments = nullptr; ///< absent: null
};

/// Writes the `tool_call_rejected` line of `r`: the call record with decision, duration,
/// outcome and result null and `"end":"rejected"`.
void write_rejected_call_audit(audit::audit_trail& trail, const audit::redactor& redactor,
                               const rejected_call& r);

} // namespace meith::registry
