// mcp_wire: requests to and answers from MCP servers, without I/O (see mcp_wire.hpp).
#include "sources/mcp_wire.hpp"

#include "sources/declared_capabilities.hpp"

#include "process/rpc_peer.hpp"
#include "protocol/json_writer.hpp"
#include "protocol/server_frames.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace meith::sources::mcp {

using protocol::append_json_string;
using protocol::error_code;
using protocol::tool_result;

std::string initialize_params(std::string_view version, bool roots) {
    std::string out = R"({"protocolVersion":)";
    append_json_string(out, protocol_revisions.front());
    // meithd forwards sampling, elicitation and roots requests to the client of the call that
    // caused them (docs/protocol.md §17): offered here, refused per request when that client
    // did not declare them.
    out += R"(,"capabilities":{)";
    if (roots) out += R"("roots":{},)";
    out += R"("sampling":{"context":{},"tools":{}},"elicitation":{"form":{},"url":{}}},)"
           R"("clientInfo":{"name":"meithd","version":)";
    append_json_string(out, version);
    out += "}}";
    return out;
}

std::string envelope_members(std::string_view version, bool roots) {
    std::string out = R"("io.modelcontextprotocol/protocolVersion":)";
    append_json_string(out, modern_revision);
    out += R"(,"io.modelcontextprotocol/clientCapabilities":{)";
    if (roots) out += R"("roots":{},)";
    out += R"("sampling":{"context":{},"tools":{}},"elicitation":{"form":{},"url":{}}},)"
           R"("io.modelcontextprotocol/clientInfo":{"name":"meithd","version":)";
    append_json_string(out, version);
    out += "}";
    return out;
}

std::string with_envelope(std::string_view params_json, std::string_view envelope) {
    thread_local simdjson::dom::parser parser;
    simdjson::dom::object obj;
    if (parser.parse(params_json).get_object().get(obj) != simdjson::SUCCESS)
        return std::string(params_json);
    std::string out = "{";
    bool meta_seen = false;
    for (auto [key, value] : obj) {
        if (out.size() > 1) out += ',';
        append_json_string(out, key);
        out += ':';
        simdjson::dom::object meta;
        if (key == "_meta" && value.get_object().get(meta) == simdjson::SUCCESS) {
            meta_seen = true;
            std::string inner = simdjson::minify(meta);
            inner.pop_back(); // the closing brace
            if (inner.size() > 1) inner += ',';
            out += inner;
            out += envelope;
            out += '}';
        } else {
            out += simdjson::minify(value);
        }
    }
    if (!meta_seen) {
        if (out.size() > 1) out += ',';
        out += R"("_meta":{)";
        out += envelope;
        out += '}';
    }
    return out + "}";
}

std::string without_meta_key(std::string_view params_json, std::string_view key) {
    thread_local simdjson::dom::parser parser;
    simdjson::dom::object obj;
    if (parser.parse(params_json).get_object().get(obj) != simdjson::SUCCESS)
        return std::string(params_json);
    std::string out = "{";
    for (auto [k, value] : obj) {
        simdjson::dom::object meta;
        std::string rendered;
        if (k == "_meta" && value.get_object().get(meta) == simdjson::SUCCESS) {
            rendered = "{";
            for (auto [mk, mv] : meta) {
                if (mk == key) continue;
                if (rendered.size() > 1) rendered += ',';
                append_json_string(rendered, mk);
                rendered += ':';
                rendered += simdjson::minify(mv);
            }
            rendered += '}';
            if (rendered == "{}") continue;
        } else {
            rendered = simdjson::minify(value);
        }
        if (out.size() > 1) out += ',';
        append_json_string(out, k);
        out += ':';
        out += rendered;
    }
    return out + "}";
}

std::string discover_params(std::string_view envelope) {
    std::string out = R"({"_meta":{)";
    out += envelope;
    return out + "}}";
}

bool offers_modern(simdjson::dom::element discover_result) {
    simdjson::dom::array versions;
    if (discover_result["supportedVersions"].get_array().get(versions) != simdjson::SUCCESS)
        return false;
    for (auto v : versions) {
        std::string_view s;
        if (v.get_string().get(s) == simdjson::SUCCESS && s == modern_revision) return true;
    }
    return false;
}

namespace {

std::string known_revisions() {
    std::string out;
    for (auto r : protocol_revisions) {
        if (!out.empty()) out += ", ";
        out += r;
    }
    return out;
}

void append_member(std::string& out, std::string_view key, std::string_view json) {
    if (!out.empty()) out.push_back(',');
    append_json_string(out, key);
    out.push_back(':');
    out.append(json);
}

} // namespace

