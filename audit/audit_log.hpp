// audit_log: the append-only audit trail `audit.jsonl` (docs/protocol.md §6).
//
// Lines are built by one producer thread (the daemon's I/O thread) into a pending batch —
// finished where they are built: each summary redacted and bounded straight into its line, the
// line cut or its raw newlines blanked at end_line() — and handed over with `submit()`, which
// returns a sequence number; the producer sends the replies those lines describe only once
// `committed()` has reached it ("the line is in the file before its tool_result is sent"). One
// writer at a time (under a mutex) appends a batch, whole lines only, to an O_APPEND descriptor
// with one write(2) (group commit), so lines never tear or interleave; the batch is written
// from the buffer it was built in, never copied.
//
// Who writes: with audit.fsync = "never" the batch is written inside submit(), on the I/O
// thread. Handing it to another thread was measured slower (docs/benchmarks.md (e)): every
// batch then costs two cross-core wake-ups, and the replies wait for both. With "always" and
// "interval" the writer thread ("meithd-audit") writes and syncs, so the I/O thread keeps
// reading and dispatching while the disk syncs, and batches grow with the load. Summaries are
// made on the I/O thread in every mode (a summary's work is bounded: redactor.hpp). The writer
// thread also deletes the oldest rotated file, off the reply path.
#pragma once

#include "audit/redactor.hpp"
#include "config/config.hpp"
#include "protocol/json_writer.hpp"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

namespace meith::audit {

/// RFC 3339 UTC timestamp with milliseconds, e.g. "2026-11-21T10:00:00.123Z".
std::string now_rfc3339();
/// Appends now_rfc3339() as a JSON string (quotes included) without allocating.
void append_rfc3339_json(std::string& out);

/// JSON string escaping (RFC 8259, invalid UTF-8 → U+FFFD): the protocol's, one implementation.
using protocol::append_json_string;

class audit_log {
  public:
    /// Opens (creating with mode 0600) the log at `path` and starts the writer thread. If the
    /// file's last byte is not '\n' (a torn write), truncates the partial line and
    /// `repaired_bytes()` reports how many bytes were removed; the caller then appends an
    /// `audit_repaired` event. Throws std::runtime_error naming the path and errno text if the
    /// file cannot be opened. Summaries are made with `redactor`, which must outlive the log.
    audit_log(std::filesystem::path path, const config::audit_config& cfg,
              const redactor& redactor = default_redactor());
    /// Writes every pending line, syncs, and stops the writer thread.
    ~audit_log();
    audit_log(const audit_log&) = delete;
    audit_log& operator=(const audit_log&) = delete;

    std::uint64_t repaired_bytes() const { return repaired_bytes_; }
    const std::filesystem::path& path() const { return path_; }

    // ---- Building lines (producer thread only) -------------------------------------------
    // A line is a JSON object assembled from verbatim pieces and summaries:
    //   auto& b = log.begin_line();  b += R"({"event":"x","args":)";
    //   log.begin_summary() += args_json;   // replaced by its redacted summary (§6)
    //   log.end_summary() += "}";
    //   log.end_line();
    // begin_line() and end_summary() return the pending batch, begin_summary() a scratch
    // buffer: append only, and only until the next call.

    /// Starts a line; returns the buffer to append verbatim JSON text to.
    std::string& begin_line();
    /// Returns a scratch buffer for JSON text that end_summary() replaces by its redacted and
    /// bounded summary (redactor::append_summary_json) in the line; invalid JSON becomes a note.
    std::string& begin_summary();
    /// Summarises the text given since begin_summary() into the line; returns the line's
    /// buffer to go on with verbatim text.
    std::string& end_summary();
    /// Ends the line. Lines over 16 KiB are replaced by a shorter line that keeps "ts",
    /// "event" and "requestId" and notes the cut; raw newlines become spaces.
    void end_line();
    /// A whole line of verbatim JSON text (`json_object`, without newline).
    void append_deferred(std::string_view json_object);
    bool has_pending() const { return pending_lines_ > 0; }

    // ---- Committing ----------------------------------------------------------------------

