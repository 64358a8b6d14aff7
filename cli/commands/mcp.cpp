// mcp: `meith mcp` — the registry as an MCP server on stdio (docs/protocol.md §10, §17). The
// MCP session itself is bridge/mcp_session; this file hosts it.
//
// When stdin and stdout are pipes or sockets (as every MCP client starts a server), `meith
// mcp` hands them and stderr to meithd (§10 "Handoff": SCM_RIGHTS, after its hello) and then
// only waits for meithd's verdict, its exit status: meithd speaks MCP on the client's pipes
// itself, one process fewer on every message. A signal that ends `meith mcp` closes its
// connection, which ends the session in meithd. Otherwise — a terminal or a file,
// MEITH_MCP_HANDOFF=0, a meithd that refuses or predates the handoff, or a meithd gone without
// a verdict — the session runs here (the bridge): one thread, the daemon's channel read with
// stdin as its wake fd, so neither side can starve the other.
#include "bridge/mcp_session.hpp"
#include "cli/autostart.hpp"
#include "cli/commands.hpp"
#include "cli/discovery.hpp"
#include "cli/session.hpp"
#include "platform/fd_passing.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdlib>

#include <fcntl.h>
#include <fmt/core.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

namespace meith::cli {

namespace {

/// The bridge's link: a blocking socket connection to meithd and blocking stdout.
class socket_link final : public bridge::link {
  public:
    explicit socket_link(const options& o) : opts_(o) {}

    bool connected() const override { return conn_.has_value(); }

    std::optional<json> connect(const std::string& hello, const std::string& id,
                                std::string& why) override {
        try {
            daemon_connection dc = connect_daemon(opts_);
            protocol::client_channel ch = std::move(dc.channel);
            ch.send_frame(hello);
            json result = await_reply(ch, id, "hello_result");
            conn_ = std::move(ch);
            return result;
        } catch (const protocol::client_error& e) {
            why = to_cli_error(e, opts_).what();
        } catch (const cli_error& e) {
            why = e.what();
        }
        return std::nullopt;
    }

    bool send(const std::string& frame, std::string& why) override {
        try {
            conn_->send_frame(frame);
            return true;
        } catch (const protocol::client_error& e) {
            why = e.what();
            conn_.reset();
            return false;
        }
    }

    void disconnect() override { conn_.reset(); }

    void write_client(std::string_view text) override {
        for (std::size_t done = 0; done < text.size();) {
            const ssize_t n = ::write(STDOUT_FILENO, text.data() + done, text.size() - done);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) throw cli_error(exit_error, "stdout closed");
            done += static_cast<std::size_t>(n);
        }
    }

    void note(std::string_view text) override { fmt::print(stderr, "{}\n", text); }

    std::optional<protocol::client_channel>& channel() { return conn_; }

  private:
    const options& opts_;
    std::optional<protocol::client_channel> conn_;
};

void read_stdin(bridge::mcp_session& s) {
    auto buf = s.input_buffer();
    const ssize_t n = ::read(STDIN_FILENO, buf.data(), buf.size());
    if (n > 0)
        s.input_commit(static_cast<std::size_t>(n));
    else if (n == 0 || (errno != EINTR && errno != EAGAIN))
        s.input_ended(n == 0);
}

/// After stdin's EOF: answers the requests still awaited (a cancelled one is not) for at
/// most `drain_grace`, or until stdout's reader is gone; then returns exit_ok.
int drain(bridge::mcp_session& s, socket_link& l) {
    // The client may still read stdout (a script that wrote its requests and closed its end,
    // or a client waiting for its answers before it signals us, MCP stdio "Shutdown").
    s.begin_drain();
    // Bounded: past drain_grace (or once nobody reads stdout) the bridge leaves, and closing
    // its connection cancels what is still running.
    const auto until = std::chrono::steady_clock::now() + bridge::mcp_session::drain_grace;
    while (s.awaited() || s.waiting_hello()) {
        const auto now = std::chrono::steady_clock::now();
        if (now >= until) {
            fmt::print(stderr,
                       "meith mcp: stdin closed; {} s later requests are still in flight: "
                       "leaving them (their calls are cancelled)\n",
                       bridge::mcp_session::drain_grace.count());
            break;
        }
        pollfd out{STDOUT_FILENO, 0, 0};
        if (::poll(&out, 1, 0) > 0 && (out.revents & (POLLERR | POLLHUP | POLLNVAL)) != 0)
            break; // nobody reads the answers any more
        auto& conn = l.channel();
        if (!conn) break;
        const auto r = conn->read_frame(std::min(until, now + std::chrono::milliseconds(200)));
        if (r.status == protocol::client_channel::read_status::frame)
            s.on_daemon_frame(r.frame);
        else if (r.status == protocol::client_channel::read_status::closed)
            s.daemon_gone("meithd closed the connection");
    }
    return exit_ok;
}

/// The session, run here: `meith mcp` as the bridge between its stdio and a socket.
int run_bridge(const options& opts, const bridge::settings& settings) {
    socket_link l(opts);
    bridge::mcp_session s(settings, l);
    s.connect(); // failures are answered per request
    for (;;) {
        s.pump();
        if (s.input_over() && !s.waiting_hello()) return drain(s, l);
        auto& conn = l.channel();
        if (conn) {
            const auto r = conn->read_frame(std::nullopt, s.input_over() ? -1 : STDIN_FILENO);
            if (r.status == protocol::client_channel::read_status::frame) {
                s.on_daemon_frame(r.frame);
            } else if (r.status == protocol::client_channel::read_status::closed) {
                s.daemon_gone("meithd closed the connection");
            } else if (r.status == protocol::client_channel::read_status::woken) {
                read_stdin(s);
            }
        } else if (s.input_over()) {
            return drain(s, l);
        } else {
            pollfd p{STDIN_FILENO, POLLIN, 0};
            if (::poll(&p, 1, -1) > 0) read_stdin(s);
        }
    }
}

/// A pipe or a socket: what meithd can watch with epoll and make non-blocking without
/// touching a terminal other programs share (docs/protocol.md §10 "Handoff").
bool pipe_or_socket(int fd) {
    struct stat st {};
    return ::fstat(fd, &st) == 0 && (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode));
}

