#include "daemon/server.hpp"
#include "platform/self.hpp"

#include "audit/audit_log.hpp"
#include "config/config.hpp"
#include "config/config_edit.hpp"
#include "config/paths.hpp"
#include "daemon/admission.hpp"
#include "daemon/connection.hpp"
#include "daemon/coroutine_root.hpp"
#include "daemon/instance.hpp"
#include "daemon/reload.hpp"
#include "hooks/hooks.hpp"
#include "platform/peer.hpp"
#include "platform/service_manager.hpp"
#include "process/subprocess.hpp"
#include "protocol/frames.hpp"
#include "protocol/json_writer.hpp"
#include "protocol/server_frames.hpp"
#include "registry/registry.hpp"
#include "sandbox/confinement.hpp"
#include "sources/factory.hpp"

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/experimental/as_tuple.hpp>
#include <asio/io_context.hpp>
#include <asio/local/stream_protocol.hpp>
#include <asio/signal_set.hpp>
#include <asio/use_awaitable.hpp>

#include <algorithm>
#include <csignal>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include <unordered_map>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

namespace meith::daemon {

namespace fs = std::filesystem;
using asio::local::stream_protocol;

namespace {

std::string cli_hint(const fs::path& home);

class server {
  public:
    /// `cfg` is the daemon's live config: a reload assigns the parts it applies in place.
    /// `config_arg` is --config (absent: HOME/meithd.toml when it exists, else the defaults).
    /// `activated`: the listener systemd passed (socket activation), adopted instead of
    /// binding `socket`. `ready_fd`, `log_file`: see daemon_options.
    server(asio::io_context& ioc, config::config& cfg, std::optional<fs::path> config_arg,
           fs::path home, fs::path socket, audit::audit_log& audit,
           std::optional<platform::activated_listener> activated, int ready_fd, fs::path log_file)
        : ioc_(ioc), cfg_(cfg), config_arg_(std::move(config_arg)), home_(std::move(home)),
          socket_path_(std::move(socket)), audit_(audit), signals_(ioc, SIGINT, SIGTERM, SIGHUP),
          reaper_(ioc.get_executor()),
          registry_(ioc.get_executor(), cfg, cfg.audit.enabled ? &audit : nullptr),
          hooks_(ioc.get_executor(), reaper_, cfg), acceptor_(ioc), grace_timer_(ioc),
          close_timer_(ioc), watchdog_timer_(ioc), status_timer_(ioc), home_timer_(ioc),
          activated_(std::move(activated)), ready_fd_(ready_fd), log_file_(std::move(log_file)) {
        if (activated_) {
            // Owned by the acceptor from here on; accepted on only once ready (listen()).
            acceptor_.assign(stream_protocol(), activated_->fd);
        }
    }

