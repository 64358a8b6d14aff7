// approve: `meith approve` and `meith tools accept` (PROTOCOL.md §12, docs/protocol.md §14;
// `meith grant`, `grants` and `revoke` are in grants.cpp). Each proves itself an approver first:
// approver_hello with the secret from HOME/approver.secret, from this terminal (meithd checks the
// process has one).
//
// `meith approve` is line-based, so it works in any terminal and under tmux: each held call is
// shown with its preview and redacted arguments, then "y" allows it once, "s" for the caller's
// session, "n" denies (a reason is asked for), "q" quits. A held egress connection (a source
// whose network table says `ask`, docs/protocol.md §19) also takes "a": allowed always, the
// target added to the source's network.allow in the config file. Calls held while one is shown wait
// in order; a call that another approver answered, or that timed out or was cancelled, is
// dropped from the screen with what happened. Whenever the call on screen changes, input typed
// so far is discarded, so an answer always goes to the call the person is looking at.
// A quarantined tool (docs/protocol.md §22: its definition changed, or it is new) waits in the
// same queue: its diff is shown, "y" accepts it, "n" leaves it quarantined.
#include "cli/commands.hpp"
#include "cli/commands/approver.hpp"
#include "cli/commands/definitions.hpp"

#include "cli/errors.hpp"
#include "cli/session.hpp"
#include "cli/table.hpp"

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <deque>
#include <fstream>
#include <utility>

#include <fmt/core.h>
#include <poll.h>
#include <termios.h>
#include <unistd.h>

