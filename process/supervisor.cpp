#include "process/supervisor.hpp"

#include "process/zygote.hpp"

#include "audit/redactor.hpp"
#include "protocol/json_writer.hpp"
#include "protocol/pipe_writer.hpp"
#include "sandbox/sandbox.hpp"

#include <cerrno>
#include <csignal>
#include <fmt/format.h>
#include <fstream>
#include <spdlog/spdlog.h>
#include <sys/wait.h>
#include <system_error>

#include <asio/post.hpp>
#include <asio/write.hpp>

namespace meith::process {

namespace {
constexpr std::size_t max_log_line = 16 * 1024;

/// A script ("#!" first), not a program of its own.
bool starts_with_shebang(const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    char head[2] = {};
    return in.read(head, 2) && head[0] == '#' && head[1] == '!';
}
constexpr std::size_t stderr_tail_lines = 20;
constexpr std::size_t stderr_tail_line_bytes = 1024; ///< per kept line, cut on a character
} // namespace

// ---- supervised_process ------------------------------------------------------------------

/// One launch of the child. Handlers hold it by shared_ptr and check `owner`, which is cleared
/// when the launch is retired, so callbacks of a dead child never reach a newer one.
struct supervised_process::instance {
    instance(asio::any_io_executor ex, const child_process::options& opts, std::size_t max_line)
        : child(ex, opts), stdin_writer(child.stdin_pipe(), max_pending_input),
          out_framer(max_line), err_framer(max_log_line) {
        out_framer.scan_oversized({"id"});
    }
    child_process child;
    /// A failed write (EPIPE) needs no report: the exit handler fails the work in flight.
    protocol::pipe_writer stdin_writer;
    protocol::line_framer out_framer;
    protocol::line_framer err_framer;
    supervised_process* owner = nullptr;
    audit::pem_block_filter err_pem; ///< a key's body lines on stderr are redacted too
};

namespace {

/// A start error that repeats on every try: the program is missing or may not be executed.
bool cannot_start(const std::exception& e) {
    const auto* sys = dynamic_cast<const std::system_error*>(&e);
    if (sys == nullptr || sys->code().category() != std::generic_category()) return false;
    const int code = sys->code().value();
    return code == ENOENT || code == EACCES || code == ENOEXEC || code == ENOTDIR || code == ELOOP;
}

} // namespace

supervised_process::supervised_process(asio::any_io_executor ex, child_reaper& reaper,
                                       process_spec spec, policy pol, handlers h)
    : ex_(std::move(ex)), reaper_(reaper), spec_(std::move(spec)), policy_(pol), h_(std::move(h)),
      restart_timer_(ex_), start_timer_(ex_), stop_timer_(ex_) {
}

supervised_process::~supervised_process() {
    if (inst_) {
        inst_->owner = nullptr;
        inst_->child.signal_group(SIGKILL);
    }
}

std::optional<pid_t> supervised_process::pid() const {
    if (inst_ && !inst_->child.exited()) return inst_->child.pid();
    return std::nullopt;
}

void supervised_process::start() {
    state_ = process_state::starting;
    spawn();
}

void supervised_process::spawn() {
    ready_ = false;
    child_process::options opts{spec_.argv, spec_.cwd, spec_.env, spec_.sandbox, spec_.egress};
    if (spec_.resolve_secrets) {
        if (auto why = spec_.resolve_secrets(opts.argv, opts.env)) {
            // A missing secret: a restart would miss it again. `meith secret set` then a
            // restart (or a reload) mends it; the reason says which command.
            spdlog::error("{}: {}", spec_.name, *why);
            fail_permanently("cannot start: " + *why);
            return;
        }
    }
    try {
        inst_ = std::make_shared<instance>(ex_, opts, policy_.max_line_bytes);
    } catch (const std::exception& e) {
        inst_.reset();
        last_error_ = e.what();
        spdlog::error("{}: {}", spec_.name, last_error_);
        std::string fields;
        protocol::json_members(fields).null("pid").string("status", last_error_);
        lifecycle("source_exit", fields);
        if (h_.on_exit) h_.on_exit(last_error_);
        if (cannot_start(e)) {
            // No such program, or not executable: trying again changes nothing. Said once;
            // restart_source (or a reload) tries again when it has been fixed.
            fail_permanently(last_error_.starts_with("cannot start")
                                 ? last_error_
                                 : "cannot start: " + last_error_);
            return;
        }
        after_exit();
        return;
    }
    inst_->owner = this;
    const pid_t pid = inst_->child.pid();
    spdlog::info("{}: started (pid {})", spec_.name, pid);
    std::string fields;
    protocol::json_members(fields).number("pid", static_cast<std::uint64_t>(pid));
    lifecycle("source_start", fields);
    reaper_.watch(pid, [inst = inst_](int wait_status) {
        const int status = inst->child.exit_status(wait_status);
        inst->child.mark_exited();
        // Children it left in its group die with it, and our ends of its pipes close (nothing
        // it writes after its exit is read: its work was failed by the exit handler).
        inst->child.kill_stragglers();
        auto* owner = inst->owner;
        if (owner) owner->on_child_exit(inst, status);
        inst->child.close_output();
        inst->child.close_stdin();
    });
    read_stdout(inst_);
    read_stderr(inst_);
    start_timer_.expires_after(policy_.start_timeout);
    start_timer_.async_wait([this, inst = inst_](const std::error_code& ec) {
        if (ec || inst != inst_ || ready_) return;
        fail_start(fmt::format("not ready within {} ms (start_timeout_ms)",
                               policy_.start_timeout.count()));
    });
    if (h_.on_spawn) h_.on_spawn();
}

void supervised_process::mark_ready() {
    ready_ = true;
    start_timer_.cancel();
    state_ = process_state::ready;
    consecutive_failures_ = 0;
    last_error_.clear();
}

void supervised_process::fail_start(std::string why) {
    last_error_ = with_last_stderr(std::move(why));
    spdlog::error("{}: {}", spec_.name, last_error_);
    if (inst_) inst_->child.signal_group(SIGKILL); // the exit handler decides what next
}

std::string supervised_process::with_last_stderr(std::string why) const {
    if (!stderr_tail_.empty())
        why +=
            fmt::format("; its last stderr line: {}", protocol::cut_utf8(stderr_tail_.back(), 300));
    return why;
}

void supervised_process::fail_permanently(std::string why) {
    last_error_ = std::move(why);
    state_ = process_state::failed;
    restart_timer_.cancel();
    start_timer_.cancel();
    spdlog::error("{}: marked failed: {}", spec_.name, last_error_);
    std::string fields;
    protocol::json_members(fields).string("reason", last_error_);
    lifecycle("source_failed", fields);
    if (inst_) inst_->child.signal_group(SIGKILL);
}

void supervised_process::respawn_confined(std::shared_ptr<const sandbox::plan> plan,
                                          std::vector<std::string> env,
                                          std::shared_ptr<const egress::proxy_options> egress) {
    spec_.sandbox = std::move(plan);
    spec_.env = std::move(env);
    spec_.egress = spec_.sandbox && spec_.sandbox->egress_port != 0 ? std::move(egress) : nullptr;
    if (state_ == process_state::stopped || state_ == process_state::failed) return;
    if (!inst_) {
        // Between a crash and its restart: the pending restart starts it in the new sandbox.
        return;
    }
    respawning_ = true;
    inst_->child.signal_group(SIGKILL);
}

void supervised_process::on_child_exit(const std::shared_ptr<instance>& inst, int status) {
    if (inst != inst_) return;
    if (std::exchange(respawning_, false) && state_ != process_state::stopped &&
        state_ != process_state::failed) {
        spdlog::debug("{} (pid {}) replaced by one in its tools' sandbox", spec_.name,
                      inst->child.pid());
        inst->owner = nullptr;
        inst_.reset();
        ready_ = false;
        spawn();
        return;
    }
    const std::string how = describe_wait_status(status);
    const bool expected = state_ == process_state::stopped || state_ == process_state::failed;
    spdlog::log(expected ? spdlog::level::info : spdlog::level::warn, "{} (pid {}) {}", spec_.name,
                inst->child.pid(), how);
    std::string fields;
    protocol::json_members(fields)
        .number("pid", static_cast<std::uint64_t>(inst->child.pid()))
        .string("status", how);
    lifecycle("source_exit", fields);
    inst->owner = nullptr;
    inst_.reset();
    const bool was_ready = std::exchange(ready_, false);
    if (state_ == process_state::ready || last_error_.empty()) last_error_ = how;
    // A process meithd failed on purpose (a login needed, an address refused) is killed as soon
    // as meithd reads why; the calls it had in flight learn that reason, not only the signal.
    if (h_.on_exit)
        h_.on_exit(state_ == process_state::failed ? fmt::format("was stopped ({})", last_error_)
                                                   : how);
    if (state_ == process_state::stopped) {
        stop_timer_.cancel();
        if (stop_done_) std::exchange(stop_done_, nullptr)();
        return;
    }
    if (state_ == process_state::failed) return;
    if (!was_ready && WIFEXITED(status) &&
        (WEXITSTATUS(status) == 126 || WEXITSTATUS(status) == 127)) {
        // The shell's and env's "could not run it" statuses, before the process was ever
        // ready: a wrapper script (a pyenv shim, npx) whose program is missing or may not be
        // executed. Restarting repeats it; say why once.
        std::string why = WEXITSTATUS(status) == 127
                              ? "127: a program it runs was not found"
                              : "126: a program it runs could not be executed; under the sandbox "
                                "that needs starts-process or sandbox_paths.exec";
        // A wrapper script (a pyenv shim): the fix is to name the program it wraps.
        if (!spec_.argv.empty() && spec_.sandbox)
            if (const auto program = sandbox::resolve_program(
                    spec_.argv[0], sandbox::program_search_path(), spec_.cwd);
                program && starts_with_shebang(*program))
                why += fmt::format("; '{}' is a wrapper script ({}, a pyenv shim?): name the "
                                   "program it runs by its absolute path in `command` (for "
                                   "Python, /usr/bin/python3 or the venv's bin/python)",
                                   spec_.argv[0], program->string());
        fail_permanently(fmt::format("cannot start: {} before it was ready ({}; `meith sources "
                                     "NAME` shows its last stderr lines)",
                                     how, why));
        return;
    }
    after_exit();
}

void supervised_process::after_exit() {
    const auto now = std::chrono::steady_clock::now();
    exits_.push_back(now);
    while (!exits_.empty() && now - exits_.front() > policy_.crash_window)
        exits_.pop_front();
    if (state_ == process_state::stopped || state_ == process_state::failed) return;
    if (exits_.size() >= policy_.crash_limit) {
        fail_permanently(fmt::format("exited {} times within {} s; last: {}", exits_.size(),
                                     policy_.crash_window.count(), last_error_));
        return;
    }
    state_ = process_state::restarting;
    auto delay = policy_.first_backoff * (1LL << std::min<std::size_t>(consecutive_failures_, 10));
    if (delay > policy_.max_backoff) delay = policy_.max_backoff;
    ++consecutive_failures_;
    ++restarts_;
    std::string fields;
    protocol::json_members(fields)
        .number("attempt", restarts_)
        .number("delayMs", static_cast<std::uint64_t>(delay.count()));
    lifecycle("source_restart", fields);
    restart_timer_.expires_after(delay);
    restart_timer_.async_wait([this](const std::error_code& ec) {
        if (!ec && state_ == process_state::restarting) spawn();
    });
}

void supervised_process::restart() {
    if (state_ == process_state::stopped) return;
    exits_.clear();
    consecutive_failures_ = 0;
    restart_timer_.cancel();
    if (inst_) {
        // The exit handler sees state restarting and respawns after the first backoff.
        state_ = process_state::restarting;
        last_error_ = "restarted on request";
        inst_->child.signal_group(SIGKILL);
        return;
    }
    state_ = process_state::starting;
    last_error_.clear();
    spawn();
}

void supervised_process::stop(std::chrono::milliseconds grace, std::function<void()> done) {
    state_ = process_state::stopped;
    restart_timer_.cancel();
    start_timer_.cancel();
    if (!inst_ || inst_->child.exited()) {
        done();
        return;
    }
    stop_done_ = std::move(done);
    // What this turn queued (e.g. a cancel before the stop) still goes out, if the pipe takes
    // it now.
    inst_->stdin_writer.write_now();
    inst_->child.close_stdin(); // a well-behaved child exits on EOF
    if (policy_.stdin_first) {
        // MCP's stdio shutdown (spec 2025-11-25, basic/lifecycle "Shutdown"): EOF first, then
        // SIGTERM after the grace, then SIGKILL after another grace.
        stop_timer_.expires_after(grace);
        stop_timer_.async_wait([inst = inst_, grace](const std::error_code& ec) {
            if (ec || inst->owner == nullptr || inst->child.exited()) return;
            inst->child.signal_group(SIGTERM);
            auto& timer = inst->owner->stop_timer_;
            timer.expires_after(grace);
            timer.async_wait([inst](const std::error_code& ec2) {
                if (!ec2) inst->child.signal_group(SIGKILL);
            });
        });
        return;
    }
    inst_->child.signal_group(SIGTERM);
    stop_timer_.expires_after(grace);
    stop_timer_.async_wait([inst = inst_](const std::error_code& ec) {
        if (!ec) inst->child.signal_group(SIGKILL);
    });
}

bool supervised_process::send(std::string_view bytes) {
    // Written after this I/O turn: the requests a turn queues (a client's pipelined calls, or
    // several clients' at once) go to the child in one write(2) and wake it once.
    return inst_ && inst_->stdin_writer.write(bytes);
}

void supervised_process::read_stdout(const std::shared_ptr<instance>& inst) {
    auto buf = inst->out_framer.prepare();
    inst->child.stdout_pipe().async_read_some(
        asio::buffer(buf.data(), buf.size()), [inst](const std::error_code& ec, std::size_t n) {
            if (ec || !inst->owner) return; // EOF: the exit is reported by the reaper
            inst->out_framer.commit(n);
            for (;;) {
                const auto st = inst->out_framer.next();
                if (st == protocol::line_framer::status::need_more) break;
                auto* owner = inst->owner;
                if (!owner) return;
                if (st == protocol::line_framer::status::oversized) {
                    spdlog::warn("{}: a stdout line of {} bytes is over the limit; dropped",
                                 owner->spec_.name, inst->out_framer.dropped_bytes());
                    if (owner->h_.on_oversized)
                        owner->h_.on_oversized(inst->out_framer.oversized_member(0),
                                               inst->out_framer.dropped_bytes());
                } else if (owner->h_.on_line) {
                    owner->h_.on_line(inst->out_framer.line());
                }
            }
            if (inst->owner) inst->owner->read_stdout(inst);
        });
}

void supervised_process::read_stderr(const std::shared_ptr<instance>& inst) {
    auto buf = inst->err_framer.prepare();
    inst->child.stderr_pipe().async_read_some(
        asio::buffer(buf.data(), buf.size()), [inst](const std::error_code& ec, std::size_t n) {
            if (!inst->owner) return;
            if (ec) {
                if (auto rest = inst->err_framer.partial(); !rest.empty())
                    inst->owner->keep_stderr(inst->err_pem.filter(rest));
                return;
            }
            inst->err_framer.commit(n);
            for (;;) {
                const auto st = inst->err_framer.next();
                if (st == protocol::line_framer::status::need_more) break;
                if (st == protocol::line_framer::status::oversized)
                    inst->owner->keep_stderr(fmt::format("(a stderr line of {} bytes was cut)",
                                                         inst->err_framer.dropped_bytes()));
                else
                    inst->owner->keep_stderr(inst->err_pem.filter(inst->err_framer.line()));
            }
            inst->owner->read_stderr(inst);
        });
}

void supervised_process::keep_stderr(std::string_view line) {
    spdlog::info("[{}] {}", spec_.name, line);
    // Kept for `meith sources NAME` (docs/protocol.md §7): redacted here, as the log's sink
    // redacts the line above.
    stderr_tail_.push_back(
        audit::default_redactor().redact_text(protocol::cut_utf8(line, stderr_tail_line_bytes)));
    if (stderr_tail_.size() > stderr_tail_lines) stderr_tail_.pop_front();
}

void supervised_process::lifecycle(std::string_view event, const std::string& details) {
    if (h_.on_lifecycle) h_.on_lifecycle(event, details);
}

// ---- oneshot_run ---------------------------------------------------------------------------

oneshot_run::oneshot_run(asio::any_io_executor ex, std::chrono::milliseconds kill_grace)
    : kill_grace_(kill_grace), kill_timer_(ex), drain_timer_(std::move(ex)) {
}

std::shared_ptr<oneshot_run> oneshot_run::start(asio::any_io_executor ex, child_reaper& reaper,
                                                const process_spec& spec, std::string input,
                                                std::size_t max_stdout,
                                                std::chrono::milliseconds kill_grace,
                                                std::function<void(oneshot_outcome)> done) {
    auto run = std::make_shared<oneshot_run>(ex, kill_grace);
    run->name_ = spec.name;
    run->done_ = std::move(done);
    run->max_stdout_ = max_stdout;
    try {
        child_process::options opts{spec.argv, spec.cwd, spec.env, spec.sandbox, spec.egress};
        if (spec.resolve_secrets)
            if (auto why = spec.resolve_secrets(opts.argv, opts.env))
                throw std::runtime_error(*why);
        // A confined run starts from its sandbox's zygote where there is one (zygote.hpp).
        // One that has just died (its socket refuses the run) is replaced at once; one that
        // is busy (its socket full) leaves the run to a direct start.
        for (int attempt = 0; spec.sandbox && attempt < 2 && !run->child_; ++attempt) {
            const auto z = reaper.zygotes().for_plan(spec.name, spec.sandbox);
            if (!z) break;
            run->child_ = child_process::from_zygote(ex, opts, *z);
            if (!run->child_ && z->running()) break;
        }
        if (!run->child_) run->child_ = std::make_unique<child_process>(ex, std::move(opts));
    } catch (const std::exception& e) {
        run->outcome_.spawn_error = e.what();
        run->exited_ = run->out_eof_ = run->err_eof_ = true;
        // Report asynchronously, like every other outcome.
        asio::post(ex, [run] { run->maybe_done(); });
        return run;
    }
    auto on_exit = [run](int wait_status) {
        run->outcome_.wait_status = run->child_->exit_status(wait_status);
        run->child_->mark_exited();
        run->exited_ = true;
        // Stragglers of the group (a forked grandchild) must not outlive the tool or keep
        // its stdout open.
        run->child_->kill_stragglers();
        if (!run->out_eof_ || !run->err_eof_) {
            // What it wrote before exiting is in the pipes already; a process outside its
            // group (setsid) may hold them open for ever, so stop reading shortly.
            run->drain_timer_.expires_after(std::chrono::milliseconds(100));
            run->drain_timer_.async_wait([run](const std::error_code& ec) {
                if (!ec) run->child_->close_output();
            });
        }
        run->maybe_done();
    };
    if (run->child_->from_zygote())
        run->child_->wait_run_exit(std::move(on_exit));
    else
        reaper.watch(run->child_->pid(), std::move(on_exit));
    run->input_ = std::move(input);
    asio::async_write(run->child_->stdin_pipe(), asio::buffer(run->input_),
                      [run](const std::error_code&, std::size_t) {
                          run->child_->close_stdin(); // EPIPE: the tool did not read; fine
                          std::string().swap(run->input_);
                      });
    run->read_out();
    run->read_err();
    return run;
}

std::optional<pid_t> oneshot_run::pid() const {
    if (child_ && !child_->exited() && child_->pid() > 0) return child_->pid();
    return std::nullopt;
}

void oneshot_run::read_out() {
    child_->stdout_pipe().async_read_some(
        asio::buffer(out_buf_),
        [self = shared_from_this()](const std::error_code& ec, std::size_t n) {
            if (ec) {
                self->out_eof_ = true;
                self->maybe_done();
                return;
            }
            auto& out = self->outcome_;
            if (out.out.size() + n > self->max_stdout_) {
                out.out_overflow = true;
                self->kill();
            } else {
                out.out.append(self->out_buf_, n);
            }
            self->read_out();
        });
}

void oneshot_run::read_err() {
    auto buf = err_framer_.prepare();
    child_->stderr_pipe().async_read_some(
        asio::buffer(buf.data(), buf.size()),
        [self = shared_from_this()](const std::error_code& ec, std::size_t n) {
            if (ec) {
                // A last line without its newline still counts.
                if (auto rest = self->err_framer_.partial(); !rest.empty())
                    self->keep_stderr(std::string(rest));
                self->err_eof_ = true;
                self->maybe_done();
                return;
            }
            self->err_framer_.commit(n);
            for (;;) {
                const auto st = self->err_framer_.next();
                if (st == protocol::line_framer::status::need_more) break;
                self->keep_stderr(st == protocol::line_framer::status::oversized
                                      ? fmt::format("(a stderr line of {} bytes was cut)",
                                                    self->err_framer_.dropped_bytes())
                                      : std::string(self->err_framer_.line()));
            }
            self->read_err();
        });
}

void oneshot_run::keep_stderr(std::string raw) {
    std::string line(err_pem_.filter(raw));
    spdlog::info("[{}] {}", name_, line);
    auto& tail = outcome_.stderr_tail;
    tail.push_back(std::move(line));
    if (tail.size() > stderr_tail_lines) tail.erase(tail.begin());
}

void oneshot_run::kill() {
    if (!child_ || child_->exited() || outcome_.killed) return;
    outcome_.killed = true;
    child_->signal_group(SIGTERM);
    kill_timer_.expires_after(kill_grace_);
    kill_timer_.async_wait([self = shared_from_this()](const std::error_code& ec) {
        if (!ec) self->child_->signal_group(SIGKILL);
    });
}

void oneshot_run::maybe_done() {
    if (reported_ || !exited_ || !out_eof_ || !err_eof_) return;
    reported_ = true;
    kill_timer_.cancel();
    drain_timer_.cancel();
    if (child_) child_->close_output();
    if (done_) std::exchange(done_, nullptr)(std::move(outcome_));
}

} // namespace meith::process
