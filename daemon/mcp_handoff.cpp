#include "daemon/mcp_handoff.hpp"

#include "daemon/connection.hpp"

#include <asio/post.hpp>

#include <cerrno>
#include <fmt/format.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

namespace meith::daemon {

namespace {

constexpr auto watch_every = std::chrono::milliseconds(200);
constexpr std::string_view gone = "this MCP session's connection in meithd ended";

/// Reads or writes without blocking, whoever else holds the descriptor: a socket with
/// MSG_DONTWAIT (its O_NONBLOCK is shared with the client), a pipe through its own
/// non-blocking description (platform::private_nonblocking).
ssize_t read_some(int fd, bool socket, char* data, std::size_t size) {
    return socket ? ::recv(fd, data, size, MSG_DONTWAIT) : ::read(fd, data, size);
}
ssize_t write_some(int fd, bool socket, const char* data, std::size_t size) {
    return socket ? ::send(fd, data, size, MSG_DONTWAIT | MSG_NOSIGNAL) : ::write(fd, data, size);
}

} // namespace

mcp_handoff::mcp_handoff(asio::any_io_executor ex, client_fd in, client_fd out, client_fd err,
                         bridge::settings s, std::string label, std::function<void(int)> ended)
    : ex_(ex), in_(ex), in_socket_(in.socket), out_(asio::posix::stream_descriptor(ex)),
      out_socket_(out.socket), err_(err), label_(std::move(label)), ended_(std::move(ended)),
      session_(std::move(s), *this), drain_timer_(ex), watch_timer_(ex) {
    // Registered with epoll here; its refusal (an fd epoll cannot watch) is reported, not
    // thrown. asio sets no flag on the descriptions: only waits are asked of it.
    std::error_code ec;
    in_.assign(in.fd, ec);
    if (ec) {
        ::close(in.fd);
        failed_ = "its stdin cannot be watched: " + ec.message();
    }
    std::error_code ec_out;
    out_.fd.assign(out.fd, ec_out);
    if (ec_out) {
        ::close(out.fd);
        if (failed_.empty()) failed_ = "its stdout cannot be watched: " + ec_out.message();
    }
    if (!failed_.empty()) close_all();
}

mcp_handoff::~mcp_handoff() {
    close_all();
}

template <class Fn>
void mcp_handoff::guarded(Fn&& fn) {
    try {
        fn();
    } catch (const std::exception& e) {
        spdlog::error("{}: {}: ending the session", label_, e.what());
        finish(1, false);
    }
}

bool mcp_handoff::over_limit() const {
    if (out_.unsent() > max_unsent) return true;
    auto c = conn_.lock();
    return c && c->backed_up();
}

void mcp_handoff::start() {
    if (done_) return;
    const std::string id = session_.next_request_id();
    std::string why;
    send(bridge::compact(session_.hello_frame(id)), why);
    session_.expect_hello(id); // the client's messages wait for the hello's profile (§23)
    read_client();
}

void mcp_handoff::end() {
    ended_ = nullptr; // nobody to tell
    close_all();
}

void mcp_handoff::stop() {
    if (done_ || finishing_) return;
    if (!conn_gone_) session_.daemon_gone("meithd is stopping");
    conn_gone_ = true;
    finish(no_verdict, true);
    if (!finishing_) return;
    // Shutdown does not wait long on a client that does not read.
    drain_timer_.expires_after(std::chrono::seconds(1));
    drain_timer_.async_wait([self = shared_from_this()](const std::error_code& ec) {
        if (!ec) self->finish(no_verdict, false);
    });
}

std::optional<bridge::json> mcp_handoff::connect(const std::string&, const std::string&,
                                                 std::string& why) {
    why = gone;
    return std::nullopt;
}

bool mcp_handoff::send(const std::string& frame, std::string& why) {
    if (!connected()) {
        why = gone;
        return false;
    }
    to_conn_.append(frame);
    to_conn_.push_back('\n');
    if (!delivery_posted_) {
        // After this I/O turn: the session's frames of the turn are read as one batch, and
        // the connection is never entered from inside its own reply.
        delivery_posted_ = true;
        asio::post(ex_, [self = shared_from_this()] { self->deliver(); });
    }
    return true;
}

void mcp_handoff::deliver() {
    delivery_posted_ = false;
    delivering_.clear();
    if (done_ || conn_gone_) return;
    // Swapped out first: the connection's answers may queue more frames meanwhile. The
    // buffer is kept for the next turn.
    delivering_.swap(to_conn_);
    guarded([&] {
        if (auto c = conn_.lock()) c->take_frames(delivering_);
    });
    delivering_.clear();
}

void mcp_handoff::disconnect() {
    conn_gone_ = true;
}

void mcp_handoff::on_frames(std::string_view frames) {
    guarded([&] {
        while (!frames.empty() && !done_) {
            const auto nl = frames.find('\n');
            session_.on_daemon_frame(frames.substr(0, nl));
            if (nl == std::string_view::npos) break;
            frames.remove_prefix(nl + 1);
        }
        if (draining_) check_drained();
        // The connection's queue was just drained: read the client again if it waited.
        if (!reading_client_ && !draining_) read_client();
    });
}

void mcp_handoff::on_connection_closed(bool stopping) {
    if (done_ || conn_gone_) return;
    if (stopping) return stop(); // `meith mcp` takes the session over
    // The connection closed the client (it did not read its answers): the requests waiting
    // hear so and the session ends, exit status 1.
    session_.daemon_gone("meithd closed this MCP session's connection");
    conn_gone_ = true;
    finish(1, true);
}

void mcp_handoff::write_client(std::string_view line) {
    if (done_ || out_.dead) return;
    out_.buf.append(line);
    if (out_.scheduled || out_.waiting) return;
    out_.scheduled = true;
    // After this I/O turn: every message of the turn leaves in one write.
    asio::post(ex_, [self = shared_from_this()] {
        self->out_.scheduled = false;
        self->guarded([&] { self->flush_out(); });
    });
}

void mcp_handoff::note(std::string_view text) {
    if (err_.fd >= 0) {
        // Best effort, never blocking the I/O thread: a full pipe loses the note.
        const std::string line = fmt::format("{}\n", text);
        [[maybe_unused]] const ssize_t n =
            write_some(err_.fd, err_.socket, line.data(), line.size());
    }
    spdlog::info("{}: {}", label_, text);
}

void mcp_handoff::flush_out() {
    while (!done_ && out_.unsent() > 0) {
        const ssize_t n = write_some(out_.fd.native_handle(), out_socket_,
                                     out_.buf.data() + out_.sent, out_.unsent());
        if (n > 0) {
            out_.sent += static_cast<std::size_t>(n);
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            if (out_.sent > 64 * 1024) { // a slow reader: what it took is not kept
                out_.buf.erase(0, out_.sent);
                out_.sent = 0;
            }
            out_.waiting = true;
            out_.fd.async_wait(asio::posix::descriptor_base::wait_write,
                               [self = shared_from_this()](const std::error_code& ec) {
                                   self->out_.waiting = false;
                                   if (!ec) self->guarded([&] { self->flush_out(); });
                               });
            return;
        }
        // The client closed its stdout with answers still owed: they are lost (status 1).
        out_.dead = true;
        out_.buf.clear();
        out_.sent = 0;
        return finish(1, false);
    }
    if (done_) return;
    out_.buf.clear();
    out_.sent = 0;
    if (finishing_) return finish(finish_status_, false);
    if (!reading_client_ && !draining_) read_client(); // under the limit again
}

void mcp_handoff::read_client() {
    if (done_ || draining_ || reading_client_ || over_limit()) return;
    reading_client_ = true;
    in_.async_wait(asio::posix::descriptor_base::wait_read,
                   [self = shared_from_this()](const std::error_code& ec) {
                       self->reading_client_ = false;
                       if (self->done_ || self->draining_) return;
                       if (ec) return self->finish(1, false);
                       self->guarded([&] { self->read_input(); });
                   });
}

void mcp_handoff::read_input() {
    auto buf = session_.input_buffer();
    const ssize_t n = read_some(in_.native_handle(), in_socket_, buf.data(), buf.size());
    if (n > 0) {
        session_.input_commit(static_cast<std::size_t>(n));
    } else if (n == 0 || (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK)) {
        session_.input_ended(n == 0);
        session_.pump();
        return begin_drain();
    }
    session_.pump();
    read_client();
}

void mcp_handoff::begin_drain() {
    if (draining_ || done_) return;
    draining_ = true;
    session_.begin_drain();
    drain_timer_.expires_after(bridge::mcp_session::drain_grace);
    drain_timer_.async_wait([self = shared_from_this()](const std::error_code& ec) {
        if (ec || self->done_) return;
        self->note(fmt::format("meith mcp: stdin closed; {} s later requests are still in "
                               "flight: leaving them (their calls are cancelled)",
                               bridge::mcp_session::drain_grace.count()));
        self->finish(0, false);
    });
    check_drained();
}

void mcp_handoff::check_drained() {
    if (done_ || finishing_) return;
    if (!session_.awaited() && !session_.waiting_hello()) return finish(0, true);
    // Nobody reads the answers any more (the client closed its end): leave now.
    pollfd p{out_.fd.native_handle(), 0, 0};
    if (::poll(&p, 1, 0) > 0 && (p.revents & (POLLERR | POLLHUP | POLLNVAL)) != 0)
        return finish(0, false);
    watch_timer_.expires_after(watch_every);
    watch_timer_.async_wait([self = shared_from_this()](const std::error_code& ec) {
        if (!ec) self->guarded([&] { self->check_drained(); });
    });
}

void mcp_handoff::finish(int exit_status, bool flush_first) {
    if (done_) return;
    if (flush_first && out_.unsent() > 0 && !out_.dead) {
        // The answers queued leave first, for at most the drain's grace.
        finishing_ = true;
        finish_status_ = exit_status;
        if (!draining_) {
            drain_timer_.expires_after(bridge::mcp_session::drain_grace);
            drain_timer_.async_wait([self = shared_from_this()](const std::error_code& ec) {
                if (!ec) self->finish(self->finish_status_, false);
            });
        }
        return;
    }
    close_all();
    if (ended_) std::exchange(ended_, nullptr)(exit_status);
}

void mcp_handoff::close_all() {
    if (done_) return;
    done_ = true;
    drain_timer_.cancel();
    watch_timer_.cancel();
    // Closing the session's connection cancels its calls, as for any client that leaves.
    if (auto c = conn_.lock(); c && !conn_gone_) {
        conn_gone_ = true;
        c->close("the handed-over MCP session ended");
    }
    std::error_code ignored;
    in_.close(ignored);
    out_.fd.close(ignored);
    if (err_.fd >= 0) ::close(std::exchange(err_.fd, -1));
}

} // namespace meith::daemon