namespace meith::cli {

namespace {

/// The approver secret of the daemon's home.
std::string read_secret(const std::filesystem::path& home) {
    const auto path = home / "approver.secret";
    std::ifstream in(path);
    std::string secret;
    if (!in || !std::getline(in, secret) || secret.empty())
        throw cli_error(exit_error, fmt::format("cannot read {} (meithd creates it at its first "
                                                "start; only its user can read it)",
                                                path.string()));
    while (!secret.empty() && (secret.back() == '\r' || secret.back() == ' '))
        secret.pop_back();
    return secret;
}

} // namespace

json become_approver(session& s) {
    const std::string id = s.ids.next();
    s.conn.send_frame(compact(json{{"type", "approver_hello"},
                                   {"protocol", 1},
                                   {"requestId", id},
                                   {"secret", read_secret(s.where.home)}}));
    return await_reply(s.conn, id, "approver_hello_result");
}

std::string text_of(const json& obj, std::string_view key, std::string fallback) {
    const json* v = get_field(obj, key);
    if (v == nullptr || v->is_null()) return fallback;
    if (v->is_string()) return sanitize(v->get<std::string>(), false);
    return sanitize(compact(*v), false);
}

std::string list_text(const json& obj, std::string_view key) {
    const json* v = get_field(obj, key);
    if (v == nullptr || !v->is_array() || v->empty()) return "-";
    std::string out;
    for (const json& item : *v) {
        if (!out.empty()) out += ", ";
        out += item.is_string() ? sanitize(item.get<std::string>(), false) : compact(item);
    }
    return out;
}

std::string trim(std::string s) {
    while (!s.empty() && (s.back() == ' ' || s.back() == '\r' || s.back() == '\t'))
        s.pop_back();
    std::size_t i = 0;
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t'))
        ++i;
    return s.substr(i);
}

namespace {

bool is_egress(const json& req) {
    return get_string(req, "kind").value_or("") == "egress";
}

/// One held egress connection on the screen (docs/protocol.md §19), then the prompt.
void show_egress_request(const json& req, std::size_t waiting) {
    fmt::print("\nHeld connection {} from source '{}'\n", text_of(req, "approvalId"),
               text_of(req, "source"));
    fmt::print("  to         {}  (via {})\n", text_of(req, "target"), text_of(req, "via"));
    if (get_string(req, "toolName"))
        fmt::print("  for        {} by {} (session {})\n", text_of(req, "toolName"),
                   text_of(req, "caller"), text_of(req, "sessionId"));
    fmt::print("  asked      {}\n", text_of(req, "reason"));
    if (const json* t = get_field(req, "timeoutMs"); t && t->is_number_unsigned())
        fmt::print("  timeout    {} ms\n", t->get<std::uint64_t>());
    if (waiting > 0) fmt::print("  ({} more held after this one)\n", waiting);
    fmt::print("Allow? y = once, s = until meithd stops, a = always (adds \"{}\" to the source's "
               "network.allow in the config), n = deny, q = quit: ",
               text_of(req, "target"));
    std::fflush(stdout);
}

/// A quarantined tool's diff in the queue (an accept_tool preview's reply), not a held call.
bool is_definition(const json& req) {
    return get_string(req, "type") == "tool_definition";
}

/// One held call (or quarantined tool) on the screen, then the prompt.
void show_request(const json& req, std::size_t waiting) {
    if (is_egress(req)) return show_egress_request(req, waiting);
    if (is_definition(req)) {
        fmt::print("\n");
        print_definition_diff(text_of(req, "toolName"), req);
        if (waiting > 0) fmt::print("  ({} more waiting)\n", waiting);
        fmt::print("Accept this definition? It becomes callable as it is now. y/n/q: ");
        std::fflush(stdout);
        return;
    }
    const auto agent = get_string(req, "agent");
    const auto profile = get_string(req, "client");
    fmt::print("\nHeld call {} by {}{}{} (session {})\n", text_of(req, "approvalId"),
               text_of(req, "caller"), agent ? " via " + sanitize(*agent, false) : "",
               profile ? " (client profile " + sanitize(*profile, false) + ")" : "",
               text_of(req, "sessionId"));
    fmt::print("  tool       {}  [{}]\n", text_of(req, "toolName"), list_text(req, "capabilities"));
    fmt::print("  asked      {}\n", text_of(req, "reason"));
    if (const json* p = get_field(req, "preview"); p && p->is_string()) {
        // The preview may span lines (a diff): indent each one.
        std::string text = sanitize(p->get<std::string>(), true);
        std::string indented;
        for (char c : text) {
            indented += c;
            if (c == '\n') indented += "             ";
        }
        fmt::print("  preview    {}\n", indented);
    }
    fmt::print("  arguments  {}\n", text_of(req, "args", "{}"));
    if (const json* t = get_field(req, "timeoutMs"); t && t->is_number_unsigned())
        fmt::print("  timeout    {} ms from the call\n", t->get<std::uint64_t>());
    if (waiting > 0) fmt::print("  ({} more held after this one)\n", waiting);
    fmt::print("Allow? y = once, s = for this session, n = deny, q = quit: ");
    std::fflush(stdout);
}

/// The terminal while `meith approve` runs: single keys (no Enter: ICANON off) for y/s/n/q,
/// whole lines (the terminal's own editing) for a deny's reason. Restored when it ends, also
/// on SIGINT, SIGTERM and SIGHUP. Inactive when standard input is not a terminal.
class approver_terminal {
  public:
    approver_terminal() {
        if (!::isatty(STDIN_FILENO) || ::tcgetattr(STDIN_FILENO, &saved_) != 0) return;
        active_ = true;
        restore_at_signal = saved_;
        restore_armed = 1;
        for (int sig : {SIGINT, SIGTERM, SIGHUP})
            std::signal(sig, on_signal);
        line_mode(false);
    }
    ~approver_terminal() {
        if (!active_) return;
        ::tcsetattr(STDIN_FILENO, TCSANOW, &saved_);
        restore_armed = 0;
        for (int sig : {SIGINT, SIGTERM, SIGHUP})
            std::signal(sig, SIG_DFL);
    }
    approver_terminal(const approver_terminal&) = delete;
    approver_terminal& operator=(const approver_terminal&) = delete;

    bool single_keys() const { return active_ && !line_; }
    /// Whole lines (true) or single keys (false).
    void line_mode(bool lines) {
        if (!active_) return;
        line_ = lines;
        termios t = saved_;
        if (!lines) {
            t.c_lflag &= static_cast<tcflag_t>(~ICANON);
            t.c_cc[VMIN] = 1;
            t.c_cc[VTIME] = 0;
        }
        ::tcsetattr(STDIN_FILENO, TCSANOW, &t);
    }

  private:
    static inline termios restore_at_signal{};
    static inline volatile std::sig_atomic_t restore_armed = 0;
    static void on_signal(int sig) {
        if (restore_armed) ::tcsetattr(STDIN_FILENO, TCSANOW, &restore_at_signal);
        std::signal(sig, SIG_DFL);
        std::raise(sig);
    }
    termios saved_{};
    bool active_ = false;
    bool line_ = true;
};

/// What `meith approve` shows and reads: the held calls (the one on screen first), the line
/// being typed, and whether a deny's reason is being asked for. Answers go out as `approve`
/// frames; the daemon's approval_resolved (to every approver, this one included) moves on.
class approver_screen {
  public:
    explicit approver_screen(session& s) : s_(s) {}

