// audit_log: JSON string escaping, timestamps, and the append-only file with torn-tail repair,
// size-based rotation, fsync policies and failure/recovery reporting.
#include "audit/audit_log.hpp"

#include <simdjson.h>
#include <spdlog/spdlog.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <stdexcept>

#include <pthread.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace meith::audit {

namespace {

constexpr std::size_t max_line_bytes = 16384; // including the newline

std::string errno_text(int err) {
    return std::strerror(err);
}

/// Opens (creating it 0600) the log for appending. Never follows a symbolic link (O_NOFOLLOW):
/// a planted link would make the torn-tail repair truncate, and the log append to, its target.
int open_log(const std::filesystem::path& p) {
    int fd;
    do
        fd = ::open(p.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    while (fd < 0 && errno == EINTR);
    return fd;
}

std::string open_error(const std::filesystem::path& p, int err) {
    if (err == ELOOP)
        return "audit log " + p.string() +
               " is a symbolic link; meithd does not follow links (remove it, or set "
               "audit.path to the real file)";
    return "audit log " + p.string() + ": " + errno_text(err);
}

/// Offset just past the last '\n' of the file at `p` (size `size`), 0 if it has none.
std::uint64_t end_of_last_line(const std::filesystem::path& p, std::uint64_t size) {
    int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) throw std::runtime_error(open_error(p, errno));
    char buf[65536];
    std::uint64_t end = size;
    std::uint64_t found = 0;
    while (end > 0) {
        const std::uint64_t begin = end > sizeof buf ? end - sizeof buf : 0;
        const auto want = static_cast<std::size_t>(end - begin);
        ssize_t n = ::pread(fd, buf, want, static_cast<off_t>(begin));
        if (n < 0 && errno == EINTR) continue;
        if (n != static_cast<ssize_t>(want)) {
            int err = n < 0 ? errno : EIO;
            ::close(fd);
            throw std::runtime_error("audit log " + p.string() + ": " + errno_text(err));
        }
        if (const void* nl = ::memrchr(buf, '\n', want)) {
            found = begin + static_cast<std::uint64_t>(static_cast<const char*>(nl) - buf) + 1;
            break;
        }
        end = begin;
    }
    ::close(fd);
    return found;
}

/// Keeps ts, event and requestId of an over-long line and notes the cut.
std::string cut_line(std::string_view json_object) {
    std::string out = "{";
    simdjson::dom::parser parser;
    simdjson::dom::object obj;
    const bool parsed =
        parser.parse(json_object.data(), json_object.size()).get(obj) == simdjson::SUCCESS;
    bool have_ts = false;
    for (std::string_view key : {"ts", "event", "requestId"}) {
        simdjson::dom::element v;
        if (!parsed || obj.at_key(key).get(v) != simdjson::SUCCESS) continue;
        std::string_view str;
        if (v.get_string().get(str) == simdjson::SUCCESS) {
            if (str.size() > 256) continue; // these are short ids; a long one is not worth keeping
            append_json_string(out, key);
            out += ':';
            append_json_string(out, str);
        } else if (v.is_number() || v.is_bool() || v.is_null()) {
            append_json_string(out, key);
            out += ':';
            out += simdjson::minify(v);
        } else {
            continue;
        }
        out += ',';
        have_ts = have_ts || key == "ts";
    }
    if (!have_ts) {
        out += "\"ts\":";
        append_json_string(out, now_rfc3339());
        out += ',';
    }
    out += "\"cut\":";
    append_json_string(out, "line over " + std::to_string(max_line_bytes) + " bytes (" +
                                std::to_string(json_object.size() + 1) + " bytes)");
    out += '}';
    return out;
}

} // namespace

