// audit: `meith audit` reads the audit log itself (meithd need not run) — the live file and its
// rotated files PATH.N, oldest first — filters its lines and prints them as a table
// (audit_view.hpp) or as JSON Lines. A line that does not parse is reported with file:line and
// skipped. With --follow it then prints lines as they are appended, as `tail -F` does: across
// rotation (the old file read to its end, then any rotated after it, then the new one) and
// truncation, polling every 200 ms, until SIGINT or SIGTERM (exit status 0).
#include "cli/commands.hpp"

#include "cli/audit_view.hpp"
#include "cli/discovery.hpp"
#include "cli/errors.hpp"
#include "cli/session.hpp"
#include "cli/table.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <fcntl.h>
#include <fstream>
#include <functional>
#include <poll.h>
#include <set>
#include <string_view>
#include <sys/stat.h>
#include <unistd.h>
#include <utility>
#include <vector>

#include <fmt/core.h>

namespace meith::cli {

namespace {

namespace fs = std::filesystem;
using sys_clock = std::chrono::system_clock;

/// Unparseable lines reported one by one; the rest are only counted.
constexpr std::size_t max_reported_bad_lines = 20;
/// --follow looks for new lines this often.
constexpr int follow_interval_ms = 200;

struct audit_line {
    std::string raw; ///< the line as logged, for --json
    json obj;
};

/// The live log and its rotated files `base.N`, oldest (highest N) first, the live one last.
/// Only files that exist are listed.
std::vector<fs::path> log_files(const fs::path& base) {
    std::vector<std::pair<std::uint64_t, fs::path>> rotated;
    const fs::path dir = base.has_parent_path() ? base.parent_path() : fs::path(".");
    const std::string prefix = base.filename().string() + ".";
    std::error_code ec;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
        const std::string name = it->path().filename().string();
        if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) continue;
        const std::string_view digits = std::string_view(name).substr(prefix.size());
        if (digits.size() > 18 || digits.find_first_not_of("0123456789") != std::string::npos) {
            continue;
        }
        rotated.emplace_back(std::stoull(std::string(digits)), it->path());
    }
    std::sort(rotated.begin(), rotated.end(),
              [](const auto& a, const auto& b) { return a.first > b.first; });
    std::vector<fs::path> files;
    for (auto& r : rotated)
        files.push_back(std::move(r.second));
    if (fs::exists(base, ec)) files.push_back(base);
    return files;
}

/// Which lines `opts` selects; `cutoff` is now minus --since.
struct audit_filter {
    const options& opts;
    std::optional<sys_clock::time_point> cutoff;

    bool keeps(const json& line) const {
        const std::string event = get_string(line, "event").value_or("");
        if (opts.event) {
            if (*opts.event != "all" && event != *opts.event) return false;
        } else if (!opts.json && !is_call_event(event)) {
            return false; // the table's default: calls only
        }
        if (opts.tool && get_string(line, "toolName") != *opts.tool) return false;
        if (opts.caller_given && get_string(line, "caller") != opts.caller) return false;
        if (opts.denied && (event != "tool_call" || get_string(line, "decision") != "deny")) {
            return false;
        }
        if (cutoff) {
            const auto ts = get_string(line, "ts");
            const auto when = ts ? parse_audit_ts(*ts) : std::nullopt;
            if (!when || *when < *cutoff) return false;
        }
        return true;
    }
};

/// Parses lines, reports those that are not audit lines, and keeps count.
struct line_parser {
    const audit_filter& filter;
    std::size_t parsed = 0, bad = 0;

    /// The line when it parses and the filter keeps it.
    std::optional<audit_line> take(std::string text, const fs::path& file, std::size_t number) {
        if (!text.empty() && text.back() == '\r') text.pop_back();
        if (text.find_first_not_of(" \t") == std::string::npos) return std::nullopt;
        json obj = json::parse(text, nullptr, false);
        if (obj.is_discarded() || !obj.is_object() || !get_string(obj, "event")) {
            if (++bad <= max_reported_bad_lines) {
                fmt::print(stderr, "meith: {}:{}: not a JSON audit line; skipped\n",
                           display_path(file), number);
            }
            return std::nullopt;
        }
        ++parsed;
        if (!filter.keeps(obj)) return std::nullopt;
        return audit_line{std::move(text), std::move(obj)};
    }
};

using line_handler = std::function<void(audit_line&&)>;

/// A log file read with read(2), each time from where the last read stopped.
class open_file {
  public:
    open_file() = default;
    open_file(open_file&& o) noexcept { *this = std::move(o); }
    open_file& operator=(open_file&& o) noexcept {
        if (this != &o) {
            close();
            path_ = std::move(o.path_);
            fd_ = std::exchange(o.fd_, -1);
            id_ = o.id_;
            offset_ = o.offset_;
            partial_ = std::move(o.partial_);
            lines_ = o.lines_;
        }
        return *this;
    }
    ~open_file() { close(); }

