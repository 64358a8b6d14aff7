// lifecycle: `meith stop` and `meith restart`. There is no shutdown frame: meithd shuts down
// gracefully on SIGTERM (calls in flight get [tools] shutdown_grace_ms, then its children are
// stopped), so `stop` asks the service manager when the user unit serves this home and it
// runs, else sends SIGTERM to the daemon that answers on the socket — its pid from the
// socket's peer credentials, checked against the home's runtime record — and waits for it to
// exit. `restart` stops it, then starts it the way auto-start does (the unit, else
// `meithd --detach` on this home, with the --config the old one read) and waits until it
// answers.
#include "cli/autostart.hpp"
#include "cli/commands.hpp"
#include "cli/discovery.hpp"
#include "cli/errors.hpp"
#include "cli/process.hpp"
#include "platform/peer.hpp"

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <fstream>
#include <optional>
#include <string>
#include <sys/socket.h>
#include <thread>

#include <fmt/core.h>

namespace meith::cli {

namespace {

namespace fs = std::filesystem;
using protocol::client_error;

/// How long `stop` waits for meithd to exit (its shutdown grace is 5 s by default, then its
/// children get kill_grace_ms) unless --timeout-ms says otherwise.
constexpr std::chrono::milliseconds default_stop_wait{30000};

/// True while `pid` runs: a zombie (exited, its parent has not reaped it yet) has stopped.
bool alive(pid_t pid) {
    if (::kill(pid, 0) != 0 && errno != EPERM) return false;
    std::ifstream in(fmt::format("/proc/{}/stat", pid));
    std::string stat;
    std::getline(in, stat);
    const auto close = stat.rfind(')'); // after "PID (comm)": " S ..."
    return close == std::string::npos || close + 2 >= stat.size() || stat[close + 2] != 'Z';
}

/// The process name of `pid` (Linux: /proc/PID/comm), empty when unknown.
std::string process_name(pid_t pid) {
    std::ifstream in(fmt::format("/proc/{}/comm", pid));
    std::string name;
    std::getline(in, name);
    return name;
}

/// The pid of the process that listens on the connected socket `fd` (SO_PEERCRED), if known.
std::optional<pid_t> peer_pid(int fd) {
    if (auto peer = platform::peer_identity_of(fd); peer && peer->pid > 0) return peer->pid;
    return std::nullopt;
}

/// True when `systemctl --user is-active UNIT` says it is active.
bool unit_active(const char* unit) {
    return run_program({"systemctl", "--user", "--quiet", "is-active", unit}, output::discard) == 0;
}

enum class stopped { not_running, by_signal, by_manager };

/// Stops the daemon of `opts`' home and socket; waits up to `wait` for it to exit.
stopped stop_daemon(const options& opts, std::chrono::milliseconds wait) {
    if (unit_serves(opts) && unit_active("meithd.service")) {
        fmt::print("stopping meithd through its user unit: systemctl --user stop meithd.service\n");
        std::fflush(stdout);
        if (run_program({"systemctl", "--user", "stop", "meithd.service"}) != 0)
            throw cli_error(exit_error, "systemctl --user stop meithd.service failed (see "
                                        "`systemctl --user status meithd.service`)");
        if (unit_active("meithd.socket"))
            fmt::print("meithd.socket still listens: the next meith command starts meithd again "
                       "(`systemctl --user stop meithd.socket` stops that too)\n");
        return stopped::by_manager;
    }

    const daemon_location where = locate_daemon(opts.socket, opts.home);
    protocol::client_channel channel;
    try {
        channel.connect(where.socket);
    } catch (const client_error& e) {
        if (e.error_kind() != client_error::kind::not_running) throw;
        return stopped::not_running;
    }
    // The pid that listens on the socket; the record's when the socket was handed over by
    // systemd (then the listener is the service manager, not meithd).
    std::optional<pid_t> pid = peer_pid(channel.fd());
    if (pid && process_name(*pid) != "meithd" && where.pid) pid = static_cast<pid_t>(*where.pid);
    if (!pid)
        throw cli_error(exit_error,
                        fmt::format("a meithd answers on {}, but its pid is unknown (no "
                                    "{}/config.json names it); stop it with kill PID",
                                    display_path(where.socket), display_path(where.home)));
    if (const std::string name = process_name(*pid); !name.empty() && name != "meithd")
        throw cli_error(exit_error,
                        fmt::format("the process on {} (pid {}) is '{}', not meithd; not "
                                    "stopping it",
                                    display_path(where.socket), *pid, name));
    fmt::print("stopping meithd (pid {}): calls in flight get [tools] shutdown_grace_ms to "
               "finish…\n",
               *pid);
    std::fflush(stdout);
    if (::kill(*pid, SIGTERM) != 0 && errno != ESRCH)
        throw cli_error(exit_error, fmt::format("cannot signal meithd (pid {}): {}", *pid,
                                                std::strerror(errno)));
    const auto deadline = std::chrono::steady_clock::now() + wait;
    while (alive(*pid)) {
        if (std::chrono::steady_clock::now() >= deadline)
            throw cli_error(exit_error,
                            fmt::format("meithd (pid {}) is still shutting down after {} s; wait, "
                                        "or `kill -9 {}` stops it at once (calls in flight fail)",
                                        *pid, (wait.count() + 999) / 1000, *pid));
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return stopped::by_signal;
}

std::chrono::milliseconds stop_wait(const options& opts) {
    return opts.timeout_ms ? std::chrono::milliseconds(*opts.timeout_ms) : default_stop_wait;
}

} // namespace

int run_stop(const options& opts) {
    switch (stop_daemon(opts, stop_wait(opts))) {
    case stopped::not_running:
        fmt::print("meithd is not running (nothing answers on {})\n",
                   display_path(locate_daemon(opts.socket, opts.home).socket));
        break;
    case stopped::by_signal:
    case stopped::by_manager:
        fmt::print("meithd stopped\n");
        break;
    }
    return exit_ok;
}

int run_restart(const options& opts) {
    if (unit_serves(opts) && unit_active("meithd.service")) {
        fmt::print("restarting meithd through its user unit: systemctl --user restart "
                   "meithd.service\n");
        std::fflush(stdout);
        if (run_program({"systemctl", "--user", "restart", "meithd.service"}) != 0)
            throw cli_error(exit_error, "systemctl --user restart meithd.service failed (see "
                                        "`systemctl --user status meithd.service`)");
    } else {
        // The file the old daemon read when it was not the home's own (meithd --config FILE):
        // the new one reads it too.
        const daemon_location before = locate_daemon(opts.socket, opts.home);
        std::optional<fs::path> config;
        if (before.config &&
            before.config->lexically_normal() != (before.home / "meithd.toml").lexically_normal())
            config = before.config;
        if (stop_daemon(opts, stop_wait(opts)) == stopped::not_running)
            fmt::print("meithd was not running\n");
        daemon_connection c = start_and_connect(opts, config);
        (void)c;
    }
    const daemon_location after = locate_daemon(opts.socket, opts.home);
    fmt::print("meithd is running again{} on {}\n",
               after.pid ? fmt::format(" (pid {})", *after.pid) : std::string(),
               display_path(after.socket));
    return exit_ok;
}

} // namespace meith::cli
