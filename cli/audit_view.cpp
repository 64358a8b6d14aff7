#include "cli/audit_view.hpp"

#include "cli/table.hpp"

#include <algorithm>
#include <ctime>
#include <sys/ioctl.h>
#include <unistd.h>

#include <fmt/core.h>

namespace meith::cli {

namespace {

using sys_clock = std::chrono::system_clock;

/// REQUEST shows at most this many columns of a requestId, SUBJECT of its value.
constexpr std::size_t request_width = 24;
constexpr std::size_t subject_width = 16;
/// DETAILS gets at least this many columns, even past the line width: a reason cut shorter
/// says too little.
constexpr std::size_t min_details_width = 40;
/// A summary's list (tools added, capabilities) names at most this many items.
constexpr std::size_t max_listed = 5;

/// A field as text: strings sanitized, numbers and booleans printed, a string array joined
/// with ", "; nullopt when absent or null.
std::optional<std::string> field(const json& line, std::string_view key) {
    const json* v = get_field(line, key);
    if (v == nullptr || v->is_null()) return std::nullopt;
    if (v->is_string()) return sanitize(v->get<std::string>(), false);
    if (v->is_boolean()) return v->get<bool>() ? "true" : "false";
    if (v->is_number_integer()) return std::to_string(v->get<long long>());
    if (v->is_number()) return fmt::format("{}", v->get<double>());
    if (v->is_array()) {
        std::string out;
        std::size_t n = 0;
        for (const json& item : *v) {
            if (++n > max_listed) {
                out += fmt::format(", +{}", v->size() - max_listed);
                break;
            }
            if (!out.empty()) out += ", ";
            out += item.is_string() ? sanitize(item.get<std::string>(), false) : compact(item);
        }
        return out;
    }
    return sanitize(compact(*v), false);
}

std::string field_or(const json& line, std::string_view key, std::string_view fallback) {
    return field(line, key).value_or(std::string(fallback));
}

/// " (pid P, uid U)" from the fields present; "" when neither is.
std::string peer_text(const json& line) {
    std::vector<std::string> parts;
    if (auto pid = field(line, "pid")) parts.push_back("pid " + *pid);
    if (auto uid = field(line, "uid")) parts.push_back("uid " + *uid);
    if (parts.empty()) return "";
    std::string out = " (" + parts[0];
    for (std::size_t i = 1; i < parts.size(); ++i)
        out += ", " + parts[i];
    return out + ")";
}

/// The local calendar day of the line's ts (year * 1000 + yday), when it parses.
std::optional<int> local_day(const json& line) {
    const auto ts = get_string(line, "ts");
    const auto when = ts ? parse_audit_ts(*ts) : std::nullopt;
    if (!when) return std::nullopt;
    const std::time_t t = sys_clock::to_time_t(*when);
    std::tm tm{};
    ::localtime_r(&t, &tm);
    return tm.tm_year * 1000 + tm.tm_yday;
}

int today() {
    const std::time_t now = sys_clock::to_time_t(sys_clock::now());
    std::tm tm{};
    ::localtime_r(&now, &tm);
    return tm.tm_year * 1000 + tm.tm_yday;
}

/// Local time, HH:MM:SS, with the date in front when `dated`; the raw text if it does not
/// parse.
std::string time_text(const json& line, bool dated) {
    const auto ts = get_string(line, "ts");
    if (!ts) return "-";
    const auto when = parse_audit_ts(*ts);
    if (!when) return sanitize(*ts, false);
    const std::time_t t = sys_clock::to_time_t(*when);
    std::tm tm{};
    ::localtime_r(&t, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, dated ? "%Y-%m-%d %H:%M:%S" : "%H:%M:%S", &tm);
    return buf;
}

/// ok, the error code, "rejected" (the call never reached the policy) or "-".
std::string result_text(const json& line) {
    if (get_string(line, "event") == "tool_call_rejected") return "rejected";
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

/// The summaries of source_* events, for a tool source or a hook's server process.
std::string source_text(std::string_view event, const json& line) {
    if (event == "source_start") return fmt::format("pid {} started", field_or(line, "pid", "?"));
    if (event == "source_exit") {
        const std::string status = field_or(line, "status", "exited");
        if (auto pid = field(line, "pid")) return fmt::format("pid {} {}", *pid, status);
        return status; // it never started: status says why
    }
    if (event == "source_restart") {
        return fmt::format("restart {} in {} ms", field_or(line, "attempt", "?"),
                           field_or(line, "delayMs", "?"));
    }
    if (event == "source_failed") return "failed: " + field_or(line, "reason", "?");
    if (event == "source_restart_requested") return "restart requested";
    if (event == "source_learning_started") return "learning started";
    if (event == "source_learning_stopped") return "learning stopped";
    if (event == "source_waking") return "starting on demand";
    if (event == "source_idle_stopped")
        return "stopped after " + field_or(line, "idleStopMs", "?") + " ms without calls";
    if (event == "source_tools_changed") {
        std::string out = fmt::format("{} tools", field_or(line, "tools", "?"));
        if (auto added = field(line, "added"); added && !added->empty()) out += "; added " + *added;
        if (auto removed = field(line, "removed"); removed && !removed->empty()) {
            out += "; removed " + *removed;
        }
        return out;
    }
    return "";
}

std::string config_reload_text(const json& line) {
    const json* ok = get_field(line, "ok");
    const std::string file = field_or(line, "file", "defaults");
    if (ok == nullptr || !ok->is_boolean() || !ok->get<bool>()) {
        return fmt::format("failed ({}): {}", file, field_or(line, "error", "?"));
    }
    std::string out = "reloaded " + file;
    const auto changed = field(line, "changed");
    out += changed && !changed->empty() ? "; changed " + *changed : "; no change";
    if (const json* sources = get_field(line, "sources"); sources && sources->is_object()) {
        for (const char* key : {"added", "removed", "replaced", "restarted"}) {
            if (auto names = field(*sources, key); names && !names->empty()) {
                out += fmt::format("; {} {}", key, *names);
            }
        }
    }
    if (auto later = field(line, "needsRestart"); later && !later->empty()) {
        out += "; needs a restart: " + *later;
    }
    return out;
}

std::string grant_created_text(const json& line) {
    const json* g = get_field(line, "grant");
    if (g == nullptr || !g->is_object()) return "by " + field_or(line, "by", "?");
    std::string out = "[" + field_or(*g, "capabilities", "") + "]";
    if (auto tool = field(*g, "tool")) out += " tool " + *tool;
    if (auto caller = field(*g, "caller")) out += " caller " + *caller;
    if (auto session = field(*g, "sessionId")) out += " session " + *session;
    if (auto uses = field(*g, "usesLeft")) out += ", " + *uses + " uses";
    if (auto until = field(*g, "expiresAt")) out += ", until " + *until;
    if (auto by = field(line, "by")) out += ", by " + *by;
    return out;
}

} // namespace

std::optional<sys_clock::time_point> parse_audit_ts(std::string_view ts) {
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

bool is_call_event(std::string_view event) {
    return event == "tool_call" || event == "tool_call_rejected";
}

std::string call_reason(const json& line) {
    if (auto cut = field(line, "cut")) return "line cut by meithd: " + *cut;
    const std::string event = get_string(line, "event").value_or("");
    const auto reason = field(line, "reason");
    if (event == "tool_call_rejected") return reason.value_or("rejected");
    if (get_string(line, "decision") == "deny" && reason) return *reason;
    const json* ok = get_field(line, "ok");
    const bool failed = get_string(line, "decision") == "deny" ||
                        (ok != nullptr && ok->is_boolean() && !ok->get<bool>());
    if (!failed) return "";
    // The result summary holds the error the client got ({"ok":false,"error":{…}}).
    if (const json* result = get_field(line, "result"); result && result->is_object()) {
        if (const json* error = get_field(*result, "error"); error && error->is_object()) {
            if (auto message = field(*error, "message"); message && !message->empty()) {
                return *message;
            }
        }
    }
    if (reason) return *reason;
    if (auto end = field(line, "end"); end && *end != "tool") return "ended: " + *end;
    return "";
}

namespace {

/// Sources, hooks' server processes, the daemon, its audit log and config.
std::optional<event_summary> summarize_daemon_event(const std::string& event, const json& line) {
    if (event.starts_with("source_")) {
        // A hook's server process has the same lifecycle, named by "hook".
        std::string who = field(line, "source").value_or("");
        if (who.empty()) who = "hook " + field_or(line, "hook", "?");
        return event_summary{who, source_text(event, line)};
    }
    if (event == "daemon_start") {
        std::string text =
            fmt::format("pid {} on {}, {} tools", field_or(line, "pid", "?"),
                        field_or(line, "socketPath", "?"), field_or(line, "tools", "?"));
        if (get_field(line, "socketActivated") && line["socketActivated"] == true) {
            text += ", socket-activated";
        }
        return event_summary{"meithd", text};
    }
    if (event == "daemon_stop") {
        return event_summary{"meithd", fmt::format("pid {} stopped", field_or(line, "pid", "?"))};
    }
    if (event == "audit_repaired") {
        return event_summary{"audit log", fmt::format("cut a torn last line ({} bytes)",
                                                      field_or(line, "bytesRemoved", "?"))};
    }
    if (event == "config_reload") return event_summary{"config", config_reload_text(line)};
    return std::nullopt;
}

/// A connection's life and what its client asked for (lists, cancels, refused frames,
/// previews).
std::optional<event_summary> summarize_session_event(const std::string& event, const json& line) {
    const auto session = [&] { return field_or(line, "sessionId", "?"); };
    if (event == "connection_open") return event_summary{session(), "opened" + peer_text(line)};
    if (event == "connection_close") {
        std::string text = "closed: " + field_or(line, "reason", "?");
        if (auto n = field(line, "callsCancelled"); n && *n != "0") {
            text += fmt::format(", {} calls cancelled", *n);
        }
        return event_summary{session(), text + peer_text(line)};
    }
    if (event == "connection_rejected") {
        return event_summary{"-", "rejected: " + field_or(line, "reason", "?") + peer_text(line)};
    }
    if (event == "approver_connected")
        return event_summary{session(), "approver" + peer_text(line)};
    if (event == "approver_rejected") {
        return event_summary{session(),
                             "not an approver: " + field_or(line, "reason", "?") + peer_text(line)};
    }
    if (event == "list_tools") {
        return event_summary{session(), fmt::format("{} tools listed for caller {}",
                                                    field_or(line, "tools", "?"),
                                                    field_or(line, "caller", "?"))};
    }
    if (event == "cancel_tool_call") {
        const json* in_flight = get_field(line, "inFlight");
        const bool live = in_flight && in_flight->is_boolean() && in_flight->get<bool>();
        return event_summary{session(),
                             fmt::format("cancel request {} ({})", field_or(line, "requestId", "?"),
                                         live ? "in flight" : "not in flight")};
    }
    if (event == "frame_refused") {
        return event_summary{
            session(), fmt::format("{} from caller {} refused: {}", field_or(line, "frame", "?"),
                                   field_or(line, "caller", "?"), field_or(line, "reason", "?"))};
    }
    if (event == "tool_preview") {
        return event_summary{field_or(line, "toolName", "-"),
                             fmt::format("preview for caller {}: {}", field_or(line, "caller", "?"),
                                         field_or(line, "permission", "?"))};
    }
    if (event == "mcp_request") { // docs/protocol.md §17
        return event_summary{
            field_or(line, "target", "-"),
            fmt::format("{} from {} for caller {}: {} ({})", field_or(line, "method", "?"),
                        field_or(line, "source", "every source"), field_or(line, "caller", "?"),
                        field_or(line, "outcome", "?"), field_or(line, "decision", "?"))};
    }
    if (event == "client_request") {
        return event_summary{
            field_or(line, "requestId", "-"),
            fmt::format("{} sent to the client of the call", field_or(line, "method", "?"))};
    }
    return std::nullopt;
}

/// Held calls, approvers' decisions and grants (docs/protocol.md §14).
std::optional<event_summary> summarize_approval_event(const std::string& event, const json& line) {
    if (event == "approval_request") {
        return event_summary{
            field_or(line, "toolName", "-"),
            fmt::format("{} asks {} approvers (request {}, caller {})",
                        field_or(line, "approvalId", "?"), field_or(line, "approvers", "?"),
                        field_or(line, "requestId", "?"), field_or(line, "caller", "?"))};
    }
    if (event == "approval_decision") {
        std::string text = field_or(line, "decision", "?");
        if (auto why = field(line, "reason")) text += ": " + *why;
        if (auto by = field(line, "approverSession")) text += " (by " + *by + ")";
        return event_summary{field_or(line, "approvalId", "-"), text};
    }
    if (event == "grant_created") {
        const json* g = get_field(line, "grant");
        return event_summary{g && g->is_object() ? field_or(*g, "grantId", "-") : "-",
                             grant_created_text(line)};
    }
    if (event == "grant_used") {
        std::string text = fmt::format("used by request {} ({})", field_or(line, "requestId", "?"),
                                       field_or(line, "toolName", "?"));
        if (auto left = field(line, "usesLeft")) text += fmt::format(", {} uses left", *left);
        return event_summary{field_or(line, "grantId", "-"), text};
    }
    if (event == "grant_revoked" || event == "grant_expired") {
        std::string why = field_or(line, "why", event == "grant_revoked" ? "revoked" : "expired");
        std::replace(why.begin(), why.end(), '_', ' '); // used_up, session_ended
        if (auto by = field(line, "by")) why += " by " + *by;
        return event_summary{field_or(line, "grantId", "-"), why};
    }
    return std::nullopt;
}

} // namespace

event_summary summarize_event(const json& line) {
    const std::string event = get_string(line, "event").value_or("");
    for (auto* family : {summarize_daemon_event, summarize_session_event, summarize_approval_event})
        if (auto s = family(event, line)) return *s;
    const auto subject = [&](std::initializer_list<std::string_view> keys) {
        for (std::string_view key : keys) {
            if (auto v = field(line, key)) return *v;
        }
        return std::string("-");
    };
    // An event this build does not know: its scalar fields.
    std::string text;
    for (const auto& [key, value] : line.items()) {
        if (key == "ts" || key == "event" || value.is_structured() || value.is_null()) continue;
        if (!text.empty()) text += ", ";
        text += sanitize(key, false) + " " + field_or(line, key, "");
    }
    return {subject({"source", "hook", "toolName", "sessionId", "requestId"}), text};
}

audit_table::audit_table(bool call_layout, std::size_t width) : calls_(call_layout), width_(width) {
}

audit_table::row audit_table::make_row(const json& line) const {
    const auto text = [&](std::string_view key) {
        return sanitize(get_string(line, key).value_or("-"), false);
    };
    const std::string event = text("event");
    if (calls_ && is_call_event(event)) {
        return {{time_text(line, dated_), event, text("toolName"), text("caller"), text("decision"),
                 result_text(line), duration_text(line),
                 truncate(text("requestId"), request_width)},
                call_reason(line)};
    }
    event_summary s = summarize_event(line);
    return {{time_text(line, dated_), event, truncate(s.subject, subject_width)}, s.text};
}

void audit_table::widen(const row& r) {
    // In the call layout, another event's subject sits under TOOL without widening it (a
    // session id would push every call's columns right); its summary just starts later.
    const std::size_t n = calls_ && r.cells.size() < 8 ? 2 : r.cells.size();
    if (widths_.size() < n) widths_.resize(n, 0);
    for (std::size_t c = 0; c < n; ++c)
        widths_[c] = std::max(widths_[c], columns(r.cells[c]));
}

void audit_table::print_line(const row& r) const {
    std::string line;
    for (std::size_t c = 0; c < r.cells.size(); ++c) {
        // A cell wider than its column (a row printed later, a subject) still gets its gap.
        const std::size_t w = std::max(c < widths_.size() ? widths_[c] : 0, columns(r.cells[c]));
        line += pad(r.cells[c], w + 2);
    }
    const std::size_t used = columns(line);
    const std::size_t room = used + min_details_width < width_ ? width_ - used : min_details_width;
    line += truncate(r.tail, room);
    while (!line.empty() && line.back() == ' ')
        line.pop_back();
    fmt::print("{}\n", line);
}

void audit_table::print(const std::vector<const json*>& lines, bool follow) {
    // The date shows when the lines span more than one day, or their one day is not today.
    for (const json* l : lines) {
        const auto d = local_day(*l);
        if (!d) continue;
        if (day_ && *d != *day_) dated_ = true;
        day_ = d;
    }
    if (day_ && *day_ != today()) dated_ = true;
    if (!day_) day_ = today();

    const row header =
        calls_ ? row{{"TIME", "EVENT", "TOOL", "CALLER", "DECISION", "RESULT", "MS", "REQUEST"},
                     "DETAILS"}
               : row{{"TIME", "EVENT", "SUBJECT"}, "DETAILS"};
    widen(header);
    if (follow) {
        // Typical widths, so most rows that come later line up with these.
        static const std::vector<std::size_t> call_widths{8, 9, 12, 6, 8, 11, 7, 14};
        static const std::vector<std::size_t> event_widths{8, 14, 12};
        const auto& typical = calls_ ? call_widths : event_widths;
        for (std::size_t c = 0; c < typical.size(); ++c)
            widths_[c] = std::max(widths_[c], typical[c]);
    }
    std::vector<row> rows;
    rows.reserve(lines.size());
    for (const json* l : lines) {
        rows.push_back(make_row(*l));
        widen(rows.back());
    }
    print_line(header);
    for (const row& r : rows)
        print_line(r);
}

void audit_table::print_row(const json& line) {
    if (const auto d = local_day(line)) {
        if (day_ && *d != *day_) dated_ = true; // past midnight: from now on with the date
        day_ = d;
    }
    const row r = make_row(line);
    if (!widths_.empty()) widths_[0] = std::max(widths_[0], columns(r.cells[0]));
    print_line(r);
}

} // namespace meith::cli