    int run() {
        // Grants and approvals (PROTOCOL.md §12): the approver secret, then kept grants.
        registry_.approvals().set_approver_secret(load_approver_secret(home_));
        // No tool sandbox lets a tool write the home; tools' temporary folders live in it.
        // A tool's orphans stay meithd's descendants, so they are known at the socket.
        platform::become_subreaper();
        if (auto err = registry_.pin_tools_in(home_ / "tool-pins.json")) spdlog::warn("{}", *err);
        if (cfg_.permissions.persist_grants)
            if (auto err = registry_.approvals().persist_to(home_ / "grants.json"))
                spdlog::warn("{}", *err);
        wait_for_signal();
        if (notifier_.enabled() && notifier_.watchdog_interval()) watchdog_tick();
        watch_home_tick();
        registry_.set_reload_handler([this] { return reload(); });
        registry_.set_egress_always_handler([this](std::string_view source, std::string_view rule) {
            return keep_egress_rule(source, rule);
        });
        registry_.add_source(sources::make_source("builtin", factory_context()));
        for (const auto& src : cfg_.sources)
            if (src.enabled) registry_.add_source(make_source(src));
        if (!cfg_.hooks.empty()) {
            hooks_.on_lifecycle(
                [this](std::string_view hook, std::string_view event, const std::string& details) {
                    std::string fields;
                    protocol::json_members(fields).string("hook", hook);
                    if (!details.empty()) fields += "," + details;
                    registry_.audit_trail().event(event, fields);
                });
            registry_.set_hooks(&hooks_);
            hooks_.start();
        }
        const auto started = std::chrono::steady_clock::now();
        registry_.start([this, started] {
            if (shutting_down_) return;
            try {
                listen();
            } catch (const std::exception& e) {
                fmt::print(stderr, "meithd: error: {}\n", e.what());
                exit_code_ = 1;
                begin_shutdown(0);
                return;
            }
            const std::chrono::duration<double, std::milli> took =
                std::chrono::steady_clock::now() - started;
            spdlog::info("meithd {} ready in {:.1f} ms: {} tool(s), socket {}{}", MEITH_VERSION,
                         took.count(), registry_.tool_count(), socket_path_.string(),
                         activated_ ? " (socket-activated)" : "");
            ready_ = true;
            notifier_.ready(status_text());
            tools_token_ = registry_.subscribe_tools_changed([this] { schedule_status(); });
            if (ready_fd_ >= 0) {
                // --detach: the waiting parent returns now (daemon/detach.hpp).
                [[maybe_unused]] auto n = ::write(ready_fd_, "ready\n", 6);
                ::close(ready_fd_);
                ready_fd_ = -1;
            }
            const std::string cli = cli_hint(home_);
            spdlog::info("try: {} tools", cli);
            spdlog::info(R"(     {} call echo '{{"hello":"world"}}')", cli);
        });
        // A handler that throws unwinds out of run() (Asio's rule); one failed request must not
        // end every client's session, so the error is logged and the loop goes on. Coroutines
        // catch their own (coroutine_root.hpp); this is the net under plain handlers.
        for (;;) {
            try {
                ioc_.run();
                break;
            } catch (const std::exception& e) {
                spdlog::error("meithd: a handler failed and was skipped: {} (please report it)",
                              e.what());
            }
        }
        return exit_code_;
    }

  private:
    /// SIGTERM/SIGINT start the shutdown; SIGHUP reloads the config (as `meith reload` does).
    void wait_for_signal() {
        signals_.async_wait([this](const std::error_code& ec, int sig) {
            if (ec) return;
            if (sig == SIGHUP) {
                if (!shutting_down_) reload();
                wait_for_signal();
                return;
            }
            begin_shutdown(sig);
        });
    }

    /// Reloads the config file (docs/configuration.md "Reloading"): on any error the running
    /// config stays; otherwise [limits], [tools] and [permissions] are replaced, sources are
    /// added, removed or replaced (by name, when their table changed), failed sources are
    /// restarted, and what cannot change without a restart ([socket], [audit], [[hooks]]) is
    /// reported. Audited as `config_reload`; returns the members of the `config_reloaded`
    /// reply.
    std::string reload() {
        // systemd shows "reloading" until READY=1 again, whatever the outcome; only a ready
        // daemon says so (a SIGHUP during startup or shutdown must not announce readiness).
        const bool notify = ready_ && !shutting_down_;
        if (notify) notifier_.reloading();
        std::string reply = reload_config();
        if (notify) notifier_.ready(status_text());
        return reply;
    }

    /// The config file a reload reads: --config, else HOME/meithd.toml when there is one.
    std::optional<fs::path> config_file() const {
        std::error_code ec;
        if (config_arg_) return config_arg_;
        if (fs::exists(home_ / "meithd.toml", ec)) return home_ / "meithd.toml";
        return std::nullopt;
    }

