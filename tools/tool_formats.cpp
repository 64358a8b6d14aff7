#include "tools/tool_formats.hpp"

#include "protocol/json_writer.hpp"

#include <simdjson.h>

namespace meith::tools {

namespace {

constexpr std::string_view empty_object_schema = R"({"type":"object","properties":{}})";
/// What a text-payload tool takes where only functions exist (PROTOCOL.md §11).
constexpr std::string_view text_input_schema =
    R"({"type":"object","properties":{"input":{"type":"string"}},"required":["input"]})";

bool is_text_payload(const tool& t) {
    return t.payload_kind == "text";
}

std::string_view parameters_of(const tool& t) {
    if (is_text_payload(t)) return text_input_schema;
    return t.input_schema_json.empty() ? empty_object_schema
                                       : std::string_view(t.input_schema_json);
}

/// `title` and `outputSchema` from an MCP source's extra descriptor members, when there.
void append_mcp_extras(std::string& out, const tool& t, bool title) {
    if (t.extra_descriptor_json.empty()) return;
    simdjson::dom::parser parser;
    const std::string doc = "{" + t.extra_descriptor_json + "}";
    simdjson::dom::object obj;
    if (parser.parse(doc).get(obj) != simdjson::SUCCESS) return;
    simdjson::dom::element v;
    if (title) {
        if (obj["title"].get(v) == simdjson::SUCCESS && v.is_string())
            protocol::json_members(out).raw("title", simdjson::minify(v));
    } else if (obj["outputSchema"].get(v) == simdjson::SUCCESS && v.is_object()) {
        protocol::json_members(out).raw("outputSchema", simdjson::minify(v));
    }
}

/// `"name":…,"description":…` and, when `schema_key` is given, `,"<schema_key>":<parameters>`:
/// the members every format shares.
void append_common(std::string& out, const tool& t, std::string_view schema_key = {}) {
    protocol::json_members m(out);
    m.string("name", t.name).string("description", t.description);
    if (!schema_key.empty()) m.raw(schema_key, parameters_of(t));
}

bool has(const tool& t, permissions::capability c) {
    return (t.capabilities & (1u << static_cast<unsigned>(c))) != 0;
}

} // namespace

std::optional<list_format> list_format_from_string(std::string_view name) {
    if (name == "meith") return list_format::meith;
    if (name == "openai") return list_format::openai;
    if (name == "openai.responses") return list_format::openai_responses;
    if (name == "anthropic") return list_format::anthropic;
    if (name == "mcp") return list_format::mcp;
    return std::nullopt;
}

std::string_view to_string(list_format f) {
    switch (f) {
    case list_format::meith:
        return "meith";
    case list_format::openai:
        return "openai";
    case list_format::openai_responses:
        return "openai.responses";
    case list_format::anthropic:
        return "anthropic";
    case list_format::mcp:
        return "mcp";
    }
    return "meith";
}

std::string_view list_format_names() {
    return "meith, openai, openai.responses, anthropic, mcp";
}

void append_provider_tool(std::string& out, const tool& t, list_format f) {
    switch (f) {
    case list_format::meith:
        return;
    case list_format::openai:
        out += '{';
        protocol::json_members(out).string("type", "function").key("function").push_back('{');
        append_common(out, t, "parameters");
        out += "}}";
        return;
    case list_format::openai_responses:
        out += '{';
        if (is_text_payload(t)) {
            protocol::json_members(out).string("type", "custom");
            append_common(out, t);
            if (!t.payload_format_json.empty())
                protocol::json_members(out).raw("format", t.payload_format_json);
            out += '}';
            return;
        }
        protocol::json_members(out).string("type", "function");
        append_common(out, t, "parameters");
        protocol::json_members(out).boolean("strict", false);
        out += '}';
        return;
    case list_format::anthropic:
        out += '{';
        append_common(out, t, "input_schema");
        out += '}';
        return;
    case list_format::mcp: {
        using permissions::capability;
        out += '{';
        protocol::json_members m(out);
        m.string("name", t.name);
        append_mcp_extras(out, t, true);
        m.string("description", t.description).raw("inputSchema", parameters_of(t));
        // As `meith mcp` derives them (docs/protocol.md §10): from the capabilities.
        const bool read_only =
            t.capabilities == (1u << static_cast<unsigned>(capability::read_only));
        m.key("annotations").push_back('{');
        m.boolean("readOnlyHint", read_only)
            .boolean("destructiveHint", has(t, capability::destructive))
            .boolean("openWorldHint", has(t, capability::accesses_network));
        out += '}';
        append_mcp_extras(out, t, false);
        out += '}';
        return;
    }
    }
}

} // namespace meith::tools
