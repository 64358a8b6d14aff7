#include "daemon/mcp_handoff.hpp"

#include <asio/post.hpp>

#include <cerrno>
#include <fmt/format.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

namespace meith::daemon {

namespace {
constexpr std::size_t max_frame = 256 << 20; ///< meithd's own frames: no limit of its own
constexpr auto watch_every = std::chrono::milliseconds(200);
} // namespace

mcp_handoff::mcp_handoff(asio::any_io_executor ex, int inner, int in, int out, int err,
                         bridge::settings s, std::string label, std::function<void(int)> ended)
    : ex_(ex), inner_(asio::posix::stream_descriptor(ex, inner)), in_(ex, in),
      out_(asio::posix::stream_descriptor(ex, out)), err_(err), label_(std::move(label)),
      ended_(std::move(ended)), session_(std::move(s), *this), frames_(max_frame), drain_timer_(ex),
      watch_timer_(ex) {
    std::error_code ignored;
    inner_.fd.non_blocking(true, ignored);
    in_.non_blocking(true, ignored);
    out_.fd.non_blocking(true, ignored);
}

mcp_handoff::~mcp_handoff() {
    close_all();
}

void mcp_handoff::start() {
    const std::string id = session_.next_request_id();
    std::string why;
    send(bridge::compact(session_.hello_frame(id)), why);
    session_.expect_hello(id); // the client's messages wait for the hello's profile (§23)
    read_inner();
    read_client();
}

void mcp_handoff::end() {
    ended_ = nullptr; // nobody to tell
    close_all();
}

std::optional<bridge::json> mcp_handoff::connect(const std::string&, const std::string&,
                                                 std::string& why) {
    why = "this MCP session's connection in meithd ended";
    return std::nullopt;
}

bool mcp_handoff::send(const std::string& frame, std::string& why) {
    if (!connected()) {
        why = "this MCP session's connection in meithd ended";
        return false;
    }
    queue(inner_, frame);
    queue(inner_, "\n");
    return true;
}

void mcp_handoff::disconnect() {
    inner_gone_ = true;
}

void mcp_handoff::write_client(std::string_view line) {
    if (!done_ && !out_.dead) queue(out_, line);
}

void mcp_handoff::note(std::string_view text) {
    if (err_ >= 0) {
        // Best effort, never blocking the I/O thread: a full pipe loses the note.
        pollfd p{err_, POLLOUT, 0};
        if (::poll(&p, 1, 0) == 1 && (p.revents & POLLOUT) != 0) {
            const std::string line = fmt::format("{}\n", text);
            [[maybe_unused]] const ssize_t n = ::write(err_, line.data(), line.size());
        }
    }
    spdlog::info("{}: {}", label_, text);
}

void mcp_handoff::queue(outbox& box, std::string_view bytes) {
    if (box.dead || done_) return;
    box.buf.append(bytes);
    if (box.scheduled || box.waiting) return;
    box.scheduled = true;
    // After this I/O turn: every message of the turn leaves in one write.
    asio::post(ex_, [self = shared_from_this(), &box] {
        box.scheduled = false;
        self->flush(box);
    });
}

void mcp_handoff::flush(outbox& box) {
    while (!done_ && box.unsent() > 0) {
        const ssize_t n = ::write(box.fd.native_handle(), box.buf.data() + box.sent, box.unsent());
        if (n > 0) {
            box.sent += static_cast<std::size_t>(n);
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            box.waiting = true;
            box.fd.async_wait(asio::posix::descriptor_base::wait_write,
                              [self = shared_from_this(), &box](const std::error_code& ec) {
                                  box.waiting = false;
                                  if (!ec) self->flush(box);
                              });
            return;
        }
        // The reader is gone: the client closed its stdout, or the connection ended.
        box.dead = true;
        box.buf.clear();
        box.sent = 0;
        if (&box == &out_)
            finish(draining_ ? 0 : 1, false);
        else
            inner_gone_ = true;
        return;
    }
    if (done_) return;
    box.buf.clear();
    box.sent = 0;
    if (&box != &out_) return;
    if (finishing_) return finish(finish_status_, false);
    // Under the limit again: read what waited.
    if (!reading_inner_) read_inner();
    if (!reading_client_ && !draining_) read_client();
}

void mcp_handoff::read_client() {
    if (done_ || draining_ || over_limit()) return;
    reading_client_ = true;
    in_.async_wait(asio::posix::descriptor_base::wait_read,
                   [self = shared_from_this()](const std::error_code& ec) {
                       self->reading_client_ = false;
                       if (self->done_ || self->draining_) return;
                       if (ec) return self->finish(1, false);
                       auto buf = self->session_.input_buffer();
                       const ssize_t n = ::read(self->in_.native_handle(), buf.data(), buf.size());
                       if (n > 0) {
                           self->session_.input_commit(static_cast<std::size_t>(n));
                       } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
                           self->session_.input_ended(n == 0);
                           self->session_.pump();
                           return self->begin_drain();
                       }
                       self->session_.pump();
                       self->read_client();
                   });
}

void mcp_handoff::read_inner() {
    if (done_ || inner_gone_ || over_limit()) return;
    reading_inner_ = true;
    inner_.fd.async_wait(asio::posix::descriptor_base::wait_read, [self = shared_from_this()](
                                                                      const std::error_code& ec) {
        self->reading_inner_ = false;
        if (self->done_) return;
        auto buf = self->frames_.prepare();
        const ssize_t n = ec ? -1 : ::read(self->inner_.fd.native_handle(), buf.data(), buf.size());
        if (n < 0 && !ec && (errno == EINTR || errno == EAGAIN)) return self->read_inner();
        if (n <= 0) {
            // The connection closed (meithd shutting down, or it closed a client that
            // did not read): the session cannot go on.
            self->session_.daemon_gone("meithd ended this MCP session's connection");
            return self->finish(1, true);
        }
        self->frames_.commit(static_cast<std::size_t>(n));
        for (;;) {
            const auto st = self->frames_.next();
            if (st == protocol::line_framer::status::need_more) break;
            if (st == protocol::line_framer::status::frame)
                self->session_.on_daemon_frame(std::string(self->frames_.line()));
            if (self->done_) return;
        }
        if (self->draining_) self->check_drained();
        self->read_inner();
    });
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
        if (!ec) self->check_drained();
    });
}

void mcp_handoff::finish(int exit_status, bool flush_first) {
    if (done_) return;
    if (flush_first && out_.unsent() > 0 && !out_.dead) {
        // The answers queued leave first; the drain timer still bounds the wait.
        finishing_ = true;
        finish_status_ = exit_status;
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
    std::error_code ignored;
    // Closing our end of the pair ends the session's connection: its calls are cancelled.
    inner_.fd.close(ignored);
    in_.close(ignored);
    out_.fd.close(ignored);
    if (err_ >= 0) ::close(std::exchange(err_, -1));
}

} // namespace meith::daemon
