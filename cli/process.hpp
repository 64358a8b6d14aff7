// process: running the programs `meith` drives — meithd --detach (auto-start, §10) and the
// service manager's tools (systemctl, launchctl) — blocking, with posix_spawnp(3).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace meith::cli {

/// Where output of a program run by `run_program` goes.
enum class output {
    inherit,     ///< the program's stdout and stderr are ours
    to_stderr,   ///< its stdout goes to our stderr (ours may be a data channel)
    stderr_only, ///< its stdout is discarded, its stderr is ours
    discard,     ///< both discarded
};

/// Runs argv[0] (searched in PATH when it has no '/') with `argv`, stdin from /dev/null, and
/// waits. Returns its exit status, 128+N when killed by signal N, 127 when it cannot be run.
int run_program(const std::vector<std::string>& argv, output out = output::inherit);

/// Starts argv[0] as run_program does and returns at once, without waiting: its pid, or -1
/// when it cannot be started. For a program that may stay as long as the user keeps it (a
/// browser opened on a URL: `firefox URL` runs until its window closes when no instance ran).
/// One that ends while this process runs stays a zombie until this process exits (the CLI's
/// short life); one that outlives it is reaped by init.
pid_t start_program(const std::vector<std::string>& argv, output out = output::discard);

/// What a program run by `run_program_capturing` did.
struct program_result {
    int status;      ///< as run_program
    std::string err; ///< everything it wrote to stderr (its stdout is discarded)
};

/// As run_program, collecting the program's stderr (up to 64 KiB) instead of showing it: for
/// messages that matter only if what follows fails. Ends when the program exits and every
/// process it left holding its stderr has closed it (a daemon must redirect its own).
/// With `deadline`, stops waiting then: the program is killed (SIGKILL) and reaped, status 124.
program_result
run_program_capturing(const std::vector<std::string>& argv,
                      std::optional<std::chrono::steady_clock::time_point> deadline = std::nullopt);

/// The absolute path of the executable `name` found first in PATH, or nullopt.
std::optional<std::filesystem::path> which(const std::string& name);
inline bool in_path(const std::string& name) {
    return which(name).has_value();
}

/// The meithd to start: the one next to this `meith` (a build tree, or /usr/bin), else the one
/// in PATH, else plain "meithd" (which then fails to run, with a clear message).
std::filesystem::path sibling_meithd();

} // namespace meith::cli
