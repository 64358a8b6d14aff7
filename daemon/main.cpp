// meithd: the per-user tool-registry daemon. Parses the command line and runs the server.
#include "daemon/server.hpp"

#include <cstring>
#include <fmt/format.h>
#include <string_view>

namespace {

constexpr std::string_view usage = R"(usage: meithd [OPTIONS]

Runs the meith tool-registry daemon in the foreground until SIGTERM or SIGINT.

Options:
  --home DIR         state folder (default: $MEITH_HOME, else ~/.meith)
  --config FILE      TOML config (default: HOME/meithd.toml when present)
  --socket PATH      Unix socket (default: [socket] path, else
                     $XDG_RUNTIME_DIR/meith/meithd.sock, else HOME/meithd.sock)
  --log-level LEVEL  trace, debug, info, warn, error (default: info; env MEITH_LOG)
  -h, --help         show this help
  --version          show the version
)";

} // namespace

int main(int argc, char** argv) {
    meith::daemon::daemon_options opts;
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
        } else {
            fmt::print(stderr, "meithd: unknown option '{}'\n{}", arg, usage);
            return 2;
        }
    }
    return meith::daemon::run_daemon(opts);
}
