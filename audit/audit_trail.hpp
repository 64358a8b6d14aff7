// audit_trail: the registry's side of the audit log (docs/protocol.md §6).
//
// Owns the lines the registry builds into the audit log's pending batch (call lines through
// call_audit, events through event()), the group commit at the end of each I/O turn that
// queued a line, and the replies waiting until their lines are in the file. Without an audit
// log (unit tests) nothing is written and every line counts as committed. I/O-thread only; the
// audit writer thread reports commits by posting to the I/O thread.
#pragma once

#include "audit/audit_log.hpp"

#include <asio/any_io_executor.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>
#include <utility>
#include <vector>

namespace meith::audit {

class audit_trail {
  public:
    /// `log` may be null; it must outlive the trail otherwise. `fail_closed`: audit.on_failure
    /// = "fail_closed" (docs/configuration.md [audit]), fixed until the daemon restarts.
    audit_trail(asio::any_io_executor ex, audit::audit_log* log, bool fail_closed = false);
    ~audit_trail();
    audit_trail(const audit_trail&) = delete;
    audit_trail& operator=(const audit_trail&) = delete;

    bool enabled() const { return log_ != nullptr; }
    /// The log lines are built into (audit_log::begin_line ...); only when enabled().
    audit::audit_log& log() const { return *log_; }
    /// Ends the line being built into log() and makes sure it is submitted by the end of this
    /// I/O turn.
    void end_line();

    /// A non-call event line: `fields_json` is the object's members without braces, may be
    /// empty. Returns false when the log is failing.
    bool event(std::string_view event, std::string_view fields_json);

    /// True when a write failed and the log has not recovered.
    bool failing() const { return log_ && log_->failing(); }
    /// Hands the pending lines to the writer; the sequence number that covers them.
    std::uint64_t commit();
    /// commit() and waits for the write (and its fsync, under audit.fsync = "always"): holds
    /// the I/O thread; for shutdown and tests. Where something must wait for its lines (a
    /// connection closed only once its close line is on file), use commit_then.
    void commit_now();
    /// commit() without waiting: `fn` runs on the I/O thread once the lines queued so far are
    /// in the file (at once when they already are), so the I/O thread never waits for the
    /// writer. Lines are not lost when the trail goes first: the log's destructor writes every
    /// batch submitted (only `fn` is then never run).
    void commit_then(std::function<void()> fn) { after(commit(), std::move(fn)); }
    bool committed(std::uint64_t seq) const { return !log_ || log_->committed() >= seq; }
    std::uint64_t high_seq() const { return log_ ? log_->high_seq() : 0; }
    /// True under fail_closed when a batch numbered in (after, upto] could not be written:
    /// replies that follow lines of such a batch must not carry a tool's result (§6).
    bool withheld_between(std::uint64_t after, std::uint64_t upto) const {
        return fail_closed_ && log_ && log_->failed_between(after, upto);
    }
    /// True under fail_closed while the log is failing: calls are refused.
    bool refuses_calls() const { return fail_closed_ && failing(); }
    /// Runs `fn` on the I/O thread once the lines up to `seq` are in the file (at once when
    /// they already are).
    void after(std::uint64_t seq, std::function<void()> fn);

  private:
    /// Runs the waiters whose lines are in the file.
    void run_waiters();

    asio::any_io_executor ex_;
    audit::audit_log* log_;
    bool fail_closed_;
    bool commit_posted_ = false;
    std::vector<std::pair<std::uint64_t, std::function<void()>>> waiters_;
    std::shared_ptr<bool> alive_ = std::make_shared<bool>(true); ///< for posted handlers
};

} // namespace meith::audit