    /// Shows the first held call, or that none is waiting.
    void show_front() {
        asking_reason_ = false;
        term_.line_mode(false);
        // Typed for the call that just left the screen: never for the next one.
        typed_.clear();
        if (::isatty(STDIN_FILENO)) ::tcflush(STDIN_FILENO, TCIFLUSH);
        if (held_.empty()) {
            if (!waiting_shown_) fmt::print("\nWaiting for held calls…\n");
            waiting_shown_ = true;
            std::fflush(stdout);
            return;
        }
        waiting_shown_ = false;
        show_request(held_.front(), held_.size() - 1);
    }

    /// The connection to meithd is gone: every call on screen went with it (meithd withdrew
    /// them), and whatever was typed for them is dropped.
    void lost_connection() {
        held_.clear();
        asking_reason_ = false;
        term_.line_mode(false);
        typed_.clear();
        answered_.reset();
        waiting_shown_ = false;
    }

    /// Standard input is readable: reads it and answers each whole line. False to quit
    /// (q, Ctrl-D, or stdin gone).
    bool on_stdin() {
        char buf[512];
        const ssize_t n = ::read(STDIN_FILENO, buf, sizeof buf);
        if (n < 0 && errno == EINTR) return true;
        if (n <= 0) {
            fmt::print("\n");
            return false;
        }
        for (ssize_t i = 0; i < n; ++i) {
            const char ch = buf[i];
            if (term_.single_keys()) {
                if (!on_key(ch)) return false;
            } else if (ch == '\n') {
                const std::string line = std::exchange(typed_, {});
                if (!on_line(line)) return false;
            } else {
                typed_ += ch;
            }
        }
        return true;
    }

    /// Asks meithd for the diff of each quarantined tool there is now (the answer comes to
    /// on_frame as a tools_list).
    void ask_quarantined() {
        s_.conn.send_frame(compact(
            json{{"type", "list_tools"}, {"protocol", 1}, {"requestId", "approve-quarantined"}}));
    }

    /// A frame from the daemon: a call held, a call resolved (by anyone), a tool quarantined,
    /// a diff, or an error.
    void on_frame(const json& msg) {
        const std::string type = get_string(msg, "type").value_or("");
        if (type == "tools_list") {
            for (const json& t : msg.value("tools", json::array()))
                if (t.value("quarantined", false)) ask_definition(text_of(t, "name"));
        } else if (type == "tool_quarantined") {
            ask_definition(text_of(msg, "toolName"));
        } else if (type == "tool_definition") {
            queue(msg);
        } else if (type == "tool_accepted") {
            const std::string name = text_of(msg, "toolName");
            fmt::print("\naccepted: {} is callable again\n", sanitize(name, false));
            drop_definition(name);
        } else if (type == "approval_request") {
            held_.push_back(msg);
            if (held_.size() == 1) {
                show_front();
            } else if (!asking_reason_) {
                fmt::print("\n  (another call is held: {} waiting)\nAllow? y/s/n/q: ",
                           held_.size() - 1);
                std::fflush(stdout);
            }
        } else if (type == "approval_resolved") {
            on_resolved(msg);
        } else if (type == "error") {
            fmt::print(stderr, "\nmeith: {}\n", text_of(msg, "message"));
            // An accept another approver beat us to: the tool is no longer quarantined.
            const std::string rid = text_of(msg, "requestId", "");
            if (rid.starts_with("accept:")) drop_definition(rid.substr(7));
        }
    }

  private:
    void ask_definition(const std::string& name) {
        for (const json& h : held_)
            if (is_definition(h) && text_of(h, "toolName") == name) return; // shown already
        s_.conn.send_frame(compact(json{{"type", "accept_tool"},
                                        {"protocol", 1},
                                        {"requestId", "diff:" + name},
                                        {"toolName", name},
                                        {"preview", true}}));
    }

    void queue(const json& msg) {
        held_.push_back(msg);
        if (held_.size() == 1) {
            show_front();
        } else if (!asking_reason_) {
            fmt::print("\n  (more is waiting: {})\n", held_.size() - 1);
            std::fflush(stdout);
        }
    }