    std::string reload_config() {
        std::optional<fs::path> file = config_file();
        std::string m;
        protocol::json_members members(m);
        if (shutting_down_) {
            // Sources started now would never be stopped: the shutdown already began stopping.
            members.boolean("ok", false)
                .null("file")
                .string("error", "meithd is shutting down; the config is not reloaded");
            return m;
        }
        const auto refuse = [&](const fs::path& named, const std::string& why) {
            spdlog::error("config reload failed, keeping the running config: {}", why);
            members.boolean("ok", false).string("file", named.string());
            registry_.append_redacted(members.key("error"), why); // may quote a value of the file
            registry_.audit_trail().event("config_reload", m);
            return m;
        };
        // The running config came from a file that is gone: reading the built-in defaults
        // instead would remove every source, which no one asks for by deleting a file.
        std::optional<fs::path> gone = file ? std::nullopt : cfg_.source_file;
        if (std::error_code ec; file && !fs::exists(*file, ec) && !ec) gone = file;
        if (gone)
            return refuse(*gone, fmt::format("the config file {} no longer exists; meithd keeps "
                                             "the running config it read from it. Put the file "
                                             "back and run `meith reload` again, or start "
                                             "afresh with `meith restart`",
                                             gone->string()));
        config::config next;
        if (file) {
            auto loaded = config::load_config(*file);
            if (loaded.error) return refuse(*file, loaded.error->to_string());
            next = std::move(*loaded.value);
        }

        const reload_plan plan = plan_reload(cfg_, next);
        const auto restarted =
            apply_reload(plan, cfg_, std::move(next), registry_,
                         [this](const config::source_config& src) { return make_source(src); });
        cfg_.source_file = file;

        append_reload_reply(m, file, plan, restarted);
        const auto changed = plan.changed();
        const auto& needs_restart = plan.needs_restart;
        spdlog::info("config reloaded from {}: changed [{}]{}",
                     file ? file->string() : "(defaults)", fmt::join(changed, ", "),
                     needs_restart.empty() ? std::string()
                                           : fmt::format("; needs a restart to apply: {}",
                                                         fmt::join(needs_restart, ", ")));
        registry_.audit_trail().event("config_reload", m);
        return m;
    }

    /// A person's "allow always" for an egress target (daemon/reload.hpp).
    std::optional<std::string> keep_egress_rule(std::string_view source, std::string_view rule) {
        return daemon::keep_egress_rule(config_file(), cfg_, registry_, source, rule);
    }

    /// What the registry's source factories are given (sources/factory.hpp).
    sources::source_context factory_context() { return {ioc_.get_executor(), reaper_, cfg_}; }

    std::shared_ptr<tools::tool_source> make_source(const config::source_config& src) {
        return sources::make_source(factory_context(), src);
    }

    void listen() {
        if (activated_) {
            // systemd made, bound and owns the socket: adopt it and never unlink it (§10).
            acceptor_.listen(asio::socket_base::max_listen_connections); // no-op if listening
            serve();
            return;
        }
        if (auto err = check_socket_path(socket_path_)) throw std::runtime_error(*err);
        // We hold our home's lock, but another home's daemon may serve this path: replace the
        // socket only when nobody answers on it (stale, §1).
        std::error_code ec;
        if (fs::exists(fs::symlink_status(socket_path_, ec))) {
            stream_protocol::socket probe(ioc_);
            probe.connect(stream_protocol::endpoint(socket_path_.string()), ec);
            if (!ec)
                throw std::runtime_error(fmt::format(
                    "socket {} is in use by another meithd (with another home); stop it or "
                    "choose another --socket",
                    socket_path_.string()));
        }
        fs::remove(socket_path_, ec);
        const mode_t old_mask = ::umask(0177); // the socket is born 0600, never briefly wider
        acceptor_.open(stream_protocol());
        acceptor_.bind(stream_protocol::endpoint(socket_path_.string()), ec);
        ::umask(old_mask);
        if (ec)
            throw std::runtime_error(
                fmt::format("cannot bind {}: {}", socket_path_.string(), ec.message()));
        ::chmod(socket_path_.c_str(), 0600);
        ::fcntl(acceptor_.native_handle(), F_SETFD, FD_CLOEXEC);
        struct stat st {};
        if (::stat(socket_path_.c_str(), &st) == 0) socket_inode_ = st.st_ino;
        acceptor_.listen(asio::socket_base::max_listen_connections);
        bound_ = true;
        serve();
    }

    /// The listener is ready: records written, start audited, connections accepted.
    void serve() {
        sweep_instance_records(home_);
        // config.json last: clients treat it as the sign that the daemon is ready.
        instance_record_ = write_instance_record(home_, socket_path_);
        write_runtime_record(home_, socket_path_, audit_.path(), log_file_,
                             config_arg_ ? *config_arg_ : home_ / "meithd.toml");
        std::string fields;
        protocol::json_members(fields)
            .number("pid", static_cast<std::uint64_t>(::getpid()))
            .string("socketPath", socket_path_.string())
            .number("tools", registry_.tool_count())
            .boolean("socketActivated", activated_.has_value());
        registry_.audit_trail().event("daemon_start", fields);
        asio::co_spawn(ioc_, accept_loop(),
                       coroutine_root("accept loop", [this](const std::string&) {
                           // Without it nobody can connect: stop loudly, not look alive.
                           spdlog::critical("meithd can no longer accept clients; shutting down");
                           exit_code_ = 1;
                           begin_shutdown(0);
                       }));
    }

