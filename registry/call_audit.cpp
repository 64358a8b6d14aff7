// call_audit: the one writer of the call record (see call_audit.hpp).
#include "registry/call_audit.hpp"

#include "audit/audit_log.hpp"
#include "audit/audit_trail.hpp"
#include "audit/redactor.hpp"
#include "hooks/hooks.hpp"
#include "protocol/json_writer.hpp"
#include "tools/tool_source.hpp"
#include "tools/tool_table.hpp"

#include <chrono>

namespace meith::registry {

using namespace std::string_view_literals;
using protocol::append_json_string;

namespace {

/// The call record's values, as views; what a line lacks is null.
struct record {
    std::string_view event; ///< "tool_call" or "tool_call_rejected" (no escaping needed)
    std::optional<std::string_view> request_id;
    std::string_view session_id;
    permissions::caller caller = permissions::caller::plugin;
    std::string_view claimed_caller; ///< "": null
    std::string_view agent;          ///< "": null
    std::string_view client;         ///< the client profile (§23); written only when set
    std::string_view traceparent;    ///< W3C trace context; written only when set
    std::string_view instance;       ///< the source instance that ran it; written only when set
    std::optional<std::string_view> tool_name;
    const tools::tool* target = nullptr; ///< source and capabilities
    std::optional<bool> allow;           ///< the decision
    std::optional<std::string_view> reason;
    std::string_view grant_id;    ///< written only when set (PROTOCOL.md §12)
    std::string_view approval_id; ///< written only when set
    std::optional<std::uint64_t> timeout_ms;
    std::optional<std::int64_t> duration_ns;
    const protocol::tool_result* result = nullptr; ///< ok, errorCode and result
    std::string_view end;
    std::string_view hooks_json;
    std::string_view args_summary; ///< written as is when not empty, else:
    std::string_view args_json;    ///< summarised by the audit writer; "": null
};

void append_redacted_or_null(std::string& out, std::optional<std::string_view> s) {
    if (s)
        append_redacted_json_string(out, *s);
    else
        out.append("null"sv);
}

// Stays whole (~95 lines): the one writer of the call record's layout, key after key in the
// order the line has (docs/protocol.md §6).
void write_record(audit::audit_trail& trail, const record& r) {
    audit::audit_log& log = trail.log();
    std::string& l = log.begin_line();
    l.append(R"({"ts":)"sv);
    audit::append_rfc3339_json(l);
    l.append(R"(,"event":")"sv);
    l.append(r.event);
    l.append(R"(","requestId":)"sv);
    append_redacted_or_null(l, r.request_id);
    l.append(R"(,"sessionId":)"sv);
    append_json_string(l, r.session_id);
    l.append(R"(,"caller":)"sv);
    append_json_string(l, permissions::to_string(r.caller));
    l.append(R"(,"claimedCaller":)"sv);
    append_redacted_or_null(l, r.claimed_caller.empty() ? std::nullopt
                                                        : std::optional(r.claimed_caller));
    l.append(R"(,"agent":)"sv);
    append_redacted_or_null(l, r.agent.empty() ? std::nullopt : std::optional(r.agent));
    if (!r.client.empty()) {
        l.append(R"(,"client":)"sv);
        append_json_string(l, r.client);
    }
    if (!r.traceparent.empty()) {
        l.append(R"(,"traceparent":)"sv);
        append_json_string(l, r.traceparent);
    }
    l.append(R"(,"toolName":)"sv);
    append_redacted_or_null(l, r.tool_name);
    if (!r.instance.empty()) {
        l.append(R"(,"instance":)"sv);
        append_redacted_json_string(l, r.instance); // holds an agent's name
    }
    l.append(R"(,"source":)"sv);
    if (r.target)
        append_json_string(l, r.target->source->name());
    else
        l.append("null"sv);
    l.append(R"(,"capabilities":)"sv);
    if (r.target)
        permissions::append_capabilities(l, r.target->capabilities);
    else
        l.append("null"sv);
    l.append(R"(,"decision":)"sv);
    if (r.allow)
        l.append(*r.allow ? R"("allow")"sv : R"("deny")"sv);
    else
        l.append("null"sv);
    l.append(R"(,"reason":)"sv);
    append_redacted_or_null(l, r.reason); // may be a hook's or the client's words
    if (!r.grant_id.empty()) {
        l.append(R"(,"grantId":)"sv);
        append_json_string(l, r.grant_id);
    }
    if (!r.approval_id.empty()) {
        l.append(R"(,"approvalId":)"sv);
        append_json_string(l, r.approval_id);
    }
    l.append(R"(,"timeoutMs":)"sv);
    if (r.timeout_ms)
        protocol::append_uint(l, *r.timeout_ms);
    else
        l.append("null"sv);
    l.append(R"(,"durationMs":)"sv);
    if (r.duration_ns)
        protocol::append_duration_ms(l, *r.duration_ns);
    else
        l.append("null"sv);
    if (!r.result)
        l.append(R"(,"ok":null,"errorCode":null)"sv);
    else {
        l.append(r.result->ok ? R"(,"ok":true,"errorCode":)"sv : R"(,"ok":false,"errorCode":)"sv);
        if (r.result->error)
            append_json_string(l, protocol::to_string(r.result->error->code));
        else
            l.append("null"sv);
    }
    l.append(R"(,"end":")"sv);
    l.append(r.end);
    l.append(R"(","hooks":[)"sv);
    l.append(r.hooks_json);
    l.append(R"(],"args":)"sv);
    // `l` stays the pending batch: each summary is made into it at end_summary().
    if (!r.args_summary.empty()) {
        l.append(r.args_summary);
    } else if (!r.args_json.empty()) {
        log.begin_summary().append(r.args_json);
        log.end_summary();
    } else {
        l.append("null"sv);
    }
    l.append(R"(,"result":)"sv);
    if (r.result) {
        protocol::append_tool_result(log.begin_summary(), *r.result);
        log.end_summary();
    } else {
        l.append("null"sv);
    }
    l.push_back('}');
    trail.end_line();
}

} // namespace

void append_redacted_json_string(std::string& out, std::string_view s) {
    // Strings from clients and tools: most hold no secret-looking text at all, which
    // redact_text finds without rewriting anything.
    audit::default_redactor().append_redacted_json_string(out, s);
}

std::string_view to_string(tools::call_end how) {
    return tools::names_of(how).audit;
}

void record_args(const audit::redactor& redactor, call& c, simdjson::dom::element args) {
    // From the arguments' text or the parsed value, never parsed again later.
    redactor.append_summary_element(c.args_summary, args, c.args_json);
}

void record_filter_verdicts(call& c, const std::vector<hooks::hook_verdict>& verdicts) {
    for (const auto& v : verdicts) {
        if (!c.hooks_json.empty()) c.hooks_json += ',';
        c.hooks_json += R"({"name":)";
        append_json_string(c.hooks_json, v.name);
        c.hooks_json += R"(,"phase":)";
        append_json_string(c.hooks_json, v.phase);
        c.hooks_json += R"(,"kind":"filter","decision":)";
        c.hooks_json += v.allow ? R"("allow")" : R"("deny")";
        c.hooks_json += R"(,"reason":)";
        if (v.reason.empty())
            c.hooks_json += "null";
        else
            append_redacted_json_string(c.hooks_json, v.reason);
        c.hooks_json += '}';
    }
}

void record_observers(call& c, std::string_view phase, const std::vector<std::string>& names) {
    for (const auto& name : names) {
        if (!c.hooks_json.empty()) c.hooks_json += ',';
        c.hooks_json += R"({"name":)";
        append_json_string(c.hooks_json, name);
        c.hooks_json += R"(,"phase":)";
        append_json_string(c.hooks_json, phase);
        c.hooks_json += R"(,"kind":"observe","decision":"notified","reason":null})";
    }
}

void write_call_audit(audit::audit_trail& trail, const call& c, const protocol::tool_result& r) {
    if (!trail.enabled()) return;
    record rec;
    rec.event = "tool_call"sv;
    rec.request_id = c.request_id;
    rec.session_id = c.session_id;
    rec.caller = c.caller;
    rec.claimed_caller = c.claimed_caller;
    rec.agent = c.agent;
    if (c.profile) rec.client = c.profile->name();
    rec.traceparent = c.traceparent;
    rec.instance = c.instance;
    rec.tool_name = c.tool_name;
    rec.target = c.target.get();
    if (c.decided) {
        rec.allow = c.decision.allow;
        rec.reason = c.decision.reason;
    }
    rec.grant_id = c.grant_id;
    rec.approval_id = c.approval_id;
    if (c.timeout_ms) rec.timeout_ms = c.timeout_ms;
    rec.duration_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::steady_clock::now() - c.started)
                          .count();
    rec.result = &r;
    rec.end = to_string(c.end());
    rec.hooks_json = c.hooks_json;
    rec.args_summary = c.args_summary;
    rec.args_json = c.args_json;
    write_record(trail, rec);
}

void write_rejected_call_audit(audit::audit_trail& trail, const audit::redactor& redactor,
                               const rejected_call& r) {
    if (!trail.enabled()) return;
    const std::string args_summary =
        r.arguments ? redactor.summarize_element(*r.arguments) : std::string();
    record rec;
    rec.event = "tool_call_rejected"sv;
    rec.request_id = r.request_id;
    rec.session_id = r.session_id;
    rec.caller = r.caller;
    rec.claimed_caller = r.claimed_caller;
    rec.agent = r.agent;
    rec.client = r.client;
    if (!r.tool_name.empty()) rec.tool_name = r.tool_name;
    rec.reason = r.reason;
    rec.timeout_ms = r.timeout_ms;
    rec.end = "rejected"sv;
    rec.args_summary = args_summary;
    write_record(trail, rec);
}

} // namespace meith::registry
