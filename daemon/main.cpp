// meithd: the per-user tool-registry daemon. Parses the command line and runs the server.
#include "config/paths.hpp"
#include "daemon/detach.hpp"
#include "daemon/server.hpp"

#include <cstring>
#include <fmt/format.h>
#include <string_view>

namespace {

constexpr std::string_view usage = R"(usage: meithd [OPTIONS]

Runs the meith tool-registry daemon in the foreground until SIGTERM or SIGINT (SIGHUP
reloads the config). Under systemd it takes its socket from socket activation and reports
readiness with sd_notify (meithd(8)).

Options:
  --home DIR         state folder (default: $MEITH_HOME, else ~/.meith)
  --config FILE      TOML config (default: HOME/meithd.toml when present)
  --socket PATH      Unix socket (default: [socket] path, else
                     $XDG_RUNTIME_DIR/meith/meithd.sock, else HOME/meithd.sock)
  --log-level LEVEL  trace, debug, info, warn, error (default: info; env MEITH_LOG)
  --detach           run in the background, logging to HOME/meithd.log; returns once
                     the daemon is ready (exit 0) or has failed (exit 1, with its error)
  -h, --help         show this help
  --version          show the version
)";

} // namespace

int main(int argc, char** argv) {
    meith::daemon::daemon_options opts;
    bool detach = false;
    if (const char* env = std::getenv("MEITH_LOG"); env && *env) opts.log_level = env;
    for (int i = 1; i < argc; ++i) {
        const std::string_view arg = argv[i];
        auto value = [&](std::string_view name) -> const char* {
            if (i + 1 >= argc) {
                fmt::print(stderr, "meithd: {} needs a value\n", name);
                std::exit(2);
            }
            return argv[++i];
        };
        if (arg == "-h" || arg == "--help") {
            fmt::print("{}", usage);
            return 0;
        } else if (arg == "--version") {
            fmt::print("meithd {}\n", MEITH_VERSION);
            return 0;
        } else if (arg == "--home") {
            opts.home = value(arg);
        } else if (arg == "--config") {
            opts.config = value(arg);
        } else if (arg == "--socket") {
            opts.socket = value(arg);
        } else if (arg == "--log-level") {
            opts.log_level = value(arg);
        } else if (arg == "--detach") {
            detach = true;
        } else {
            fmt::print(stderr, "meithd: unknown option '{}'\n{}", arg, usage);
            return 2;
        }
    }
    if (detach) {
        namespace fs = std::filesystem;
        // The detached daemon works in its home: paths given relative to here stay right.
        std::error_code ec;
        for (auto* p : {&opts.home, &opts.config, &opts.socket})
            if (*p) *p = fs::absolute(**p, ec);
        const fs::path home = meith::config::resolve_home(opts.home);
        if (auto err = meith::config::ensure_private_dir(home, false)) {
            fmt::print(stderr, "meithd: error: {}\n", *err);
            return 1;
        }
        opts.home = home;
        try {
            opts.ready_fd = meith::daemon::detach(home / "meithd.log");
            opts.log_file = home / "meithd.log";
        } catch (const std::exception& e) {
            fmt::print(stderr, "meithd: error: {}\n", e.what());
            return 1;
        }
    }
    return meith::daemon::run_daemon(opts);
}