    asio::awaitable<void> accept_loop() {
        asio::steady_timer backoff(ioc_);
        // While accept fails (EMFILE: out of descriptors), the first failure is logged, then a
        // summary once a minute and when accepting works again: not a line per retry.
        std::size_t failures = 0;
        std::size_t failures_since_summary = 0;
        auto failing_since = std::chrono::steady_clock::now();
        auto last_summary = failing_since;
        while (!shutting_down_) {
            auto [ec, sock] =
                co_await acceptor_.async_accept(asio::experimental::as_tuple(asio::use_awaitable));
            if (shutting_down_) co_return;
            const auto now = std::chrono::steady_clock::now();
            if (ec) {
                if (ec == asio::error::operation_aborted) co_return;
                if (failures++ == 0) {
                    failing_since = last_summary = now;
                    spdlog::warn("accept failed: {} (retrying every 100 ms; further failures "
                                 "are summarised)",
                                 ec.message());
                } else if (++failures_since_summary,
                           now - last_summary >= std::chrono::minutes(1)) {
                    spdlog::warn("accept still failing: {} ({} failures in the last minute)",
                                 ec.message(), failures_since_summary);
                    failures_since_summary = 0;
                    last_summary = now;
                }
                // EMFILE and friends: back off instead of spinning.
                backoff.expires_after(std::chrono::milliseconds(100));
                co_await backoff.async_wait(asio::experimental::as_tuple(asio::use_awaitable));
                continue;
            }
            if (failures > 0) {
                spdlog::info(
                    "accepting again after {} failed attempt(s) over {} ms", failures,
                    std::chrono::duration_cast<std::chrono::milliseconds>(now - failing_since)
                        .count());
                failures = failures_since_summary = 0;
            }
            try {
                admit(std::move(sock));
            } catch (const std::exception& e) {
                // One client that cannot be admitted (no memory, no entropy) is not the end.
                spdlog::error("could not admit a client: {}", e.what());
            }
        }
    }

    /// Closes a refused connection once its audit line is on file (the peer never sees the
    /// close first), without the I/O thread waiting for the write: a flood of refused
    /// connections does not stall every client (issue 40).
    void close_when_on_file(stream_protocol::socket sock) {
        auto held = std::make_shared<stream_protocol::socket>(std::move(sock));
        registry_.audit_trail().commit_then([held] {
            std::error_code ignored;
            held->close(ignored);
        });
    }

    void admit(stream_protocol::socket sock) {
        ::fcntl(sock.native_handle(), F_SETFD, FD_CLOEXEC);
        const auto peer = platform::peer_identity_of(sock.native_handle());
        std::optional<std::string> tool;
        if (peer && peer->uid == ::geteuid())
            tool = platform::tool_peer_problem(sock.native_handle(), peer->pid);
        if (auto refused = refuse_connection(peer, ::geteuid(), tool, connections_.size(),
                                             cfg_.limits.max_connections)) {
            if (!refused->frame.empty()) {
                std::error_code ignored;
                sock.non_blocking(true, ignored);
                sock.write_some(asio::buffer(refused->frame), ignored); // best effort, never blocks
            }
            registry_.audit_trail().event("connection_rejected", refused->audit_fields);
            close_when_on_file(std::move(sock));
            return;
        }
        launch(std::move(sock), *peer, std::nullopt);
    }

