// connection: one client on the Unix socket — framing, frame dispatch, batched replies.
//
// A reader coroutine reads into the connection's line framer and handles every complete
// frame; replies are appended to one outbound buffer and written by a single writer, so
// frames never interleave and a burst of replies leaves in one write(2).
// Back-pressure: while more than `limits.max_outbound_bytes` wait unsent, no further request
// is read (the client's own writes block); a client whose socket then takes no byte for
// `limits.write_stall_ms` does not read and is closed. A client that half-closes (EOF on read,
// as `nc -N` and `socat` do) has sent its last request: its calls run and every reply is
// written before the daemon closes. Closing cancels the connection's calls in flight.
// I/O-thread only.
#pragma once

#include "protocol/frames.hpp"
#include "protocol/framing.hpp"
#include "registry/registry.hpp"

#include <asio/awaitable.hpp>
#include <asio/local/stream_protocol.hpp>
#include <asio/steady_timer.hpp>

#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace meith::daemon {

/// Peer credentials from SO_PEERCRED (Linux) / getpeereid (macOS); pid is 0 when unknown.
struct peer_identity {
    pid_t pid = 0;
    uid_t uid = 0;
};

class connection final : public registry::call_sink,
                         public std::enable_shared_from_this<connection> {
  public:
    connection(asio::local::stream_protocol::socket socket, registry::registry& reg,
               peer_identity peer, std::function<void(connection*)> on_closed);
    ~connection() override;

    /// Starts reading; the connection keeps itself alive until it closes.
    void start();

    /// Closes at once: cancels calls in flight (audited), drops unsent replies.
    void close(std::string_view reason);

    /// Closes once every queued reply has been written (used at shutdown).
    void close_after_flush();

    const std::string& session_id() const { return session_id_; }

    // registry::call_sink
    void on_tool_event(std::string_view request_id, std::string_view event_json) override;
    void on_tool_result(std::string_view request_id, const protocol::tool_result& r) override;

  private:
    asio::awaitable<void> read_loop();
    void handle_frame(std::string_view line);
    void handle_tool_call(const protocol::client_frame& f);
    void handle_oversized();
    void audit_rejected_call(const protocol::client_frame& f, std::string_view reason);
    permissions::caller caller_for(const protocol::client_frame& f) const;
    std::string_view claim_for(const protocol::client_frame& f) const;
    void flush();     ///< schedules the queued replies for writing (end of this I/O turn)
    void write_now(); ///< commits the audit lines, then writes the queued replies
    /// Replaces each successful tool_result in the queued replies whose audit line could not be
    /// written by a TOOL_FAILED result (audit.on_failure = "fail_closed", §6).
    void withhold_unaudited_results();
    void arm_idle_timer();
    /// Bytes queued or being written that the client has not taken yet.
    std::size_t unsent() const { return outbound_.size() + writing_.size() - written_; }
    bool over_outbound_limit() const;
    /// True when the peer closed (not merely half-closed): POLLHUP on the socket.
    bool peer_gone();
    /// Arms the write-stall check while over the outbound limit (back-pressure, §5).
    void watch_stall();
    /// After a half-close: closes once no call is in flight and every reply is written.
    void close_if_finished();

    asio::local::stream_protocol::socket socket_;
    registry::registry& registry_;
    peer_identity peer_;
    std::function<void(connection*)> on_closed_;
    std::string session_id_;
    std::string hello_claim_; ///< clientInfo.caller of the hello, if any
    bool has_hello_claim_ = false;
    protocol::line_framer framer_;
    protocol::frame_decoder decoder_;
    std::unordered_map<std::string, registry::call_ptr> calls_;
    std::string outbound_;
    std::string writing_;
    bool write_active_ = false;
    bool flush_posted_ = false;   ///< a write is scheduled for the end of this I/O turn
    bool audit_wait_ = false;     ///< replies wait for the audit writer to commit their lines
    std::uint64_t audit_seq_ = 0; ///< audit batch covering the lines of the queued replies
    /// Audit batch holding the line of each tool_result frame in outbound_, in frame order.
    std::vector<std::uint64_t> result_seqs_;
    bool closed_ = false;
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
