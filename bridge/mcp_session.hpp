// mcp_session: the registry as an MCP server (docs/protocol.md §10, §17) — one MCP client's
// session, translated to socket frames for meithd, free of I/O. Two hosts drive it: `meith mcp`
// (cli/commands/mcp.cpp: stdin/stdout and a socket connection, the fallback) and meithd itself
// once `meith mcp` has handed it the client's pipes (daemon/mcp_handoff.cpp, §10 "Handoff").
// Files: mcp_session.cpp (input, the daemon's frames, dispatch), tools.cpp (tools/list,
// tools/call, search mode), families.cpp (resources, prompts, completions, logging, the
// servers' requests, 2026-07-28's envelope, listens and input rounds, tasks).
#pragma once

#include "bridge/json.hpp"
#include "bridge/shapes.hpp"
#include "bridge/tasks.hpp"
#include "protocol/client_frames.hpp"
#include "protocol/framing.hpp"

#include <chrono>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

namespace meith::bridge {

constexpr std::size_t page_size = 500;     ///< items per list page (docs/protocol.md §10)
constexpr std::size_t max_line = 64 << 20; ///< longest stdin message accepted

// JSON-RPC 2.0 error codes.
constexpr int parse_error = -32700;
constexpr int invalid_request = -32600;
constexpr int method_not_found = -32601;
constexpr int invalid_params = -32602;
constexpr int internal_error = -32603;

/// What `meith mcp` was asked for (its options, docs/protocol.md §10); the same in meithd
/// after a handoff, where they come in the mcp_handoff frame.
struct settings {
    std::string caller = "plugin";     ///< --caller
    bool all = false;                  ///< --all: deny tools listed too
    bool search = false;               ///< --search: the meta-tools only (§20)
    std::optional<std::string> client; ///< --client: the client profile (§23)
    /// The fast path of tools/call (fast_path.cpp); false: every message takes the general
    /// path (for A/B runs and the differential fuzzer, tests/fuzz/fuzz_mcp_session.cpp).
    bool fast_path = true;
    /// Said after "meithd closed the connection" and the like: what happens next.
    std::string when_down = "; start it again with: meithd";
};

/// The session's host: its daemon connection and the client's output. Calls come from the
/// session's own thread; none may call back into the session.
class link {
  public:
    virtual ~link() = default;
    /// True while a connection to meithd is up.
    virtual bool connected() const = 0;
    /// Connects and sends `hello` (a compact frame whose requestId is `id`), waiting for its
    /// hello_result, which it returns; nullopt, with `why` set, when meithd cannot be reached.
    /// Only called while not connected.
    virtual std::optional<json> connect(const std::string& hello, const std::string& id,
                                        std::string& why) = 0;
    /// Sends one compact frame; false, with `why` set, when the connection failed (it is
    /// then down: connected() is false).
    virtual bool send(const std::string& frame, std::string& why) = 0;
    /// Ends the connection (after daemon_gone).
    virtual void disconnect() = 0;
    /// Writes one JSON-RPC message line (with its newline) to the client. May throw to end the
    /// session when the client is gone.
    virtual void write_client(std::string_view line) = 0;
    /// A diagnostic for the person who runs the client (stderr, or meithd's log).
    virtual void note(std::string_view text) = 0;
};

class mcp_session {
  public:
    mcp_session(settings s, link& l)
        : settings_(std::move(s)), link_(l),
          ids_(protocol::request_id_generator::process_prefix("mcp")),
          search_mode_(settings_.search) {
        in_.scan_oversized({"id"}); // an over-long request is still answered by its id
    }

    // ---- driving it -----------------------------------------------------------------------

    /// The client's bytes: written into input_buffer(), then input_commit(n).
    std::span<char> input_buffer() { return in_.prepare(); }
    void input_commit(std::size_t n) { in_.commit(n); }
    /// The client closed its input (`clean`: EOF, not an error): a last message without its
    /// newline still counts. Then call pump(), begin_drain().
    void input_ended(bool clean);
    bool input_over() const { return in_eof_; }
    /// Handles every complete message read, unless a hello waits for its answer (then the
    /// messages wait in the buffer, in order).
    void pump();