void append_rfc3339_json(std::string& out) {
    using namespace std::chrono;
    const auto ms = duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
    const std::int64_t secs = ms / 1000 - (ms % 1000 < 0 ? 1 : 0);
    const int millis = static_cast<int>(((ms % 1000) + 1000) % 1000);
    // gmtime_r and snprintf once per second, not once per line (hot path: every audit line).
    thread_local std::int64_t cached_secs = -1;
    thread_local char cached[64];
    thread_local std::size_t cached_len = 0;
    if (secs != cached_secs) {
        const std::time_t t = static_cast<std::time_t>(secs);
        std::tm tm{};
        ::gmtime_r(&t, &tm);
        const int n = std::snprintf(cached, sizeof cached, "\"%04d-%02d-%02dT%02d:%02d:%02d.",
                                    tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
                                    tm.tm_min, tm.tm_sec);
        cached_len = n > 0 ? static_cast<std::size_t>(n) : 0;
        cached_secs = secs;
    }
    out.append(cached, cached_len);
    const char tail[] = {static_cast<char>('0' + millis / 100),
                         static_cast<char>('0' + millis / 10 % 10),
                         static_cast<char>('0' + millis % 10), 'Z', '"'};
    out.append(tail, sizeof tail);
}

std::string now_rfc3339() {
    std::string quoted;
    append_rfc3339_json(quoted);
    return quoted.substr(1, quoted.size() - 2);
}

namespace {

constexpr std::size_t no_line = static_cast<std::size_t>(-1);
/// Lines waiting for the writer beyond which submit() blocks (back-pressure).
constexpr std::size_t max_queued_bytes = 16u << 20;
/// Batch buffers larger than this are freed rather than recycled.
constexpr std::size_t max_recycled_capacity = 1u << 20;

} // namespace

audit_log::audit_log(std::filesystem::path path, const config::audit_config& cfg,
                     const redactor& redactor)
    : path_(std::move(path)), cfg_(cfg), redactor_(redactor), line_start_(no_line) {
    fd_ = open_log(path_);
    if (fd_ < 0) throw std::runtime_error(open_error(path_, errno));
    struct stat st {};
    if (::fstat(fd_, &st) != 0) {
        const int err = errno;
        ::close(fd_);
        throw std::runtime_error("audit log " + path_.string() + ": " + errno_text(err));
    }
    regular_ = S_ISREG(st.st_mode);
    if (regular_ && st.st_uid != ::geteuid()) {
        ::close(fd_);
        throw std::runtime_error("audit log " + path_.string() + " belongs to uid " +
                                 std::to_string(st.st_uid) + ", not to this user");
    }
    if (regular_ && (st.st_mode & 077) != 0 && ::fchmod(fd_, 0600) == 0)
        spdlog::warn("audit log {}: was readable or writable by others (mode {:o}); now 0600",
                     path_.string(), st.st_mode & 0777);
    size_ = regular_ ? static_cast<std::uint64_t>(st.st_size) : 0;
    if (regular_ && size_ > 0) {
        try {
            const std::uint64_t keep = end_of_last_line(path_, size_);
            if (keep < size_) {
                if (::ftruncate(fd_, static_cast<off_t>(keep)) != 0) {
                    const int err = errno;
                    throw std::runtime_error("audit log " + path_.string() +
                                             ": cannot truncate torn line: " + errno_text(err));
                }
                repaired_bytes_ = size_ - keep;
                size_ = keep;
            }
        } catch (...) {
            ::close(fd_);
            throw;
        }
    }
    last_sync_ = std::chrono::steady_clock::now();
    writer_ = std::thread([this] { writer_main(); });
}

audit_log::~audit_log() {
    submit();
    {
        std::lock_guard lk(mu_);
        stop_ = true;
    }
    work_cv_.notify_all();
    writer_.join(); // the writer drains the queue before it stops
    std::lock_guard f(file_mu_);
    if (fd_ < 0) return;
    sync();
    ::close(fd_);
}

// ---- Building ---------------------------------------------------------------------------

std::string& audit_log::begin_line() {
    end_line();          // a line left open by mistake is ended by the next one's start
    in_summary_ = false; // and a summary begun outside a line is dropped
    line_start_ = pending_.size();
    return pending_;
}

std::string& audit_log::begin_summary() {
    summary_.clear();
    in_summary_ = true;
    return summary_;
}

