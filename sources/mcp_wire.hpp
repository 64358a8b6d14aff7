// mcp_wire: the pure side of the MCP source (docs/protocol.md §7, "MCP servers") — what meithd
// sends an MCP server and how it reads the answers, free of the child and the registry so it
// can be unit-tested (tests/unit/mcp_test.cpp).
//
// References are to the MCP specification, revision 2025-11-25: basic/lifecycle (initialize,
// version negotiation), server/tools (Tool, CallToolResult, ToolAnnotations and their
// defaults), basic/utilities/progress, basic/utilities/cancellation, client/roots.
#pragma once

#include "config/config.hpp"
#include "protocol/json_writer.hpp"
#include "protocol/tool_result.hpp"
#include "tools/tool_source.hpp"

#include <simdjson.h>

#include <array>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace meith::sources::mcp {

/// The protocol revisions meithd speaks, newest first; `initialize` offers the first.
inline constexpr std::array<std::string_view, 4> protocol_revisions{"2025-11-25", "2025-06-18",
                                                                    "2025-03-26", "2024-11-05"};

/// Params of the `initialize` request: the newest revision, the client capabilities sampling
/// (with tools), elicitation (form and url) and, when `roots`, roots — which meithd forwards
/// to the client of the call in flight (docs/protocol.md §17) — and
/// `clientInfo {"name":"meithd","version":version}`.
std::string initialize_params(std::string_view version, bool roots = false);

/// The stateless revision meithd also speaks to a source that offers it in `server/discover`
/// (docs/protocol.md §17): no initialize, every request carrying the envelope below.
inline constexpr std::string_view modern_revision = "2026-07-28";

/// The 2026-07-28 envelope as `_meta` members without braces: protocolVersion, the client
/// capabilities of `initialize_params` (roots when `roots`) and clientInfo meithd.
std::string envelope_members(std::string_view version, bool roots);

/// `params_json` (an object) with `envelope` (members without braces) added to its `_meta`
/// (made when absent). Params that are not an object are returned unchanged.
std::string with_envelope(std::string_view params_json, std::string_view envelope);

/// Params of `server/discover`: `{"_meta":{envelope}}`.
std::string discover_params(std::string_view envelope);

/// The `_meta` key a 2026-07-28 listen stamps on its notifications.
inline constexpr std::string_view subscription_id_key = "io.modelcontextprotocol/subscriptionId";

/// `params_json` (an object) without `_meta[key]`; `_meta` left out when that empties it.
std::string without_meta_key(std::string_view params_json, std::string_view key);

/// Whether a `server/discover` result offers the 2026-07-28 revision (`supportedVersions`).
bool offers_modern(simdjson::dom::element discover_result);

/// The outcome of version negotiation (lifecycle "Version Negotiation"): the revision the
/// server answered in its `initialize` result, or why the start fails.
struct negotiation {
    std::string revision; ///< set when accepted
    std::string error;    ///< set when refused: names the revision (or what was wrong)
};
/// Checks an `initialize` result: `protocolVersion` must be one of `protocol_revisions`.
negotiation negotiate(simdjson::dom::element initialize_result);

/// ToolAnnotations hints as the server gave them; absent (or not a boolean) = not given.
struct tool_hints {
    std::optional<bool> read_only;   ///< readOnlyHint, spec default false
    std::optional<bool> destructive; ///< destructiveHint, spec default true
    std::optional<bool> open_world;  ///< openWorldHint, spec default true
};
/// Reads `tool.annotations`; a missing or non-object `annotations` gives no hints.
tool_hints hints_of(simdjson::dom::element tool);

/// Capabilities from hints with the spec's defaults: read-only → `read-only`, otherwise
/// `writes-files` plus `destructive` unless destructiveHint is false; `accesses-network`
/// is added unless openWorldHint is false.
std::vector<std::string> capabilities_from_hints(const tool_hints& hints);

/// A tool's capabilities, the first that applies: the source's `capabilities` table entry
/// (unprefixed name), the trusted annotations (`trust_annotations = true`), else `unknown`.
std::vector<std::string> tool_capabilities(const config::source_config& cfg, std::string_view name,
                                           simdjson::dom::element tool);

/// One `tools/list` item as a tool_definition: name (unprefixed), description, inputSchema
/// (`{"type":"object"}` when absent), capabilities as above, the table's timeout, and as extra
/// descriptor members, verbatim when given: `title` (string), `annotations`, `outputSchema`,
/// `execution`, `_meta` (objects) and `icons` (array).
/// nullopt, with `why` set, for an item without a non-empty string name.
std::optional<tools::tool_definition>
definition_of(simdjson::dom::element item, const config::source_config& cfg, std::string& why);

/// Params of a `tools/call` request: {"name","arguments","_meta":{"progressToken":token}},
/// plus `traceparent` in _meta when given (W3C Trace Context, MCP SEP-414) and the 2026-07-28
/// envelope's members (JSON members without braces) when given.
std::string call_params(std::string_view name, std::string_view args_json, std::uint64_t token,
                        std::string_view traceparent = {}, std::string_view envelope_members = {});

/// Params of `notifications/cancelled`: {"requestId":id,"reason":reason}.
std::string cancelled_params(std::uint64_t request_id, std::string_view reason);

/// A `tools/call` result as a ToolResult: `isError: true` → TOOL_FAILED with the text blocks
/// joined by "\n" and cut to 1 KiB as message, the whole MCP result as `details`; otherwise
/// `ok:true` with the result object minus `isError` as content. A result that is not an object
/// is TOOL_FAILED.
protocol::tool_result call_result(simdjson::dom::element result);

/// The longest error message taken from an `isError` result's text blocks, in bytes.
inline constexpr std::size_t max_error_text = 1024;

/// A JSON-RPC `error` answer as a ToolResult: TOOL_FAILED with `error.message` and
/// `details: {"code","message","data"?}`.
protocol::tool_result error_answer(simdjson::dom::element error);

/// The `tool_event` of a `notifications/progress` params object:
/// {"type":"progress","progress":N,"total"?:M,"fraction"?:N/M,"message"?}; `fraction` only
/// when `total` is a number > 0. Empty when `progress` is not a number.
std::string progress_event(simdjson::dom::object params);

/// The progress token of a `notifications/progress` params object, when it is one meithd sends
/// (a non-negative integer).
std::optional<std::uint64_t> progress_token(simdjson::dom::object params);

/// `file://` URI of an absolute path, bytes outside RFC 3986's unreserved set and `/`
/// percent-encoded.
std::string file_uri(const std::filesystem::path& dir);

/// The `roots/list` result: {"roots":[{"uri":file_uri(dir),"name":last path element}]}.
std::string roots_result(const std::filesystem::path& dir);

/// The longest prefix of at most `max` bytes that does not split a UTF-8 character.
using protocol::cut_utf8;

} // namespace meith::sources::mcp
