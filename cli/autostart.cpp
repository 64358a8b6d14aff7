#include "cli/autostart.hpp"

#include "cli/errors.hpp"
#include "cli/process.hpp"

#include <cstdlib>
#include <fcntl.h>
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
    std::error_code ec;
    return fs::exists(dir / "meithd.service", ec) && in_path("systemctl");
#else
    (void)opts;
    return false;
#endif
}

/// Starts the daemon; returns how ("the user unit", or the meithd --detach exit status).
std::string start_daemon(const options& opts, const fs::path& home) {
    if (unit_serves(opts) &&
        run_program({"systemctl", "--user", "start", "meithd.service"}, output::to_stderr) == 0)
        return "through systemctl --user start meithd.service";
    std::vector<std::string> argv = {sibling_meithd().string(), "--detach", "--home",
                                     home.string()};
    if (opts.socket) {
        argv.emplace_back("--socket");
        argv.push_back(opts.socket->string());
    }
    // meithd --detach returns once the daemon is ready; its errors (a bad config) are shown.
    const int status = run_program(argv, output::stderr_only);
    if (status == 127)
        throw cli_error(exit_error, fmt::format("meithd is not running and {} cannot be run; "
                                                "install meithd or put it in PATH",
                                                argv[0]));
    return status == 0 ? fmt::format("with {} --detach (log {})", argv[0],
                                     display_path(home / "meithd.log"))
                       : std::string();
}

} // namespace

bool autostart_enabled(const options& opts) {
    if (opts.no_autostart) return false;
    const char* env = std::getenv("MEITH_NO_AUTOSTART");
    return env == nullptr || *env == '\0' || std::string_view(env) == "0";
}

daemon_connection connect_daemon(const options& opts) {
    daemon_connection c{locate_daemon(opts.socket, opts.home), protocol::client_channel{}, false};
    try {
        c.channel.connect(c.where.socket);
        return c;
    } catch (const client_error& e) {
        if (e.error_kind() != client_error::kind::not_running || !autostart_enabled(opts)) throw;
    }
    const std::string how = start_daemon(opts, c.where.home);
    if (!how.empty()) fmt::print(stderr, "meith: started meithd {}\n", how);
    c.started = true;

    // Ready already when meithd --detach returned 0; else (the unit, or another command that
    // won the race to start it) wait while a daemon is starting, with backoff.
    const auto deadline = std::chrono::steady_clock::now() + autostart_timeout;
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
                    fmt::format("{}; meithd did not come up{} (see {})", e.what(),
                                starting ? fmt::format(" within {} s", autostart_timeout.count())
                                         : "",
                                display_path(c.where.home / "meithd.log")));
        }
        std::this_thread::sleep_for(pause);
        pause = std::min(pause * 2, std::chrono::milliseconds(250));
    }
}

} // namespace meith::cli
