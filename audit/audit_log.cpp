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

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace meith::audit {

namespace {

constexpr std::size_t max_line_bytes = 16384; // including the newline

std::string errno_text(int err) {
    return std::strerror(err);
}

int open_log(const std::filesystem::path& p) {
    int fd;
    do
        fd = ::open(p.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    while (fd < 0 && errno == EINTR);
    return fd;
}

/// Offset just past the last '\n' of the file at `p` (size `size`), 0 if it has none.
std::uint64_t end_of_last_line(const std::filesystem::path& p, std::uint64_t size) {
    int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw std::runtime_error("audit log " + p.string() + ": " + errno_text(errno));
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

std::string now_rfc3339() {
    using namespace std::chrono;
    const auto ms = duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
    const std::int64_t secs = ms / 1000 - (ms % 1000 < 0 ? 1 : 0);
    const int millis = static_cast<int>(((ms % 1000) + 1000) % 1000);
    // gmtime_r and snprintf once per second, not once per line (hot path: every audit line).
    thread_local std::int64_t cached_secs = -1;
    thread_local char cached[64];
    if (secs != cached_secs) {
        const std::time_t t = static_cast<std::time_t>(secs);
        std::tm tm{};
        ::gmtime_r(&t, &tm);
        std::snprintf(cached, sizeof cached, "%04d-%02d-%02dT%02d:%02d:%02d.", tm.tm_year + 1900,
                      tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
        cached_secs = secs;
    }
    std::string out(cached);
    out.push_back(static_cast<char>('0' + millis / 100));
    out.push_back(static_cast<char>('0' + millis / 10 % 10));
    out.push_back(static_cast<char>('0' + millis % 10));
    out.push_back('Z');
    return out;
}

audit_log::audit_log(std::filesystem::path path, const config::audit_config& cfg)
    : path_(std::move(path)), cfg_(cfg) {
    fd_ = open_log(path_);
    if (fd_ < 0) throw std::runtime_error("audit log " + path_.string() + ": " + errno_text(errno));
    struct stat st {};
    if (::fstat(fd_, &st) != 0) {
        const int err = errno;
        ::close(fd_);
        throw std::runtime_error("audit log " + path_.string() + ": " + errno_text(err));
    }
    regular_ = S_ISREG(st.st_mode);
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
}

audit_log::~audit_log() {
    if (fd_ < 0) return;
    flush();
    ::close(fd_);
}

void audit_log::report_failure(const char* what, int err) {
    if (!failing_)
        spdlog::error("audit log {}: {} failed: {}", path_.string(), what, errno_text(err));
    failing_ = true;
}

bool audit_log::ensure_open() {
    if (fd_ >= 0) {
        struct stat st {};
        if (::fstat(fd_, &st) == 0 && st.st_nlink > 0) {
            if (regular_) size_ = static_cast<std::uint64_t>(st.st_size);
            return true;
        }
        // Removed (or unreadable) under us: lines written to a deleted inode would be lost.
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
    return true;
}

std::string audit_log::prepare_line(std::string_view json_object) const {
    std::string line;
    if (json_object.size() + 1 > max_line_bytes)
        line = cut_line(json_object);
    else
        line.assign(json_object);
    // A raw newline (only possible as whitespace between tokens) would split the record.
    for (char& c : line)
        if (c == '\n' || c == '\r') c = ' ';
    line += '\n';
    return line;
}

bool audit_log::write_all(std::string_view bytes) {
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

    // The lines are in the file either way; a failed sync still fails the write because the
    // policy promised durability.
    if ((cfg_.fsync == config::fsync_policy::always ||
         (cfg_.fsync == config::fsync_policy::interval &&
          std::chrono::steady_clock::now() - last_sync_ >= std::chrono::seconds(1))) &&
        !sync())
        return false;

    if (failing_) {
        spdlog::info("audit log {}: writes recovered", path_.string());
        failing_ = false;
    }
    return true;
}

bool audit_log::append(std::string_view json_object) {
    // Keep the order: anything queued goes first.
    if (!pending_.empty() && !commit()) return false;
    return write_all(prepare_line(json_object));
}

void audit_log::append_deferred(std::string_view json_object) {
    if (json_object.size() + 1 > max_line_bytes) {
        pending_ += prepare_line(json_object);
        return;
    }
    const auto start = pending_.size();
    pending_.append(json_object);
    // Lines we build never hold a raw newline; memchr keeps the check cheap.
    char* first = pending_.data() + start;
    char* last = pending_.data() + pending_.size();
    for (char c : {'\n', '\r'})
        for (char* p = first; (p = static_cast<char*>(std::memchr(p, c, last - p))) != nullptr; ++p)
            *p = ' ';
    pending_ += '\n';
}

bool audit_log::commit() {
    if (pending_.empty()) return true;
    const bool ok = write_all(pending_);
    pending_.clear();
    if (pending_.capacity() > 1024 * 1024) std::string().swap(pending_);
    return ok;
}

bool audit_log::sync() {
    last_sync_ = std::chrono::steady_clock::now();
    if (fd_ < 0 || !regular_) return true;
    if (::fdatasync(fd_) == 0) return true;
    report_failure("fdatasync", errno);
    return false;
}

void audit_log::flush() {
    commit();
    sync();
}

void audit_log::rotate() {
    // With a sync policy, the old file is made durable before it leaves the name. With
    // fsync = "never" we do not block the I/O thread on fdatasync(2) of up to max_bytes here
    // (it stalled the daemon for tens of ms at every rotation under load).
    if (cfg_.fsync != config::fsync_policy::never) sync();
    const std::string base = path_.string();
    auto numbered = [&](std::uint64_t i) { return base + "." + std::to_string(i); };
    if (cfg_.keep == 0) {
        if (::unlink(base.c_str()) != 0 && errno != ENOENT) {
            report_failure("rotate (unlink)", errno);
            return; // keep appending to the current file rather than lose lines
        }
    } else {
        // Shift only the files that exist: .1 .. .last, the oldest (.keep) being overwritten.
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
