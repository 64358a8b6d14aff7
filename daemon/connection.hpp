// connection: one client on the Unix socket — framing, frame dispatch, batched replies.
//
// A reader coroutine reads into the connection's line framer and hands every complete frame
// to the route of its type (frame_routes.cpp: a table of {type, operator-only, audited,
// handler}, so admission and auditing live in one place). Replies are appended to one
// outbound queue — the bytes of every frame not yet written, plus a mark per successful
// tool_result naming the audit batch that holds its line — and a writer coroutine drains it:
// it waits (one state, not a set of flags) until new replies are queued, until the audit
// writer has committed the lines they follow (docs/protocol.md §6), or until the socket took
// the previous batch; so frames never interleave and a burst of replies leaves in one
// write(2). Under audit.on_failure = "fail_closed", a successful result whose own batch failed
// is replaced by TOOL_FAILED before it leaves, using its mark (no re-parse).
// Back-pressure: while more than `limits.max_outbound_bytes` wait unsent, no further request
// is read (the client's own writes block) and a call's tool_events are dropped and counted, so
// a tool that writes events faster than its client reads cannot grow the queue: the call's
// next event or its result is preceded by one `{"type":"events_dropped","count":N}` event
// (results are always queued); a client whose socket then takes no byte for
// `limits.write_stall_ms` does not read and is closed. A client that half-closes (EOF on read,
// as `nc -N` and `socat` do) has sent its last request: its calls run and every reply is
// written before the daemon closes. Closing cancels the connection's calls in flight.
// I/O-thread only.
#pragma once

#include "audit/audit_trail.hpp"
#include "daemon/mcp_handoff.hpp"
#include "gateway/mcp_gateway.hpp"
#include "platform/peer.hpp"
#include "protocol/frames.hpp"
#include "protocol/framing.hpp"
#include "protocol/server_frames.hpp"
#include "registry/registry.hpp"

#include <asio/awaitable.hpp>
#include <asio/local/stream_protocol.hpp>
#include <asio/steady_timer.hpp>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace meith::daemon {

/// Peer credentials (platform/peer.hpp); pid is 0 when unknown.
using peer_identity = platform::peer_identity;

