// rpc_peer: the request side of a line-delimited request/response protocol spoken with one
// supervised child — the one implementation behind tool hosts, exec servers, server-mode hooks
// and MCP servers.
//
// It owns the child (a supervised_process) and, for every request in flight, its callbacks:
// request ids (1, 2, … per peer), the pending map, matching each reply strictly by id (a late
// reply to an abandoned request is dropped, never given to another), recovering the id of a
// reply too long to parse from its first bytes, abandoning on cancel or timeout, and failing
// everything in flight when the child exits. Two wire dialects (docs/protocol.md §7):
//
//  * `jsonrpc` — JSON-RPC 2.0 (exec servers, server-mode hooks, MCP servers): requests
//    {"jsonrpc":"2.0","id":N,"method":M,"params":P}; a reply has "result" or "error" and ends
//    the request. Messages with a "method" from the child (its own requests and
//    notifications) go to `handlers::on_incoming`.
//  * `tool_host` — the tool-host protocol: requests {"v":1,"id":"N","method":M,"params":P};
//    {"id":"N","event":{…}} is a non-final message (a streamed event), {"id":"N","ok":bool,…}
//    the final reply.
//
// I/O-thread only.
#pragma once

#include "process/supervisor.hpp"
#include "protocol/tool_result.hpp"

#include <simdjson.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

namespace meith::process {

enum class rpc_dialect { jsonrpc, tool_host };

/// Why a request in flight ended without a reply.
enum class rpc_failure {
    exited,    ///< the child exited (or was stopped) while the request was in flight
    oversized, ///< its reply was longer than the line limit and was dropped
    not_sent,  ///< no child runs, or its stdin is not being read (over 16 MiB pending)
};

/// The wire side of `rpc_peer`, free of the child and the pending map: what one line from the
/// child is, and the id of a line too long to parse. Pure functions (tests/fuzz/fuzz_rpc_reply).
namespace rpc_wire {

/// What one line from the child is, in the order `rpc_peer` looks at it.
enum class line_kind {
    garbage,   ///< not JSON, or not a JSON object
    incoming,  ///< JSON-RPC only: carries a "method" (the child's request or notification)
    no_id,     ///< a message without a usable id
    event,     ///< tool host only: {"id":"N","event":…}, a non-final message for id N
    reply,     ///< the final reply for id N (JSON-RPC: any message with that id)
    malformed, ///< tool host only: has id N but neither "event" nor a boolean "ok"
};

struct parsed_line {
    line_kind kind = line_kind::garbage;
    std::uint64_t id = 0;      ///< for event, reply and malformed
    simdjson::dom::object msg; ///< all but garbage; valid until the parser's next parse
};

/// Parses and classifies one line in place: `line` must be followed by
/// simdjson::SIMDJSON_PADDING readable bytes (lines from the framer are).
parsed_line classify_line(simdjson::dom::parser& parser, rpc_dialect dialect,
                          std::string_view line);

/// The id of a parsed message: a non-negative integer (JSON-RPC), or a string of decimal
/// digits (tool host); nullopt when absent or of another form.
std::optional<std::uint64_t> id_of(rpc_dialect dialect, simdjson::dom::object msg);

/// The id of a line too long to parse, from its scanned top-level "id" member (a number for
/// JSON-RPC, a string of digits for a tool host, as id_of reads them); nullopt otherwise. An
/// "id" nested in the result is never taken for it.
std::optional<std::uint64_t> id_of_scanned(rpc_dialect dialect,
                                           const protocol::top_level_scanner::value& id);

/// A JSON-RPC error object (`{"code","message","data"?}`) as the call's failure: TOOL_FAILED
/// with its message (cut to 1 KiB on a character boundary; `fallback` when absent or empty)
/// and details `{"code","message","data"?}` as the child sent them. The one mapping for exec
/// servers and MCP servers.
protocol::tool_result error_result(simdjson::dom::element error, std::string_view fallback);

} // namespace rpc_wire

class rpc_peer {
  public:
    /// What happens to one request: each message for it (host events, then the reply) and, if
    /// no reply comes, one failure. Exactly one of "a final message" or "a failure" happens,
    /// unless the request is abandoned first.
    struct callbacks {
        /// `msg` is valid during the call only; `final` is false for a host's streamed event.
        std::function<void(simdjson::dom::object msg, bool final)> on_message;
        /// `why`: for `exited`, the child's end ("exited with status 3"); else empty.
        std::function<void(rpc_failure failure, const std::string& why)> on_failure;
    };

    struct handlers {
        /// The child was spawned (also after each restart): send the handshake.
        std::function<void()> on_spawn;
        /// The child ended; every request in flight was already failed.
        std::function<void(const std::string& how)> on_exit;
        /// Lifecycle transitions from the supervisor ("source_start", "source_failed", …).
        std::function<void(std::string_view event, const std::string& details)> on_lifecycle;
        /// JSON-RPC messages from the child that carry a "method" (its requests and
        /// notifications). Without a handler they are logged and dropped.
        std::function<void(simdjson::dom::object msg)> on_incoming;
    };

    /// `label` names the peer in log lines ("tool host 'fs'", "exec tool 'kv'", "hook 'audit'").
    rpc_peer(asio::any_io_executor ex, child_reaper& reaper, process_spec spec,
             supervised_process::policy pol, rpc_dialect dialect, std::string label, handlers h);

    /// Sends a request. Returns its id, or nullopt when it could not be sent (no child, or the
    /// child does not read): then nothing is kept and no callback runs.
    std::optional<std::uint64_t> request(std::string_view method, std::string_view params_json,
                                         callbacks cb);
    /// Forgets request `id`: a late reply is dropped; no callback runs any more.
    void abandon(std::uint64_t id);
    /// Sends a JSON-RPC notification (no id, no reply). False when it could not be sent.
    bool notify(std::string_view method, std::string_view params_json);
    /// Writes raw bytes (a reply to the child's own request, e.g. ping). False if not sent.
    bool send_raw(std::string_view line) { return proc_.send(line); }
    /// JSON-RPC: answers the child's own request whose id is `id_json` (its JSON text, a number
    /// or a string, copied as the child wrote it) with `result_json`. False if not sent.
    bool reply(std::string_view id_json, std::string_view result_json);
    /// JSON-RPC: answers the child's request `id_json` with an error object {code, message}.
    bool reply_error(std::string_view id_json, int code, std::string_view message);
    /// JSON-RPC: answers the child's request `id_json` with `error_json`, an error object
    /// passed through as another peer gave it. False if not sent.
    bool reply_error_object(std::string_view id_json, std::string_view error_json);

    std::size_t in_flight() const { return pending_.size(); }
    supervised_process& process() { return proc_; }
    const supervised_process& process() const { return proc_; }

  private:
    void on_line(std::string_view line);
    void on_oversized(const protocol::top_level_scanner::value& id);
    void on_exit(const std::string& how);

    rpc_dialect dialect_;
    std::string label_;
    handlers h_;
    supervised_process proc_;
    std::unordered_map<std::uint64_t, std::shared_ptr<callbacks>> pending_;
    std::uint64_t next_id_ = 0;
    std::string frame_;
    simdjson::dom::parser parser_;
    log_throttle garbage_log_;
};

} // namespace meith::process
