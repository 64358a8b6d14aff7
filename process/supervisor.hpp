// supervisor: the one way the daemon runs child processes (tool hosts, exec tools, hooks).
//
// Two shapes, built on child_process/child_reaper:
//  * `supervised_process` — a long-running child speaking line-delimited JSON on stdio. Its
//    stdout is split into bounded lines, its stderr is forwarded to the daemon log line by
//    line, its exit is noticed at once (SIGCHLD), and it is restarted with exponential backoff
//    (200 ms doubling to 10 s) until it exits `crash_limit` times within `crash_window`, when
//    it is marked failed and stays down until `restart()`.
//  * `oneshot_run` — a child per request: write stdin, close it, collect stdout (capped) and
//    the last lines of stderr, and report once the child has exited. `kill()` ends its whole
//    process group: SIGTERM, then SIGKILL after the kill grace.
// Every child gets its own process group, an explicit environment and a working directory.
// I/O-thread only.
#pragma once

#include "audit/redactor.hpp"
#include "egress/proxy.hpp"
#include "process/process_state.hpp"
#include "process/subprocess.hpp"
#include "protocol/framing.hpp"

#include <asio/steady_timer.hpp>

#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace meith::process {

/// At most one log line per second for a repeated complaint (a child writing garbage on stdout
/// must not flood the daemon log): `allow()` says whether to log now, and `suppressed()` how
/// many were skipped since the last line logged (to append as "(N more since)").
class log_throttle {
  public:
    bool allow() {
        const auto now = std::chrono::steady_clock::now();
        if (logged_once_ && now - last_ < std::chrono::seconds(1)) {
            ++skipped_;
            return false;
        }
        logged_once_ = true;
        last_ = now;
        reported_ = skipped_;
        skipped_ = 0;
        return true;
    }
    /// Skipped before the line now allowed, as " (N more like it since the last)" or "".
    std::string suppressed() const {
        return reported_ == 0
                   ? std::string()
                   : " (" + std::to_string(reported_) + " more like it since the last such line)";
    }

  private:
    std::chrono::steady_clock::time_point last_{};
    std::size_t skipped_ = 0;
    std::size_t reported_ = 0;
    bool logged_once_ = false;
};

/// What to run and how. `name` labels log lines ("[name] ...").
struct process_spec {
    std::string name;
    std::vector<std::string> argv;
    std::filesystem::path cwd;
    std::vector<std::string> env; ///< "NAME=value" items: the child's whole environment
    /// The kernel confinement of each start (PROTOCOL.md §13); null: unconfined.
    std::shared_ptr<const sandbox::plan> sandbox;
    /// The egress proxy each start's listener gets when the plan has one (§19).
    std::shared_ptr<const egress::proxy_options> egress;
    /// Fills `${secret:NAME}` references into copies of `argv` (its arguments) and `env` at
    /// each start (a one-shot tool: each run), so a secret set later is used at the next
    /// start. Returns the reason in words when one cannot be filled: the start is refused (a
    /// supervised process is marked failed, a one-shot run fails). Null: both as they are.
    std::function<std::optional<std::string>(std::vector<std::string>& argv,
                                             std::vector<std::string>& env)>
        resolve_secrets;
};

class supervised_process {
  public:
    struct handlers {
        /// The child was spawned (also after each restart): send the handshake.
        std::function<void()> on_spawn;
        /// One line of the child's stdout (without its line ending).
        std::function<void(std::string_view line)> on_line;
        /// A stdout line over `max_line_bytes` (`bytes` long) was dropped; `id` is its
        /// top-level "id" member, found by scanning the whole line as it passed (both
        /// protocols spoken on stdio carry one; top_level_scan.hpp).
        std::function<void(const protocol::top_level_scanner::value& id, std::size_t bytes)>
            on_oversized;
        /// The child ended; `why` describes it ("exited with status 3"). Fail work in flight.
        std::function<void(const std::string& why)> on_exit;
        /// Audit-worthy transitions: "source_start", "source_exit", "source_restart",
        /// "source_failed", with JSON members (no braces) as details.
        std::function<void(std::string_view event, const std::string& details)> on_lifecycle;
    };

    struct policy {
        std::size_t max_line_bytes = 8 * 1024 * 1024;
        std::chrono::milliseconds start_timeout{10000}; ///< from spawn to `mark_ready`
        std::size_t crash_limit = 5;
        std::chrono::seconds crash_window{60};
        std::chrono::milliseconds first_backoff{200};
        std::chrono::milliseconds max_backoff{10000};
        /// stop(): close stdin and wait `grace` before SIGTERM (then SIGKILL after another
        /// `grace`), instead of SIGTERM at once — the MCP stdio shutdown order.
        bool stdin_first = false;
    };

    supervised_process(asio::any_io_executor ex, child_reaper& reaper, process_spec spec,
                       policy pol, handlers h);
    ~supervised_process();
    supervised_process(const supervised_process&) = delete;
    supervised_process& operator=(const supervised_process&) = delete;