    /// Takes quarantined tool `name` off the queue (accepted, or no longer quarantined).
    void drop_definition(const std::string& name) {
        for (std::size_t i = 0; i < held_.size(); ++i) {
            if (!is_definition(held_[i]) || text_of(held_[i], "toolName") != name) continue;
            held_.erase(held_.begin() + static_cast<std::ptrdiff_t>(i));
            if (i == 0) show_front();
            return;
        }
    }

    /// y or n for the quarantined tool on screen.
    void answer_definition(const std::string& line) {
        const std::string name = text_of(held_.front(), "toolName");
        if (line == "y" || line == "Y") {
            s_.conn.send_frame(compact(json{{"type", "accept_tool"},
                                            {"protocol", 1},
                                            {"requestId", "accept:" + name},
                                            {"toolName", name}}));
        } else if (line == "n" || line == "N") {
            fmt::print("not accepted: {} stays quarantined (meith tools accept {} later)\n",
                       sanitize(name, false), sanitize(name, false));
            held_.pop_front();
            show_front();
        } else {
            fmt::print("Answer y (accept), n (leave it quarantined) or q (quit): ");
            std::fflush(stdout);
        }
    }

    /// One key in single-key mode: y, s, n (then the reason as a line), q. False to quit.
    bool on_key(char ch) {
        switch (ch) {
        case '\r':
        case '\n':
        case ' ':
        case '\t':
            return true; // an Enter out of habit changes nothing
        case 'q':
        case 'Q':
            fmt::print("\n");
            return false;
        default:
            fmt::print("\n");
            return on_line(std::string(1, ch));
        }
    }

    /// One typed line. False to quit.
    bool on_line(const std::string& raw) {
        const std::string line = trim(raw);
        if (asking_reason_) {
            send_answer("deny", line);
            asking_reason_ = false;
            term_.line_mode(false);
            return true;
        }
        if (line == "q" || line == "quit") return false;
        if (held_.empty()) return true;
        if (is_definition(held_.front())) {
            answer_definition(line);
            return true;
        }
        if (line == "y" || line == "Y") {
            send_answer("allow_once", "");
        } else if (line == "s" || line == "S") {
            send_answer("allow_session", "");
        } else if ((line == "a" || line == "A") && is_egress(held_.front())) {
            send_answer("allow_always", "");
        } else if (line == "n" || line == "N") {
            asking_reason_ = true;
            term_.line_mode(true);
            fmt::print("Reason (Enter for none): ");
        } else if (is_egress(held_.front())) {
            fmt::print("Answer y (once), s (for this session), a (always), n (deny) or q (quit): ");
        } else {
            fmt::print("Answer y (once), s (for this session), n (deny) or q (quit): ");
        }
        std::fflush(stdout);
        return true;
    }

    void send_answer(const std::string& decision, const std::string& reason) {
        answered_ = get_string(held_.front(), "approvalId");
        json f = {{"type", "approve"},
                  {"protocol", 1},
                  {"approvalId", held_.front()["approvalId"]},
                  {"decision", decision}};
        if (!reason.empty()) f["reason"] = reason;
        s_.conn.send_frame(compact(f));
    }

    void on_resolved(const json& msg) {
        const auto id = get_string(msg, "approvalId");
        for (std::size_t i = 0; i < held_.size(); ++i) {
            if (get_string(held_[i], "approvalId") != id) continue;
            const std::string decision = text_of(msg, "decision");
            const std::string reason = text_of(msg, "reason", "");
            const bool gone = i == 0 && id != answered_; // not our answer: tell the person
            fmt::print("\n{}{}: {}{}{}\n", gone ? "the call on screen is gone — " : "",
                       text_of(held_[i], "approvalId"),
                       decision == "allow_once"      ? "allowed once"
                       : decision == "allow_session" ? "allowed for the session"
                       : decision == "allow_always"  ? "allowed always (kept in the config)"
                       : decision == "deny"          ? "denied"
                                                     : "withdrawn",
                       reason.empty() ? "" : " — ", reason);
            held_.erase(held_.begin() + static_cast<std::ptrdiff_t>(i));
            if (i == 0) show_front();
            return;
        }
    }

