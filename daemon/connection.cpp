#include "daemon/connection.hpp"

#include "daemon/coroutine_root.hpp"
#include "protocol/json_writer.hpp"

#include <asio/co_spawn.hpp>
#include <asio/experimental/as_tuple.hpp>
#include <asio/post.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/write.hpp>

#include <simdjson.h>
#include <spdlog/spdlog.h>
#include <poll.h>
#include <sys/random.h>

namespace meith::daemon {

using protocol::append_json_string;
using protocol::frame_type;

std::string new_session_id() {
    unsigned char bytes[16];
    std::size_t got = 0;
    while (got < sizeof bytes) {
        const auto n = ::getrandom(bytes + got, sizeof bytes - got, 0);
        if (n > 0)
            got += static_cast<std::size_t>(n);
        else if (errno != EINTR)
            throw std::system_error(errno, std::generic_category(), "getrandom");
    }
    static constexpr char hex[] = "0123456789abcdef";
    std::string id = "s_";
    for (unsigned char b : bytes) {
        id.push_back(hex[b >> 4]);
        id.push_back(hex[b & 0xF]);
    }
    return id;
}

namespace {
// Small first reads keep an idle connection cheap; the framer grows for big frames.
constexpr std::size_t read_chunk = 16 * 1024;
} // namespace

connection::connection(asio::local::stream_protocol::socket socket, registry::registry& reg,
                       peer_identity peer, std::function<void(connection*)> on_closed)
    : socket_(std::move(socket)), registry_(reg), peer_(peer), on_closed_(std::move(on_closed)),
      session_id_(new_session_id()), framer_(reg.cfg().limits.max_frame_bytes, read_chunk),
      idle_timer_(socket_.get_executor()), resume_timer_(socket_.get_executor()),
      stall_timer_(socket_.get_executor()) {
}

connection::~connection() = default;

void connection::start() {
    std::string fields = R"("sessionId":)";
    append_json_string(fields, session_id_);
    fields += R"(,"pid":)" + std::to_string(peer_.pid) + R"(,"uid":)" + std::to_string(peer_.uid);
    registry_.audit_event("connection_open", fields);
    registry_.observe_session("session_start", session_id_, peer_.pid, peer_.uid);
    arm_idle_timer();
    asio::co_spawn(socket_.get_executor(), read_loop(),
                   coroutine_root("connection " + session_id_ + " reader",
                                  [weak = weak_from_this()](const std::string& error) {
                                      if (auto self = weak.lock())
                                          self->close("internal error: " + error);
                                  }));
}

void connection::arm_idle_timer() {
    const auto ms = registry_.cfg().limits.idle_timeout_ms;
    if (ms == 0) return;
    idle_timer_.expires_after(std::chrono::milliseconds(ms));
    idle_timer_.async_wait([weak = weak_from_this(), ms](const std::error_code& ec) {
        if (ec) return;
        auto self = weak.lock();
        if (!self || self->closed_) return;
        if (!self->calls_.empty()) { // waiting on a call is not idling
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
        const std::size_t n = socket_.read_some(asio::buffer(buf.data(), buf.size()), ec);
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
        if (!self->over_outbound_limit()) return;
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
    if (closed_ || !peer_eof_ || !calls_.empty() || write_active_ || flush_posted_ ||
        audit_wait_ || !outbound_.empty())
        return;
    close("client closed its side; every reply was written");
}

void connection::handle_oversized() {
    const auto prefix = framer_.oversized_prefix();
    const auto id = protocol::request_id_from_prefix(prefix);
    const std::string why = "frame of " + std::to_string(framer_.dropped_bytes()) +
                            " bytes is over limits.max_frame_bytes (" +
                            std::to_string(registry_.cfg().limits.max_frame_bytes) + ")";
    protocol::append_error_frame(outbound_, id, why);
    if (protocol::prefix_is_tool_call(prefix)) {
        protocol::client_frame f;
        f.type = frame_type::tool_call;
        f.request_id = id;
        audit_rejected_call(f, why);
    }
}

permissions::caller connection::caller_for(const protocol::client_frame& f) const {
    if (f.caller_claim) return permissions::caller_from_claim(*f.caller_claim);
    if (has_hello_claim_) return permissions::caller_from_claim(hello_claim_);
    return permissions::caller::plugin;
}

std::string_view connection::claim_for(const protocol::client_frame& f) const {
    if (f.caller_claim) return *f.caller_claim;
    if (has_hello_claim_) return hello_claim_;
    return {};
}

void connection::handle_frame(std::string_view line) {
    arm_idle_timer();
    const protocol::client_frame f = decoder_.decode(line);
    if (f.error) {
        protocol::append_error_frame(outbound_, f.request_id, *f.error);
        if (f.type == frame_type::tool_call) audit_rejected_call(f, *f.error);
        return;
    }
    switch (f.type) {
    case frame_type::hello:
        if (f.caller_claim) {
            hello_claim_ = std::string(*f.caller_claim);
            has_hello_claim_ = true;
        }
        protocol::append_hello_result(outbound_, f.request_id, session_id_,
                                      permissions::to_string(caller_for(f)), MEITH_VERSION);
        return;
    case frame_type::list_tools: {
        const auto who = caller_for(f);
        protocol::append_tools_list_head(outbound_, f.request_id);
        registry_.append_tool_descriptors(outbound_, who);
        outbound_.append("]}\n");
        std::string fields = R"("sessionId":)";
        append_json_string(fields, session_id_);
        fields += R"(,"caller":)";
        append_json_string(fields, permissions::to_string(who));
        fields += R"(,"tools":)" + std::to_string(registry_.tool_count());
        registry_.audit_event("list_tools", fields);
        return;
    }
    case frame_type::tool_call:
        handle_tool_call(f);
        return;
    case frame_type::list_sources:
        protocol::append_sources_list(outbound_, f.request_id, registry_.sources_json());
        return;
    case frame_type::check_policy:
        protocol::append_policy_decision(outbound_, f.request_id,
                                         registry_.explain_policy(f.tool_name, caller_for(f)));
        return;
    case frame_type::restart_source:
        // Restarting is an operator's act: only the cli caller may do it.
        if (caller_for(f) != permissions::caller::cli)
            protocol::append_error_frame(outbound_, f.request_id,
                                         "only the cli caller may restart sources");
        else if (!registry_.restart_source(f.source_name))
            protocol::append_error_frame(outbound_, f.request_id,
                                         "no source named '" + std::string(f.source_name) + "'");
        else
            protocol::append_source_restarted(outbound_, f.request_id, f.source_name);
        return;
    case frame_type::reload_config:
        // Like restarting a source, reloading is an operator's act: cli caller only.
        if (caller_for(f) != permissions::caller::cli) {
            protocol::append_error_frame(outbound_, f.request_id,
                                         "only the cli caller may reload the config");
        } else if (auto result = registry_.reload_config()) {
            protocol::append_config_reloaded(outbound_, f.request_id, *result);
        } else {
            protocol::append_error_frame(outbound_, f.request_id,
                                         "this daemon cannot reload its config");
        }
        return;
    case frame_type::cancel_tool_call: {
        auto it = calls_.find(std::string(*f.request_id));
        std::string fields = R"("requestId":)";
        registry_.append_redacted(fields, *f.request_id);
        fields += R"(,"sessionId":)";
        append_json_string(fields, session_id_);
        fields += it == calls_.end() ? R"(,"inFlight":false)" : R"(,"inFlight":true)";
        registry_.audit_event("cancel_tool_call", fields);
        if (it == calls_.end()) return; // naming no call in flight changes nothing (§3)
        auto c = it->second;
        c->resolve(protocol::tool_result::failure(protocol::error_code::cancelled,
                                                  "the call was cancelled by the client"),
                   registry::call_end::cancel);
        return;
    }
    case frame_type::other:
        return;
    }
}

void connection::handle_tool_call(const protocol::client_frame& f) {
    const std::string_view id = *f.request_id;
    std::string key(id);
    if (calls_.count(key)) {
        const std::string why = "requestId '" + key + "' is already in flight on this connection";
        protocol::append_error_frame(outbound_, id, why);
        audit_rejected_call(f, why);
        return;
    }
    const auto limit = registry_.cfg().limits.max_calls_in_flight_per_connection;
    if (calls_.size() >= limit) {
        const std::string why = "too many calls in flight on this connection (limit " +
                                std::to_string(limit) +
                                ", limits.max_calls_in_flight_per_connection)";
        protocol::append_error_frame(outbound_, id, why);
        audit_rejected_call(f, why);
        return;
    }
    auto c = std::make_shared<registry::call>(socket_.get_executor(), shared_from_this());
    c->request_id = key;
    c->session_id = session_id_;
    c->caller = caller_for(f);
    c->claimed_caller = std::string(claim_for(f));
    c->tool_name = std::string(f.tool_name);
    c->timeout_ms = f.timeout_ms.value_or(0);
    calls_.emplace(std::move(key), c);
    if (f.call_error)
        registry_.reject(c, protocol::error_code::validation_error, *f.call_error,
                         f.has_arguments ? &f.arguments : nullptr);
    else
        registry_.dispatch(c, f.arguments);
}

void connection::audit_rejected_call(const protocol::client_frame& f, std::string_view reason) {
    // Same keys as a tool_call line (§6); decision, ok and result are null.
    std::string l;
    l += R"("requestId":)";
    if (f.request_id)
        registry_.append_redacted(l, *f.request_id);
    else
        l += "null";
    l += R"(,"sessionId":)";
    append_json_string(l, session_id_);
    l += R"(,"caller":)";
    append_json_string(l, permissions::to_string(caller_for(f)));
    l += R"(,"claimedCaller":)";
    if (auto claim = claim_for(f); !claim.empty())
        registry_.append_redacted(l, claim);
    else
        l += "null";
    l += R"(,"toolName":)";
    if (!f.tool_name.empty())
        registry_.append_redacted(l, f.tool_name);
    else
        l += "null";
    l += R"(,"source":null,"capabilities":null,"decision":null,"reason":)";
    registry_.append_redacted(l, reason); // may echo what the client sent
    l += R"(,"timeoutMs":)";
    l += f.timeout_ms ? std::to_string(*f.timeout_ms) : "null";
    l += R"(,"durationMs":null,"ok":null,"errorCode":null,"end":"rejected","hooks":[],"args":)";
    l += f.has_arguments ? registry_.redactor().summarize_element(f.arguments) : "null";
    l += R"(,"result":null)";
    registry_.audit_event("tool_call_rejected", l);
}

void connection::on_tool_event(std::string_view request_id, std::string_view event_json) {
    if (closed_) return;
    protocol::append_tool_event(outbound_, request_id, event_json);
    flush();
}

void connection::on_tool_result(std::string_view request_id, const protocol::tool_result& r) {
    if (!closed_) {
        protocol::append_tool_result_frame(outbound_, request_id, r);
        // The call's line was just built into the pending batch (registry::finish).
        result_seqs_.push_back(registry_.audit_high_seq());
    }
    calls_.erase(std::string(request_id));
    if (!closed_) flush();
}

void connection::flush() {
    if (closed_) return;
    // Every frame queued so far follows the audit lines built so far (docs/protocol.md §6).
    audit_seq_ = registry_.audit_high_seq();
    watch_stall();
    // The pending write, flush or wait for the audit writer takes it along.
    if (write_active_ || flush_posted_ || audit_wait_) return;
    // Write at the end of this I/O turn: replies of every connection served in the turn share
    // one audit commit, and each connection's replies leave in one write(2).
    flush_posted_ = true;
    asio::post(socket_.get_executor(), [self = shared_from_this()] {
        self->flush_posted_ = false;
        self->write_now();
    });
}

void connection::write_now() {
    if (closed_) return;
    if (write_active_ || outbound_.empty()) {
        if (!write_active_ && closing_after_flush_) close("daemon shutting down");
        close_if_finished();
        return;
    }
    // Audit lines of the replies below reach the file first (docs/protocol.md §6): they were
    // queued before the replies, so the batch submitted now covers them. Under load the audit
    // writer thread takes the batch and the replies wait for its commit.
    if (registry_.commit_audit(); !registry_.audit_committed(audit_seq_)) {
        if (audit_wait_) return;
        audit_wait_ = true;
        registry_.after_audit(audit_seq_, [self = shared_from_this()] {
            self->audit_wait_ = false;
            self->write_now();
        });
        return;
    }
    if (!result_seqs_.empty() && result_seqs_.front() > 0 &&
        registry_.audit_lost_between(result_seqs_.front() - 1, result_seqs_.back()))
        withhold_unaudited_results();
    if (result_seqs_.capacity() > 4096)
        std::vector<std::uint64_t>().swap(result_seqs_); // not kept for an idle connection
    else
        result_seqs_.clear();
    write_active_ = true;
    writing_.swap(outbound_);
    written_ = 0;
    asio::async_write(socket_, asio::buffer(writing_),
                      // Counts the bytes the socket takes, for the stall check.
                      [self = shared_from_this()](const std::error_code& ec,
                                                  std::size_t total) -> std::size_t {
                          self->progress_ += total - self->written_;
                          self->written_ = total;
                          return ec ? 0 : 64 * 1024;
                      },
                      [self = shared_from_this()](const std::error_code& ec, std::size_t) {
                          self->write_active_ = false;
                          self->writing_.clear();
                          self->written_ = 0;
                          if (self->reading_paused_ && !self->over_outbound_limit())
                              self->resume_timer_.cancel();
                          // Drop a large buffer rather than keep it for an idle connection.
                          if (self->writing_.capacity() > 256 * 1024)
                              std::string().swap(self->writing_);
                          if (ec) {
                              if (!self->closed_) self->close("write failed: " + ec.message());
                              return;
                          }
                          self->write_now();
                      });
}

void connection::withhold_unaudited_results() {
    // Rare path (the audit log just failed): our own frames, one per line, parsed again.
    thread_local simdjson::dom::parser parser;
    std::string kept;
    kept.reserve(outbound_.size());
    std::size_t withheld = 0;
    std::size_t result_index = 0;
    for (std::size_t begin = 0; begin < outbound_.size();) {
        std::size_t end = outbound_.find('\n', begin);
        end = end == std::string::npos ? outbound_.size() : end + 1;
        const std::string_view frame(outbound_.data() + begin, end - begin);
        begin = end;
        simdjson::dom::object f;
        std::string_view type, id;
        bool ok = false;
        if (parser.parse(frame.data(), frame.size()).get(f) != simdjson::SUCCESS ||
            f["type"].get(type) != simdjson::SUCCESS || type != "tool_result") {
            kept.append(frame);
            continue;
        }
        const std::uint64_t seq =
            result_index < result_seqs_.size() ? result_seqs_[result_index] : 0;
        ++result_index;
        if (f["requestId"].get(id) == simdjson::SUCCESS &&
            f["result"]["ok"].get(ok) == simdjson::SUCCESS && ok && seq > 0 &&
            registry_.audit_lost_between(seq - 1, seq)) {
            protocol::append_tool_result_frame(
                kept, id,
                protocol::tool_result::failure(
                    protocol::error_code::tool_failed,
                    "the call's audit line could not be written, so its result is withheld "
                    "(audit.on_failure = \"fail_closed\")"));
            ++withheld;
            continue;
        }
        kept.append(frame);
    }
    outbound_.swap(kept);
    if (withheld > 0)
        spdlog::warn("connection {}: withheld {} result(s) whose audit lines were not written",
                     session_id_, withheld);
}

void connection::close_after_flush() {
    closing_after_flush_ = true;
    flush();
    if (!write_active_ && !flush_posted_ && !audit_wait_ && outbound_.empty())
        close("daemon shutting down");
}

void connection::close(std::string_view reason) {
    if (closed_) return;
    closed_ = true;
    idle_timer_.cancel();
    stall_timer_.cancel();
    resume_timer_.cancel();
    const std::size_t cancelled = calls_.size();
    // Calls in flight are cancelled and audited; their replies have nowhere to go.
    auto calls = std::move(calls_);
    calls_.clear();
    for (auto& [id, c] : calls)
        c->resolve(protocol::tool_result::failure(protocol::error_code::cancelled,
                                                  "the client disconnected"),
                   registry::call_end::disconnect);
    std::string fields = R"("sessionId":)";
    append_json_string(fields, session_id_);
    fields += R"(,"reason":)";
    append_json_string(fields, reason);
    fields += R"(,"callsCancelled":)" + std::to_string(cancelled);
    fields += R"(,"pid":)" + std::to_string(peer_.pid) + R"(,"uid":)" + std::to_string(peer_.uid);
    registry_.audit_event("connection_close", fields);
    // The lines of the cancelled calls and of the close are on file before the peer sees
    // the connection end (closing is rare: the I/O thread waits for the write).
    registry_.commit_audit_now();
    std::error_code ignored;
    socket_.shutdown(asio::socket_base::shutdown_both, ignored);
    socket_.close(ignored);
    registry_.observe_session("session_end", session_id_, peer_.pid, peer_.uid);
    spdlog::debug("connection {} closed: {}", session_id_, reason);
    outbound_.clear();
    result_seqs_.clear();
    if (on_closed_) std::exchange(on_closed_, nullptr)(this);
}

} // namespace meith::daemon
