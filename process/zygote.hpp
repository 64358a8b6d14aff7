// zygote: a source's sandbox prepared once for its one-shot runs (docs/protocol.md §15
// "Zygote"). A confined one-shot start used to build the whole confinement for every call —
// user, mount, IPC and PID namespaces, the read-only tree, the masks and binds, the init
// program's exec — on meithd's one I/O thread, which waits in clone(CLONE_VFORK) until the
// child execs (bench/PROFILE.md round five). A zygote is meith-sandbox-init started once per
// sandbox plan with all of that done (sandbox/init_zygote.cpp); each run is one message on its
// control socket, and the zygote clones the run into fresh PID, IPC and mount namespaces of
// its own, where it is confined as a direct start is (restrict.hpp) and run by the same init
// code. meithd talks to each run over a channel (a socketpair): the tool's wait status comes
// back on it, signals for the run's process group go out on it.
//
// A zygote runs only while its source has runs: it is stopped after `idle` without one
// (MEITH_ZYGOTE_IDLE_MS, default 10 s; a plan a reload replaced gets no more runs), and with
// meithd (EOF on its control socket). I/O-thread only.
#pragma once

#include "process/subprocess.hpp"
#include "sandbox/sandbox.hpp"

#include <asio/any_io_executor.hpp>
#include <asio/steady_timer.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace meith::process {

/// One zygote: its process and control socket, and its count of runs in flight.
class zygote : public std::enable_shared_from_this<zygote> {
  public:
    /// Whether runs under `p` can start from a zygote: an init program, user and PID
    /// namespaces, and not a learning run (its record is per start); and MEITH_ZYGOTE is not
    /// "0" (the switch for A/B measurements). A `network` table's runs each get a network
    /// namespace and listeners of their own from the zygote (init_zygote.cpp --net).
    static bool suits(const sandbox::plan& p);
    /// meith-sandbox-init's zygote command line for `p` with its control socket at `control`
    /// (sandbox/init_zygote.cpp): what each run applies itself, taken from what a direct start
    /// would apply (apply(), enter()).
    static std::vector<std::string> arguments(const sandbox::plan& p, int control);

    zygote(asio::any_io_executor ex, std::string name, std::shared_ptr<const sandbox::plan> plan);
    ~zygote();
    zygote(const zygote&) = delete;
    zygote& operator=(const zygote&) = delete;

    /// Starts the zygote process (as a confined child), and waits until it says it is ready
    /// (blocks as long as one confined start does; at most 10 s). `on_exit` runs once it has
    /// exited. Throws std::system_error / std::runtime_error when it cannot start.
    void start(child_reaper& reaper, std::function<void()> on_exit);
    /// Sends one run: `program` (absolute) with `argv` and `env` in `cwd` (empty: /), its
    /// stdio on `in`, `out`, `err` (meithd keeps its own copies). Returns meithd's end of the
    /// run's channel, or -1 when the zygote cannot take the run now (stopped, its socket
    /// full, a request over 192 KiB): start it directly then. A zygote whose socket refuses
    /// the run (it has died) is stopped: running() is false from then on.
    int send_run(const std::string& program, const std::filesystem::path& cwd,
                 const std::vector<std::string>& argv, const std::vector<std::string>& env, int in,
                 int out, int err);
    /// Counts a run in flight until the returned token goes; with none left, the idle timer.
    std::shared_ptr<void> lease();
    /// Closes the control socket: the zygote exits, and with it any run still there.
    void stop();
    bool running() const { return control_ >= 0; }

  private:
    void release();
    void read_stderr();
    asio::any_io_executor ex_;
    std::string name_;
    std::shared_ptr<const sandbox::plan> plan_;
    std::unique_ptr<child_process> process_;
    int control_ = -1; ///< meithd's end of the control socket
    std::size_t in_flight_ = 0;
    asio::steady_timer idle_;
    std::string request_;                    ///< the last request's bytes (reused)
    std::size_t request_limit_ = 192 * 1024; ///< the largest request its socket takes
    char err_buf_[1024];
};

/// The daemon's zygotes, one per sandbox plan in use (child_reaper::zygotes()).
class zygote_pool {
  public:
    zygote_pool(asio::any_io_executor ex, child_reaper& reaper);
    /// The running zygote of `plan`, started now when there is none; null when the plan does
    /// not suit one (zygote::suits) or its zygote could not start (logged once, and that
    /// plan's runs start directly from then on). `name` labels its log lines.
    std::shared_ptr<zygote> for_plan(const std::string& name,
                                     const std::shared_ptr<const sandbox::plan>& plan);
    /// Zygotes running now.
    std::size_t size() const { return zygotes_.size(); }

  private:
    asio::any_io_executor ex_;
    child_reaper& reaper_;
    std::unordered_map<const sandbox::plan*, std::shared_ptr<zygote>> zygotes_;
    /// Plans whose zygote failed to start (held, so that the key is not reused).
    std::unordered_map<const sandbox::plan*, std::shared_ptr<const sandbox::plan>> failed_;
};

} // namespace meith::process
