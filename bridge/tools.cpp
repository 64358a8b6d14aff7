// mcp_tools: `meith mcp`'s tools (docs/protocol.md §10): tools/list paged from list_tools,
// tools/call as a tool_call, and search mode's meta-tools (§13 "Search"). The class is in
// bridge/mcp_session.hpp; the answers come back through mcp_session::on_daemon_frame.
#include "bridge/mcp_session.hpp"

#include "protocol/json_writer.hpp"

#include <algorithm>

#include <fmt/core.h>

namespace meith::bridge {

json mcp_session::search_mode_tools() {
    return json{
        {"tools",
         json::array(
             {{{"name", "search_tools"},
               {"title", "Search tools"},
               {"description",
                "Find the tools for a task: ranks the tools you may use by how well their names, "
                "descriptions and parameter names match the words given, best first, and returns "
                "each with its input schema. Then call one with call_tool."},
               {"inputSchema",
                {{"type", "object"},
                 {"properties",
                  {{"query",
                    {{"type", "string"},
                     {"description", "what the tool should do, in a few words"}}},
                   {"limit",
                    {{"type", "integer"},
                     {"minimum", 1},
                     {"maximum", 50},
                     {"description", "how many tools to return (default 10)"}}}}},
                 {"required", json::array({"query"})}}},
               {"annotations", {{"readOnlyHint", true}}}},
              {{"name", "call_tool"},
               {"title", "Call a tool"},
               {"description",
                "Calls a tool found with search_tools by its name, with arguments that match its "
                "input schema; returns the tool's result."},
               {"inputSchema",
                {{"type", "object"},
                 {"properties",
                  {{"name",
                    {{"type", "string"},
                     {"description", "the tool's name, as search_tools gave it"}}},
                   {"arguments", {{"type", "object"}, {"description", "the tool's arguments"}}}}},
                 {"required", json::array({"name"})}}}}})}};
}

json mcp_session::search_result(const json& descriptors) {
    json found = json::array();
    for (const json& d : descriptors) {
        if (!d.is_object()) continue;
        if (get_string(d, "payloadKind") == "text")
            text_tools_.insert(get_string(d, "name").value_or(""));
        json t = shapes::tool_of(d);
        json item{{"name", t.value("name", "")},
                  {"description", t.value("description", "")},
                  {"inputSchema", t.value("inputSchema", json::object())}};
        if (t.contains("title")) item["title"] = t["title"];
        found.push_back(std::move(item));
    }
    const std::string text =
        found.empty() ? std::string("no tool you may use matches; try other words") : found.dump();
    return json{{"content", json::array({{{"type", "text"}, {"text", text}}})},
                {"structuredContent", {{"tools", found}}}};
}

void mcp_session::search_tools_call(const json& id, const json& args, bool modern) {
    const auto query = get_string(args, "query");
    if (!query || query->empty())
        return send_error(id, invalid_params, "search_tools needs a non-empty string \"query\"");
    std::uint64_t limit = 10;
    if (const json* l = get_field(args, "limit"); l != nullptr && !l->is_null()) {
        if (!l->is_number_unsigned() || l->get<std::uint64_t>() == 0 ||
            l->get<std::uint64_t>() > 50)
            return send_error(id, invalid_params,
                              "search_tools: limit must be an integer from 1 to 50");
        limit = l->get<std::uint64_t>();
    }
    if (!connect()) return send_error(id, internal_error, down_);
    const std::string rid = track(id, kind::search, "tools/call", modern, 0);
    send_to_daemon({{"type", "list_tools"},
                    {"protocol", 1},
                    {"requestId", rid},
                    {"query", *query},
                    {"limit", limit},
                    {"clientInfo", {{"caller", settings_.caller}}}});
}

void mcp_session::tools_list(const json& id, const json& params, bool modern) {
    const auto offset = cursor_of(params);
    if (!offset) return send_error(id, invalid_params, "invalid cursor");
    if (search_mode_ && pinned_.empty()) {
        json result = search_mode_tools();
        if (modern) shapes::mark_modern(result, "tools/list");
        return send_result(id, std::move(result));
    }
    if (!connect()) return send_error(id, internal_error, down_);
    const std::string rid =
        track(id, search_mode_ ? kind::pinned : kind::list_tools, "tools/list", modern, *offset);
    json frame{{"type", "list_tools"},
               {"protocol", 1},
               {"requestId", rid},
               {"clientInfo", {{"caller", settings_.caller}}}};
    if (!search_mode_) {
        // One page, cut by meithd (docs/protocol.md §5 "Pages"): the bridge parses 500
        // descriptors, not every tool (10,000 tools: 4 MiB a page otherwise).
        frame["offset"] = *offset;
        frame["limit"] = page_size;
        frame["permitted"] = !settings_.all;
    }
    send_to_daemon(frame);
}

// A meithd that does not cut pages (older than the `total` member) sent every tool.
json mcp_session::tools_page(const json& descriptors, std::size_t offset) {
    std::vector<const json*> listed;
    for (const json& d : descriptors) {
        if (!d.is_object()) continue;
        if (get_string(d, "payloadKind") == "text")
            text_tools_.insert(get_string(d, "name").value_or(""));
        const std::string permission = get_string(d, "permission").value_or("");
        if (!settings_.all && permission != "allow" && permission != "ask") continue;
        listed.push_back(&d);
    }
    json tools = json::array();
    for (std::size_t i = offset; i < listed.size() && i < offset + page_size; ++i)
        tools.push_back(shapes::tool_of(*listed[i]));
    json result{{"tools", std::move(tools)}};
    if (offset + page_size < listed.size())
        result["nextCursor"] = std::to_string(offset + page_size);
    return result;
}

json mcp_session::tools_page_cut(const json& page, std::size_t offset, std::size_t total) {
    json tools = json::array();
    for (const json& d : page) {
        if (!d.is_object()) continue;
        if (get_string(d, "payloadKind") == "text")
            text_tools_.insert(get_string(d, "name").value_or(""));
        tools.push_back(shapes::tool_of(d));
    }
    json result{{"tools", std::move(tools)}};
    if (offset + page_size < total) result["nextCursor"] = std::to_string(offset + page_size);
    return result;
}

void mcp_session::tools_call(const json& id, const json& params, bool modern) {
    if (modern && params.contains("requestState")) return retry_call(id, params);
    if (!params.contains("name") || !params["name"].is_string())
        return send_error(id, invalid_params, "tools/call needs a string \"name\"");
    static const json no_arguments = json::object();
    const json* given = get_field(params, "arguments");
    const json& args = given != nullptr ? *given : no_arguments; // not copied
    if (!args.is_object()) return send_error(id, invalid_params, "\"arguments\" must be an object");
    if (search_mode_ && params["name"] == "search_tools")
        return search_tools_call(id, args, modern);
    if (search_mode_ && params["name"] == "call_tool") {
        // The named tool's own tools/call, as if the client had listed it.
        if (!args.contains("name") || !args["name"].is_string())
            return send_error(id, invalid_params, "call_tool needs a string \"name\"");
        json inner = params;
        inner["name"] = args["name"];
        inner["arguments"] = args.value("arguments", json::object());
        if (inner["arguments"].is_null()) inner["arguments"] = json::object();
        return tools_call(id, inner, modern);
    }
    if (by_mcp_id_.count(id.dump()))
        return send_error(id, invalid_request, "a request with this id is in flight");
    if (!connect()) return send_error(id, internal_error, down_);
    std::string rid =
        call_request_id(id.is_string() ? id.get_ref<const std::string&>() : id.dump());
    pending p;
    p.mcp_id = id;
    p.k = kind::call;
    p.method = "tools/call";
    p.modern = modern;
    // The frame is written as text: the arguments are serialized once, never copied.
    std::string& frame = frame_text_;
    frame.assign(R"({"type":"tool_call","protocol":1,"requestId":)");
    protocol::append_json_string(frame, rid);
    if (const json* meta = get_field(params, "_meta"); meta != nullptr && meta->is_object()) {
        p.progress_token = meta->value("progressToken", json());
        // W3C trace context passes to the source and into the audit line (§17).
        if (const auto trace = get_string(*meta, "traceparent")) {
            frame.append(R"(,"traceparent":)");
            protocol::append_json_string(frame, *trace);
        }
    }
    if (!modern && params.contains("task") && params["task"].is_object()) {
        // Task-augmented: answered now with the task; tasks/result gives the result.
        const json ttl = params["task"].value("ttl", json(300000));
        p.mcp_id = json();
        send_result(
            id, tasks_.create(rid, ttl.is_number_unsigned() ? ttl.get<std::uint64_t>() : 300000));
    } else {
        by_mcp_id_[id.dump()] = rid;
    }
    pending_.emplace(rid, std::move(p));
    const std::string& name = params["name"].get_ref<const std::string&>();
    frame.append(R"(,"toolName":)");
    protocol::append_json_string(frame, name);
    frame.append(R"(,"arguments":)");
    // A text-payload tool (listed with one string `input`) gets that string.
    if (text_tools_.count(name) > 0)
        protocol::append_json_string(frame, get_string(args, "input").value_or(""));
    else
        append_compact(frame, args);
    end_call_frame(frame);
    send_frame_text(frame);
}

std::string mcp_session::call_request_id(std::string_view id_text) {
    // The MCP request id is part of the requestId (docs/protocol.md §10), kept within 128 bytes
    // and cut on a UTF-8 character boundary (a split character would not come back as sent).
    // The generator's prefix keeps it unique however much of the MCP id is cut.
    std::string rid = ids_.next();
    rid += ':';
    rid += id_text;
    if (rid.size() > 128) {
        std::size_t cut = 128;
        while (cut > 0 && (static_cast<unsigned char>(rid[cut]) & 0xC0) == 0x80)
            --cut;
        rid.resize(cut);
    }
    return rid;
}

void mcp_session::end_call_frame(std::string& frame) const {
    frame.append(R"(,"clientInfo":{"caller":)");
    protocol::append_json_string(frame, settings_.caller);
    if (!agent_.empty()) {
        frame.append(R"(,"agent":)");
        protocol::append_json_string(frame, agent_);
    }
    frame.append("}}");
}

} // namespace meith::bridge