negotiation negotiate(simdjson::dom::element initialize_result) {
    negotiation n;
    std::string_view answered;
    if (initialize_result["protocolVersion"].get_string().get(answered) != simdjson::SUCCESS) {
        n.error = "the server's initialize result has no string protocolVersion";
        return n;
    }
    if (std::find(protocol_revisions.begin(), protocol_revisions.end(), answered) !=
        protocol_revisions.end()) {
        n.revision = std::string(answered);
        return n;
    }
    std::string shown;
    append_json_string(shown, cut_utf8(answered, 64));
    n.error = fmt::format("the server answered MCP protocol revision {}, which meithd does not "
                          "speak (it speaks {})",
                          shown, known_revisions());
    return n;
}

tool_hints hints_of(simdjson::dom::element tool) {
    tool_hints h;
    simdjson::dom::object a;
    if (tool["annotations"].get_object().get(a) != simdjson::SUCCESS) return h;
    bool b = false;
    if (a["readOnlyHint"].get_bool().get(b) == simdjson::SUCCESS) h.read_only = b;
    if (a["destructiveHint"].get_bool().get(b) == simdjson::SUCCESS) h.destructive = b;
    if (a["openWorldHint"].get_bool().get(b) == simdjson::SUCCESS) h.open_world = b;
    return h;
}

std::vector<std::string> capabilities_from_hints(const tool_hints& hints) {
    std::vector<std::string> caps;
    if (hints.read_only.value_or(false)) {
        caps.emplace_back("read-only");
    } else {
        caps.emplace_back("writes-files");
        if (hints.destructive.value_or(true)) caps.emplace_back("destructive");
    }
    if (hints.open_world.value_or(true)) caps.emplace_back("accesses-network");
    return caps;
}

std::vector<std::string> tool_capabilities(const config::source_config& cfg, std::string_view name,
                                           simdjson::dom::element tool) {
    if (const auto* declared = declared_capabilities(cfg, name)) return *declared;
    if (cfg.trust_annotations) return capabilities_from_hints(hints_of(tool));
    return {"unknown"};
}

std::optional<tools::tool_definition>
definition_of(simdjson::dom::element item, const config::source_config& cfg, std::string& why) {
    std::string_view text;
    if (item["name"].get_string().get(text) != simdjson::SUCCESS || text.empty()) {
        why = "a tool without a non-empty string name";
        return std::nullopt;
    }
    tools::tool_definition d;
    d.name = std::string(text);
    if (item["description"].get_string().get(text) == simdjson::SUCCESS)
        d.description = std::string(text);
    simdjson::dom::element v;
    if (item["inputSchema"].get(v) == simdjson::SUCCESS && v.is_object())
        d.input_schema_json = simdjson::minify(v);
    else
        d.input_schema_json = R"({"type":"object"})";
    d.capabilities = tool_capabilities(cfg, d.name, item);
    if (auto it = cfg.timeout_ms.find(d.name); it != cfg.timeout_ms.end())
        d.timeout_ms = it->second;
    // The Tool's other members, verbatim (server/tools "Tool"); members meith's descriptor
    // owns (capabilities, permission, ...) are never taken from the server.
    static constexpr std::array<std::pair<std::string_view, bool>, 6> verbatim{{
        {"title", true},
        {"annotations", false},
        {"outputSchema", false},
        {"execution", false},
        {"icons", false},
        {"_meta", false},
    }};
    std::string_view support;
    if (item["execution"]["taskSupport"].get_string().get(support) == simdjson::SUCCESS)
        d.task_required = support == "required";
    for (const auto& [key, is_string] : verbatim) {
        if (item[key].get(v) != simdjson::SUCCESS) continue;
        const bool ok = is_string ? v.is_string() : key == "icons" ? v.is_array() : v.is_object();
        if (ok) append_member(d.extra_descriptor_json, key, simdjson::minify(v));
    }
    return d;
}

std::string call_params(std::string_view name, std::string_view args_json, std::uint64_t token,
                        std::string_view traceparent, std::string_view envelope_members) {
    std::string out = R"({"name":)";
    append_json_string(out, name);
    out += R"(,"arguments":)";
    out += args_json;
    out += R"(,"_meta":{"progressToken":)";
    protocol::append_uint(out, token);
    if (!traceparent.empty()) {
        out += R"(,"traceparent":)";
        append_json_string(out, traceparent);
    }
    if (!envelope_members.empty()) {
        out += ',';
        out += envelope_members;
    }
    out += "}}";
    return out;
}

