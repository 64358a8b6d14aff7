#include "protocol/frames.hpp"

#include "protocol/json_writer.hpp"
#include "protocol/top_level_scan.hpp"

#include <limits>
#include <optional>
#include <utility>

namespace meith::protocol {

namespace {

frame_type type_from_name(std::string_view name) {
    if (name == "tool_call") return frame_type::tool_call;
    if (name == "list_tools") return frame_type::list_tools;
    if (name == "cancel_tool_call") return frame_type::cancel_tool_call;
    if (name == "hello") return frame_type::hello;
    if (name == "list_sources") return frame_type::list_sources;
    if (name == "restart_source") return frame_type::restart_source;
    if (name == "learn_source") return frame_type::learn_source;
    if (name == "reload_config") return frame_type::reload_config;
    if (name == "check_policy") return frame_type::check_policy;
    if (name == "preview_tool_call") return frame_type::preview_tool_call;
    if (name == "approver_hello") return frame_type::approver_hello;
    if (name == "approve") return frame_type::approve;
    if (name == "grant") return frame_type::grant;
    if (name == "revoke") return frame_type::revoke;
    if (name == "list_grants") return frame_type::list_grants;
    if (name == "accept_tool") return frame_type::accept_tool;
    if (name == "mcp_request") return frame_type::mcp_request;
    if (name == "client_response") return frame_type::client_response;
    if (name == "mcp_handoff") return frame_type::mcp_handoff;
    return frame_type::other;
}

/// The members of the grant and approval frames (docs/protocol.md §14); sets `f.error` when
/// one is missing or of the wrong type.
void decode_grant_frame(simdjson::dom::object obj, client_frame& f) {
    // A member that must be a non-empty string (`optional`: may be absent).
    auto string_member = [&](const char* key, std::string_view& out, bool optional) {
        simdjson::dom::element el;
        if (obj[key].get(el) != simdjson::SUCCESS) {
            if (!optional)
                f.error = std::string(f.type_name) + " needs a non-empty string \"" + key + "\"";
            return;
        }
        if (el.is_null() && optional) return;
        if (el.get_string().get(out) != simdjson::SUCCESS || (out.empty() && !optional))
            f.error = std::string(f.type_name) + ": \"" + key + "\" must be a" +
                      (optional ? " string" : " non-empty string");
    };
    switch (f.type) {
    case frame_type::approver_hello:
        string_member("secret", f.body.emplace<approver_hello_frame>().secret, false);
        break;
    case frame_type::approve: {
        auto& b = f.body.emplace<approve_frame>();
        string_member("approvalId", b.approval_id, false);
        if (!f.error) string_member("decision", b.decision, false);
        if (!f.error) string_member("reason", b.reason, true);
        break;
    }
    case frame_type::revoke:
        string_member("grantId", f.body.emplace<revoke_frame>().grant_id, false);
        break;
    case frame_type::accept_tool: {
        auto& b = f.body.emplace<accept_tool_frame>();
        string_member("toolName", f.tool_name, false);
        simdjson::dom::element preview;
        if (!f.error && obj["preview"].get(preview) == simdjson::SUCCESS &&
            preview.get_bool().get(b.accept_preview) != simdjson::SUCCESS)
            f.error = "accept_tool: \"preview\" must be true or false";
        break;
    }
    case frame_type::grant:
        if (obj["grant"].get_object().get(f.body.emplace<grant_frame>().grant) != simdjson::SUCCESS)
            f.error = "grant needs an object \"grant\" ({\"capabilities\":[...], ...})";
        break;
    default:
        break;
    }
}

std::string describe_parse_error(simdjson::error_code ec) {
    std::string msg = "frame is not valid JSON (";
    msg += simdjson::error_message(ec);
    msg += ')';
    return msg;
}

/// A frame the parser refused (a number too large, `1e400`; a stray byte after a valid
/// requestId) still names its requestId and type when its top level shows them: the error frame
/// then carries the id, so the client knows which request failed, and a refused tool_call is
/// audited as one. The id is a view into `line` (its bytes have no escapes).
void recover_identity(client_frame& f, std::string_view line) {
    top_level_scanner scan({"requestId", "type"}, top_level_scanner::duplicates::last_wins);
    scan.feed(line);
    using kind = top_level_scanner::value::kind;
    if (const auto& id = scan.get(0); id.k == kind::string && usable_request_id(id.text)) {
        const auto at = line.find(id.text);
        if (at != std::string_view::npos) f.request_id = line.substr(at, id.text.size());
    }
    if (const auto& type = scan.get(1); type.k == kind::string) f.type = type_from_name(type.text);
}

/// The members `decode` reads, found in one pass over the frame's object; later duplicates
/// win, as in most JSON readers. Absent: nullopt.
struct frame_members {
    using member = std::optional<simdjson::dom::element>;
    member type, protocol, request_id, client_info, tool_name, arguments, timeout, subscribe,
        format, result_format, display, tags, models, capabilities, traceparent, method, params,
        client_request_id, result, error, query, limit, offset, permitted;
};

frame_members collect_members(simdjson::dom::object obj) {
    frame_members m;
    static constexpr std::pair<std::string_view, frame_members::member frame_members::*> table[] = {
        {"type", &frame_members::type},
        {"protocol", &frame_members::protocol},
        {"requestId", &frame_members::request_id},
        {"clientInfo", &frame_members::client_info},
        {"toolName", &frame_members::tool_name},
        {"arguments", &frame_members::arguments},
        {"timeoutMs", &frame_members::timeout},
        {"subscribe", &frame_members::subscribe},
        {"format", &frame_members::format},
        {"resultFormat", &frame_members::result_format},
        {"display", &frame_members::display},
        {"tags", &frame_members::tags},
        {"models", &frame_members::models},
        {"capabilities", &frame_members::capabilities},
        {"traceparent", &frame_members::traceparent},
        {"method", &frame_members::method},
        {"params", &frame_members::params},
        {"clientRequestId", &frame_members::client_request_id},
        {"result", &frame_members::result},
        {"error", &frame_members::error},
        {"query", &frame_members::query},
        {"limit", &frame_members::limit},
        {"offset", &frame_members::offset},
        {"permitted", &frame_members::permitted},
    };
    for (auto field : obj)
        for (const auto& [key, slot] : table)
            if (field.key == key) {
                m.*slot = field.value;
                break;
            }
    return m;
}

/// A member that is absent or JSON null.
bool absent(const frame_members::member& m) {
    return !m || m->is_null();
}

/// What every frame may carry: its requestId (a string of 1-128 characters), toolName,
/// arguments and clientInfo's caller claim and agent. Read before the frame is checked, so a
/// refused frame's error and audit line can still name them.
void read_identity(const frame_members& m, client_frame& f) {
    if (m.request_id) {
        std::string_view id;
        if (m.request_id->get_string().get(id) == simdjson::SUCCESS && !id.empty() &&
            utf8_length(id) <= max_request_id_chars)
            f.request_id = id;
    }
    if (m.tool_name && m.tool_name->get_string().get(f.tool_name) != simdjson::SUCCESS)
        f.tool_name = {};
    if (m.arguments) {
        f.has_arguments = true;
        f.arguments = *m.arguments;
    }
    if (m.client_info) {
        std::string_view claim;
        if ((*m.client_info)["caller"].get_string().get(claim) == simdjson::SUCCESS)
            f.caller_claim = claim;
        std::string_view agent;
        if ((*m.client_info)["agent"].get_string().get(agent) == simdjson::SUCCESS &&
            !agent.empty())
            f.agent = agent;
        std::string_view client;
        if ((*m.client_info)["client"].get_string().get(client) == simdjson::SUCCESS &&
            !client.empty())
            f.client = client;
    }
}

/// A requestId is optional on this frame, but one that is there must be usable.
void check_optional_request_id(const frame_members& m, client_frame& f) {
    if (m.request_id && !f.request_id) f.error = "requestId must be a string of 1-128 characters";
}

/// hello's `subscribe`: an array of topic names; unknown topics are ignored (a newer client
/// may ask for more).
void decode_subscribe(const frame_members& m, client_frame& f, hello_frame& b) {
    if (!m.subscribe) return;
    simdjson::dom::array topics;
    if (m.subscribe->get_array().get(topics) != simdjson::SUCCESS) {
        f.error = "subscribe must be an array of strings";
        return;
    }
    for (auto topic : topics) {
        std::string_view name;
        if (topic.get_string().get(name) != simdjson::SUCCESS) {
            f.error = "subscribe must be an array of strings";
            return;
        }
        if (name == "tools_changed") b.subscribe_tools_changed = true;
        if (name == "mcp_notifications") b.subscribe_mcp = true;
    }
}

/// hello's `capabilities`: the MCP ClientCapabilities the client answers client_request for.
void decode_capabilities(const frame_members& m, client_frame& f, hello_frame& b) {
    if (absent(m.capabilities)) return;
    simdjson::dom::object caps;
    if (m.capabilities->get_object().get(caps) != simdjson::SUCCESS)
        f.error = "capabilities must be an MCP ClientCapabilities object, e.g. "
                  "{\"sampling\":{},\"elicitation\":{},\"roots\":{}}";
    else
        b.client_capabilities = caps;
}

/// mcp_request (docs/protocol.md §17): a requestId, a string method, params an object.
void decode_mcp_request(const frame_members& m, client_frame& f) {
    auto& b = f.body.emplace<mcp_request_frame>();
    if (!f.request_id) {
        f.error = "mcp_request needs a requestId string of 1-128 characters";
        return;
    }
    if (!m.method || m.method->get_string().get(b.mcp_method) != simdjson::SUCCESS ||
        b.mcp_method.empty()) {
        f.error = "mcp_request needs a non-empty string \"method\", e.g. \"resources/list\"";
        return;
    }
    if (absent(m.params)) return;
    simdjson::dom::object params;
    if (m.params->get_object().get(params) != simdjson::SUCCESS)
        f.error = "mcp_request: \"params\" must be an object";
    else
        b.mcp_params = params;
}

/// client_response (docs/protocol.md §17): the clientRequestId of a client_request and one of
/// `result` or `error`, each an object.
void decode_client_response(const frame_members& m, client_frame& f) {
    auto& b = f.body.emplace<client_response_frame>();
    if (!m.client_request_id ||
        m.client_request_id->get_string().get(b.client_request_id) != simdjson::SUCCESS ||
        b.client_request_id.empty()) {
        f.error = "client_response needs the non-empty string \"clientRequestId\" of the "
                  "client_request it answers";
        return;
    }
    simdjson::dom::object obj;
    if (!absent(m.result) && m.result->get_object().get(obj) == simdjson::SUCCESS)
        b.response_result = obj;
    if (!absent(m.error) && m.error->get_object().get(obj) == simdjson::SUCCESS)
        b.response_error = obj;
    if (b.response_result.has_value() == b.response_error.has_value())
        f.error = "client_response needs exactly one of \"result\" (an object) or \"error\" "
                  "(a JSON-RPC error object)";
}

/// list_tools' `format`, `tags` and `models` (docs/protocol.md §5, §8).
void decode_list_options(const frame_members& m, client_frame& f) {
    auto& b = f.body.emplace<list_tools_frame>();
    if (m.format &&
        (m.format->get_string().get(b.list_format) != simdjson::SUCCESS || b.list_format.empty())) {
        f.error = "format must be a string: meith, openai, openai.responses, anthropic or mcp";
        return;
    }
    if (!absent(m.tags)) {
        bool strings = m.tags->get_array().get(b.tags) == simdjson::SUCCESS;
        if (strings)
            for (auto t : b.tags)
                strings = strings && t.is_string();
        if (!strings) {
            f.error = "tags must be an array of strings";
            return;
        }
        b.has_tags = true;
    }
    if (!absent(m.models)) {
        if (m.models->get_array().get(b.models) != simdjson::SUCCESS) {
            f.error = "models must be an array";
            return;
        }
        b.has_models = true;
    }
    // Tool search (docs/protocol.md §20).
    if (!absent(m.query)) {
        if (m.query->get_string().get(b.list_query) != simdjson::SUCCESS || b.list_query.empty() ||
            b.list_query.size() > max_query_bytes) {
            f.error = "query must be a non-empty string of words (at most 1024 bytes)";
            return;
        }
        b.has_query = true;
    }
    if (!absent(m.limit)) {
        std::uint64_t n = 0;
        if (m.limit->get_uint64().get(n) != simdjson::SUCCESS || n == 0 || n > max_query_limit) {
            f.error = "limit must be an integer from 1 to 1000";
            return;
        }
        b.list_limit = static_cast<std::size_t>(n);
    }
    if (b.has_query && (b.has_tags || b.has_models)) {
        f.error = "query cannot be combined with tags or models";
        return;
    }
    // A page of the plain listing (docs/protocol.md §5).
    if (!absent(m.offset)) {
        std::uint64_t n = 0;
        if (m.offset->get_uint64().get(n) != simdjson::SUCCESS || n > max_page_offset) {
            f.error = "offset must be an integer from 0 to 1000000";
            return;
        }
        b.list_offset = static_cast<std::size_t>(n);
        b.has_page = true;
    }
    if (!absent(m.permitted)) {
        if (m.permitted->get_bool().get(b.list_permitted) != simdjson::SUCCESS) {
            f.error = "permitted must be true or false";
            return;
        }
        b.has_page = true;
    }
    if (!b.has_query && !absent(m.limit)) b.has_page = true;
    if (b.has_page && (b.has_query || b.has_tags || b.has_models)) {
        f.error = b.has_query
                      ? "offset and permitted cannot be combined with query"
                      : "offset, limit and permitted cannot be combined with tags or models";
        return;
    }
    if (b.has_page && absent(m.limit)) b.list_limit = std::numeric_limits<std::size_t>::max();
}

/// W3C Trace Context §3.2: `version-traceid-parentid-flags`, lowercase hex, 2-32-16-2.
bool is_traceparent(std::string_view t) {
    if (t.size() != 55 || t[2] != '-' || t[35] != '-' || t[52] != '-') return false;
    for (std::size_t i = 0; i < t.size(); ++i) {
        if (i == 2 || i == 35 || i == 52) continue;
        const char ch = t[i];
        if (!((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f'))) return false;
    }
    return true;
}

bool arguments_shape_ok(const frame_members& m) {
    return m.arguments->is_object() || m.arguments->is_string();
}

/// A tool_call's own members (docs/protocol.md §3). A missing requestId is a frame error; the
/// rest are call errors, answered with a tool_result (`call_error`).
void decode_tool_call(const frame_members& m, client_frame& f) {
    auto& b = f.body.emplace<tool_call_frame>();
    if (!f.request_id) {
        f.error = "tool_call needs a requestId string of 1-128 characters";
        return;
    }
    if (f.tool_name.empty()) {
        b.call_error = "toolName must be a non-empty string";
        return;
    }
    if (!m.arguments) {
        b.call_error = "arguments is missing (send {} for none)";
        return;
    }
    if (!arguments_shape_ok(m)) {
        // A string is for text-payload tools; the registry checks it against the tool.
        b.call_error = "arguments must be a JSON object (or a string for a text-payload tool)";
        return;
    }
    if (!absent(m.timeout)) {
        uint64_t ms = 0;
        if (m.timeout->get_uint64().get(ms) != simdjson::SUCCESS || ms == 0) {
            b.call_error = "timeoutMs must be a positive integer (milliseconds)";
            return;
        }
        b.timeout_ms = ms;
    }
    if (!absent(m.result_format)) {
        std::string_view rf;
        if (m.result_format->get_string().get(rf) != simdjson::SUCCESS ||
            (rf != "model" && rf != "meith")) {
            b.call_error = R"(resultFormat must be "model" (or "meith", the default))";
            return;
        }
        b.result_model = rf == "model";
    }
    if (!absent(m.display) && m.display->get_bool().get(b.display) != simdjson::SUCCESS) {
        b.call_error = "display must be a boolean";
        return;
    }
    if (!absent(m.traceparent) &&
        (m.traceparent->get_string().get(b.traceparent) != simdjson::SUCCESS ||
         !is_traceparent(b.traceparent)))
        b.call_error = "traceparent must be a W3C trace context: "
                       "00-<32 hex digits>-<16 hex digits>-<2 hex digits>";
}

/// The checks of each frame type past the common ones (docs/protocol.md §3-§14).
void decode_by_type(simdjson::dom::object obj, const frame_members& m, client_frame& f) {
    switch (f.type) {
    case frame_type::other:
        f.error = "unknown frame type \"" + std::string(f.type_name) + "\"";
        return;
    case frame_type::restart_source: {
        auto& b = f.body.emplace<restart_source_frame>();
        simdjson::dom::element name_el;
        if (obj["name"].get(name_el) != simdjson::SUCCESS ||
            name_el.get_string().get(b.source_name) != simdjson::SUCCESS || b.source_name.empty())
            f.error = "restart_source needs a non-empty string \"name\"";
        else
            check_optional_request_id(m, f);
        return;
    }
    case frame_type::learn_source: {
        auto& b = f.body.emplace<learn_source_frame>();
        simdjson::dom::element el;
        std::string_view action;
        if (obj["name"].get(el) != simdjson::SUCCESS ||
            el.get_string().get(b.source_name) != simdjson::SUCCESS || b.source_name.empty())
            f.error = "learn_source needs a non-empty string \"name\"";
        else if (obj["action"].get(el) != simdjson::SUCCESS ||
                 el.get_string().get(action) != simdjson::SUCCESS ||
                 (action != "start" && action != "stop"))
            f.error = "learn_source needs \"action\": \"start\" or \"stop\"";
        else
            check_optional_request_id(m, f);
        b.learn_stop = action == "stop";
        return;
    }
    case frame_type::check_policy:
        if (f.tool_name.empty())
            f.error = "check_policy needs a non-empty string \"toolName\"";
        else
            check_optional_request_id(m, f);
        return;
    case frame_type::hello: {
        auto& b = f.body.emplace<hello_frame>();
        decode_subscribe(m, f, b);
        if (!f.error) decode_capabilities(m, f, b);
        if (!f.error) check_optional_request_id(m, f);
        return;
    }
    case frame_type::list_tools:
        decode_list_options(m, f);
        if (!f.error) check_optional_request_id(m, f);
        return;
    case frame_type::list_sources:
    case frame_type::reload_config:
        check_optional_request_id(m, f);
        return;
    case frame_type::cancel_tool_call:
        if (!f.request_id)
            f.error = "cancel_tool_call needs a requestId string of 1-128 characters";
        return;
    case frame_type::preview_tool_call:
        // Arguments as for a call: an object, or a string for a text-payload tool.
        if (!f.request_id)
            f.error = "preview_tool_call needs a requestId string of 1-128 characters";
        else if (f.tool_name.empty())
            f.error = "preview_tool_call needs a non-empty string \"toolName\"";
        else if (m.arguments && !arguments_shape_ok(m))
            f.error = "arguments must be a JSON object (or a string for a text-payload tool)";
        return;
    case frame_type::approver_hello:
    case frame_type::approve:
    case frame_type::grant:
    case frame_type::revoke:
    case frame_type::list_grants:
    case frame_type::accept_tool:
        check_optional_request_id(m, f);
        if (!f.error) decode_grant_frame(obj, f);
        return;
    case frame_type::tool_call:
        decode_tool_call(m, f);
        return;
    case frame_type::mcp_request:
        decode_mcp_request(m, f);
        return;
    case frame_type::client_response:
        decode_client_response(m, f);
        if (!f.error) check_optional_request_id(m, f);
        return;
    case frame_type::mcp_handoff: {
        auto& b = f.body.emplace<mcp_handoff_frame>();
        if (!f.request_id) {
            f.error = "mcp_handoff needs a requestId string of 1-128 characters";
            return;
        }
        for (auto [key, out] : {std::pair{"all", &b.all}, std::pair{"search", &b.search}}) {
            simdjson::dom::element el;
            if (obj[key].get(el) == simdjson::SUCCESS &&
                el.get_bool().get(*out) != simdjson::SUCCESS)
                f.error = std::string("mcp_handoff: \"") + key + "\" must be true or false";
        }
        return;
    }
    }
}

} // namespace

client_frame frame_decoder::decode(std::string_view line) {
    client_frame f;
    simdjson::dom::element root;
    // The framer guarantees frame_padding readable bytes after the line: parse in place.
    if (auto ec = parser().parse(line.data(), line.size(), false).get(root)) {
        f.error = describe_parse_error(ec);
        recover_identity(f, line);
        return f;
    }
    simdjson::dom::object obj;
    if (root.get_object().get(obj) != simdjson::SUCCESS) {
        f.error = "frame is not a JSON object";
        return f;
    }
    const frame_members m = collect_members(obj);
    read_identity(m, f);
    if (!m.type || m.type->get_string().get(f.type_name) != simdjson::SUCCESS) {
        f.error = "frame has no string \"type\"";
        return f;
    }
    f.type = type_from_name(f.type_name);
    if (m.protocol) {
        int64_t v = 0;
        if (m.protocol->get_int64().get(v) != simdjson::SUCCESS || v != protocol_version) {
            f.error = "unsupported protocol version " + simdjson::minify(*m.protocol) +
                      " (this server speaks protocol 1)";
            return f;
        }
    }
    decode_by_type(obj, m, f);
    return f;
}

std::size_t utf8_length(std::string_view s) {
    std::size_t n = 0;
    for (char ch : s)
        if ((static_cast<unsigned char>(ch) & 0xC0) != 0x80) ++n;
    return n;
}

std::optional<std::string_view> usable_request_id(std::string_view id) {
    // Escapes would need a real parser; an id with one is simply not recovered.
    if (id.empty() || id.find('\\') != std::string_view::npos ||
        utf8_length(id) > max_request_id_chars || !is_valid_utf8(id))
        return std::nullopt;
    return id;
}

simdjson::dom::parser& frame_decoder::parser() {
    thread_local simdjson::dom::parser shared;
    return shared;
}

void frame_decoder::shrink_if_large(std::size_t keep_bytes) {
    if (parser().capacity() > keep_bytes) parser() = simdjson::dom::parser{};
}

} // namespace meith::protocol
