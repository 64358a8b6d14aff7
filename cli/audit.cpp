// audit: `meith audit` reads the audit log itself (meithd need not run) — the live file and its
// rotated files PATH.N, oldest first — filters its lines and prints them as a table or as JSON
// Lines. A line that does not parse is reported with file:line and skipped.
#include "cli/commands.hpp"

#include "cli/discovery.hpp"
#include "cli/errors.hpp"
#include "cli/session.hpp"
#include "cli/table.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <ctime>
#include <deque>
#include <fstream>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/core.h>

namespace meith::cli {

namespace {

namespace fs = std::filesystem;
using sys_clock = std::chrono::system_clock;

/// Unparseable lines reported one by one; the rest are only counted.
constexpr std::size_t max_reported_bad_lines = 20;
/// The REQUEST column shows at most this many columns of a requestId.
constexpr std::size_t request_width = 24;

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

/// An RFC 3339 timestamp ("2026-11-21T10:00:00.123Z", or with an offset) as a time point.
std::optional<sys_clock::time_point> parse_ts(std::string_view ts) {
    std::size_t i = 0;
    const auto number = [&](std::size_t digits, int& out) {
        if (i + digits > ts.size()) return false;
        int v = 0;
        for (std::size_t k = 0; k < digits; ++k) {
            const char c = ts[i + k];
            if (c < '0' || c > '9') return false;
            v = v * 10 + (c - '0');
        }
        i += digits;
        out = v;
        return true;
    };
    const auto literal = [&](std::string_view any_of) {
        if (i >= ts.size() || any_of.find(ts[i]) == std::string_view::npos) return false;
        ++i;
        return true;
    };

    int year = 0, month = 0, day = 0, hour = 0, minute = 0, second = 0;
    if (!(number(4, year) && literal("-") && number(2, month) && literal("-") && number(2, day) &&
          literal("Tt ") && number(2, hour) && literal(":") && number(2, minute) && literal(":") &&
          number(2, second))) {
        return std::nullopt;
    }
    if (month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 || minute > 59 || second > 60) {
        return std::nullopt;
    }
    long millis = 0;
    if (literal(".")) {
        std::size_t digits = 0;
        for (; i < ts.size() && ts[i] >= '0' && ts[i] <= '9'; ++i, ++digits) {
            if (digits < 3) millis = millis * 10 + (ts[i] - '0');
        }
        if (digits == 0) return std::nullopt;
        for (; digits < 3; ++digits)
            millis *= 10;
    }
    long offset_seconds = 0;
    if (!literal("Zz")) {
        if (i >= ts.size() || (ts[i] != '+' && ts[i] != '-')) return std::nullopt;
        const long sign = ts[i] == '-' ? -1 : 1;
        ++i;
        int oh = 0, om = 0;
        if (!(number(2, oh) && literal(":") && number(2, om)) || oh > 23 || om > 59) {
            return std::nullopt;
        }
        offset_seconds = sign * (oh * 3600L + om * 60L);
    }
    if (i != ts.size()) return std::nullopt;

    std::tm tm{};
    tm.tm_year = year - 1900;
    tm.tm_mon = month - 1;
    tm.tm_mday = day;
    tm.tm_hour = hour;
    tm.tm_min = minute;
    tm.tm_sec = second;
    const std::time_t t = ::timegm(&tm);
    return sys_clock::from_time_t(t) + std::chrono::milliseconds(millis) -
           std::chrono::seconds(offset_seconds);
}

/// Which lines `opts` selects; `cutoff` is now minus --since.
struct audit_filter {
    const options& opts;
    std::optional<sys_clock::time_point> cutoff;

