#pragma once
// protocol::pipe_writer: the one shape in which meith writes lines (or any frames) to a pipe
// it does not own the reader of: a child's stdin (process::supervised_process) and
// meith-remote's stdout towards meithd (remote::bridge). Reading is protocol::line_framer's.
//
// Shape (docs/architecture.md "Threading"): one write in flight; what is queued while it runs
// goes out next in one write(2) (double buffer: `queued` fills while `writing` is on the wire);
// a write that starts when nothing is in flight waits for the end of the current I/O turn, so
// the frames one turn queues (a client's pipelined calls) wake the reader once. Bounded: once
// more than `max_queued` bytes wait, a write is refused, not buffered — the reader does not read,
// and the caller answers that (back-pressure; docs/protocol.md §5). Header-only: users link
// meith::asio.
#include <asio/posix/stream_descriptor.hpp>
#include <asio/post.hpp>
#include <asio/write.hpp>

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>

namespace meith::protocol {

class pipe_writer {
  public:
    /// Called when a write fails (EPIPE: the reader is gone); what was queued is dropped. A
    /// later write tries again (and fails the same way).
    using error_handler = std::function<void(const std::error_code&)>;

    /// `pipe` must outlive this writer or be closed first (a write in flight then ends with
    /// operation_aborted, which is not reported).
    pipe_writer(asio::posix::stream_descriptor& pipe, std::size_t max_queued,
                error_handler on_error = {})
        : state_(std::make_shared<state>()) {
        state_->pipe = &pipe;
        state_->max_queued = max_queued;
        state_->on_error = std::move(on_error);
    }
    ~pipe_writer() { state_->pipe = nullptr; } // a write in flight finds nobody to report to
    pipe_writer(const pipe_writer&) = delete;
    pipe_writer& operator=(const pipe_writer&) = delete;

    /// Queues `bytes` (a whole frame: a line writer passes its '\n'). False, with nothing
    /// queued, when more than max_queued bytes already wait (one frame may pass the bound, so
    /// a frame larger than it still goes out to a reader that reads).
    bool write(std::string_view bytes) {
        auto& s = *state_;
        if (s.queued.size() + s.writing.size() > s.max_queued) return false;
        s.queued.append(bytes);
        if (!s.flush_posted && !s.active) {
            s.flush_posted = true;
            asio::post(s.pipe->get_executor(), [st = state_] {
                st->flush_posted = false;
                flush(st);
            });
        }
        return true;
    }

    /// Writes what is queued as far as the pipe takes it now, without waiting (before closing
    /// the pipe at a stop); what it does not take is dropped. No-op while a write is in flight.
    void write_now() {
        auto& s = *state_;
        if (s.active || s.queued.empty() || s.pipe == nullptr) return;
        std::error_code ec;
        s.pipe->non_blocking(true, ec);
        if (!ec) s.pipe->write_some(asio::buffer(s.queued), ec);
        s.queued.clear();
    }

    /// Bytes queued or on the wire.
    std::size_t pending() const { return state_->queued.size() + state_->writing.size(); }

  private:
    struct state {
        asio::posix::stream_descriptor* pipe = nullptr; ///< null once the writer is gone
        std::size_t max_queued = 0;
        error_handler on_error;
        std::string queued;  ///< what the next write takes
        std::string writing; ///< what the write in flight holds
        bool active = false;
        bool flush_posted = false;
    };

    static void flush(const std::shared_ptr<state>& st) {
        auto& s = *st;
        if (s.pipe == nullptr || s.active || s.queued.empty()) return;
        s.active = true;
        s.writing.swap(s.queued);
        asio::async_write(*s.pipe, asio::buffer(s.writing),
                          [st](const std::error_code& ec, std::size_t) {
                              st->active = false;
                              st->writing.clear();
                              if (st->pipe == nullptr || ec == asio::error::operation_aborted)
                                  return;
                              if (ec) {
                                  st->queued.clear();
                                  if (st->on_error) st->on_error(ec);
                                  return;
                              }
                              flush(st);
                          });
    }

    std::shared_ptr<state> state_;
};

} // namespace meith::protocol