    /// The hello frame: subscribed to tools_changed and MCP notifications, declaring the
    /// client's capabilities so meithd forwards servers' requests it can answer (§17).
    json hello_frame(const std::string& id) const;
    std::string next_request_id() { return ids_.next(); }
    /// Connects (through the link) and says hello unless connected; false, with the reason
    /// kept for the requests it fails, if not.
    bool connect();
    /// A hello sent for a changed client waits for its answer: input is held meanwhile.
    bool waiting_hello() const { return !hello_wait_.empty(); }
    /// The host sent hello `id` on a connection it made itself: the client's messages wait for
    /// its hello_result (as after hello_now).
    void expect_hello(std::string id) { hello_wait_ = std::move(id); }

    /// One frame from meithd (one line, no newline).
    void on_daemon_frame(std::string_view line);
    /// The connection ended: every request waiting is answered with an error.
    void daemon_gone(const std::string& why);

    /// After the client's EOF: its servers' requests still waiting are refused to meithd
    /// (nobody can answer them now).
    void begin_drain();
    /// True while an answer is still owed to the client (not a cancelled call's).
    bool awaited() const;
    /// Calls sent and answers written by the fast path (fast_path.cpp), for tests and
    /// benchmarks: the rest took the general path.
    std::uint64_t fast_calls() const { return fast_calls_; }
    std::uint64_t fast_answers() const { return fast_answers_; }
    /// How long the drain waits for those answers at most (docs/protocol.md §10).
    static constexpr std::chrono::seconds drain_grace{30};

  private:
    /// The next complete message (valid until the next call), answering over-long ones.
    std::optional<std::string_view> next_input_line();

    void write_client(const json& msg);

    void send_result(const json& id, json result);

    void send_error(const json& id, int code, const std::string& message);

    void notify(std::string_view method, json params);

    // ---- the daemon -----------------------------------------------------------------------

    /// The client's capabilities changed (initialize, or a 2026-07-28 request's envelope): a
    /// new hello tells meithd (its reply is not waited for).
    void set_client(const json& caps, const json* info);

    /// Sends `frame`; on failure the daemon is gone and the request answered with an error.
    bool send_to_daemon(const json& frame);
    /// The same for a frame already written as compact JSON text.
    bool send_frame_text(const std::string& frame);

    enum class kind { list_tools, call, mcp, search, pinned };
    struct pending {
        json mcp_id; ///< null: nobody waits (a listen's subscribe; a 2026 call between rounds)
        kind k = kind::call;
        std::string method;         ///< mcp: the MCP method
        std::size_t offset = 0;     ///< tools/list and the other lists: the page's first item
        json progress_token;        ///< tools/call: null when the client asked for no progress
        std::uint64_t progress = 0; ///< events counted, for events that carry no progress
        bool cancelled = false;     ///< the client cancelled: its answer is not sent (MCP spec)
        bool modern = false;        ///< asked in 2026-07-28: results carry resultType, _meta
        // 2026-07-28 calls: servers' requests become an input_required result (§17)
        json inputs = json::object();             ///< key → {method, params}, not yet asked
        std::map<std::string, std::string> asked; ///< key → clientRequestId, asked
        std::optional<json> final;                ///< the answer, while no request waits
    };

    /// on_daemon_frame's work on the parsed frame (its members may be moved out).
    void handle_daemon_frame(json& f);