    /// Hands every pending line to the writer and returns the sequence number that covers them
    /// (the previous one when nothing is pending; 0 before any line). With fsync = "never" (and
    /// nothing queued before) the lines are written before this returns.
    /// Blocks while more than 16 MiB of lines wait for the writer (back-pressure: the daemon
    /// cannot outrun its audit trail).
    std::uint64_t submit();
    /// The highest sequence number whose lines are written (or failed and were dropped).
    std::uint64_t committed() const { return committed_.load(std::memory_order_acquire); }
    /// True when a batch numbered in (after, upto] could not be written. Recorded before
    /// committed() covers the batch, so a reader that sees a batch committed also sees whether
    /// it failed. Lock-free unless a batch after `after` failed; the last 64 failure streaks
    /// are kept apart, older ones merged (which can only make the answer true more often).
    bool failed_between(std::uint64_t after, std::uint64_t upto) const;
    /// The sequence number that covers every line built so far: the pending batch's when
    /// lines are pending, else the last submitted one.
    std::uint64_t high_seq() const { return submitted_ + (pending_lines_ > 0 ? 1 : 0); }
    /// Blocks until committed() >= seq.
    void wait_committed(std::uint64_t seq);
    /// Called on the writer thread after it commits a batch (not for batches written inline
    /// by submit()). The daemon posts from it to its I/O thread. Pass nullptr to clear; clearing
    /// waits for a call in progress.
    void set_commit_listener(std::function<void()> listener);

    /// submit() + wait_committed(); false when the lines could not be written.
    bool commit();
    /// One line, written before returning: append_deferred() + commit().
    bool append(std::string_view json_object);
    /// Commits pending lines and fsyncs the file (shutdown).
    void flush();

    /// True while writes fail (from the last batch); audit.on_failure decides what that means.
    bool failing() const { return failing_.load(std::memory_order_acquire); }

  private:
    struct batch {
        std::string bytes;    ///< whole lines, each ending in '\n'
        std::size_t size = 0; ///< bytes.size(), kept for the queue's accounting
        std::uint64_t seq = 0;
    };

    void writer_main();
    /// Appends a batch's lines; under file_mu_.
    bool write_batch(const batch& b);
    void finish_batch(const batch& b, bool ok);
    bool write_all(std::string_view bytes);
    void rotate();
    /// Reopens the file when it was closed, or — checked at most once per millisecond, not per
    /// batch (two stat calls) — removed or renamed away from `path_` (logrotate without
    /// copytruncate), so later lines go to a file at the configured path.
    bool ensure_open();
    bool sync();                                    ///< fdatasync + reset the interval clock
    void report_failure(const char* what, int err); ///< logs once per failure streak

    std::filesystem::path path_;
    config::audit_config cfg_;
    const redactor& redactor_;
    std::uint64_t repaired_bytes_ = 0;

    // Producer side (one thread).
    std::string pending_; ///< finished lines of the batch being built, then the open one
    std::size_t pending_lines_ = 0;
    std::size_t line_start_ = 0; ///< offset of the open line in pending_, npos if none
    std::string summary_;        ///< JSON text of the summary being built (reused)
    bool in_summary_ = false;
    std::uint64_t submitted_ = 0;
    std::vector<std::string> spare_; ///< recycled batch buffers (under mu_)

    // Hand-off.
    std::mutex mu_;
    std::condition_variable work_cv_; ///< writer: a batch is queued or stop
    std::condition_variable done_cv_; ///< producer: a batch is committed or the queue drained
    std::deque<batch> queue_;
    std::size_t queued_bytes_ = 0;
    bool writer_busy_ = false;
    bool expired_waiting_ = false; ///< rotation left `<path>.expired` for the writer to delete
    bool stop_ = false;
    std::atomic<std::uint64_t> committed_{0};
    std::atomic<std::uint64_t> failed_{0}; ///< highest failed batch (0: none)
    mutable std::mutex failed_mu_;
    std::vector<std::pair<std::uint64_t, std::uint64_t>> failed_ranges_; ///< under failed_mu_
    std::atomic<bool> failing_{false};
    std::mutex listener_mu_;
    std::function<void()> listener_;

    // File side (writer thread, or the producer writing inline; under file_mu_).
    std::mutex file_mu_;
    int fd_ = -1;
    std::uint64_t size_ = 0;
    bool regular_ = true; ///< false for devices (/dev/full, ...): no rotation, repair or fsync
    bool dirty_ = false;  ///< written since the last sync (fsync = "interval")
    std::chrono::steady_clock::time_point last_sync_;
    std::chrono::steady_clock::time_point last_path_check_{};

    std::thread writer_; ///< last: started when everything above is ready
};

} // namespace meith::audit
