// client_frames: encoding the request frames a client sends (docs/protocol.md §3) and making
// their request ids. Standard library only; strings are escaped by `append_json_string`, so
// any bytes (quotes, control characters, invalid UTF-8 → U+FFFD) give valid JSON.
//
// Each encoder returns one frame's JSON text without its line ending, ready for
// `client_channel::send_frame`. Every frame carries `"protocol":1` and its `requestId`
// (always written: §3 makes it optional for some frames, but a client wants the reply matched).
// `caller`, when given, becomes `"clientInfo":{"caller":…}` — the frame's caller claim (§5);
// without it the daemon uses the connection's hello claim, else `plugin`.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace meith::protocol {

using caller_claim = std::optional<std::string_view>;

/// `{"type":"hello","protocol":1,"requestId","clientInfo":{"caller"}?}` → hello_result.
std::string encode_hello(std::string_view request_id, caller_claim caller = std::nullopt);
/// A hello naming client profile `client` (docs/protocol.md §23) when it is not empty.
std::string encode_hello(std::string_view request_id, caller_claim caller, std::string_view client);

/// `{"type":"list_tools","protocol":1,"requestId","clientInfo"?}` → tools_list (each tool's
/// `permission` is what this frame's caller would get).
std::string encode_list_tools(std::string_view request_id, caller_claim caller = std::nullopt);
/// list_tools asking for a provider `format` ("openai", "anthropic", ...; docs/protocol.md §13);
/// an empty `format` is the default (meith).
std::string encode_list_tools(std::string_view request_id, caller_claim caller,
                              std::string_view format);

/// The members of a tool_call (§3).
/// Every member has a default, so designated initializers may leave any out.
struct tool_call_request {
    std::string_view request_id = {};
    std::string_view tool_name = {};
    /// JSON object text, copied as is (not validated: pass what a JSON library produced).
    /// Raw `\r` / `\n` — whitespace in valid JSON text — become spaces, so the frame stays one
    /// line.
    std::string_view arguments_json = "{}";
    /// This call's timeout in ms (positive); none: the tool's own.
    std::optional<std::uint64_t> timeout_ms = std::nullopt;
    caller_claim caller = std::nullopt;
    /// `"resultFormat":"model"`: the result also carries modelContent (docs/protocol.md §13).
    bool result_model = false;
    /// `"display":true`: the result's meta also carries `display` (docs/protocol.md §13).
    bool display = false;
};

/// `{"type":"tool_call","protocol":1,"requestId","toolName","arguments":<raw>,"timeoutMs"?,
/// "clientInfo"?}` → tool_event*, then one tool_result.
std::string encode_tool_call(const tool_call_request& call);

/// `{"type":"cancel_tool_call","protocol":1,"requestId"}` — no reply of its own; the call's
/// tool_result (CANCELLED) follows.
std::string encode_cancel_tool_call(std::string_view request_id);

/// `{"type":"list_sources","protocol":1,"requestId","clientInfo"?}` → sources_list.
std::string encode_list_sources(std::string_view request_id, caller_claim caller = std::nullopt);

/// `{"type":"restart_source","protocol":1,"requestId","name","clientInfo"?}` →
/// source_restarted, or an error frame (only the `cli` caller may).
std::string encode_restart_source(std::string_view request_id, std::string_view name,
                                  caller_claim caller = std::nullopt);

/// `{"type":"learn_source","protocol":1,"requestId","name","action","clientInfo"?}`
/// → source_learning (start) or source_learned (stop), or an error frame (docs/protocol.md
/// §15 "Learned profiles"; only the `cli` caller may).
std::string encode_learn_source(std::string_view request_id, std::string_view name, bool stop,
                                caller_claim caller = std::nullopt);

/// `{"type":"check_policy","protocol":1,"requestId","toolName","clientInfo"?}` →
/// policy_decision.
std::string encode_check_policy(std::string_view request_id, std::string_view tool_name,
                                caller_claim caller = std::nullopt);

/// `{"type":"reload_config","protocol":1,"requestId","clientInfo"?}` → config_reloaded, or an
/// error frame (only the `cli` caller may).
std::string encode_reload_config(std::string_view request_id, caller_claim caller = std::nullopt);

/// Request ids `<prefix>1`, `<prefix>2`, … — usable ids (§3: 1-128 characters) as long as the
/// prefix is short. Not thread-safe.
class request_id_generator {
  public:
    explicit request_id_generator(std::string prefix) : prefix_(std::move(prefix)) {}

    /// A prefix unique to this process: `<name>_<pid>_` (the CLI's ids: `cli_4242_1`).
    static std::string process_prefix(std::string_view name);

    std::string next();

  private:
    std::string prefix_;
    std::uint64_t counter_ = 0;
};

} // namespace meith::protocol
