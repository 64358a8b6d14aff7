// subprocess: starting, watching and stopping the daemon's child processes.
//
// Every child runs in its own session and process group, without a controlling terminal (so a
// timeout or stop ends the tool and anything it forked, and no tool passes as an approver),
// gets only the environment it is given (see `child_environment`), and talks over
// close-on-exec pipes wrapped as Asio stream descriptors. Exits are noticed through SIGCHLD
// at once, not at the next failed write. All of it runs on the daemon's one I/O thread.
#pragma once

#include "egress/proxy.hpp"
#include "sandbox/sandbox.hpp"

#include <asio/any_io_executor.hpp>
#include <asio/posix/stream_descriptor.hpp>
#include <asio/signal_set.hpp>
#include <asio/steady_timer.hpp>

#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <sys/types.h>
#include <unordered_map>
#include <vector>

namespace meith::process {

class zygote_pool;

/// Calls a handler when a child exits. One per io_context; listens to SIGCHLD and reaps only
/// the pids registered with it (waitpid per pid), and any other child that has exited: the
/// orphans a subreaper adopts (meithd has no other code that waits for its children).
class child_reaper {
  public:
    explicit child_reaper(asio::any_io_executor ex);
    ~child_reaper();
    child_reaper(const child_reaper&) = delete;
    child_reaper& operator=(const child_reaper&) = delete;
    /// `on_exit(wait_status)` runs on the I/O thread once the child `pid` has been reaped —
    /// never from inside watch() itself, even for a child that has exited already.
    void watch(pid_t pid, std::function<void(int wait_status)> on_exit);
    /// Reaps whatever has exited now (also called on each SIGCHLD).
    void poll();
    std::size_t watched() const { return handlers_.size(); }
    /// The one-shot runs' zygotes of this daemon (zygote.hpp), made at first use.
    zygote_pool& zygotes();

  private:
    void arm();
    asio::signal_set signals_;
    std::unique_ptr<zygote_pool> zygotes_;
    std::unordered_map<pid_t, std::function<void(int)>> handlers_;
    std::shared_ptr<char> alive_ = std::make_shared<char>(); ///< guards posted polls
};

/// Describes an exit status for messages: "exited with status 3", "killed by signal 9 (Killed)".
std::string describe_wait_status(int wait_status);

/// The environment a child gets: the daemon's values of the `allow` names (exact names, or
/// prefixes ending in `*` such as "LC_*") plus `extra`, which wins. Returns "NAME=value" items.
std::vector<std::string> child_environment(const std::vector<std::string>& allow,
                                           const std::map<std::string, std::string>& extra);

/// A running child with pipes to its stdin, stdout and stderr.
class child_process {
  public:
    struct options {
        std::vector<std::string> argv; ///< argv[0] is looked up in PATH
        std::filesystem::path cwd;     ///< empty = the daemon's
        std::vector<std::string> env;  ///< "NAME=value" items, the whole environment
        /// Confinement applied between fork and exec (sandbox/sandbox.hpp); null: none, and
        /// the child is started with posix_spawn.
        std::shared_ptr<const sandbox::plan> sandbox;
        /// With a plan that has an egress port: the proxy that serves it (docs/protocol.md
        /// §19), started for this child and stopped when it is reaped.
        std::shared_ptr<const egress::proxy_options> egress;
        /// >= 0: start the plan's zygote (meith-sandbox-init --zygote, zygote.hpp) with this
        /// end of its control socket instead of `argv`; `argv` names it in messages.
        int zygote_control = -1;
    };

    /// Starts the child. Throws std::system_error naming the command when it cannot start
    /// (missing program, bad cwd, no pipes), and ENOENT when an argument after the program
    /// names a script by its extension (.mjs, .py, .sh, ...) that does not exist from `cwd`.
    child_process(asio::any_io_executor ex, const options& opts);
    /// Starts `opts` as a run of `z` (zygote.hpp): the same checks and errors as the
    /// constructor; null when the zygote cannot take the run now (start it directly then).
    static std::unique_ptr<child_process> from_zygote(asio::any_io_executor ex, const options& opts,
                                                      class zygote& z);
    ~child_process();
    child_process(const child_process&) = delete;
    child_process& operator=(const child_process&) = delete;

    /// Its pid; -1 for a zygote's run (not meithd's child: see wait_run_exit).
    pid_t pid() const { return pid_; }
    bool from_zygote() const { return channel_.is_open(); }
    /// A zygote's run: `on_exit(wait_status)` runs on the I/O thread once the run's init
    /// reports the tool's status on its channel, or the channel ends without one (the zygote
    /// or the run's init was killed: then as if by SIGKILL).
    void wait_run_exit(std::function<void(int wait_status)> on_exit);
    /// The program's own wait status, given the one the reaper got for pid(): a confined
    /// child runs under the sandbox's init program, which reports the program's status
    /// through a pipe (read once; `wait_status` when there is none).
    int exit_status(int wait_status);
    asio::posix::stream_descriptor& stdin_pipe() { return stdin_; }
    asio::posix::stream_descriptor& stdout_pipe() { return stdout_; }
    asio::posix::stream_descriptor& stderr_pipe() { return stderr_; }

    /// Sends `sig` to the child's whole process group; no-op once the child is reaped.
    void signal_group(int sig);
    /// Marks the child reaped (the pid may be reused from now on; signals are no longer sent).
    void mark_exited() {
        exited_ = true;
        if (egress_) egress_->stop();
        for (auto& f : forwards_)
            f->stop();
    }
    bool exited() const { return exited_; }
    /// Closes our end of its stdin (the child sees EOF).
    void close_stdin();
    /// After the child was reaped: SIGKILLs what is left in its process group (a forked
    /// grandchild must not outlive it or keep its pipes). The group id cannot be reused while
    /// any member lives (credentials(7)), so this reaches only the child's own stragglers.
    void kill_stragglers();
    /// Closes our ends of its stdout and stderr (reads in progress complete with an error), for
    /// pipes still held open by a process outside its group (a setsid'd daemon).
    void close_output();

  private:
    explicit child_process(asio::any_io_executor ex);
    pid_t pid_ = -1;
    int status_fd_ = -1; ///< the sandbox init program's status pipe (read end), -1 when none
    std::shared_ptr<egress::proxy> egress_; ///< serving the child's egress listener, if any
    std::vector<std::shared_ptr<egress::proxy>> forwards_; ///< its loopback forwards
    bool exited_ = false;
    asio::posix::stream_descriptor stdin_;
    asio::posix::stream_descriptor stdout_;
    asio::posix::stream_descriptor stderr_;
    /// A zygote's run: its channel (SOCK_SEQPACKET) to the run's init, and the zygote's count
    /// of runs in flight, held until this object goes.
    asio::posix::stream_descriptor channel_;
    std::shared_ptr<void> lease_;
    /// A zygote's run with a `network` table: the listeners it sends on its channel are served
    /// as a direct start's are (the proxy's, then each of `run_forward_ports_`).
    void adopt_run_listener(int fd);
    std::shared_ptr<const egress::proxy_options> run_egress_;
    std::vector<std::uint16_t> run_forward_ports_;
    std::size_t run_listeners_ = 0;
};

} // namespace meith::process