std::string& audit_log::end_summary() {
    if (!in_summary_) return pending_;
    in_summary_ = false;
    // The summary is made here, once, straight into the line: the JSON text in summary_ is
    // read in place (padded for simdjson's DOM fallback) and never copied again.
    const std::size_t n = summary_.size();
    summary_.append(simdjson::SIMDJSON_PADDING, ' ');
    redactor_.append_summary_json(pending_, std::string_view(summary_.data(), n), /*padded=*/true);
    if (summary_.capacity() > max_recycled_capacity) std::string().swap(summary_);
    return pending_;
}

void audit_log::end_line() {
    if (line_start_ == no_line) return;
    end_summary();
    std::size_t len = pending_.size() - line_start_;
    if (len + 1 > max_line_bytes) {
        std::string cut = cut_line(std::string_view(pending_.data() + line_start_, len));
        pending_.resize(line_start_);
        pending_ += cut;
        len = cut.size();
    }
    // A raw newline (only possible as whitespace between tokens) would split the record.
    char* first = pending_.data() + line_start_;
    char* last = first + len;
    for (char c : {'\n', '\r'})
        for (char* p = first; (p = static_cast<char*>(std::memchr(p, c, last - p)));)
            *p++ = ' ';
    pending_.push_back('\n');
    line_start_ = no_line;
    ++pending_lines_;
}

void audit_log::append_deferred(std::string_view json_object) {
    begin_line().append(json_object);
    end_line();
}

// ---- Committing -------------------------------------------------------------------------

std::uint64_t audit_log::submit() {
    end_line();
    if (pending_lines_ == 0) return submitted_;
    batch b;
    b.size = pending_.size();
    b.bytes = std::move(pending_);
    b.seq = ++submitted_;
    pending_lines_ = 0;

    std::unique_lock lk(mu_);
    if (!spare_.empty()) {
        pending_ = std::move(spare_.back());
        spare_.pop_back();
    } else {
        pending_ = std::string();
    }
    pending_.clear();
    if (cfg_.fsync == config::fsync_policy::never && queue_.empty() && !writer_busy_) {
        // Without a sync to wait for, appending on this thread is cheaper than any hand-off
        // (measured: docs/benchmarks.md (e)); the writer has nothing queued before it.
        lk.unlock();
        bool ok;
        {
            std::lock_guard f(file_mu_);
            ok = write_batch(b);
        }
        finish_batch(b, ok);
        lk.lock();
        if (b.bytes.capacity() <= max_recycled_capacity) spare_.push_back(std::move(b.bytes));
        return b.seq;
    }
    done_cv_.wait(lk, [&] { return queued_bytes_ < max_queued_bytes; });
    queued_bytes_ += b.size;
    queue_.push_back(std::move(b));
    lk.unlock();
    work_cv_.notify_one();
    return submitted_;
}

void audit_log::wait_committed(std::uint64_t seq) {
    if (committed() >= seq) return;
    std::unique_lock lk(mu_);
    done_cv_.wait(lk, [&] { return committed() >= seq; });
}

void audit_log::set_commit_listener(std::function<void()> listener) {
    std::lock_guard lk(listener_mu_);
    listener_ = std::move(listener);
}

bool audit_log::commit() {
    wait_committed(submit());
    return !failing();
}

bool audit_log::append(std::string_view json_object) {
    append_deferred(json_object);
    return commit();
}

void audit_log::flush() {
    commit();
    std::lock_guard f(file_mu_);
    sync();
}

void audit_log::finish_batch(const batch& b, bool ok) {
    if (!ok) {
        std::lock_guard lk(failed_mu_);
        if (!failed_ranges_.empty() && failed_ranges_.back().second + 1 == b.seq)
            failed_ranges_.back().second = b.seq;
        else
            failed_ranges_.emplace_back(b.seq, b.seq);
        if (failed_ranges_.size() > 64) {
            failed_ranges_[1].first = failed_ranges_[0].first;
            failed_ranges_.erase(failed_ranges_.begin());
        }
        failed_.store(b.seq, std::memory_order_release);
    }
    committed_.store(b.seq, std::memory_order_release);
}