    session& s_;
    approver_terminal term_;
    std::deque<json> held_; ///< approval_requests not yet resolved, the shown one first
    bool asking_reason_ = false;
    std::string typed_; ///< stdin bytes not yet ended by a newline
    bool waiting_shown_ = false;
    std::optional<std::string> answered_; ///< the approvalId this approver last answered
};

/// How long `meith approve` waits for meithd to come back after the connection closed.
constexpr std::chrono::seconds approve_reconnect_for{60};

/// meithd closed the connection (it stopped or restarted): says so, then reconnects with
/// back-off (100 ms doubling to 2 s) for up to approve_reconnect_for and proves itself an
/// approver again. Never starts a daemon: one that was stopped on purpose stays stopped.
/// Standard input stays live (q quits: false). Throws cli_error when meithd does not come back.
bool reconnect_approver(const options& opts, session& s, approver_screen& screen) {
    screen.lost_connection();
    fmt::print("\nmeithd closed the connection (it stopped or restarted); the calls shown here "
               "were withdrawn with it.\nWaiting up to {} s for meithd to come back (q quits)…\n",
               approve_reconnect_for.count());
    std::fflush(stdout);
    options again = opts;
    again.no_autostart = true;
    const auto deadline = std::chrono::steady_clock::now() + approve_reconnect_for;
    auto pause = std::chrono::milliseconds(100);
    std::string last_error;
    for (;;) {
        pollfd in{STDIN_FILENO, POLLIN, 0};
        if (::poll(&in, 1, static_cast<int>(pause.count())) > 0 && !screen.on_stdin()) return false;
        try {
            session fresh = open_session(again);
            const json hello = become_approver(fresh);
            s = std::move(fresh);
            fmt::print("reconnected to meithd at {} (this approver is now session {}).\n",
                       s.where.socket.string(), text_of(hello, "sessionId"));
            screen.show_front();
            screen.ask_quarantined();
            return true;
        } catch (const protocol::client_error& e) {
            last_error = e.what();
        } catch (const cli_error& e) {
            last_error = e.what();
        }
        if (std::chrono::steady_clock::now() >= deadline)
            throw cli_error(exit_error,
                            fmt::format("meithd did not come back within {} s ({}); once it runs "
                                        "again (`meith status` starts it), run `meith approve` "
                                        "again",
                                        approve_reconnect_for.count(), last_error));
        pause = std::min(pause * 2, std::chrono::milliseconds(2000));
    }
}

} // namespace

int run_approve(const options& opts) {
    session s = open_session(opts);
    const json hello = become_approver(s);
    fmt::print("meith approve: answering held calls for meithd at {} (this approver is session "
               "{}).\nq or Ctrl-D quits; calls shown here stay held for other approvers or "
               "their timeout.\n",
               s.where.socket.string(), text_of(hello, "sessionId"));
    std::fflush(stdout);
    approver_screen screen(s);
    screen.show_front();
    screen.ask_quarantined();
    for (;;) {
        auto r = s.conn.read_frame(std::nullopt, STDIN_FILENO);
        if (r.status == protocol::client_channel::read_status::woken) {
            if (!screen.on_stdin()) return exit_ok;
            continue;
        }
        if (r.status != protocol::client_channel::read_status::frame) {
            if (!reconnect_approver(opts, s, screen)) return exit_ok;
            continue;
        }
        screen.on_frame(parse_frame(r.frame));
    }
}

int run_tools_accept(const options& opts) {
    options as_cli = opts;
    as_cli.caller = "cli";
    session s = open_session(as_cli);
    become_approver(s);
    const std::string& name = opts.words.at(2);
    const std::string id = s.ids.next();
    s.conn.send_frame(compact(json{{"type", "accept_tool"},
                                   {"protocol", 1},
                                   {"requestId", id},
                                   {"toolName", name},
                                   {"preview", true}}));
    const json diff = await_reply(s.conn, id, "tool_definition");
    print_definition_diff(name, diff);
    fmt::print("Accept this definition for {}? It becomes callable as it is now. [y/N] ",
               sanitize(name, false));
    std::fflush(stdout);
    std::string answer;
    char ch = 0;
    while (::read(STDIN_FILENO, &ch, 1) == 1 && ch != '\n')
        answer += ch;
    answer = trim(answer);
    if (answer != "y" && answer != "Y" && answer != "yes") {
        fmt::print("not accepted: {} stays quarantined\n", sanitize(name, false));
        return exit_tool_failed; // 1, as for a call the policy would deny
    }
    const std::string accept_id = s.ids.next();
    s.conn.send_frame(compact(json{
        {"type", "accept_tool"}, {"protocol", 1}, {"requestId", accept_id}, {"toolName", name}}));
    await_reply(s.conn, accept_id, "tool_accepted");
    fmt::print("accepted: {} is callable again\n", sanitize(name, false));
    return exit_ok;
}

} // namespace meith::cli