    bool open(const fs::path& path) {
        close();
        fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
        struct stat st {};
        if (fd_ < 0 || ::fstat(fd_, &st) != 0) {
            close();
            return false;
        }
        path_ = path;
        id_ = {st.st_dev, st.st_ino};
        offset_ = 0;
        partial_.clear();
        lines_ = 0;
        return true;
    }
    bool is_open() const { return fd_ >= 0; }
    /// The file's identity (device, inode): a rotated log is another file at the same path.
    std::pair<dev_t, ino_t> id() const { return id_; }

    /// Reads to the end, handing each complete line on; a last line without its newline waits
    /// for the rest (meithd writes whole lines, but a reader can see a write half done).
    void read_lines(line_parser& parser, const line_handler& on_line) {
        if (fd_ < 0) return;
        char buf[65536];
        for (;;) {
            const ssize_t n = ::read(fd_, buf, sizeof buf);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) break;
            offset_ += n;
            partial_.append(buf, static_cast<std::size_t>(n));
            std::size_t start = 0;
            for (std::size_t nl; (nl = partial_.find('\n', start)) != std::string::npos;
                 start = nl + 1) {
                hand_on(partial_.substr(start, nl - start), parser, on_line);
            }
            partial_.erase(0, start);
        }
    }
    /// The file will not grow: a last line without its newline is a line too.
    void finish(line_parser& parser, const line_handler& on_line) {
        read_lines(parser, on_line);
        if (!partial_.empty()) hand_on(std::exchange(partial_, {}), parser, on_line);
    }
    /// True (and reading starts over) when the file is now shorter than what was read of it:
    /// truncated in place (logrotate's copytruncate).
    bool restart_if_truncated() {
        struct stat st {};
        if (fd_ < 0 || ::fstat(fd_, &st) != 0 || st.st_size >= offset_) return false;
        ::lseek(fd_, 0, SEEK_SET);
        offset_ = 0;
        partial_.clear();
        lines_ = 0;
        return true;
    }

  private:
    void hand_on(std::string text, line_parser& parser, const line_handler& on_line) {
        if (auto l = parser.take(std::move(text), path_, ++lines_)) on_line(std::move(*l));
    }
    void close() {
        if (fd_ >= 0) ::close(fd_);
        fd_ = -1;
    }

    fs::path path_;
    int fd_ = -1;
    std::pair<dev_t, ino_t> id_{};
    off_t offset_ = 0;
    std::string partial_;
    std::size_t lines_ = 0;
};

/// Reads every file, oldest first, keeping the selected lines (the last --limit of them).
/// `live`, when open (--follow), is the live file, read from its descriptor and left open at
/// its end; the rotated files are read by name. Throws cli_error(exit_error) when no file
/// could be read or no line of them parsed (without --follow, also when there is no file).
std::deque<audit_line> read_log(const fs::path& base, line_parser& parser, open_file* live) {
    std::vector<fs::path> files = log_files(base);
    if (live) std::erase(files, base);
    if (files.empty() && !(live && live->is_open())) {
        if (!live)
            throw cli_error(exit_error, fmt::format("no audit log at {}", display_path(base)));
        fmt::print(stderr, "meith: no audit log at {} yet; waiting for it\n", display_path(base));
        return {};
    }
    std::deque<audit_line> kept;
    const line_handler keep = [&](audit_line&& l) {
        kept.push_back(std::move(l));
        if (parser.filter.opts.limit && kept.size() > *parser.filter.opts.limit) kept.pop_front();
    };
    std::size_t opened = 0;
    for (const fs::path& file : files) {
        open_file f;
        if (!f.open(file)) {
            fmt::print(stderr, "meith: cannot read {}\n", display_path(file));
            continue;
        }
        // Rotated between opening the live file and listing these: it is the live one.
        if (live && live->is_open() && f.id() == live->id()) continue;
        ++opened;
        f.finish(parser, keep);
    }
    if (live && live->is_open()) {
        ++opened;
        live->read_lines(parser, keep);
    }
    if (parser.bad > max_reported_bad_lines) {
        fmt::print(stderr, "meith: {} more lines that are not JSON audit lines skipped\n",
                   parser.bad - max_reported_bad_lines);
    }
    if (opened == 0) {
        throw cli_error(exit_error,
                        fmt::format("cannot read the audit log {}", display_path(base)));
    }
    if (parser.parsed == 0 && parser.bad > 0) {
        throw cli_error(exit_error, fmt::format("no line of the audit log {} could be read",
                                                display_path(base)));
    }
    return kept;
}

