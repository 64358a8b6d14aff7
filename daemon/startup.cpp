// startup: what run_daemon settles before the server runs (docs/protocol.md §1): logging,
// the socket systemd passed, the home, the config file, the socket path, the single-instance
// lock and the audit log (its torn tail repaired). Any problem is one line on stderr and
// exit status 1; then serve() (server.cpp) runs the daemon until shutdown.
#include "daemon/server.hpp"

#include "audit/audit_log.hpp"
#include "audit/redacting_sink.hpp"
#include "config/config.hpp"
#include "config/paths.hpp"
#include "daemon/instance.hpp"
#include "platform/service_manager.hpp"

#include <csignal>

#include <fmt/format.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

namespace meith::daemon {

namespace fs = std::filesystem;

namespace {

void setup_logging(const std::string& level) {
    auto inner = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
    auto sink = std::make_shared<audit::redacting_sink>(inner);
    auto logger = std::make_shared<spdlog::logger>("meithd", sink);
    logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ %v");
    logger->set_level(spdlog::level::from_str(level));
    spdlog::set_default_logger(logger);
}

} // namespace

int run_daemon(const daemon_options& opts) {
    setup_logging(opts.log_level);
    std::signal(SIGPIPE, SIG_IGN); // a vanished peer is an error code, not a signal

    // First, before any child exists: takes the listener and unsets LISTEN_* (§10).
    std::optional<platform::activated_listener> activated;
    try {
        activated = platform::take_activated_listener();
    } catch (const std::exception& e) {
        fmt::print(stderr, "meithd: error: {}\n", e.what());
        return 1;
    }

    const fs::path home = config::resolve_home(opts.home);
    if (auto err = config::ensure_private_dir(home, false)) {
        fmt::print(stderr, "meithd: error: {}\n", *err);
        return 1;
    }

    std::optional<fs::path> config_file = opts.config;
    if (!config_file && fs::exists(home / "meithd.toml")) config_file = home / "meithd.toml";
    config::config cfg;
    if (config_file) {
        auto loaded = config::load_config(*config_file);
        if (loaded.error) {
            fmt::print(stderr, "meithd: error: {}\n", loaded.error->to_string());
            return 1;
        }
        cfg = std::move(*loaded.value);
    }
    fs::path socket = config::resolve_socket_path(opts.socket, cfg.socket_path, home);
    if (activated) {
        // The socket systemd passed is the one clients reach: config.json names it (§10).
        if (socket != activated->path && (opts.socket || cfg.socket_path))
            spdlog::warn("socket activation: serving {} from systemd; the configured socket {} "
                         "is not used",
                         activated->path, socket.string());
        socket = activated->path;
    } else if (auto err = check_socket_path(socket)) {
        fmt::print(stderr, "meithd: error: {}\n", *err);
        return 1;
    }

    try {
        instance_lock lock(home);
        watch_home(home);
        const fs::path audit_path = cfg.audit.path ? *cfg.audit.path : home / "audit.jsonl";
        audit::audit_log audit(audit_path, cfg.audit);
        if (audit.repaired_bytes() > 0) {
            spdlog::warn("audit log {}: cut a torn final line of {} bytes", audit_path.string(),
                         audit.repaired_bytes());
            audit.append(fmt::format(R"({{"ts":"{}","event":"audit_repaired","bytesRemoved":{}}})",
                                     audit::now_rfc3339(), audit.repaired_bytes()));
        }
        if (!cfg.audit.enabled)
            spdlog::warn("[audit] enabled = false: calls are NOT audited (benchmarks only)");
        spdlog::info("meithd {} starting: home {}, config {}", MEITH_VERSION, home.string(),
                     config_file ? config_file->string() : "(built-in defaults)");
        return serve({cfg, opts.config, home, socket, audit, std::move(activated), opts.ready_fd,
                      opts.log_file});
    } catch (const std::exception& e) {
        fmt::print(stderr, "meithd: error: {}\n", e.what());
        return 1;
    }
}

} // namespace meith::daemon