    /// What a frame from meithd answers: a result, or a JSON-RPC error's members.
    struct daemon_answer {
        json result;
        bool failed = false;
        int code = internal_error;
        std::string message;
        json error_data;
        json error() const; ///< {code, message[, data]}
    };
    /// The answer in a tools_list, tool_result, mcp_result or error frame for `p`; nullopt for
    /// another frame type.
    std::optional<daemon_answer> answer_of(json& f, const std::string& type, const pending& p);
    /// tools/list in search mode: the meta-tools and the client profile's pinned tools.
    json pinned_listing(const json& tools);
    /// Sends `a` to whoever waits for `it`: the MCP request, a task's waiters, or a 2026-07-28
    /// call's retry; forgets `it`.
    void deliver(std::map<std::string, pending, std::less<>>::iterator it,
                 const std::optional<std::string>& task, daemon_answer a);

    /// A list_changed for the client: as is (2025-11-25), or on each listen that asked for it.
    void list_changed(std::string_view method);

    void on_mcp_notification(const json& f);

    /// A server's request for the client (sampling, elicitation, roots), through meithd.
    void on_client_request(const json& f);

    /// Answers a server's request for the client (`clientRequestId` `crid`) with a JSON-RPC
    /// error `message` to meithd; false when the send failed (the daemon is then gone).
    bool refuse_client_request(const std::string& crid, const std::string& message);

    /// Answers the waiting request of call `rid` with input_required for its queued inputs.
    void ask_inputs(const std::string& rid, pending& p);

    void on_event(pending& p, const json& event);

    // ---- MCP ------------------------------------------------------------------------------

    /// One message from the client. Every member is read by its type (get_string, is_*), so
    /// a member of an unexpected type gets its JSON-RPC error; a slip that still throws is
    /// answered as an internal error and the session goes on (no message ends the bridge).
    void handle_message(std::string_view line);

    void dispatch_message(const json& msg);
    /// dispatch_message, a throw answered as an internal error.
    void dispatch_safely(const json& msg);

    /// A 2026-07-28 request carries its version and the client's capabilities in
    /// `_meta` (the envelope): read, taken out of `params`. True for such a request; an
    /// unsupported version is answered -32022 and `params` set to null.
    bool read_envelope(const json& id, json& params);

    /// The client's answer to a server's request we sent it (2025-11-25).
    void on_client_answer(const json& msg);

    void on_notification(const std::string& method, const json& params);

    void initialize(const json& id, const json& params);

    /// The offset a list request's `cursor` names (0 without one); nullopt when malformed.
    static std::optional<std::size_t> cursor_of(const json& params);

    /// Registers a request to meithd; `mcp_id` null when nobody waits for its answer.
    std::string track(const json& mcp_id, kind k, std::string method, bool modern,
                      std::size_t offset = 0);

    void tools_list(const json& id, const json& params, bool modern);

    /// One page of MCP tools from the daemon's descriptors (docs/protocol.md §10).
    json tools_page(const json& descriptors, std::size_t offset);
    /// tools/list's answer from a page meithd cut (`offset`, `limit`, `permitted`): its
    /// descriptors in MCP's shape, and nextCursor while `total` holds more.
    json tools_page_cut(const json& page, std::size_t offset, std::size_t total);

    /// meithd answers a list with every item: the client gets it page by page.
    static json page_of(const std::string& method, json result, std::size_t offset);

    void mcp_request(const json& id, const std::string& method, json params, bool modern);

    void subscribe_uri(const std::string& uri, bool on);

    /// subscriptions/listen (2026-07-28): acknowledged at once; its notifications carry its
    /// id in _meta until the client cancels it. Resource URIs are subscribed through meithd.
    void listen(const json& id, const json& params);

    /// Search mode (`meith mcp --search`, docs/protocol.md §20): tools/list offers only the
    /// search_tools and call_tool meta-tools; the client finds tools and loads their schemas
    /// on demand. Real tools stay callable by name (meithd's policy decides as always).
    static json search_mode_tools();
    /// Takes the hello_result's `client` (the profile meithd applies, docs/protocol.md §23):
    /// its search mode and pinned tools; none: --search alone decides.
    void apply_hello(const json& hello_result);
    /// Sends a hello (the MCP client's name and capabilities changed); the client's next
    /// messages wait until its answer (pump): the profile an MCP client's name selects is
    /// known before its first tools/list is answered.
    void hello_now();
    /// search_tools: a list_tools with `query`, answered as a result listing the matches.
    void search_tools_call(const json& id, const json& args, bool modern);
    /// A list_tools reply for search_tools: the matches as text (JSON) and structuredContent.
    json search_result(const json& descriptors);