    /// A connection for an admitted peer; `in_process`: the connection of an MCP session
    /// meithd runs itself on the peer's behalf (docs/protocol.md §10 "Handoff"), no socket.
    std::shared_ptr<connection> launch(stream_protocol::socket sock,
                                       const platform::peer_identity& peer,
                                       std::optional<connection::in_process_client> in_process) {
        auto conn = std::make_shared<connection>(
            std::move(sock), registry_, mcp_, peer,
            [this](connection* c) {
                connections_.erase(c);
                if (shutting_down_ && connections_.empty()) maybe_finish();
                schedule_status();
            },
            [this](const platform::peer_identity& p, connection::in_process_client client) {
                if (shutting_down_) return std::shared_ptr<connection>();
                return launch(stream_protocol::socket(ioc_), p, std::move(client));
            });
        if (in_process) conn->serve_in_process(std::move(*in_process));
        connections_.emplace(conn.get(), conn);
        conn->start();
        schedule_status();
        return conn;
    }

    /// "12 tools from 3 sources, 2 connections": sd_notify's STATUS= (§10).
    std::string status_text() const {
        return fmt::format("{} tool{} from {} source{}, {} connection{}", registry_.tool_count(),
                           registry_.tool_count() == 1 ? "" : "s", registry_.source_count(),
                           registry_.source_count() == 1 ? "" : "s", connections_.size(),
                           connections_.size() == 1 ? "" : "s");
    }

    /// Sends STATUS= at most once a second after connections or tools change; nothing when
    /// no service manager listens, and no timer runs while nothing changes.
    void schedule_status() {
        if (!notifier_.enabled() || status_pending_ || shutting_down_) return;
        status_pending_ = true;
        status_timer_.expires_after(std::chrono::seconds(1));
        status_timer_.async_wait([this](const std::error_code& ec) {
            status_pending_ = false;
            if (ec || shutting_down_) return;
            notifier_.status(status_text());
        });
    }

    /// WATCHDOG=1 every WATCHDOG_USEC / 2 from the I/O thread, so a stuck loop stops the pings
    /// and systemd restarts the daemon (WatchdogSec= in meithd.service).
    void watchdog_tick() {
        notifier_.watchdog();
        watchdog_timer_.expires_after(*notifier_.watchdog_interval());
        watchdog_timer_.async_wait([this](const std::error_code& ec) {
            if (!ec && !finished_) watchdog_tick();
        });
    }

    /// Every 5 s: is the home still there? A home removed under the daemon is said once in
    /// the log (and to systemd), with what to do; calls refused for it say it too
    /// (connection.cpp).
    void watch_home_tick() {
        home_timer_.expires_after(std::chrono::seconds(5));
        home_timer_.async_wait([this](const std::error_code& ec) {
            if (ec || shutting_down_) return;
            if (!home_gone_said_)
                if (const auto why = home_gone_reason()) {
                    home_gone_said_ = true;
                    spdlog::error("{}", *why);
                    notifier_.status("home removed: restart meithd");
                }
            watch_home_tick();
        });
    }

    void begin_shutdown(int sig) {
        if (shutting_down_) return;
        shutting_down_ = true;
        notifier_.stopping();
        status_timer_.cancel();
        home_timer_.cancel();
        if (sig) spdlog::info("signal {} received: shutting down", sig);
        std::error_code ignored;
        acceptor_.close(ignored);
        remove_socket_if_ours();
        registry_.begin_shutdown();
        shutdown_started_ = std::chrono::steady_clock::now();
        wait_for_calls();
    }

    /// Removes the socket file unless another daemon has replaced it meanwhile.
    void remove_socket_if_ours() {
        struct stat st {};
        if (bound_ && ::stat(socket_path_.c_str(), &st) == 0 && st.st_ino == socket_inode_) {
            std::error_code ignored;
            fs::remove(socket_path_, ignored);
        }
    }