    bool keeps(const json& line) const {
        const std::string event = get_string(line, "event").value_or("");
        if (opts.event) {
            if (*opts.event != "all" && event != *opts.event) return false;
        } else if (!opts.json && event != "tool_call" && event != "tool_call_rejected") {
            return false; // the table's default: calls only
        }
        if (opts.tool && get_string(line, "toolName") != *opts.tool) return false;
        if (opts.caller_given && get_string(line, "caller") != opts.caller) return false;
        if (opts.denied && (event != "tool_call" || get_string(line, "decision") != "deny")) {
            return false;
        }
        if (cutoff) {
            const auto ts = get_string(line, "ts");
            const auto when = ts ? parse_ts(*ts) : std::nullopt;
            if (!when || *when < *cutoff) return false;
        }
        return true;
    }
};

/// Reads every file, oldest first, keeping the selected lines (the last --limit of them).
/// Throws cli_error(exit_error) when no file could be read or no line of them parsed.
std::deque<audit_line> read_log(const fs::path& base, const audit_filter& filter) {
    const std::vector<fs::path> files = log_files(base);
    if (files.empty()) {
        throw cli_error(exit_error, fmt::format("no audit log at {}", display_path(base)));
    }
    std::deque<audit_line> kept;
    std::size_t opened = 0, parsed = 0, bad = 0;
    for (const fs::path& file : files) {
        std::ifstream in(file, std::ios::binary);
        if (!in) {
            fmt::print(stderr, "meith: cannot read {}\n", display_path(file));
            continue;
        }
        ++opened;
        std::string text;
        for (std::size_t number = 1; std::getline(in, text); ++number) {
            if (!text.empty() && text.back() == '\r') text.pop_back();
            if (text.find_first_not_of(" \t") == std::string::npos) continue;
            json obj = json::parse(text, nullptr, false);
            if (obj.is_discarded() || !obj.is_object() || !get_string(obj, "event")) {
                if (++bad <= max_reported_bad_lines) {
                    fmt::print(stderr, "meith: {}:{}: not a JSON audit line; skipped\n",
                               display_path(file), number);
                }
                continue;
            }
            ++parsed;
            if (!filter.keeps(obj)) continue;
            kept.push_back({std::move(text), std::move(obj)});
            if (filter.opts.limit && kept.size() > *filter.opts.limit) kept.pop_front();
        }
    }
    if (bad > max_reported_bad_lines) {
        fmt::print(stderr, "meith: {} more lines that are not JSON audit lines skipped\n",
                   bad - max_reported_bad_lines);
    }
    if (opened == 0) {
        throw cli_error(exit_error,
                        fmt::format("cannot read the audit log {}", display_path(base)));
    }
    if (parsed == 0 && bad > 0) {
        throw cli_error(exit_error, fmt::format("no line of the audit log {} could be read",
                                                display_path(base)));
    }
    return kept;
}

/// Local time: HH:MM:SS for today, with the date in front otherwise; the raw text if it does
/// not parse.
std::string time_text(const json& line, const std::tm& today) {
    const auto ts = get_string(line, "ts");
    if (!ts) return "-";
    const auto when = parse_ts(*ts);
    if (!when) return sanitize(*ts, false);
    const std::time_t t = sys_clock::to_time_t(*when);
    std::tm tm{};
    ::localtime_r(&t, &tm);
    char buf[32];
    const bool same_day = tm.tm_year == today.tm_year && tm.tm_yday == today.tm_yday;
    std::strftime(buf, sizeof buf, same_day ? "%H:%M:%S" : "%Y-%m-%d %H:%M:%S", &tm);
    return buf;
}

/// ok, the error code, "rejected" (the call never reached the policy) or "-".
std::string result_text(const json& line) {
    const std::string event = get_string(line, "event").value_or("");
    if (event == "tool_call_rejected") return "rejected";
    const json* ok = get_field(line, "ok");
    if (ok == nullptr || !ok->is_boolean()) return "-";
    if (ok->get<bool>()) return "ok";
    return sanitize(get_string(line, "errorCode").value_or("error"), false);
}

std::string duration_text(const json& line) {
    const json* ms = get_field(line, "durationMs");
    if (ms == nullptr || !ms->is_number()) return "-";
    return fmt::format("{:.1f}", ms->get<double>());
}

void print_audit_table(const std::deque<audit_line>& lines) {
    if (lines.empty()) {
        fmt::print("no matching audit lines\n");
        return;
    }
    const std::time_t now = sys_clock::to_time_t(sys_clock::now());
    std::tm today{};
    ::localtime_r(&now, &today);
    const auto text = [](const json& line, std::string_view key) {
        return sanitize(get_string(line, key).value_or("-"), false);
    };

    std::vector<std::vector<std::string>> rows{
        {"TIME", "EVENT", "TOOL", "CALLER", "DECISION", "RESULT", "MS", "REQUEST"}};
    for (const audit_line& l : lines) {
        rows.push_back({time_text(l.obj, today), text(l.obj, "event"), text(l.obj, "toolName"),
                        text(l.obj, "caller"), text(l.obj, "decision"), result_text(l.obj),
                        duration_text(l.obj), truncate(text(l.obj, "requestId"), request_width)});
    }
    print_table(rows);
}

} // namespace

int run_audit(const options& opts) {
    const fs::path base = locate_audit_log(opts.file, opts.home);
    audit_filter filter{opts, std::nullopt};
    if (opts.since) filter.cutoff = sys_clock::now() - *opts.since;
    const std::deque<audit_line> lines = read_log(base, filter);
    if (opts.json) {
        for (const audit_line& l : lines)
            fmt::print("{}\n", l.raw);
        return exit_ok;
    }
    print_audit_table(lines);
    return exit_ok;
}

} // namespace meith::cli