class connection final : public tools::call_sink,
                         public approvals::approver,
                         public std::enable_shared_from_this<connection> {
  public:
    /// An in-process client's side (mcp_handoff.hpp): the connection's replies, whole frames,
    /// go to `frames` (after their audit lines, as on a socket); `backlog` is what the client
    /// has not taken of them yet, counted against limits.max_outbound_bytes; `closed` is
    /// posted when the connection closes.
    struct in_process_client {
        std::function<void(std::string_view frames)> frames;
        std::function<std::size_t()> backlog;
        /// `stopping`: closed by meithd's shutdown (close_after_flush), not for the client.
        std::function<void(bool stopping)> closed;
    };
    /// Makes the connection of an MCP session handed over on this one (docs/protocol.md §10
    /// "Handoff"): the server adds an in-process connection of this connection's peer.
    using adopt_fn =
        std::function<std::shared_ptr<connection>(const peer_identity&, in_process_client)>;

    connection(asio::local::stream_protocol::socket socket, registry::registry& reg,
               gateway::mcp_gateway& mcp, peer_identity peer,
               std::function<void(connection*)> on_closed, adopt_fn adopt = nullptr);
    ~connection() override;

    /// Starts reading; the connection keeps itself alive until it closes.
    void start();

    /// Closes at once: cancels calls in flight (audited), drops unsent replies.
    void close(std::string_view reason);

    /// Closes once every queued reply has been written (at shutdown; after an MCP session).
    void close_after_flush(std::string_view reason = "daemon shutting down");

    /// Makes this the connection of an MCP session meithd runs itself (mcp_handoff.hpp),
    /// before start(): no socket; frames come through take_frames(), replies go to `client`. It
    /// never idles out; the session ends it.
    void serve_in_process(in_process_client client);
    /// An in-process client's bytes: whole frames, read as the socket's would be.
    void take_frames(std::string_view bytes);
    /// More than limits.max_outbound_bytes wait for the client: read no more requests from it
    /// (a socket's reader pauses by itself; an in-process client asks).
    bool backed_up() const { return over_outbound_limit(); }

    const std::string& session_id() const { return session_id_; }

    // tools::call_sink
    void on_tool_event(std::string_view request_id, std::string_view event_json) override;
    void on_tool_result(std::string_view request_id, const protocol::tool_result& r) override;

    /// A server's request to this client (docs/protocol.md §17; mcp_routes.cpp).
    bool ask_client(std::string_view request_id, std::string_view method,
                    std::string_view params_json,
                    std::function<void(tools::mcp_answer)> done) override;
    void notify_client(std::string_view request_id, std::string_view source,
                       std::string_view method, std::string_view params_json) override;

    /// What the client's hello `capabilities` declared (MCP ClientCapabilities).
    struct client_capabilities {
        bool sampling = false, roots = false, elicitation_form = false, elicitation_url = false;
    };

    // approvals::approver (after a proven approver_hello, docs/protocol.md §14)
    void deliver(std::string_view frame) override;
    const std::string& approver_session() const override { return session_id_; }

  private:
    /// One frame type's route (frame_routes.cpp).
    struct frame_route;
    static const frame_route& route_of(protocol::frame_type type);

    asio::awaitable<void> read_loop();
    asio::awaitable<void> write_loop();
    void handle_frame(std::string_view line);
    void handle_oversized();
    /// The tool_call_rejected line of a tool_call frame refused before it became a call.
    void audit_rejected_call(const protocol::frame_head& f, std::string_view reason,
                             std::optional<std::uint64_t> timeout_ms = std::nullopt);
    permissions::caller caller_for(const protocol::frame_head& f) const;
    std::string_view claim_for(const protocol::frame_head& f) const;

    // Routes: each takes its frame's own type (the head, and the type's members when it has
    // any; frames.hpp), appends its reply to outbound_ and, for an audited route, the audit
    // event's members (after "sessionId") to `audit_fields`.
    template <auto Handler>
    static void route_to(connection& c, const protocol::client_frame& f, std::string& audit);
    /// list_tools with `tags` or `models`: answered when the hosts' get_tags have answered.
    void list_tools_tagged(const protocol::frame_head& f, const protocol::list_tools_frame& body,
                           permissions::caller who, tools::list_format format,
                           registry::registry::profile_ptr profile);
    void on_hello(const protocol::frame_head& f, const protocol::hello_frame& body,
                  std::string& audit_fields);
    void on_list_tools(const protocol::frame_head& f, const protocol::list_tools_frame& body,
                       std::string& audit_fields);
    void on_tool_call(const protocol::frame_head& f, const protocol::tool_call_frame& body,
                      std::string& audit_fields);
    void on_cancel_tool_call(const protocol::frame_head& f, std::string& audit_fields);
    void on_list_sources(const protocol::frame_head& f, std::string& audit_fields);
    void on_check_policy(const protocol::frame_head& f, std::string& audit_fields);
    void on_restart_source(const protocol::frame_head& f,
                           const protocol::restart_source_frame& body, std::string& audit_fields);
    void on_learn_source(const protocol::frame_head& f, const protocol::learn_source_frame& body,
                         std::string& audit_fields);
    void on_reload_config(const protocol::frame_head& f, std::string& audit_fields);
    void on_preview_tool_call(const protocol::frame_head& f, std::string& audit_fields);
    // grants and approvals (approval_routes.cpp)
    void on_approver_hello(const protocol::frame_head& f,
                           const protocol::approver_hello_frame& body, std::string& audit_fields);
    void on_approve(const protocol::frame_head& f, const protocol::approve_frame& body,
                    std::string& audit_fields);
    void on_grant(const protocol::frame_head& f, const protocol::grant_frame& body,
                  std::string& audit_fields);
    void on_revoke(const protocol::frame_head& f, const protocol::revoke_frame& body,
                   std::string& audit_fields);
    void on_accept_tool(const protocol::frame_head& f, const protocol::accept_tool_frame& body,
                        std::string& audit_fields);
    void on_list_grants(const protocol::frame_head& f, std::string& audit_fields);
    /// Refuses an approver's frame from a connection that is not one: error frame + audit.
    bool refuse_unless_approver(const protocol::frame_head& f);
    /// The `approver_rejected` audit line (PROTOCOL.md §12: every refusal is on file).
    void audit_approver_rejected(std::string_view reason);
    void on_other(const protocol::frame_head& f, std::string& audit_fields);
    // `meith mcp` hands over its stdio (mcp_routes.cpp, docs/protocol.md §10 "Handoff")
    void on_mcp_handoff(const protocol::frame_head& f, const protocol::mcp_handoff_frame& body,
                        std::string& audit_fields);
    /// The handed-over session ended with `exit_status`: told to `meith mcp`, then closed.
    void on_mcp_ended(int exit_status);
    /// Closes the descriptors that came with the bytes read and were not taken.
    void drop_passed_fds();
    // MCP families beyond tools (mcp_routes.cpp, docs/protocol.md §17)
    void on_mcp_request(const protocol::frame_head& f, const protocol::mcp_request_frame& body,
                        std::string& audit_fields);
    void on_client_response(const protocol::frame_head& f,
                            const protocol::client_response_frame& body, std::string& audit_fields);
    static client_capabilities read_client_capabilities(simdjson::dom::object caps);
    /// The connection's gateway subscriber, made on first use; `broadcast`: it also gets
    /// list_changed and log messages (hello `mcp_notifications`).
    std::uint64_t mcp_subscriber(bool broadcast);
    /// Closing: drops the subscriber; servers' requests still waiting get an error answer.
    void end_mcp();

    /// New replies are queued: wakes the writer if it waits for them. It runs at the end of
    /// this I/O turn, so replies of every connection served in the turn share one audit commit.
    void flush();
    /// Replaces each successful tool_result in outbound_ whose audit line could not be
    /// written by a TOOL_FAILED result (audit.on_failure = "fail_closed", §6).
    void withhold_unaudited_results();
    void arm_idle_timer();
    /// Bytes queued or being written that the client has not taken yet.
    std::size_t unsent() const {
        return outbound_.size() + writing_.size() - written_ +
               (in_process_ ? in_process_->backlog() : 0);
    }
    bool over_outbound_limit() const;
    /// True when the peer closed (not merely half-closed): POLLHUP on the socket.
    bool peer_gone();
    /// Arms the write-stall check while over the outbound limit (back-pressure, §5).
    void watch_stall();
    /// After a half-close: closes once no call is in flight and every reply is written.
    void close_if_finished();
    /// Queues call `request_id`'s events_dropped event, if it had events dropped.
    void report_dropped_events(std::string_view request_id);

    asio::local::stream_protocol::socket socket_;
    registry::registry& registry_;
    gateway::mcp_gateway& mcp_; ///< MCP's families beyond tools (mcp_routes.cpp)
    audit::audit_trail& audit_; ///< the registry's: lines, group commit, waiting replies
    peer_identity peer_;
    std::function<void(connection*)> on_closed_;
    adopt_fn adopt_;
    /// Descriptors that came with the bytes being read (SCM_RIGHTS): the next complete frame
    /// takes them if it is an mcp_handoff, else they are closed.
    std::vector<int> passed_fds_;
    std::shared_ptr<mcp_handoff> handoff_;        ///< the MCP session handed over here, if any
    std::optional<in_process_client> in_process_; ///< set: the client is in this process
    std::string flush_close_reason_;
    std::string session_id_;
    std::string hello_claim_; ///< clientInfo.caller of the hello, if any
    bool has_hello_claim_ = false;
    std::string hello_agent_; ///< clientInfo.agent of the hello, if any
    /// clientInfo.client of the first hello that named one: the client profile this
    /// connection keeps (docs/protocol.md §23). "": none named (an agent may select one).
    std::string client_name_;
    /// The profile `f` is under: the one the hello named (a removed one hides every tool),
    /// else the one whose `agents` list the frame's agent, else null.
    registry::registry::profile_ptr profile_for(const protocol::frame_head& f) const;
    bool approver_ = false; ///< proven by approver_hello: receives approval requests
    /// When the connection was accepted, in clock ticks since boot (the unit of
    /// /proc/<pid>/stat's starttime): a peer pid whose process started later is not the one
    /// that connected.
    std::uint64_t accepted_ticks_ = 0;
    /// The registry's tools_changed subscription (hello `subscribe`), 0 when none.
    std::uint64_t tools_changed_token_ = 0;
    std::string_view agent_for(const protocol::frame_head& f) const;
    client_capabilities client_caps_;
    std::uint64_t mcp_subscriber_ = 0; ///< the gateway's token for this connection, 0: none
    /// client_request frames sent and not answered, by clientRequestId.
    std::map<std::string, std::function<void(tools::mcp_answer)>, std::less<>> client_requests_;
    std::uint64_t next_client_request_ = 0;
    std::uint64_t mcp_in_flight_ = 0; ///< mcp_request frames not answered yet
    std::uint64_t mcp_dropped_ = 0;   ///< MCP notifications dropped over the outbound limit
    protocol::line_framer framer_;
    protocol::frame_decoder decoder_;
    std::unordered_map<std::string, tools::call_ptr> calls_;
    /// Calls whose tool_events were dropped over the outbound limit, and how many: a short
    /// list (at most max_calls_in_flight_per_connection), searched without allocating.
    std::vector<std::pair<std::string, std::uint64_t>> dropped_events_;

    // ---- the outbound queue and its writer ------------------------------------------------
    /// A successful tool_result frame in outbound_ ([begin, end)) and the audit batch that
    /// holds its call's line: what fail_closed withholding needs, kept only for ok results.
    struct result_mark {
        std::size_t begin;
        std::size_t end;
        std::uint64_t seq;
    };
    /// What the writer waits for; flush() and the audit writer wake it only from their state.
    enum class writer_state {
        busy,          ///< draining (or about to): replies queued now go in its next batch
        idle,          ///< outbound_ was empty: waits for flush()
        waiting_audit, ///< waits for the audit lines its replies follow
    };
    std::string outbound_;           ///< frames queued, not yet handed to the socket
    std::vector<result_mark> marks_; ///< ok tool_results in outbound_, in order
    std::string writing_;            ///< the batch the socket is taking
    writer_state writer_ = writer_state::busy;
    asio::steady_timer writer_wake_; ///< the writer parks on it; cancelled = wake up
    bool closed_ = false;
    /// Replies still being made off the frame's turn (a preview, a tag-filtered list waiting
    /// on hosts): the connection neither idles out nor closes on a half-close before them.
    std::size_t async_replies_ = 0;
    bool closing_after_flush_ = false;
    bool peer_eof_ = false;       ///< the client half-closed: no more requests
    bool reading_paused_ = false; ///< over the outbound limit: requests wait in the kernel
    std::size_t written_ = 0;     ///< bytes of writing_ the socket took so far
    std::uint64_t progress_ = 0;  ///< bytes the socket took, ever (for the stall check)
    std::uint64_t progress_at_stall_check_ = 0;
    bool stall_armed_ = false;
    asio::steady_timer idle_timer_;
    asio::steady_timer resume_timer_; ///< wakes the paused reader (cancelled = resume)
    asio::steady_timer stall_timer_;
};

/// A fresh session id: "s_" + 32 hex digits from the OS CSPRNG (getrandom(2)).
std::string new_session_id();

} // namespace meith::daemon
