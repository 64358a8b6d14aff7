// shapes: what `meith mcp` says to an MCP client (see mcp_shapes.hpp).
#include "bridge/shapes.hpp"

namespace meith::bridge::shapes {

json server_capabilities() {
    return {{"tools", {{"listChanged", true}}},
            {"resources", {{"subscribe", true}, {"listChanged", true}}},
            {"prompts", {{"listChanged", true}}},
            {"completions", json::object()},
            {"logging", json::object()},
            // Task-augmented tools/call (2025-11-25 basic/utilities/tasks), run by the bridge.
            {"tasks",
             {{"list", json::object()},
              {"cancel", json::object()},
              {"requests", {{"tools", {{"call", json::object()}}}}}}}};
}

json server_info() {
    return {{"name", "meith"}, {"version", MEITH_VERSION}};
}

json discover_result() {
    json caps = server_capabilities();
    caps.erase("logging"); // 2026-07-28 has no logging/setLevel
    caps.erase("tasks");   // and tasks only as an extension, not offered here
    json r{
        {"supportedVersions", {modern_revision}},
        {"capabilities", std::move(caps)},
        {"instructions", "Tools of the local meith registry (meithd), with its permissions "
                         "and audit trail."},
    };
    mark_modern(r, "server/discover");
    return r;
}

json tool_of(const json& d) {
    const json caps = d.value("capabilities", json::array());
    const auto has = [&](std::string_view c) {
        for (const auto& x : caps)
            if (x.is_string() && x.get<std::string>() == c) return true;
        return false;
    };
    json t{{"name", get_string(d, "name").value_or("")}};
    if (d.contains("title")) t["title"] = d["title"];
    t["description"] = get_string(d, "description").value_or("");
    json schema = d.value("inputSchema", json());
    if (get_string(d, "payloadKind") == "text")
        // MCP has no text-payload tools: one required string `input` (docs/protocol.md §13).
        schema = {{"type", "object"},
                  {"properties", {{"input", {{"type", "string"}}}}},
                  {"required", {"input"}}};
    t["inputSchema"] = schema.is_object() ? schema : json{{"type", "object"}};
    if (get_string(d, "sourceKind") == "mcp") {
        // An MCP source's tool: its members as the server gave them (§17), none made up.
        if (d.contains("annotations")) t["annotations"] = d["annotations"];
    } else
        t["annotations"] = {{"readOnlyHint", caps.size() == 1 && has("read-only")},
                            {"destructiveHint", has("destructive")},
                            {"openWorldHint", has("accesses-network")}};
    for (const char* key : {"outputSchema", "execution", "icons", "_meta"})
        if (d.contains(key)) t[key] = d[key];
    return t;
}

namespace {
/// An MCP CallToolResult as an MCP source passed it on: an object with a `content` array.
bool is_mcp_result(const json& j) {
    return j.is_object() && j.contains("content") && j["content"].is_array();
}
} // namespace

json take(json& obj, std::string_view key) {
    if (!obj.is_object()) return json();
    auto it = obj.find(key);
    return it == obj.end() ? json() : std::move(*it);
}

json call_result(json r, bool& unknown_tool, std::string& message) {
    unknown_tool = false;
    const json* ok = get_field(r, "ok");
    if (ok == nullptr || !ok->is_boolean() || !ok->get<bool>()) {
        const json err = take(r, "error");
        const std::string code = get_string(err, "code").value_or("TOOL_FAILED");
        message = get_string(err, "message").value_or("");
        if (code == "UNKNOWN_TOOL") {
            unknown_tool = true;
            return json();
        }
        // The server's own isError result, as it sent it (mcp_wire: the error's details).
        if (const json* details = get_field(err, "details");
            code == "TOOL_FAILED" && details != nullptr && is_mcp_result(*details) &&
            details->value("isError", false))
            return *details;
        return {{"content", {{{"type", "text"}, {"text", code + ": " + message}}}},
                {"isError", true}};
    }
    json c = take(r, "content");
    if (is_mcp_result(c)) return c; // an MCP source's result passes through, moved
    if (c.is_string()) return {{"content", {{{"type", "text"}, {"text", c}}}}};
    json out{{"content", {{{"type", "text"}, {"text", compact(c)}}}}};
    if (c.is_object()) out["structuredContent"] = c;
    return out;
}

void mark_modern(json& result, std::string_view method) {
    if (!result.is_object()) return;
    if (!result.contains("resultType")) result["resultType"] = "complete";
    if (method == "tools/list" || method == "prompts/list" || method == "resources/list" ||
        method == "resources/templates/list" || method == "resources/read" ||
        method == "server/discover") {
        result["ttlMs"] = 0;
        result["cacheScope"] = "private";
    }
    json& meta = result["_meta"];
    if (!meta.is_object()) meta = json::object();
    meta[std::string(server_info_key)] = server_info();
}

} // namespace meith::bridge::shapes