    void wait_for_calls() {
        const auto grace = std::chrono::milliseconds(cfg_.tools.shutdown_grace_ms);
        if (registry_.calls_in_flight() > 0 &&
            std::chrono::steady_clock::now() - shutdown_started_ < grace) {
            grace_timer_.expires_after(std::chrono::milliseconds(10));
            grace_timer_.async_wait([this](const std::error_code& ec) {
                if (!ec) wait_for_calls();
            });
            return;
        }
        registry_.abort_all(protocol::error_code::runtime_shutting_down,
                            "meithd shut down before the call finished", tools::call_end::shutdown);
        std::vector<std::shared_ptr<connection>> conns;
        for (auto& [raw, c] : connections_)
            conns.push_back(c);
        for (auto& c : conns)
            c->close_after_flush();
        registry_.stop_sources([this] {
            hooks_.stop(std::chrono::milliseconds(cfg_.tools.kill_grace_ms), [this] {
                sources_stopped_ = true;
                maybe_finish();
            });
        });
        // Clients that do not read their last replies do not hold up the exit.
        close_timer_.expires_after(std::chrono::seconds(1));
        close_timer_.async_wait([this](const std::error_code& ec) {
            if (ec) return;
            std::vector<std::shared_ptr<connection>> rest;
            for (auto& [raw, c] : connections_)
                rest.push_back(c);
            for (auto& c : rest)
                c->close("daemon shutting down");
            maybe_finish();
        });
    }

    void maybe_finish() {
        if (finished_ || !sources_stopped_ || !connections_.empty()) return;
        finished_ = true;
        close_timer_.cancel();
        grace_timer_.cancel();
        watchdog_timer_.cancel();
        std::string fields;
        protocol::json_members(fields).number("pid", static_cast<std::uint64_t>(::getpid()));
        registry_.audit_trail().event("daemon_stop", fields);
        audit_.flush();
        std::error_code ignored;
        if (!instance_record_.empty()) fs::remove(instance_record_, ignored);
        signals_.cancel();
        spdlog::info("meithd stopped");
        ioc_.stop();
    }

    asio::io_context& ioc_;
    config::config& cfg_;
    std::optional<fs::path> config_arg_;
    fs::path home_;
    fs::path socket_path_;
    audit::audit_log& audit_;
    asio::signal_set signals_;
    process::child_reaper reaper_;
    registry::registry registry_;
    gateway::mcp_gateway mcp_{registry_}; ///< routes MCP's other families over registry_
    hooks::hook_set hooks_;
    stream_protocol::acceptor acceptor_;
    asio::steady_timer grace_timer_;
    asio::steady_timer close_timer_;
    asio::steady_timer watchdog_timer_;
    asio::steady_timer status_timer_;
    asio::steady_timer home_timer_; ///< watch_home_tick
    bool home_gone_said_ = false;
    std::unordered_map<connection*, std::shared_ptr<connection>> connections_;
    std::optional<platform::activated_listener> activated_;
    platform::service_notifier notifier_;
    int ready_fd_ = -1;
    std::uint64_t tools_token_ = 0;
    bool status_pending_ = false;
    bool ready_ = false; ///< listening and announced (READY=1)
    fs::path instance_record_;
    fs::path log_file_; ///< --detach's log; empty: stderr
    std::chrono::steady_clock::time_point shutdown_started_;
    bool shutting_down_ = false;
    bool sources_stopped_ = false;
    bool finished_ = false;
    bool bound_ = false;
    ino_t socket_inode_ = 0;
    int exit_code_ = 0;
};

/// How to run the CLI: the `meith` next to this binary when there is one.
std::string cli_hint(const fs::path& home) {
    // The CLI finds the daemon through HOME/config.json: name the home when it is not the default.
    std::string prefix;
    if (home != config::resolve_home(std::nullopt)) prefix = "MEITH_HOME=" + home.string() + " ";
    std::error_code ec;
    const auto self = platform::executable_path();
    if (!self.empty() && fs::exists(self.parent_path() / "meith")) {
        auto rel = fs::relative(self.parent_path() / "meith", fs::current_path(ec), ec);
        if (!ec && !rel.empty() && rel.native().rfind("..", 0) != 0) return prefix + rel.string();
        return prefix + (self.parent_path() / "meith").string();
    }
    return prefix + "meith";
}

} // namespace

int serve(served_daemon d) {
    // Before the server is made: its hooks are confined as it is constructed, and every
    // sandbox hides the home and the socket (and never lets a tool write the home).
    sandbox::set_confinement_home(d.home, d.socket);
    if (d.config_arg) sandbox::set_confinement_config(*d.config_arg);
    asio::io_context ioc(1);
    server srv(ioc, d.cfg, d.config_arg, d.home, d.socket, d.audit, std::move(d.activated),
               d.ready_fd, d.log_file);
    return srv.run();
}

} // namespace meith::daemon
