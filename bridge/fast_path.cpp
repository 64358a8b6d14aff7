// fast_path: the common tools/call and its answer without nlohmann (see mcp_session.hpp "the
// fast path"). Reading the client's message into its frame and the reply frame into its answer
// were the two largest costs of a call through the gateway (bench/PROFILE.md round four, (j)):
// here the call is read by simdjson's DOM (validated whole, so the frame meithd gets is valid
// JSON) and its answer by simdjson On-Demand, its content passed through as the bytes meithd
// wrote. Whatever this path does not take, it leaves untouched for the general one.
#include "bridge/mcp_session.hpp"

#include "protocol/json_writer.hpp"

#include <simdjson.h>

#include <algorithm>
#include <vector>

namespace meith::bridge {

namespace {

/// Messages and frames longer than this take the general path: the parsers keep the capacity
/// of the largest document they read, so a screenshot would leave megabytes behind.
constexpr std::size_t fast_max_bytes = 256 << 10;

bool is_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

std::string_view trim_right(std::string_view s) {
    while (!s.empty() && is_space(s.back()))
        s.remove_suffix(1);
    return s;
}

/// True when an object in `e`, at any depth, has a member name twice. nlohmann keeps the last
/// of them, simdjson both: such JSON takes the general path, so that meithd, its hooks and the
/// tool never see a value the general path would have dropped.
bool has_repeated_member(simdjson::dom::element e) {
    if (e.is_array()) {
        const simdjson::dom::array items =
            e.get_array().value_unsafe(); // a copy, not the temporary's
        for (simdjson::dom::element item : items)
            if (has_repeated_member(item)) return true;
        return false;
    }
    if (!e.is_object()) return false;
    const simdjson::dom::object obj = e.get_object().value_unsafe();
    thread_local std::vector<std::string_view> names;
    const std::size_t base = names.size(); // the outer objects' names stay below
    bool repeated = false;
    for (auto [key, value] : obj) {
        names.push_back(key);
        if (has_repeated_member(value)) {
            repeated = true;
            break;
        }
    }
    if (!repeated && names.size() - base > 1) {
        std::sort(names.begin() + static_cast<std::ptrdiff_t>(base), names.end());
        repeated = std::adjacent_find(names.begin() + static_cast<std::ptrdiff_t>(base),
                                      names.end()) != names.end();
    }
    names.resize(base);
    return repeated;
}

/// simdjson's parsers and a padded copy of a frame, one set per thread: a parser keeps the
/// capacity of the largest document it read (at most fast_max_bytes here), so one set serves
/// every session of the thread — meithd's I/O thread runs them all — instead of one each. Not
/// reentrant: nothing read from them is used after the session calls its link.
struct fast_parsers {
    simdjson::dom::parser dom;
    simdjson::ondemand::parser on_demand;
    std::string padded;
};

fast_parsers& parsers() {
    thread_local fast_parsers p;
    return p;
}

} // namespace

bool mcp_session::fast_tools_call(std::string_view line) {
    if (!settings_.fast_path || line.size() > fast_max_bytes || !hello_wait_.empty() || held_ ||
        !link_.connected())
        return false;
    simdjson::dom::object msg;
    if (parsers().dom.parse(line.data(), line.size()).get_object().get(msg) != simdjson::SUCCESS)
        return false;
    // Exactly these four members, each once.
    std::string_view jsonrpc, method;
    simdjson::dom::element id, params;
    unsigned seen = 0;
    for (auto [key, value] : msg) {
        const unsigned bit = key == "jsonrpc"  ? 1u
                             : key == "id"     ? 2u
                             : key == "method" ? 4u
                             : key == "params" ? 8u
                                               : 0u;
        if (bit == 0 || (seen & bit) != 0) return false;
        seen |= bit;
        if (bit == 1 && value.get_string().get(jsonrpc) != simdjson::SUCCESS) return false;
        if (bit == 2) id = value;
        if (bit == 4 && value.get_string().get(method) != simdjson::SUCCESS) return false;
        if (bit == 8) params = value;
    }
    if (seen != 15 || jsonrpc != "2.0" || method != "tools/call") return false;
    // The id as the general path reads it: a string or an integer.
    json mcp_id;
    std::string id_text;
    std::string_view id_string;
    std::int64_t id_signed = 0;
    std::uint64_t id_unsigned = 0;
    if (id.get_string().get(id_string) == simdjson::SUCCESS) {
        mcp_id = std::string(id_string);
        id_text = id_string;
    } else if (id.get_int64().get(id_signed) == simdjson::SUCCESS) {
        mcp_id = id_signed;
        id_text = std::to_string(id_signed);
    } else if (id.get_uint64().get(id_unsigned) == simdjson::SUCCESS) {
        mcp_id = id_unsigned;
        id_text = std::to_string(id_unsigned);
    } else {
        return false;
    }
    // params: a string "name" and, if present, an object "arguments"; nothing else.
    simdjson::dom::object p;
    if (params.get_object().get(p) != simdjson::SUCCESS) return false;
    std::string_view name;
    simdjson::dom::element args;
    unsigned pseen = 0;
    for (auto [key, value] : p) {
        const unsigned bit = key == "name" ? 1u : key == "arguments" ? 2u : 0u;
        if (bit == 0 || (pseen & bit) != 0) return false;
        pseen |= bit;
        if (bit == 1 && value.get_string().get(name) != simdjson::SUCCESS) return false;
        if (bit == 2 && (!value.is_object() || has_repeated_member(value))) return false;
        if (bit == 2) args = value;
    }
    if ((pseen & 1) == 0) return false;
    if (search_mode_ && (name == "search_tools" || name == "call_tool")) return false;
    if (text_tools_.find(name) != text_tools_.end()) return false;
    std::string key = mcp_id.dump();
    if (by_mcp_id_.find(key) != by_mcp_id_.end()) return false;

    std::string rid = call_request_id(id_text);
    std::string& frame = frame_text_;
    frame.assign(R"({"type":"tool_call","protocol":1,"requestId":)");
    protocol::append_json_string(frame, rid);
    frame.append(R"(,"toolName":)");
    protocol::append_json_string(frame, name);
    frame.append(R"(,"arguments":)");
    if ((pseen & 2) != 0)
        frame.append(simdjson::minify(args));
    else
        frame.append("{}");
    end_call_frame(frame);
    pending call;
    call.mcp_id = std::move(mcp_id);
    call.k = kind::call;
    call.method = "tools/call";
    by_mcp_id_.emplace(std::move(key), rid);
    pending_.emplace(std::move(rid), std::move(call));
    ++fast_calls_;
    send_frame_text(frame);
    return true;
}

bool mcp_session::fast_tool_result(std::string_view line) {
    constexpr std::string_view head = R"({"type":"tool_result",)";
    if (!settings_.fast_path || line.size() > fast_max_bytes || !line.starts_with(head))
        return false;
    std::string& buf = parsers().padded;
    buf.assign(line);
    buf.append(simdjson::SIMDJSON_PADDING, ' ');
    namespace od = simdjson::ondemand;
    od::document doc;
    if (parsers()
            .on_demand.iterate(simdjson::padded_string_view(buf.data(), line.size(), buf.size()))
            .get(doc) != simdjson::SUCCESS)
        return false;
    // meithd writes the members in this order (protocol/server_frames.cpp); find_field only
    // looks forward, so another order takes the general path.
    std::string_view rid;
    if (doc.find_field("requestId").get_string().get(rid) != simdjson::SUCCESS) return false;
    auto it = pending_.find(rid);
    if (it == pending_.end()) return false;
    const pending& p = it->second;
    if (p.k != kind::call || p.modern || p.cancelled || p.mcp_id.is_null()) return false;
    od::object result;
    bool ok = false;
    if (doc.find_field("result").get_object().get(result) != simdjson::SUCCESS ||
        result.find_field("ok").get_bool().get(ok) != simdjson::SUCCESS || !ok)
        return false;
    od::value content;
    od::json_type type;
    if (result.find_field("content").get(content) != simdjson::SUCCESS ||
        content.type().get(type) != simdjson::SUCCESS)
        return false;
    // What the answer's result is made of: a string's JSON token, or an object's JSON text
    // (checked with the DOM, reading it in place: the frame's padding follows it).
    std::string_view raw;
    bool call_result = false;
    if (type == od::json_type::string) {
        raw = trim_right(content.raw_json_token());
    } else if (type == od::json_type::object) {
        od::object object;
        simdjson::dom::element e, inner;
        if (content.get_object().get(object) != simdjson::SUCCESS ||
            object.raw_json().get(raw) != simdjson::SUCCESS)
            return false;
        raw = trim_right(raw);
        if (parsers().dom.parse(raw.data(), raw.size(), false).get(e) != simdjson::SUCCESS ||
            has_repeated_member(e))
            return false;
        // An MCP source's CallToolResult (an object with a `content` array) passes through as
        // meithd sent it; any other object is the text of its JSON and its structuredContent.
        call_result = e["content"].get(inner) == simdjson::SUCCESS && inner.is_array();
    } else {
        return false;
    }
    std::string& out = out_text_;
    out.assign(R"({"jsonrpc":"2.0","id":)");
    append_compact(out, p.mcp_id);
    out.append(R"(,"result":)");
    if (type == od::json_type::string) {
        out.append(R"({"content":[{"type":"text","text":)");
        out.append(raw);
        out.append("}]}");
    } else if (call_result) {
        out.append(raw);
    } else {
        out.append(R"({"content":[{"type":"text","text":)");
        protocol::append_json_string(out, raw);
        out.append(R"(}],"structuredContent":)");
        out.append(raw);
        out.push_back('}');
    }
    out.append("}\n");
    by_mcp_id_.erase(p.mcp_id.dump());
    pending_.erase(it);
    ++fast_answers_;
    link_.write_client(out);
    return true;
}

} // namespace meith::bridge