    void tools_call(const json& id, const json& params, bool modern);
    /// The tool_call frame's requestId for MCP request id `id_text` (a string id's text, an
    /// integer's digits): unique, at most 128 bytes, cut on a character boundary (§10).
    std::string call_request_id(std::string_view id_text);
    /// Ends a tool_call frame's text: its clientInfo and closing brace.
    void end_call_frame(std::string& frame) const;

    // ---- the fast path (fast_path.cpp) ------------------------------------------------------
    // The common call, `{"jsonrpc":"2.0","id":…,"method":"tools/call","params":{"name":…,
    // "arguments":{…}}}`, and its successful answer are read with simdjson and written as
    // text, without building nlohmann values; anything else (another shape, a member more, a
    // repeated member, a 2026-07-28 envelope, search mode's meta-tools, a task, an error)
    // takes the general path, which answers exactly as before.

    /// Handles `line` when it is such a call; false (nothing done) otherwise.
    bool fast_tools_call(std::string_view line);
    /// Answers the client when `line` is a successful tool_result for such a call whose
    /// content is text or an object: an MCP CallToolResult passed through as meithd sent it,
    /// another object as the text of its JSON (meithd's compact text) and its
    /// structuredContent; false (nothing done) otherwise.
    bool fast_tool_result(std::string_view line);

    /// tasks/get, tasks/result, tasks/cancel, tasks/list (2025-11-25 basic/utilities/tasks).
    void task_request(const json& id, const std::string& method, const json& params);

    void send_task_result(const json& id, const std::string& task_id);

    /// A 2026-07-28 retry of a call that answered input_required: the answers go to meithd,
    /// and this request waits for the call's next round or its result.
    void retry_call(const json& id, const json& params);

    struct listen_state {
        json id;
        json notifications = json::object();
        std::set<std::string> uris;
    };

    settings settings_;
    link& link_;
    std::string hello_wait_;   ///< the requestId of a hello not answered yet
    std::optional<json> held_; ///< the request that sent it, dispatched once it is answered
    std::string agent_;        ///< the MCP client's clientInfo.name, sent as clientInfo.agent
    json client_caps_ = json::object(); ///< its ClientCapabilities, sent in hello (§17)
    bool modern_ = false;               ///< the client speaks 2026-07-28
    protocol::request_id_generator ids_;
    std::string down_;                   ///< why there is no daemon connection
    protocol::line_framer in_{max_line}; ///< the MCP client's lines (protocol/framing.hpp)
    bool in_eof_ = false;
    std::map<std::string, pending, std::less<>> pending_;       ///< by daemon requestId
    std::map<std::string, std::string, std::less<>> by_mcp_id_; ///< MCP id (JSON text) → rid
    bool search_mode_ = false;
    std::vector<std::string> pinned_; ///< the profile's pinned tools (search mode), shown names
    std::set<std::string, std::less<>> text_tools_; ///< text-payload tools in tools/list (§13)
    /// Servers' requests sent to the client (2025-11-25): our JSON-RPC id → clientRequestId.
    std::map<std::string, std::string> to_daemon_request_;
    std::uint64_t next_client_request_ = 0;
    std::map<std::string, listen_state> listens_; ///< subscriptions/listen by id (JSON text)
    std::string out_text_;   ///< an answer's text, the buffer reused from call to call
    std::string frame_text_; ///< a tool_call frame's text, reused likewise
    std::uint64_t fast_calls_ = 0;
    std::uint64_t fast_answers_ = 0;
    task_table tasks_; ///< task-augmented calls (tasks.hpp)
};

} // namespace meith::bridge
