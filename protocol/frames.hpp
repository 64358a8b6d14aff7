// frames: decoding client frames (docs/protocol.md §2, §3); the server's frames are encoded in
// server_frames.hpp.
//
// `frame_decoder` uses one reused simdjson DOM parser per thread (thread_local: the daemon's one
// I/O thread shares it between connections, which decode one frame at a time): `decode` parses
// a line in place (the line must be followed by `frame_padding` readable bytes, which
// `line_framer` guarantees) and validates the frame's envelope. Views in the returned
// `client_frame` point into the parser or the line and stay valid until the next `decode` on
// this thread. A frame the parser refuses still names its top-level requestId and type.
#pragma once

#include "protocol/tool_result.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <simdjson.h>

namespace meith::protocol {

inline constexpr int protocol_version = 1;
inline constexpr std::size_t max_request_id_chars = 128;

/// Frame types of §3, plus our additions `list_sources`, `restart_source`, `check_policy`
/// (docs/protocol.md "meith sources") and `reload_config` (docs/configuration.md "Reloading").
enum class frame_type {
    hello,
    list_tools,
    tool_call,
    cancel_tool_call,
    list_sources,
    restart_source,
    check_policy,
    reload_config,
    preview_tool_call, ///< docs/protocol.md §13
    // Grants and approvals (PROTOCOL.md §12, docs/protocol.md §14)
    approver_hello,
    approve,
    grant,
    revoke,
    list_grants,
    accept_tool, ///< docs/protocol.md §22: a person accepts a quarantined tool's definition
    // MCP families beyond tools (docs/protocol.md §17)
    mcp_request,
    client_response,
    other
};

/// list_tools `query` (docs/protocol.md §20): at most this many bytes; `limit` at most
/// max_query_limit, default_query_limit when absent.
inline constexpr std::size_t max_query_bytes = 1024;
inline constexpr std::size_t max_query_limit = 1000;
inline constexpr std::size_t default_query_limit = 10;
/// The largest `offset` a page of list_tools takes (docs/protocol.md §5).
inline constexpr std::size_t max_page_offset = 1000000;

/// A decoded client frame. `error` set means the frame is answered with a PROTOCOL_ERROR
/// error frame (carrying `request_id` when it is usable) and not processed further.
/// For tool_call, `call_error` set means "resolve with VALIDATION_ERROR" (§3: usable requestId,
/// bad toolName/arguments/timeoutMs).
struct client_frame {
    frame_type type = frame_type::other;
    std::string_view type_name;
    std::optional<std::string_view> request_id;   ///< a usable requestId (string, 1-128 chars)
    std::optional<std::string_view> caller_claim; ///< clientInfo.caller when a string
    /// clientInfo.agent when a string: the program acting through the client, e.g. the MCP
    /// client's name that `meith mcp` forwards (docs/protocol.md §10); audited as `agent`.
    std::optional<std::string_view> agent;
    /// clientInfo.client when a non-empty string: the client profile (`[clients.NAME]`,
    /// docs/protocol.md §23) the connection asks for; read from a hello.
    std::optional<std::string_view> client;
    /// hello: `"subscribe"` names `"tools_changed"` (docs/protocol.md §3).
    bool subscribe_tools_changed = false;
    /// hello: `"subscribe"` names `"mcp_notifications"`: resources and prompts list_changed,
    /// resources/updated of subscribed URIs and servers' log messages (docs/protocol.md §17).
    bool subscribe_mcp = false;
    /// hello: `"capabilities"`, an MCP ClientCapabilities object (sampling, elicitation, roots)
    /// the client answers client_request frames for (docs/protocol.md §17).
    std::optional<simdjson::dom::object> client_capabilities;
    // mcp_request: `method` and `params` (an object; {} when absent)
    std::string_view mcp_method;
    std::optional<simdjson::dom::object> mcp_params;
    // client_response: `clientRequestId` and exactly one of `result` (object) / `error` (object)
    std::string_view client_request_id;
    std::optional<simdjson::dom::object> response_result;
    std::optional<simdjson::dom::object> response_error;
    std::optional<std::string> error; ///< PROTOCOL_ERROR message
    // list_tools only
    std::string_view list_format; ///< `format` when given (a string; checked by the router)
    bool has_tags = false;        ///< `tags` given: an array of strings (docs/protocol.md §13)
    simdjson::dom::array tags;
    bool has_models = false; ///< `models` given: an array (strings or objects), for get_tags
    simdjson::dom::array models;
    /// `query` given: tool search (docs/protocol.md §20), a non-empty string of at most
    /// max_query_bytes; `limit` (1..max_query_limit) only with it, default_query_limit when
    /// absent.
    bool has_query = false;
    std::string_view list_query;
    std::size_t list_limit = default_query_limit;
    /// A page of the plain listing (docs/protocol.md §5 "Pages"): `offset` (≥ 0), `limit`
    /// (1..max_query_limit, all when absent) and `permitted` (true: only the tools the caller
    /// may call or ask for), any of them given. Not with query, tags or models.
    bool has_page = false;
    std::size_t list_offset = 0;
    bool list_permitted = false;
    // tool_call (and preview_tool_call)
    std::string_view tool_name; ///< when a string (also on refused frames, for the audit)
    /// tool_call: `traceparent`, a W3C trace context (version-traceid-parentid-flags, lowercase
    /// hex, 55 characters; W3C Trace Context §3.2); "" when absent.
    std::string_view traceparent;
    std::string_view source_name; ///< restart_source: the source's `name`
    bool has_arguments = false;   ///< `arguments` was present, of any type
    /// When `call_error` is empty: an object, or a string (text-payload tools, §13).
    simdjson::dom::element arguments;
    std::optional<std::uint64_t> timeout_ms;
    bool result_model = false;             ///< `"resultFormat":"model"` (docs/protocol.md §13)
    bool display = false;                  ///< `"display":true`: result.meta.display
    std::optional<std::string> call_error; ///< VALIDATION_ERROR message
    // grants and approvals (docs/protocol.md §14); checked to be strings when present
    std::string_view secret;      ///< approver_hello
    std::string_view approval_id; ///< approve
    std::string_view decision;    ///< approve: allow_once | allow_session | deny
    std::string_view reason;      ///< approve (optional)
    std::string_view grant_id;    ///< revoke
    bool accept_preview = false;  ///< accept_tool `"preview":true`: show the diff, accept nothing
    simdjson::dom::object grant;  ///< grant: the `grant` object
};

/// Decodes frames with one simdjson parser per thread, shared by every connection served on
/// it: a frame's views are used only while that frame is handled (synchronously), so the
/// parser is free again before any other frame is decoded, and an idle connection holds no
/// parser memory (~10 KiB each otherwise).
class frame_decoder {
  public:
    /// Decodes one line. Never throws; every malformed input yields `error`.
    client_frame decode(std::string_view line);

    /// Releases parser memory grown by a very large frame.
    static void shrink_if_large(std::size_t keep_bytes);

  private:
    static simdjson::dom::parser& parser();
};

/// `id` (a string's bytes without escapes, as top_level_scanner captures them) when it is a
/// usable requestId: 1-128 characters of valid UTF-8 (§3); nullopt otherwise.
std::optional<std::string_view> usable_request_id(std::string_view id);

/// Number of characters (Unicode code points) in UTF-8 text.
std::size_t utf8_length(std::string_view s);

} // namespace meith::protocol