std::string cancelled_params(std::uint64_t request_id, std::string_view reason) {
    std::string out = R"({"requestId":)";
    protocol::append_uint(out, request_id);
    out += R"(,"reason":)";
    append_json_string(out, reason);
    out += '}';
    return out;
}

tool_result call_result(simdjson::dom::element result) {
    simdjson::dom::object obj;
    if (result.get_object().get(obj) != simdjson::SUCCESS)
        return tool_result::failure(error_code::tool_failed,
                                    "the MCP server's tools/call result is not an object",
                                    simdjson::minify(result));
    bool is_error = false;
    if (obj["isError"].get_bool().get(is_error) != simdjson::SUCCESS) is_error = false;
    if (is_error) {
        std::string message;
        simdjson::dom::array blocks;
        if (obj["content"].get_array().get(blocks) == simdjson::SUCCESS) {
            for (auto block : blocks) {
                std::string_view type, text;
                if (block["type"].get_string().get(type) != simdjson::SUCCESS || type != "text" ||
                    block["text"].get_string().get(text) != simdjson::SUCCESS)
                    continue;
                if (!message.empty()) message += '\n';
                message += text;
                if (message.size() > max_error_text) break;
            }
        }
        if (message.empty()) message = "the MCP tool reported an error (isError) without text";
        return tool_result::failure(error_code::tool_failed,
                                    std::string(cut_utf8(message, max_error_text)),
                                    simdjson::minify(result));
    }
    std::string content = "{";
    bool first = true;
    for (auto [key, value] : obj) {
        // resultType belongs to the 2026-07-28 hop (always "complete" here), not the result.
        if (key == "isError" || key == "resultType") continue;
        if (!first) content.push_back(',');
        first = false;
        append_json_string(content, key);
        content.push_back(':');
        content += simdjson::minify(value);
    }
    content.push_back('}');
    return tool_result::success(std::move(content));
}

tool_result error_answer(simdjson::dom::element error) {
    return process::rpc_wire::error_result(error, "the MCP server answered a JSON-RPC error");
}

std::string progress_event(simdjson::dom::object params) {
    simdjson::dom::element progress, total;
    double p = 0, t = 0;
    if (params["progress"].get(progress) != simdjson::SUCCESS || !progress.is_number() ||
        progress.get_double().get(p) != simdjson::SUCCESS)
        return {};
    const std::string progress_json = simdjson::minify(progress);
    std::string total_json;
    std::optional<double> fraction;
    const bool has_total = params["total"].get(total) == simdjson::SUCCESS && total.is_number() &&
                           total.get_double().get(t) == simdjson::SUCCESS;
    if (has_total) {
        total_json = simdjson::minify(total);
        if (t > 0 && std::isfinite(p / t)) fraction = p / t;
    }
    std::optional<std::string_view> message;
    if (std::string_view m; params["message"].get_string().get(m) == simdjson::SUCCESS) message = m;
    std::string out;
    protocol::append_progress_event(
        out, progress_json, has_total ? std::optional<std::string_view>(total_json) : std::nullopt,
        fraction, message);
    return out;
}

std::optional<std::uint64_t> progress_token(simdjson::dom::object params) {
    std::uint64_t token = 0;
    if (params["progressToken"].get_uint64().get(token) == simdjson::SUCCESS) return token;
    return std::nullopt;
}

std::string file_uri(const std::filesystem::path& dir) {
    std::string out = "file://";
    for (unsigned char ch : dir.string()) {
        const bool plain = (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') ||
                           (ch >= '0' && ch <= '9') || ch == '-' || ch == '.' || ch == '_' ||
                           ch == '~' || ch == '/';
        if (plain)
            out.push_back(static_cast<char>(ch));
        else
            out += fmt::format("%{:02X}", ch);
    }
    return out;
}

std::string roots_result(const std::filesystem::path& dir) {
    std::string out = R"({"roots":[{"uri":)";
    append_json_string(out, file_uri(dir));
    auto name = dir.filename().string();
    if (name.empty()) name = dir.parent_path().filename().string();
    if (!name.empty()) {
        out += R"(,"name":)";
        append_json_string(out, name);
    }
    out += "}]}";
    return out;
}

} // namespace meith::sources::mcp
