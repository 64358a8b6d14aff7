// mcp_handoff: an MCP session meithd runs itself, on the pipes `meith mcp` handed it
// (docs/protocol.md §10 "Handoff"). The session is bridge/mcp_session, the same code `meith mcp`
// runs when it keeps the session; this is its host in meithd, on the I/O thread:
//
//   client's stdin ──► mcp_session ──frames──► connection (in process, as any client's)
//   client's stdout ◄─────────────◄──frames─── connection
//
// The session's frames go to an ordinary connection without a socket (connection::take_frames;
// its replies come back through connection::in_process_client), so admission, policy, audit
// and its ordering, back-pressure and cancellation are the connection's, unchanged; what
// leaves the data path is `meith mcp`'s process, its two wake-ups per message and their system
// calls. Writes to the client are batched per I/O turn; while more than `max_unsent` bytes
// wait for the client to read them, its input is not read and the connection counts them
// against its outbound limit (§5). After the client's EOF the session drains as the bridge
// does (§10): answers still owed, for at most 30 s or until the client stops reading. The host
// ends — closing the pipes and its connection, whose calls are cancelled — when the session
// is over (`ended(exit status)`, told to `meith mcp`), when its connection closed under it
// (`ended(no_verdict)`: meithd stops; `meith mcp` takes over), or when `end()` says `meith
// mcp`'s control connection closed (the process was signalled or killed).
#pragma once

#include "bridge/mcp_session.hpp"

#include <asio/any_io_executor.hpp>
#include <asio/posix/stream_descriptor.hpp>
#include <asio/steady_timer.hpp>

#include <functional>
#include <memory>
#include <string>

namespace meith::daemon {

class connection;

class mcp_handoff final : public bridge::link, public std::enable_shared_from_this<mcp_handoff> {
  public:
    /// Client bytes waiting unsent above which its input is not read (back-pressure).
    static constexpr std::size_t max_unsent = 4 << 20;
    /// What `ended` is told when the session's connection closed under it: `meith mcp` gets no
    /// verdict and takes the session over.
    static constexpr int no_verdict = -1;

    /// One of the client's descriptors, owned from here, as platform::private_nonblocking
    /// made it: a pipe of its own description (O_NONBLOCK), or a socket used only with
    /// MSG_DONTWAIT. -1: none.
    struct client_fd {
        int fd = -1;
        bool socket = false;
    };

    /// Takes ownership of `in` and `out` (the client's stdin and stdout) and `err` (its
    /// stderr; fd -1: notes go to meithd's log). `label` names the session in meithd's log.
    /// Nothing here blocks or throws on the descriptors: one epoll refuses leaves `failed()`
    /// true (the session then never starts).
    mcp_handoff(asio::any_io_executor ex, client_fd in, client_fd out, client_fd err,
                bridge::settings s, std::string label, std::function<void(int)> ended);
    ~mcp_handoff() override;
    /// Why the descriptors could not be watched ("" when they can).
    const std::string& failed() const { return failed_; }

    /// The session's connection (serving this host through connection::serve_in_process).
    void attach(std::weak_ptr<connection> c) { conn_ = std::move(c); }
    /// Says hello on the session's connection and starts reading the client.
    void start();
    /// `meith mcp` is gone: everything is closed now, nothing more is written.
    void end();
    /// meithd stops: the requests waiting are answered with that, what is queued for the
    /// client leaves (for at most a second), and the session ends without a verdict, so
    /// `meith mcp` takes it over.
    void stop();

    // The connection's side: its replies (whole frames), its closing, the bytes the client
    // has not taken yet.
    void on_frames(std::string_view frames);
    /// `stopping`: meithd shuts down (no verdict: `meith mcp` takes over); otherwise the
    /// connection closed the client (exit status 1).
    void on_connection_closed(bool stopping);
    std::size_t backlog() const { return out_.unsent(); }

    // bridge::link
    bool connected() const override { return !done_ && !conn_gone_; }
    std::optional<bridge::json> connect(const std::string& hello, const std::string& id,
                                        std::string& why) override;
    bool send(const std::string& frame, std::string& why) override;
    void disconnect() override;
    void write_client(std::string_view line) override;
    void note(std::string_view text) override;

  private:
    /// Bytes queued for the client's stdout, written once per I/O turn (and as it takes them).
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
    void flush_out();
    /// Whether to stop reading the client: too much unsent to it, or its connection's own
    /// queue over limits.max_outbound_bytes (resumed when the connection hands frames over).
    bool over_limit() const;
    /// Runs `fn`; a throw ends the session (exit status 1) rather than leaving it stuck.
    template <class Fn>
    void guarded(Fn&& fn);

    void read_client();
    /// The client's bytes that are there (read_client's wait said so).
    void read_input();
    /// Hands the frames the session queued this turn to the connection.
    void deliver();
    /// Input over: refuse what the client can no longer answer, wait for what is owed.
    void begin_drain();
    void check_drained();
    /// Ends the session with `exit_status`; `flush_first`: once the client took its answers.
    void finish(int exit_status, bool flush_first);
    void close_all();

    asio::any_io_executor ex_;
    std::weak_ptr<connection> conn_;
    std::string to_conn_;    ///< frames for the connection, delivered once per turn
    std::string delivering_; ///< the batch being delivered
    bool delivery_posted_ = false;
    asio::posix::stream_descriptor in_;
    bool in_socket_ = false;
    outbox out_;
    bool out_socket_ = false;
    client_fd err_;
    std::string failed_;
    std::string label_;
    std::function<void(int)> ended_;
    bridge::mcp_session session_;
    asio::steady_timer drain_timer_;
    asio::steady_timer watch_timer_; ///< while draining: is the client still reading?
    bool reading_client_ = false;
    bool conn_gone_ = false;
    bool draining_ = false;
    bool finishing_ = false;
    int finish_status_ = 0;
    bool done_ = false;
};

} // namespace meith::daemon