volatile std::sig_atomic_t stop_requested = 0;

extern "C" void on_stop_signal(int) {
    stop_requested = 1;
}

/// The files rotated after `old` and before `next` (several rotations between two looks):
/// `old` is found among base.N by its inode; the ones newer than it, other than `next`, are
/// read whole, oldest first. Nothing when `old` is no longer there (deleted, or renamed to
/// another name).
void read_rotated_between(const fs::path& base, const open_file& old, const open_file& next,
                          line_parser& parser, const line_handler& on_line) {
    std::set<std::pair<dev_t, ino_t>> seen{old.id(), next.id()};
    bool after_old = false;
    for (const fs::path& file : log_files(base)) {
        if (file == base) continue;
        open_file f;
        if (!f.open(file)) continue;
        if (f.id() == old.id()) {
            after_old = true;
            continue;
        }
        if (!after_old || !seen.insert(f.id()).second) continue;
        f.finish(parser, on_line);
    }
}

/// SIGINT and SIGTERM end --follow (exit status 0) instead of the process; installed before
/// the log is read, so a signal at any point ends it the same way.
void stop_on_signals() {
    struct sigaction sa {};
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART; // a write to a full pipe is not cut short; poll(2) still wakes
    ::sigaction(SIGINT, &sa, nullptr);
    ::sigaction(SIGTERM, &sa, nullptr);
}

/// Prints lines as they are appended to `base` until SIGINT or SIGTERM (stop_on_signals).
/// `live` is the file read so far (closed when there was none yet).
int follow_log(const fs::path& base, open_file live, line_parser& parser,
               const line_handler& print) {
    std::optional<open_file> previous; // the file rotated away last turn: late lines
    while (stop_requested == 0) {
        if (previous) {
            previous->finish(parser, print);
            previous.reset();
        }
        if (live.restart_if_truncated()) {
            fmt::print(stderr, "meith: {} was truncated; reading it from the start\n",
                       display_path(base));
        }
        live.read_lines(parser, print);
        struct stat st {};
        if (::stat(base.c_str(), &st) == 0 &&
            (!live.is_open() || std::pair(st.st_dev, st.st_ino) != live.id())) {
            // Rotated (or created): what is left of the old file, the files rotated after
            // it, then the new one. The old one stays open a turn for lines written late.
            open_file next;
            if (next.open(base)) {
                if (live.is_open()) {
                    live.read_lines(parser, print);
                    read_rotated_between(base, live, next, parser, print);
                    previous = std::move(live);
                }
                live = std::move(next);
                live.read_lines(parser, print);
            }
        }
        if (std::fflush(stdout) != 0 || std::ferror(stdout)) return exit_error;
        ::poll(nullptr, 0, follow_interval_ms); // a signal ends the wait early
    }
    std::fflush(stdout);
    return exit_ok;
}

} // namespace

int run_audit(const options& opts) {
    const fs::path base = locate_audit_log(opts.file, opts.home);
    audit_filter filter{opts, std::nullopt};
    if (opts.since) filter.cutoff = sys_clock::now() - *opts.since;
    line_parser parser{filter};
    // --follow: the live file is opened first, so a rotation while the rest is read is seen.
    if (opts.follow) stop_on_signals();
    open_file live;
    if (opts.follow && !live.open(base) && fs::exists(base)) {
        throw cli_error(exit_error,
                        fmt::format("cannot read the audit log {}", display_path(base)));
    }
    const std::deque<audit_line> lines = read_log(base, parser, opts.follow ? &live : nullptr);

    if (opts.json) {
        for (const audit_line& l : lines)
            fmt::print("{}\n", l.raw);
        if (!opts.follow) return exit_ok;
        return follow_log(base, std::move(live), parser,
                          [](audit_line&& l) { fmt::print("{}\n", l.raw); });
    }
    // The events layout when --event names one event that is not a call.
    const bool call_layout = !opts.event || *opts.event == "all" || is_call_event(*opts.event);
    audit_table table(call_layout, output_width());
    if (lines.empty() && !opts.follow) {
        fmt::print("no matching audit lines\n");
        return exit_ok;
    }
    std::vector<const json*> shown;
    shown.reserve(lines.size());
    for (const audit_line& l : lines)
        shown.push_back(&l.obj);
    table.print(shown, opts.follow);
    if (!opts.follow) return exit_ok;
    return follow_log(base, std::move(live), parser,
                      [&table](audit_line&& l) { table.print_row(l.obj); });
}

} // namespace meith::cli
