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
#include <variant>

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
    accept_tool,  ///< docs/protocol.md §22: a person accepts a quarantined tool's definition
    learn_source, ///< docs/protocol.md §15 "Learned profiles": start or stop a learning run
    // MCP families beyond tools (docs/protocol.md §17)
    mcp_request,
    client_response,
    mcp_handoff, ///< docs/protocol.md §10 "Handoff": `meith mcp` hands meithd its stdio
    other
};

/// list_tools `query` (docs/protocol.md §20): at most this many bytes; `limit` at most
/// max_query_limit, default_query_limit when absent.
inline constexpr std::size_t max_query_bytes = 1024;
inline constexpr std::size_t max_query_limit = 1000;
inline constexpr std::size_t default_query_limit = 10;
/// The largest `offset` a page of list_tools takes (docs/protocol.md §5).
inline constexpr std::size_t max_page_offset = 1000000;

/// What every client frame may carry, read before its type's checks so that a refused
/// frame's error and audit line can still name them (docs/protocol.md §3). `error` set means
/// the frame is answered with a PROTOCOL_ERROR error frame (carrying `request_id` when it is
/// usable) and not processed further.
struct frame_head {
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
    /// `toolName` when a string (tool_call, preview_tool_call, check_policy, accept_tool; also
    /// on refused frames, for the audit).
    std::string_view tool_name;
    bool has_arguments = false; ///< `arguments` was present, of any type
    /// tool_call without `call_error`, preview_tool_call: an object, or a string (text-payload
    /// tools, §13).
    simdjson::dom::element arguments;
    std::optional<std::string> error; ///< PROTOCOL_ERROR message
};

/// hello: what the client subscribes to and answers (docs/protocol.md §3, §17).
struct hello_frame {
    /// `"subscribe"` names `"tools_changed"` (docs/protocol.md §3).
    bool subscribe_tools_changed = false;
    /// `"subscribe"` names `"mcp_notifications"`: resources and prompts list_changed,
    /// resources/updated of subscribed URIs and servers' log messages (docs/protocol.md §17).
    bool subscribe_mcp = false;
    /// `"capabilities"`, an MCP ClientCapabilities object (sampling, elicitation, roots) the
    /// client answers client_request frames for (docs/protocol.md §17).
    std::optional<simdjson::dom::object> client_capabilities;
};

/// list_tools: format, filters, search and pages (docs/protocol.md §5, §13, §20).
struct list_tools_frame {
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
};

/// tool_call's own members (docs/protocol.md §3); its name and arguments are in the head.
/// `call_error` set means "resolve with VALIDATION_ERROR" (a usable requestId, but a bad
/// toolName, arguments, timeoutMs, resultFormat, display or traceparent).
struct tool_call_frame {
    /// `traceparent`, a W3C trace context (version-traceid-parentid-flags, lowercase hex, 55
    /// characters; W3C Trace Context §3.2); "" when absent.
    std::string_view traceparent;
    std::optional<std::uint64_t> timeout_ms;
    bool result_model = false;             ///< `"resultFormat":"model"` (docs/protocol.md §13)
    bool display = false;                  ///< `"display":true`: result.meta.display
    std::optional<std::string> call_error; ///< VALIDATION_ERROR message
};

/// restart_source (docs/protocol.md "meith sources").
struct restart_source_frame {
    std::string_view source_name; ///< its `name`
};

/// learn_source (docs/protocol.md §15 "Learned profiles"): `name`, `action` ("start" |
/// "stop").
struct learn_source_frame {
    std::string_view source_name;
    bool learn_stop = false;
};

/// mcp_request (docs/protocol.md §17): `method`, and `params` (an object; {} when absent).
struct mcp_request_frame {
    std::string_view mcp_method;
    std::optional<simdjson::dom::object> mcp_params;
};

/// client_response (docs/protocol.md §17): `clientRequestId` and exactly one of `result`
/// (object) / `error` (object).
struct client_response_frame {
    std::string_view client_request_id;
    std::optional<simdjson::dom::object> response_result;
    std::optional<simdjson::dom::object> response_error;
};

/// mcp_handoff (docs/protocol.md §10 "Handoff"): the descriptors came with it (SCM_RIGHTS);
/// `all` and `search` are `meith mcp`'s options, false when absent.
struct mcp_handoff_frame {
    bool all = false;
    bool search = false;
};

// Grants and approvals (docs/protocol.md §14, §22): strings checked when present.
struct approver_hello_frame {
    std::string_view secret;
};
struct approve_frame {
    std::string_view approval_id;
    std::string_view decision; ///< allow_once | allow_session | allow_always | deny
    std::string_view reason;   ///< optional
};
struct grant_frame {
    simdjson::dom::object grant; ///< the `grant` object
};
struct revoke_frame {
    std::string_view grant_id;
};
struct accept_tool_frame {
    bool accept_preview = false; ///< `"preview":true`: show the diff, accept nothing
};

/// A decoded client frame: the head every frame has, and the members of its type (none for
/// list_sources, cancel_tool_call, reload_config, list_grants and an unknown type; check_policy
/// and preview_tool_call need only the head). A route takes its own type (`as<T>()`).
struct client_frame : frame_head {
    std::variant<std::monostate, hello_frame, list_tools_frame, tool_call_frame,
                 restart_source_frame, learn_source_frame, mcp_request_frame, client_response_frame,
                 mcp_handoff_frame, approver_hello_frame, approve_frame, grant_frame, revoke_frame,
                 accept_tool_frame>
        body;

    /// The members of type T; the frame must be of that type (std::bad_variant_access
    /// otherwise: a routing mistake).
    template <class T>
    const T& as() const {
        return std::get<T>(body);
    }
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
