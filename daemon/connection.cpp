#include "daemon/connection.hpp"

#include "daemon/coroutine_root.hpp"
#include "daemon/instance.hpp"
#include "permissions/secret.hpp"
#include "platform/fd_passing.hpp"
#include "protocol/json_writer.hpp"
#include "protocol/server_frames.hpp"

#include <asio/co_spawn.hpp>
#include <asio/experimental/as_tuple.hpp>
#include <asio/post.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/write.hpp>

#include <algorithm>
#include <cstring>
#include <ctime>
#include <poll.h>
#include <simdjson.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

namespace meith::daemon {

using protocol::append_json_string;
using protocol::frame_type;

std::string new_session_id() {
    return "s_" + permissions::random_hex(16);
}

namespace {
// Small first reads keep an idle connection cheap; the framer grows for big frames.
constexpr std::size_t read_chunk = 16 * 1024;
} // namespace

connection::connection(asio::local::stream_protocol::socket socket, registry::registry& reg,
                       gateway::mcp_gateway& mcp, peer_identity peer,
                       std::function<void(connection*)> on_closed, adopt_fn adopt)
    : socket_(std::move(socket)), registry_(reg), mcp_(mcp), audit_(reg.audit_trail()), peer_(peer),
      on_closed_(std::move(on_closed)), adopt_(std::move(adopt)), session_id_(new_session_id()),
      framer_(reg.cfg().limits.max_frame_bytes, read_chunk), writer_wake_(socket_.get_executor()),
      idle_timer_(socket_.get_executor()), resume_timer_(socket_.get_executor()),
      stall_timer_(socket_.get_executor()) {
    accepted_ticks_ = platform::accept_time();
    // A frame too large to parse is still answered under its requestId, and audited when it
    // is a tool_call (handle_oversized): members 0 and 1.
    // As frame_decoder reads fields in order, the last of duplicate keys counts.
    framer_.scan_oversized({"requestId", "type"},
                           protocol::top_level_scanner::duplicates::last_wins);
}

connection::~connection() {
    drop_passed_fds();
}

void connection::drop_passed_fds() {
    for (int fd : passed_fds_)
        ::close(fd);
    passed_fds_.clear();
}

void connection::start() {
    std::string fields;
    protocol::json_members(fields)
        .string("sessionId", session_id_)
        .number("pid", static_cast<std::uint64_t>(peer_.pid))
        .number("uid", peer_.uid);
    audit_.event("connection_open", fields);
    registry_.observe_session("session_start", session_id_, peer_.pid, peer_.uid);
    arm_idle_timer();
    const auto on_failure = [weak = weak_from_this()](const std::string& error) {
        if (auto self = weak.lock()) self->close("internal error: " + error);
    };
    if (!in_process_) // an in-process client's frames come through take_frames()
        asio::co_spawn(socket_.get_executor(), read_loop(),
                       coroutine_root("connection " + session_id_ + " reader", on_failure));
    asio::co_spawn(socket_.get_executor(), write_loop(),
                   coroutine_root("connection " + session_id_ + " writer", on_failure));
}

void connection::serve_in_process(in_process_client client) {
    in_process_ = std::move(client);
}

void connection::take_frames(std::string_view bytes) {
    // Through the connection's own framer, as read(2) would have filled it: the same limits,
    // the same answer to an oversized frame.
    while (!bytes.empty() && !closed_) {
        auto buf = framer_.prepare();
        const std::size_t n = std::min(buf.size(), bytes.size());
        std::memcpy(buf.data(), bytes.data(), n);
        framer_.commit(n);
        bytes.remove_prefix(n);
        for (;;) {
            const auto st = framer_.next();
            if (st == protocol::line_framer::status::need_more) break;
            if (st == protocol::line_framer::status::oversized)
                handle_oversized();
            else
                handle_frame(framer_.line());
            if (closed_) return;
        }
    }
    if (framer_.buffered() == 0) framer_.release();
    flush();
}

void connection::arm_idle_timer() {
    const auto ms = registry_.cfg().limits.idle_timeout_ms;
    if (ms == 0 || in_process_) return;
    idle_timer_.expires_after(std::chrono::milliseconds(ms));
    idle_timer_.async_wait([weak = weak_from_this(), ms](const std::error_code& ec) {
        if (ec) return;
        auto self = weak.lock();
        if (!self || self->closed_) return;
        // Waiting for replies, or an approver waiting for held calls, is not idling.
        if (!self->calls_.empty() || self->async_replies_ > 0 || self->approver_ ||
            self->handoff_) {
            self->arm_idle_timer();
            return;
        }
        self->close("idle for " + std::to_string(ms) + " ms (limits.idle_timeout_ms)");
    });
}

asio::awaitable<void> connection::read_loop() {
    auto self = shared_from_this();
    std::error_code ec;
    socket_.non_blocking(true, ec);
    while (!closed_) {
        if (over_outbound_limit()) {
            // Back-pressure: read no further request until the client takes its replies.
            reading_paused_ = true;
            resume_timer_.expires_at(std::chrono::steady_clock::time_point::max());
            co_await resume_timer_.async_wait(asio::experimental::as_tuple(asio::use_awaitable));
            reading_paused_ = false;
            continue;
        }
        auto buf = framer_.prepare();
        // recvmsg: descriptors a client attaches (an mcp_handoff's, §10) come with the bytes
        // and are ours to take or close; read(2) would have the kernel close them.
        const ssize_t got = platform::receive_with_fds(socket_.native_handle(), buf, passed_fds_);
        if (passed_fds_.size() > platform::max_passed_fds) {
            // Descriptors piling up under an unfinished frame: no frame carries more.
            close("sent more descriptors than one mcp_handoff carries");
            break;
        }
        const std::size_t n = got > 0 ? static_cast<std::size_t>(got) : 0;
        ec = got > 0    ? std::error_code()
             : got == 0 ? std::error_code(asio::error::eof)
                        : std::error_code(errno, asio::error::get_system_category());
        if (ec == asio::error::would_block || ec == asio::error::try_again) {
            // Nothing to read: an idle connection waits without a read buffer.
            framer_.release();
            auto [wait_ec] = co_await socket_.async_wait(
                asio::socket_base::wait_read, asio::experimental::as_tuple(asio::use_awaitable));
            if (wait_ec) break;
            continue;
        }
        if (ec == asio::error::eof && !closed_ && !peer_gone()) {
            // A half-close: no more requests, but the replies of those sent still go out.
            peer_eof_ = true;
            framer_.release();
            flush();
            close_if_finished();
            co_return;
        }
        if (ec || closed_) break;
        framer_.commit(n);
        for (;;) {
            const auto st = framer_.next();
            if (st == protocol::line_framer::status::need_more) break;
            if (st == protocol::line_framer::status::oversized) {
                handle_oversized();
            } else {
                handle_frame(framer_.line());
            }
            if (closed_) co_return;
        }
        // Descriptors stay only with an unfinished frame: the handoff frame takes its own.
        if (!passed_fds_.empty() && framer_.partial().empty()) drop_passed_fds();
        if (framer_.buffered() == 0) protocol::frame_decoder::shrink_if_large(1024 * 1024);
        flush();
    }
    if (!closed_) close("client closed the connection");
}

bool connection::peer_gone() {
    // EOF on read alone does not tell a half-close (shutdown(SHUT_WR)) from a close: a Unix
    // socket whose peer closed (or shut down both ways) also polls POLLHUP (unix(7)).
    pollfd p{socket_.native_handle(), POLLOUT, 0};
    return ::poll(&p, 1, 0) < 0 || (p.revents & (POLLHUP | POLLERR)) != 0;
}

bool connection::over_outbound_limit() const {
    return unsent() > registry_.cfg().limits.max_outbound_bytes;
}

void connection::watch_stall() {
    if (stall_armed_ || closed_ || !over_outbound_limit()) return;
    stall_armed_ = true;
    progress_at_stall_check_ = progress_;
    const auto ms = registry_.cfg().limits.write_stall_ms;
    stall_timer_.expires_after(std::chrono::milliseconds(ms));
    stall_timer_.async_wait([weak = weak_from_this(), ms](const std::error_code& ec) {
        auto self = weak.lock();
        if (ec || !self || self->closed_) return;
        self->stall_armed_ = false;
        if (!self->over_outbound_limit()) {
            if (self->reading_paused_) self->resume_timer_.cancel(); // belt and braces
            return;
        }
        if (self->progress_ != self->progress_at_stall_check_) {
            self->watch_stall(); // slow, but reading
            return;
        }
        self->close("client does not read: " + std::to_string(self->unsent()) +
                    " unsent bytes, over limits.max_outbound_bytes (" +
                    std::to_string(self->registry_.cfg().limits.max_outbound_bytes) +
                    "), and none taken for " + std::to_string(ms) + " ms (limits.write_stall_ms)");
    });
}

void connection::close_if_finished() {
    if (closed_ || !peer_eof_ || !calls_.empty() || async_replies_ > 0 ||
        writer_ != writer_state::idle || !outbound_.empty())
        return;
    close("client closed its side; every reply was written");
}

void connection::on_tool_event(std::string_view request_id, std::string_view event_json) {
    if (closed_) return;
    if (over_outbound_limit()) {
        // Back-pressure for events: the client reads slower than the tool writes. Counted,
        // not queued, so the queue stays bounded (docs/protocol.md §5 Limits).
        for (auto& [id, count] : dropped_events_)
            if (id == request_id) {
                ++count;
                return;
            }
        dropped_events_.emplace_back(request_id, 1);
        return;
    }
    report_dropped_events(request_id);
    protocol::append_tool_event(outbound_, request_id, event_json);
    flush();
}

void connection::report_dropped_events(std::string_view request_id) {
    for (auto it = dropped_events_.begin(); it != dropped_events_.end(); ++it) {
        if (it->first != request_id) continue;
        std::string event;
        protocol::append_events_dropped_event(event, it->second,
                                              "the client read slower than the tool wrote its "
                                              "events (over limits.max_outbound_bytes)");
        protocol::append_tool_event(outbound_, request_id, event);
        dropped_events_.erase(it);
        return;
    }
}

namespace {

/// A call refused because the audit log cannot be written says why when the cause is known: a
/// home removed under the daemon (`rm -rf ~/.meith`) is not fixed by waiting.
std::optional<protocol::tool_result> with_home_cause(const protocol::tool_result& r) {
    if (r.ok || !r.error || r.error->code != protocol::error_code::tool_failed) return std::nullopt;
    if (r.error->message.rfind("the audit log cannot be written", 0) != 0) return std::nullopt;
    const auto why = home_gone_reason();
    if (!why) return std::nullopt;
    auto out = r;
    out.error->message += ": " + *why;
    return out;
}

} // namespace

void connection::on_tool_result(std::string_view request_id, const protocol::tool_result& r) {
    if (!closed_) {
        if (!dropped_events_.empty()) report_dropped_events(request_id);
        const std::size_t begin = outbound_.size();
        if (auto explained = with_home_cause(r))
            protocol::append_tool_result_frame(outbound_, request_id, *explained);
        else
            protocol::append_tool_result_frame(outbound_, request_id, r);
        // The call's line was just built into the pending batch (registry::finish).
        if (r.ok) marks_.push_back({begin, outbound_.size(), audit_.high_seq()});
    }
    calls_.erase(std::string(request_id));
    if (!closed_) flush();
}

void connection::flush() {
    if (closed_) return;
    watch_stall();
    // Resumed through the timer's handler, i.e. after this I/O turn: whatever else the turn
    // queues (here or on other connections) goes in the same batch and audit commit.
    if (writer_ == writer_state::idle) writer_wake_.cancel();
}

asio::awaitable<void> connection::write_loop() {
    auto self = shared_from_this();
    const auto park = [this](writer_state why) {
        writer_ = why;
        writer_wake_.expires_at(std::chrono::steady_clock::time_point::max());
        return writer_wake_.async_wait(asio::experimental::as_tuple(asio::use_awaitable));
    };
    while (!closed_) {
        if (outbound_.empty()) {
            if (closing_after_flush_) {
                close(flush_close_reason_);
                break;
            }
            writer_ = writer_state::idle;
            close_if_finished();
            if (closed_) break;
            co_await park(writer_state::idle);
            writer_ = writer_state::busy;
            continue;
        }
        // Audit lines of the replies below reach the file first (docs/protocol.md §6): they
        // were built before the replies, so the batch submitted now covers them. Under load the
        // audit writer thread takes the batch and the replies wait for its commit.
        const std::uint64_t seq = audit_.high_seq();
        audit_.commit();
        if (!audit_.committed(seq)) {
            writer_ = writer_state::waiting_audit;
            // Runs at once when the audit writer committed in the meantime.
            audit_.after(seq, [weak = weak_from_this()] {
                auto s = weak.lock();
                if (!s || s->writer_ != writer_state::waiting_audit) return;
                s->writer_ = writer_state::busy;
                s->writer_wake_.cancel();
            });
            if (writer_ == writer_state::waiting_audit) co_await park(writer_state::waiting_audit);
            writer_ = writer_state::busy;
            continue;
        }
        if (!marks_.empty() && marks_.front().seq > 0 &&
            audit_.withheld_between(marks_.front().seq - 1, marks_.back().seq))
            withhold_unaudited_results();
        if (marks_.capacity() > 4096)
            std::vector<result_mark>().swap(marks_); // not kept for an idle connection
        else
            marks_.clear();
        writing_.swap(outbound_);
        written_ = 0;
        if (in_process_) {
            // The client is in this process: it takes the batch now (it may queue frames
            // back, which land in outbound_ for the next turn of this loop).
            progress_ += writing_.size();
            in_process_->frames(writing_);
            writing_.clear();
            continue;
        }
        auto [ec, n] = co_await asio::async_write(
            socket_, asio::buffer(writing_),
            // Counts the bytes the socket takes, for the stall check.
            [this](const std::error_code& ec, std::size_t total) -> std::size_t {
                progress_ += total - written_;
                written_ = total;
                // Under the limit again in the middle of a write: read again now. Waiting for
                // the whole write could wait forever (the client takes a part, then stops
                // reading with less than the limit unsent, and the stall check disarms).
                if (reading_paused_ && !over_outbound_limit()) resume_timer_.cancel();
                return ec ? 0 : 64 * 1024;
            },
            asio::experimental::as_tuple(asio::use_awaitable));
        writing_.clear();
        written_ = 0;
        // Drop a large buffer rather than keep it for an idle connection.
        if (writing_.capacity() > 256 * 1024) std::string().swap(writing_);
        if (ec) {
            if (!closed_) close("write failed: " + ec.message());
            break;
        }
        if (reading_paused_ && !over_outbound_limit()) resume_timer_.cancel();
    }
}

void connection::withhold_unaudited_results() {
    // Rare path (the audit log just failed). Our own encoder wrote each marked frame as
    // {"type":"tool_result","requestId":"…","result":{…}}\n; the first `,"result":` in it ends
    // the (escaped) request id, since every quote inside a JSON string is escaped.
    static constexpr std::string_view result_key = R"(,"result":)";
    std::string kept;
    kept.reserve(outbound_.size());
    std::size_t withheld = 0;
    std::size_t done = 0; // outbound_ before this is in `kept`
    for (const result_mark& m : marks_) {
        if (m.seq == 0 || !audit_.withheld_between(m.seq - 1, m.seq)) continue;
        const std::string_view frame(outbound_.data() + m.begin, m.end - m.begin);
        const auto head = frame.find(result_key);
        if (head == std::string_view::npos) continue;
        kept.append(outbound_, done, m.begin - done);
        kept.append(frame.substr(0, head + result_key.size()));
        std::string why = "the call's audit line could not be written, so its result is "
                          "withheld (audit.on_failure = \"fail_closed\")";
        if (const auto gone = home_gone_reason()) why += ": " + *gone;
        protocol::append_tool_result(
            kept, protocol::tool_result::failure(protocol::error_code::tool_failed, why));
        kept.append("}\n");
        done = m.end;
        ++withheld;
    }
    if (withheld == 0) return;
    kept.append(outbound_, done, std::string::npos);
    outbound_.swap(kept);
    spdlog::warn("connection {}: withheld {} result(s) whose audit lines were not written",
                 session_id_, withheld);
}

void connection::close_after_flush(std::string_view reason) {
    if (handoff_) {
        // meithd stops: the handed-over session answers what waits and ends first, without a
        // verdict (`meith mcp` takes it over); on_mcp_ended then closes this connection.
        const auto session = handoff_;
        session->stop();
        return;
    }
    closing_after_flush_ = true;
    flush_close_reason_ = reason;
    if (writer_ == writer_state::idle && outbound_.empty())
        close(reason);
    else
        flush(); // the writer closes once the queue is drained
}

void connection::close(std::string_view reason) {
    if (closed_) return;
    closed_ = true;
    idle_timer_.cancel();
    stall_timer_.cancel();
    resume_timer_.cancel();
    writer_wake_.cancel();
    if (tools_changed_token_ != 0) registry_.unsubscribe_tools_changed(tools_changed_token_);
    end_mcp();
    drop_passed_fds();
    // `meith mcp` is gone (signalled, killed) or meithd stops: its session ends with it.
    if (handoff_) std::exchange(handoff_, nullptr)->end();
    const std::size_t cancelled = calls_.size();
    // Calls in flight are cancelled and audited; their replies have nowhere to go.
    auto calls = std::move(calls_);
    calls_.clear();
    for (auto& [id, c] : calls)
        c->resolve(protocol::tool_result::failure(protocol::error_code::cancelled,
                                                  "the client disconnected"),
                   tools::call_end::disconnect);
    std::string fields;
    protocol::json_members(fields)
        .string("sessionId", session_id_)
        .string("reason", reason)
        .number("callsCancelled", cancelled)
        .number("pid", static_cast<std::uint64_t>(peer_.pid))
        .number("uid", peer_.uid);
    audit_.event("connection_close", fields);
    // The lines of the cancelled calls and of the close are on file before the peer sees
    // the connection end (closing is rare: the I/O thread waits for the write).
    audit_.commit_now();
    std::error_code ignored;
    socket_.shutdown(asio::socket_base::shutdown_both, ignored);
    socket_.close(ignored);
    registry_.observe_session("session_end", session_id_, peer_.pid, peer_.uid);
    // The calls it was shown stay held for the other approvers or their timeout (§12).
    if (approver_) registry_.approvals().remove_approver(*this);
    registry_.end_session(session_id_);
    spdlog::debug("connection {} closed: {}", session_id_, reason);
    if (in_process_ && in_process_->closed)
        asio::post(socket_.get_executor(), [closed = std::exchange(in_process_->closed, nullptr),
                                            stopping = closing_after_flush_] { closed(stopping); });
    outbound_.clear();
    marks_.clear();
    if (on_closed_) std::exchange(on_closed_, nullptr)(this);
}

} // namespace meith::daemon