bool audit_log::failed_between(std::uint64_t after, std::uint64_t upto) const {
    if (failed_.load(std::memory_order_acquire) <= after) return false;
    std::lock_guard lk(failed_mu_);
    for (const auto& [first, last] : failed_ranges_)
        if (first <= upto && last > after) return true;
    return false;
}

void audit_log::writer_main() {
    ::pthread_setname_np(::pthread_self(), "meithd-audit");
    std::unique_lock lk(mu_);
    const auto has_work = [this] { return !queue_.empty() || stop_ || expired_waiting_; };
    for (;;) {
        if (expired_waiting_) {
            expired_waiting_ = false;
            lk.unlock();
            const std::string expired = path_.string() + ".expired";
            if (::unlink(expired.c_str()) != 0 && errno != ENOENT)
                spdlog::warn("audit log rotation: unlink {} failed: {}", expired,
                             errno_text(errno));
            lk.lock();
            continue;
        }
        if (queue_.empty()) {
            if (stop_) break;
            if (cfg_.fsync == config::fsync_policy::interval) {
                // Sync once a second while lines wait unsynced, even when no new line comes.
                if (!work_cv_.wait_for(lk, std::chrono::seconds(1), has_work)) {
                    lk.unlock();
                    {
                        std::lock_guard f(file_mu_);
                        if (dirty_ && std::chrono::steady_clock::now() - last_sync_ >=
                                          std::chrono::seconds(1))
                            sync();
                    }
                    lk.lock();
                }
            } else {
                work_cv_.wait(lk, has_work);
            }
            continue;
        }
        batch b = std::move(queue_.front());
        queue_.pop_front();
        queued_bytes_ -= b.size;
        writer_busy_ = true;
        lk.unlock();
        bool ok;
        {
            std::lock_guard f(file_mu_);
            ok = write_batch(b);
        }
        finish_batch(b, ok);
        {
            std::lock_guard l(listener_mu_);
            if (listener_) listener_();
        }
        lk.lock();
        writer_busy_ = false;
        if (b.bytes.capacity() <= max_recycled_capacity) spare_.push_back(std::move(b.bytes));
        done_cv_.notify_all();
    }
}

// ---- Writing (under file_mu_) ------------------------------------------------------------

bool audit_log::write_batch(const batch& b) {
    return write_all(std::string_view(b.bytes.data(), b.size));
}

void audit_log::report_failure(const char* what, int err) {
    if (!failing_.load(std::memory_order_relaxed))
        spdlog::error("audit log {}: {} failed: {}", path_.string(), what, errno_text(err));
    failing_.store(true, std::memory_order_release);
}

bool audit_log::ensure_open() {
    if (fd_ >= 0) {
        // A stat per batch was a tenth of the audit trail's cost in ping-pong calls; once per
        // millisecond bounds what goes to a file that left its name to that millisecond.
        const auto now = std::chrono::steady_clock::now();
        if (now - last_path_check_ < std::chrono::milliseconds(1)) return true;
        last_path_check_ = now;
        struct stat by_fd {};
        struct stat by_path {};
        if (::fstat(fd_, &by_fd) == 0 && by_fd.st_nlink > 0 &&
            ::stat(path_.c_str(), &by_path) == 0 && by_path.st_dev == by_fd.st_dev &&
            by_path.st_ino == by_fd.st_ino)
            return true;
        // Removed or renamed under us: lines written to that inode would be lost to readers
        // of `path_`.
        ::close(fd_);
        fd_ = -1;
    }
    fd_ = open_log(path_);
    if (fd_ < 0) {
        report_failure("reopen", errno);
        return false;
    }
    struct stat st {};
    if (::fstat(fd_, &st) != 0) {
        report_failure("stat", errno);
        ::close(fd_);
        fd_ = -1;
        return false;
    }
    regular_ = S_ISREG(st.st_mode);
    size_ = regular_ ? static_cast<std::uint64_t>(st.st_size) : 0;
    last_path_check_ = std::chrono::steady_clock::now();
    return true;
}

