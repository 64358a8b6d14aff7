// mcp_handoff: an MCP session meithd runs itself, on the pipes `meith mcp` handed it
// (docs/protocol.md §10 "Handoff"). The session is bridge/mcp_session, the same code `meith mcp`
// runs when it keeps the session; this is its host in meithd, on the I/O thread:
//
//   client's stdin ──► mcp_session ──frames──► [socketpair] ──► connection (as any client's)
//   client's stdout ◄──────────────◄──frames── [socketpair] ◄──
//
// The session's frames go through an in-process socket pair to an ordinary connection, so
// admission, policy, audit, back-pressure and cancellation are the connection's, unchanged;
// what leaves the data path is `meith mcp`'s process and its two wake-ups per message. Writes
// on either side are batched per I/O turn; while more than `max_unsent` bytes wait for the
// client to read them, neither the session's connection nor the client's input is read (the
// connection's own back-pressure then applies, §5). After the client's EOF the session drains
// as the bridge does (§10): answers still owed, for at most 30 s or until the client stops
// reading. The host ends — closing the pipes and its connection, whose calls are cancelled —
// when the session is over (`ended(exit status)`, told to `meith mcp`) or when `end()` says
// `meith mcp`'s control connection closed (the process was signalled or killed).
#pragma once

#include "bridge/mcp_session.hpp"
#include "protocol/framing.hpp"

#include <asio/any_io_executor.hpp>
#include <asio/posix/stream_descriptor.hpp>
#include <asio/steady_timer.hpp>

#include <functional>
#include <memory>
#include <string>

namespace meith::daemon {

class mcp_handoff final : public bridge::link, public std::enable_shared_from_this<mcp_handoff> {
  public:
    /// Client bytes waiting unsent above which nothing more is read (back-pressure).
    static constexpr std::size_t max_unsent = 4 << 20;

    /// Takes ownership of `inner` (this end of the session's socket pair), `in` and `out` (the
    /// client's stdin and stdout, pipes or sockets) and `err` (its stderr, or -1: notes go to
    /// meithd's log). `label` names the session in meithd's log.
    mcp_handoff(asio::any_io_executor ex, int inner, int in, int out, int err, bridge::settings s,
                std::string label, std::function<void(int)> ended);
    ~mcp_handoff() override;

    /// Says hello on the session's connection and starts reading both sides.
    void start();
    /// `meith mcp` is gone: everything is closed now, nothing more is written.
    void end();

    // bridge::link
    bool connected() const override { return !done_ && !inner_gone_; }
    std::optional<bridge::json> connect(const std::string& hello, const std::string& id,
                                        std::string& why) override;
    bool send(const std::string& frame, std::string& why) override;
    void disconnect() override;
    void write_client(std::string_view line) override;
    void note(std::string_view text) override;

  private:
    /// Bytes queued for one descriptor, written once per I/O turn (and as it takes them).
    struct outbox {
        explicit outbox(asio::posix::stream_descriptor d) : fd(std::move(d)) {}
        asio::posix::stream_descriptor fd;
        std::string buf;
        std::size_t sent = 0;
        bool scheduled = false; ///< a flush is posted for this turn
        bool waiting = false;   ///< waits for the descriptor to take more
        bool dead = false;      ///< the reader is gone
        std::size_t unsent() const { return buf.size() - sent; }
    };
    void queue(outbox& box, std::string_view bytes);
    void flush(outbox& box);
    bool over_limit() const { return out_.unsent() > max_unsent; }

    void read_client();
    void read_inner();
    /// Input over: refuse what the client can no longer answer, wait for what is owed.
    void begin_drain();
    void check_drained();
    /// Ends the session with `exit_status`; `flush_first`: once the client took its answers.
    void finish(int exit_status, bool flush_first);
    void close_all();

    asio::any_io_executor ex_;
    outbox inner_;
    asio::posix::stream_descriptor in_;
    outbox out_;
    int err_ = -1;
    std::string label_;
    std::function<void(int)> ended_;
    bridge::mcp_session session_;
    protocol::line_framer frames_; ///< meithd's frames on the session's connection
    asio::steady_timer drain_timer_;
    asio::steady_timer watch_timer_; ///< while draining: is the client still reading?
    bool reading_client_ = false, reading_inner_ = false;
    bool inner_gone_ = false;
    bool draining_ = false;
    bool finishing_ = false;
    int finish_status_ = 0;
    bool done_ = false;
};

} // namespace meith::daemon
