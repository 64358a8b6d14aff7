#include "protocol/tool_result.hpp"

#include "protocol/json_minify.hpp"

#include "protocol/json_writer.hpp"

#include <array>

namespace meith::protocol {

namespace {
constexpr std::array<std::string_view, 9> code_names = {
    "UNKNOWN_TOOL",          "VALIDATION_ERROR", "PERMISSION_DENIED", "TIMEOUT",      "TOOL_FAILED",
    "RUNTIME_SHUTTING_DOWN", "CANCELLED",        "PROTOCOL_ERROR",    "RATE_LIMITED",
};
} // namespace

std::string_view to_string(error_code code) {
    return code_names[static_cast<std::size_t>(code)];
}

std::optional<error_code> error_code_from_string(std::string_view name) {
    for (std::size_t i = 0; i < code_names.size(); ++i)
        if (code_names[i] == name) return static_cast<error_code>(i);
    return std::nullopt;
}

tool_result tool_result::success(std::string content_json) {
    tool_result r;
    r.ok = true;
    r.content_json = std::move(content_json);
    return r;
}

tool_result tool_result::failure(error_code code, std::string message, std::string details_json) {
    tool_result r;
    r.ok = false;
    r.error = tool_error{code, std::move(message), std::move(details_json)};
    return r;
}

void append_tool_result(std::string& out, const tool_result& r) {
    out.append(r.ok ? R"({"ok":true)" : R"({"ok":false)");
    if (!r.content_json.empty()) {
        out.append(R"(,"content":)");
        out.append(r.content_json);
    }
    if (!r.meta_json.empty()) {
        out.append(R"(,"meta":)");
        out.append(r.meta_json);
    }
    if (!r.diagnostics_json.empty()) {
        out.append(R"(,"diagnostics":)");
        out.append(r.diagnostics_json);
    }
    if (r.error) {
        out.append(R"(,"error":{"code":")");
        out.append(to_string(r.error->code));
        out.append(R"(","message":)");
        append_json_string(out, r.error->message);
        if (!r.error->details_json.empty()) {
            out.append(R"(,"details":)");
            out.append(r.error->details_json);
        }
        out.push_back('}');
    }
    if (!r.model_content_json.empty()) {
        out.append(R"(,"modelContent":)");
        out.append(r.model_content_json);
    }
    out.push_back('}');
}

namespace {

bool looks_like_tool_result(simdjson::dom::object obj) {
    bool has_ok = false;
    for (auto field : obj) {
        const auto key = field.key;
        if (key == "ok") {
            if (!field.value.is_bool()) return false;
            has_ok = true;
        } else if (key != "content" && key != "meta" && key != "diagnostics" && key != "error") {
            return false;
        }
    }
    return has_ok;
}

} // namespace

tool_result normalize_value(simdjson::dom::element value) {
    simdjson::dom::object obj;
    if (value.get_object().get(obj) != simdjson::SUCCESS || !looks_like_tool_result(obj))
        return tool_result::success(minified(value));

    tool_result r;
    r.ok = bool(obj["ok"].get_bool());
    simdjson::dom::element field;
    if (obj["content"].get(field) == simdjson::SUCCESS) r.content_json = minified(field);
    if (obj["meta"].get(field) == simdjson::SUCCESS) {
        if (field.is_object()) r.meta_json = minified(field);
    }
    if (obj["diagnostics"].get(field) == simdjson::SUCCESS) {
        if (field.is_array()) r.diagnostics_json = minified(field);
    }
    if (r.ok) return r;

    tool_error err{error_code::tool_failed, "tool returned ok:false without an error", {}};
    simdjson::dom::object err_obj;
    if (obj["error"].get_object().get(err_obj) == simdjson::SUCCESS) {
        std::string_view text;
        if (err_obj["message"].get_string().get(text) == simdjson::SUCCESS)
            err.message = std::string(text);
        if (err_obj["details"].get(field) == simdjson::SUCCESS) err.details_json = minified(field);
        if (err_obj["code"].get_string().get(text) == simdjson::SUCCESS) {
            if (auto code = error_code_from_string(text)) {
                err.code = *code;
            } else if (err.details_json.empty()) {
                err.details_json = R"({"toolCode":)";
                append_json_string(err.details_json, text);
                err.details_json.push_back('}');
            }
        }
    }
    r.error = std::move(err);
    return r;
}

tool_result normalize_json(simdjson::dom::parser& parser, std::string_view raw) {
    simdjson::dom::element value;
    if (parser.parse(raw.data(), raw.size()).get(value) != simdjson::SUCCESS)
        return tool_result::failure(error_code::tool_failed, "tool returned invalid JSON");
    return normalize_value(value);
}

} // namespace meith::protocol
