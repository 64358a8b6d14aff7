// audit_log: the append-only audit trail `audit.jsonl` (docs/protocol.md §6).
//
// One writer per file. Each line is written with a single write(2) on an O_APPEND descriptor,
// so lines never tear or interleave even with other appenders; a line is visible to readers
// when `append` returns. Not thread-safe: the daemon calls it from its one I/O thread.
#pragma once

#include "config/config.hpp"
#include "protocol/json_writer.hpp"

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace meith::audit {

/// RFC 3339 UTC timestamp with milliseconds, e.g. "2026-11-21T10:00:00.123Z".
std::string now_rfc3339();

/// JSON string escaping (RFC 8259, invalid UTF-8 → U+FFFD): the protocol's, one implementation.
using protocol::append_json_string;

class audit_log {
  public:
    /// Opens (creating with mode 0600) the log at `path`. If the file's last byte is not '\n'
    /// (a torn write), truncates the partial line and `repaired_bytes()` reports how many bytes
    /// were removed; the caller then appends an `audit_repaired` event. Throws
    /// std::runtime_error naming the path and errno text if the file cannot be opened.
    audit_log(std::filesystem::path path, const config::audit_config& cfg);
    ~audit_log();
    audit_log(const audit_log&) = delete;
    audit_log& operator=(const audit_log&) = delete;

    std::uint64_t repaired_bytes() const { return repaired_bytes_; }
    const std::filesystem::path& path() const { return path_; }

    /// Appends one line: `json_object` (a complete JSON object without newline; a newline is
    /// added). Lines over 16 KiB are replaced by a shorter line that keeps "ts", "event",
    /// "requestId" and notes the cut. Rotates first when the file would pass `max_bytes`
    /// (audit.jsonl -> audit.jsonl.1 -> ... -> .keep). Returns false (and logs once per failure
    /// streak) when the write fails; true otherwise. fsync per `cfg.fsync`.
    bool append(std::string_view json_object);

    /// Group commit: queues one line (same checks as `append`) without writing it yet.
    /// `commit` then writes every queued line with one write(2) — whole lines only, so lines
    /// still never tear or interleave. The daemon commits before it sends any reply, which
    /// keeps "the line is in the file before its tool_result is sent" (docs/protocol.md §6).
    void append_deferred(std::string_view json_object);
    /// Writes the queued lines; false (lines dropped, failure logged) when the write fails.
    bool commit();
    bool has_pending() const { return !pending_.empty(); }

    /// Commits queued lines and fsyncs the file (used at shutdown and by "interval").
    void flush();

  private:
    void rotate();
    std::string prepare_line(std::string_view json_object) const;
    bool write_all(std::string_view bytes);
    std::string pending_;
    bool ensure_open();                             ///< reopens a removed or closed file
    bool sync();                                    ///< fdatasync + reset the interval clock
    void report_failure(const char* what, int err); ///< logs once per failure streak
    std::filesystem::path path_;
    config::audit_config cfg_;
    int fd_ = -1;
    std::uint64_t size_ = 0;
    std::uint64_t repaired_bytes_ = 0;
    bool failing_ = false;
    bool regular_ = true; ///< false for devices (/dev/full, ...): no rotation, repair or fsync
    std::chrono::steady_clock::time_point last_sync_;
};

} // namespace meith::audit