bool audit_log::write_all(std::string_view bytes) {
    if (bytes.empty()) return true;
    if (!ensure_open()) return false;
    if (regular_ && cfg_.max_bytes > 0 && size_ > 0 && size_ + bytes.size() > cfg_.max_bytes) {
        rotate();
        if (fd_ < 0) return false;
    }

    // One write(2) of whole lines on O_APPEND keeps lines whole. A short write on a regular
    // file means the disk or quota just filled up: we finish with further writes (the single
    // writer makes that safe), and if that fails, cut the partial data back out so the next
    // line does not get glued to it.
    std::size_t done = 0;
    while (done < bytes.size()) {
        const ssize_t n = ::write(fd_, bytes.data() + done, bytes.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            const int err = n < 0 ? errno : EIO;
            if (done > 0 && regular_) {
                struct stat st {};
                if (::fstat(fd_, &st) == 0 && static_cast<std::uint64_t>(st.st_size) >= done)
                    (void)!::ftruncate(fd_, st.st_size - static_cast<off_t>(done));
            }
            report_failure("write", err);
            return false;
        }
        done += static_cast<std::size_t>(n);
    }
    size_ += bytes.size();
    dirty_ = true;

    // The lines are in the file either way; a failed sync still fails the write because the
    // policy promised durability.
    if ((cfg_.fsync == config::fsync_policy::always ||
         (cfg_.fsync == config::fsync_policy::interval &&
          std::chrono::steady_clock::now() - last_sync_ >= std::chrono::seconds(1))) &&
        !sync())
        return false;

    if (failing_.load(std::memory_order_relaxed)) {
        spdlog::info("audit log {}: writes recovered", path_.string());
        failing_.store(false, std::memory_order_release);
    }
    return true;
}

bool audit_log::sync() {
    last_sync_ = std::chrono::steady_clock::now();
    dirty_ = false;
    if (fd_ < 0 || !regular_) return true;
    if (::fdatasync(fd_) == 0) return true;
    report_failure("fdatasync", errno);
    return false;
}

void audit_log::rotate() {
    // With a sync policy, the old file is made durable before it leaves the name. With
    // fsync = "never" we do not wait for fdatasync(2) of up to max_bytes here.
    if (cfg_.fsync != config::fsync_policy::never) sync();
    const std::string base = path_.string();
    auto numbered = [&](std::uint64_t i) { return base + "." + std::to_string(i); };
    if (cfg_.keep == 0) {
        if (::unlink(base.c_str()) != 0 && errno != ENOENT) {
            report_failure("rotate (unlink)", errno);
            return; // keep appending to the current file rather than lose lines
        }
    } else {
        // The oldest (.keep) leaves the numbered names first, so no rename below replaces an
        // existing file. It becomes `.expired`, which the writer thread deletes after this
        // batch is committed: freeing max_bytes of page cache takes milliseconds, and no reply
        // should wait for it.
        if (::rename(numbered(cfg_.keep).c_str(), (base + ".expired").c_str()) == 0) {
            std::lock_guard lk(mu_);
            expired_waiting_ = true;
            work_cv_.notify_one();
        } else if (errno != ENOENT) {
            spdlog::warn("audit log rotation: rename {} failed: {}", numbered(cfg_.keep),
                         errno_text(errno));
        }
        std::uint64_t last = 0;
        while (last + 1 < cfg_.keep && ::access(numbered(last + 1).c_str(), F_OK) == 0)
            ++last;
        for (std::uint64_t i = last; i >= 1; --i)
            if (::rename(numbered(i).c_str(), numbered(i + 1).c_str()) != 0 && errno != ENOENT)
                spdlog::warn("audit log rotation: rename {} failed: {}", numbered(i),
                             errno_text(errno));
        if (::rename(base.c_str(), numbered(1).c_str()) != 0) {
            report_failure("rotate (rename)", errno);
            return;
        }
    }
    ::close(fd_);
    fd_ = open_log(path_);
    if (fd_ < 0) {
        report_failure("reopen after rotation", errno);
        return;
    }
    size_ = 0;
}

} // namespace meith::audit