bool handoff_enabled() {
    const char* v = std::getenv("MEITH_MCP_HANDOFF");
    return v == nullptr || std::string_view(v) != "0";
}

/// Hands stdin, stdout and stderr to meithd and waits for its verdict. nullopt: not handed
/// over (the bridge runs), or meithd went away without a verdict (the bridge takes over).
std::optional<int> hand_off(const options& opts, const bridge::settings& settings) {
    if (!handoff_enabled() || !pipe_or_socket(STDIN_FILENO) || !pipe_or_socket(STDOUT_FILENO))
        return std::nullopt;
    std::optional<protocol::client_channel> ch;
    protocol::request_id_generator ids(protocol::request_id_generator::process_prefix("mcp"));
    json client{{"name", "meith mcp"}, {"caller", settings.caller}};
    if (settings.client) client["client"] = *settings.client;
    try {
        daemon_connection dc = connect_daemon(opts);
        ch = std::move(dc.channel);
        const std::string hello_id = ids.next();
        ch->send_frame(compact(json{
            {"type", "hello"}, {"protocol", 1}, {"requestId", hello_id}, {"clientInfo", client}}));
        await_reply(*ch, hello_id, "hello_result");
        const std::string id = ids.next();
        std::string frame = compact(json{{"type", "mcp_handoff"},
                                         {"protocol", 1},
                                         {"requestId", id},
                                         {"clientInfo", client},
                                         {"all", settings.all},
                                         {"search", settings.search}});
        frame.push_back('\n');
        // stderr too when meithd can write it without blocking (a pipe or a socket): the
        // session's notes go there.
        const bool pass_err = pipe_or_socket(STDERR_FILENO);
        const std::array<int, 3> fds{STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO};
        if (!platform::send_with_fds(ch->fd(), frame, std::span(fds.data(), pass_err ? 3 : 2)))
            return std::nullopt;
        // No short deadline: once meithd has the descriptors, giving up on its answer could
        // leave both running the session on the same pipes.
        await_reply(*ch, id, "mcp_handoff_result", std::chrono::hours(24));
    } catch (const protocol::client_error&) {
        return std::nullopt; // meithd is not there: the bridge says so per request
    } catch (const cli_error&) {
        return std::nullopt; // refused, or a meithd before the handoff: the bridge runs
    }
    // meithd holds the session now. Its verdict is the exit status.
    for (;;) {
        const auto r = ch->read_frame(std::nullopt);
        if (r.status == protocol::client_channel::read_status::closed) break;
        if (r.status != protocol::client_channel::read_status::frame) continue;
        const json f = json::parse(r.frame, nullptr, false);
        if (get_string(f, "type") != "mcp_ended") continue;
        const json* code = get_field(f, "exitCode");
        return code != nullptr && code->is_number_integer() ? code->get<int>() : exit_error;
    }
    // meithd went away mid-session (a restart): the bridge takes the client from here, on
    // the same pipes, blocking again as it expects.
    fmt::print(stderr, "meith mcp: meithd ended without a verdict; bridging from here\n");
    for (int fd : {STDIN_FILENO, STDOUT_FILENO})
        if (const int fl = ::fcntl(fd, F_GETFL); fl >= 0) ::fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    return std::nullopt;
}

} // namespace

int run_mcp(const options& opts) {
    if (opts.search && !opts.search->empty())
        throw usage_error("meith mcp --search takes no words: the MCP client searches with the "
                          "search_tools tool (to search here: meith tools --search WORDS)");
    if (opts.search && opts.all) throw usage_error("meith mcp --search lists no tools: drop --all");
    bridge::settings settings;
    settings.caller = opts.caller_given ? opts.caller : "plugin";
    settings.all = opts.all;
    settings.search = opts.search.has_value();
    settings.client = opts.client;
    settings.when_down = autostart_enabled(opts) ? "; the next request starts it again"
                                                 : "; start it again with: meithd";
    if (auto verdict = hand_off(opts, settings)) return *verdict;
    return run_bridge(opts, settings);
}

} // namespace meith::cli