    /// Spawns the child (state starting). A spawn failure counts as a crash.
    void start();
    /// The handshake succeeded: state ready, backoff reset.
    void mark_ready();
    /// The handshake failed: records `why`, kills the child; the exit counts as a crash.
    void fail_start(std::string why);
    /// Marks the process failed for good (e.g. its tools clash): kills it, no restart.
    void fail_permanently(std::string why);
    /// Queues `bytes` for the child's stdin; dropped when no child is running. Returns false
    /// when the pending input is over `max_pending_input` (the child does not read).
    bool send(std::string_view bytes);
    /// Manual restart: clears a failed state and the crash history, respawns now.
    void restart();
    /// Stops for good: closes stdin, SIGTERM to the group, SIGKILL after `grace` (with
    /// `policy::stdin_first`: SIGTERM only after `grace`, SIGKILL after a second `grace`); `done`
    /// runs once the child is reaped (at once when none runs).
    void stop(std::chrono::milliseconds grace, std::function<void()> done);

    process_state state() const { return state_; }
    std::optional<pid_t> pid() const;
    std::size_t restarts() const { return restarts_; }
    const std::string& last_error() const { return last_error_; }
    /// The program's last stderr lines (up to 20, each cut to 1 KiB, redacted), across
    /// restarts: what a person reads in `meith sources NAME` when it fails.
    const std::deque<std::string>& stderr_tail() const { return stderr_tail_; }
    const process_spec& spec() const { return spec_; }
    /// Starts the child again at once under `plan` (a host moving to its tools' sandbox before
    /// they are registered): not a restart — no backoff, not counted, no exit audited, and
    /// `on_exit` is not called; `on_spawn` runs again.
    void respawn_confined(std::shared_ptr<const sandbox::plan> plan, std::vector<std::string> env,
                          std::shared_ptr<const egress::proxy_options> egress = nullptr);

    static constexpr std::size_t max_pending_input = 16 * 1024 * 1024;

  private:
    struct instance;
    void spawn();
    void on_child_exit(const std::shared_ptr<instance>& inst, int status);
    void after_exit();
    void read_stdout(const std::shared_ptr<instance>& inst);
    void read_stderr(const std::shared_ptr<instance>& inst);
    void lifecycle(std::string_view event, const std::string& details);
    /// `why` and, when it wrote any, its last stderr line (at most 300 bytes): why a start that
    /// timed out hung (a launcher waiting on the network says so on stderr first). Not for an
    /// exit: its last lines may still be in the pipe when the exit is handled.
    std::string with_last_stderr(std::string why) const;
    /// Logs one stderr line and keeps it in stderr_tail_.
    void keep_stderr(std::string_view line);

    asio::any_io_executor ex_;
    child_reaper& reaper_;
    process_spec spec_;
    bool respawning_ = false; ///< respawn_confined: the next exit is ours
    policy policy_;
    handlers h_;
    std::shared_ptr<instance> inst_;
    asio::steady_timer restart_timer_;
    asio::steady_timer start_timer_;
    asio::steady_timer stop_timer_;
    std::function<void()> stop_done_;
    process_state state_ = process_state::stopped;
    std::deque<std::chrono::steady_clock::time_point> exits_;
    std::size_t consecutive_failures_ = 0;
    std::size_t restarts_ = 0;
    std::string last_error_;
    std::deque<std::string> stderr_tail_;
    bool ready_ = false;
};

/// The outcome of a one-shot child.
struct oneshot_outcome {
    std::string spawn_error;              ///< non-empty: the child never ran
    int wait_status = 0;                  ///< as from waitpid
    std::string out;                      ///< stdout, up to the cap
    bool out_overflow = false;            ///< stdout passed the cap (the child was killed)
    std::vector<std::string> stderr_tail; ///< last lines of stderr
    bool killed = false;                  ///< ended by `kill()`
};

class oneshot_run : public std::enable_shared_from_this<oneshot_run> {
  public:
    /// Starts `spec` with `input` on stdin (then closed). `done` runs once, after the child is
    /// reaped and its stdout is drained; stragglers in its process group are killed then.
    static std::shared_ptr<oneshot_run> start(asio::any_io_executor ex, child_reaper& reaper,
                                              const process_spec& spec, std::string input,
                                              std::size_t max_stdout,
                                              std::chrono::milliseconds kill_grace,
                                              std::function<void(oneshot_outcome)> done);
    /// Ends the process group (SIGTERM, SIGKILL after the grace). `done` still runs.
    void kill();
    std::optional<pid_t> pid() const;

    oneshot_run(asio::any_io_executor ex, std::chrono::milliseconds kill_grace);

  private:
    void read_out();
    void read_err();
    void keep_stderr(std::string line);
    void maybe_done();
    std::unique_ptr<child_process> child_;
    std::string name_;
    std::string input_;
    std::size_t max_stdout_ = 0;
    std::chrono::milliseconds kill_grace_;
    asio::steady_timer kill_timer_;
    asio::steady_timer drain_timer_; ///< after the exit: stop waiting for EOF on its pipes
    std::function<void(oneshot_outcome)> done_;
    oneshot_outcome outcome_;
    protocol::line_framer err_framer_{16 * 1024, 4096};
    audit::pem_block_filter err_pem_; ///< a key's body lines on stderr are redacted too
    char out_buf_[16 * 1024];
    bool exited_ = false;
    bool out_eof_ = false;
    bool err_eof_ = false;
    bool reported_ = false;
};

} // namespace meith::process
