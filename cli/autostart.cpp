#include "cli/autostart.hpp"

#include "cli/errors.hpp"
#include "cli/process.hpp"

#include <cstdlib>
#include <fcntl.h>
#include <fstream>
#include <sys/file.h>
#include <thread>
#include <unistd.h>

#include <fmt/core.h>

namespace meith::cli {

namespace fs = std::filesystem;
using protocol::client_error;

namespace {

/// True while some process holds HOME/meithd.lock: a daemon is running or starting there.
bool lock_held(const fs::path& home) {
    const int fd = ::open((home / "meithd.lock").c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    const bool held = ::flock(fd, LOCK_SH | LOCK_NB) != 0;
    ::close(fd);
    return held;
}

} // namespace

/// The user unit `meith service install` writes, when the daemon it runs is the one this
/// command wants (default home and socket).
bool unit_serves(const options& opts) {
#if defined(__linux__)
    if (opts.socket || opts.home) return false;
    if (const char* h = std::getenv("MEITH_HOME"); h && *h) return false;
    const char* config_home = std::getenv("XDG_CONFIG_HOME");
    const char* home = std::getenv("HOME");
    fs::path dir;
    if (config_home && *config_home)
        dir = fs::path(config_home) / "systemd" / "user";
    else if (home && *home)
        dir = fs::path(home) / ".config" / "systemd" / "user";
    else
        return false;
    // A unit installed for another home (`--home` on ExecStart) does not serve this one.
    std::ifstream unit(dir / "meithd.service");
    if (!unit || !in_path("systemctl")) return false;
    for (std::string line; std::getline(unit, line);)
        if (line.rfind("ExecStart=", 0) == 0 && line.find(" --home") != std::string::npos)
            return false;
    return true;
#else
    (void)opts;
    return false;
#endif
}

namespace {

/// How the daemon was started, and what meithd --detach said if it failed.
struct start_outcome {
    std::string how;    ///< for "meith: started meithd <how>"; empty when it failed
    std::string errors; ///< meithd's stderr when it failed (e.g. a config error, or lost race)
};

/// Starts the daemon: the user unit when it serves this home, else meithd --detach.
start_outcome start_daemon(const options& opts, const fs::path& home,
                           std::chrono::steady_clock::time_point deadline,
                           const std::optional<fs::path>& config = std::nullopt) {
    if (unit_serves(opts) &&
        run_program({"systemctl", "--user", "start", "meithd.service"}, output::discard) == 0)
        return {"through systemctl --user start meithd.service", ""};
    std::vector<std::string> argv = {sibling_meithd().string(), "--detach", "--home",
                                     home.string()};
    if (opts.socket) {
        argv.emplace_back("--socket");
        argv.push_back(opts.socket->string());
    }
    if (config) {
        argv.emplace_back("--config");
        argv.push_back(config->string());
    }
    // meithd --detach returns once the daemon is ready. What it says on failure is kept: it
    // is shown only if no daemon comes up (losing a start race to another command is fine).
    program_result r = run_program_capturing(argv, deadline);
    if (r.status == 124) // still starting at the deadline: the reconnect loop decides
        return {fmt::format("with {} --detach (still starting; log {})", argv[0],
                            display_path(home / "meithd.log")),
                ""};
    if (r.status == 127)
        throw cli_error(exit_error, fmt::format("meithd is not running and {} cannot be run; "
                                                "install meithd or put it in PATH",
                                                argv[0]));
    if (r.status == 0)
        return {
            fmt::format("with {} --detach (log {})", argv[0], display_path(home / "meithd.log")),
            ""};
    while (!r.err.empty() && r.err.back() == '\n')
        r.err.pop_back();
    return {"", std::move(r.err)};
}

} // namespace

bool autostart_enabled(const options& opts) {
    if (opts.no_autostart) return false;
    const char* env = std::getenv("MEITH_NO_AUTOSTART");
    return env == nullptr || *env == '\0' || std::string_view(env) == "0";
}

namespace {

daemon_connection connect_or_start(const options& opts, bool force_start,
                                   const std::optional<fs::path>& config) {
    daemon_connection c{locate_daemon(opts.socket, opts.home), protocol::client_channel{}, false};
    try {
        c.channel.connect(c.where.socket);
        return c;
    } catch (const client_error& e) {
        if (e.error_kind() != client_error::kind::not_running ||
            !(force_start || autostart_enabled(opts)))
            throw;
    }
    const auto deadline = std::chrono::steady_clock::now() + autostart_timeout;
    const start_outcome started = start_daemon(opts, c.where.home, deadline, config);
    const std::string& how = started.how;
    if (!how.empty()) fmt::print(stderr, "meith: started meithd {}\n", how);
    c.started = true;

    // Ready already when meithd --detach returned 0; else (the unit, or another command that
    // won the race to start it) wait while a daemon is starting, with backoff.
    auto pause = std::chrono::milliseconds(10);
    for (;;) {
        c.where = locate_daemon(opts.socket, opts.home);
        try {
            c.channel.connect(c.where.socket);
            return c;
        } catch (const client_error& e) {
            if (e.error_kind() != client_error::kind::not_running) throw;
            const bool starting = !how.empty() || lock_held(c.where.home);
            if (!starting || std::chrono::steady_clock::now() >= deadline)
                throw cli_error(
                    exit_error,
                    fmt::format("{}; meithd did not come up{} (see {}){}{}", e.what(),
                                starting ? fmt::format(" within {} s", autostart_timeout.count())
                                         : "",
                                display_path(c.where.home / "meithd.log"),
                                started.errors.empty() ? "" : ":\n", started.errors));
        }
        std::this_thread::sleep_for(pause);
        pause = std::min(pause * 2, std::chrono::milliseconds(250));
    }
}

} // namespace

daemon_connection connect_daemon(const options& opts) {
    return connect_or_start(opts, false, std::nullopt);
}

daemon_connection start_and_connect(const options& opts, const std::optional<fs::path>& config) {
    return connect_or_start(opts, true, config);
}

} // namespace meith::cli
