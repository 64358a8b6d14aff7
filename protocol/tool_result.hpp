// tool_result: the ToolResult envelope every call resolves to (docs/protocol.md §4).
//
// JSON-valued fields are kept as JSON text (already valid, already minified), so a result
// travels from a tool host to the socket without being re-parsed or re-built.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <simdjson.h>

namespace meith::protocol {

/// The codes of docs/protocol.md §4: PROTOCOL.md's eight, and RATE_LIMITED (§21).
enum class error_code {
    unknown_tool,
    validation_error,
    permission_denied,
    timeout,
    tool_failed,
    runtime_shutting_down,
    cancelled,
    protocol_error,
    rate_limited,
};

/// Wire name, e.g. "UNKNOWN_TOOL".
std::string_view to_string(error_code code);
std::optional<error_code> error_code_from_string(std::string_view name);

struct tool_error {
    error_code code = error_code::tool_failed;
    std::string message;
    std::string details_json; ///< JSON text; empty = absent
};

/// `{ok, content?, meta?, diagnostics?, error?}`; empty JSON-text fields are absent.
struct tool_result {
    bool ok = true;
    std::string content_json;
    std::string meta_json;
    std::string diagnostics_json;
    std::optional<tool_error> error;
    /// What a model should see (`resultFormat:"model"`, docs/protocol.md §13): a JSON string,
    /// or a provider-native envelope object; empty = not asked for.
    std::string model_content_json;

    static tool_result success(std::string content_json);
    static tool_result failure(error_code code, std::string message, std::string details_json = {});
    /// The error code, if any (ok:false results always have one).
    std::optional<error_code> code() const {
        return error ? std::optional<error_code>(error->code) : std::nullopt;
    }
};

/// Appends the ToolResult as a JSON object.
void append_tool_result(std::string& out, const tool_result& r);

/// Normalizes a tool's raw value (docs/protocol.md §4): a value that already is a ToolResult (an
/// object with a boolean `ok` and no keys other than ok/content/meta/diagnostics/error)
/// passes through; anything else becomes `{ok:true, content:value}`. An ok:false envelope
/// without a usable `error` gets TOOL_FAILED; an unknown error code becomes TOOL_FAILED with
/// the original code in details.
tool_result normalize_value(simdjson::dom::element value);

/// As above from JSON text (`raw` must be valid JSON); `parser` is reused by the caller.
tool_result normalize_json(simdjson::dom::parser& parser, std::string_view raw);

} // namespace meith::protocol
