// init_run: what meith-sandbox-init's two modes share (sandbox/init_main.cpp: the init of one
// confined start; sandbox/init_zygote.cpp: a source's zygote, docs/protocol.md §15 "Zygote").
// Only the init program includes it.
#pragma once

#include <csignal>

namespace meith::sandbox::init {

/// The signals a tool's process group gets from meithd (stop, cancel, reload): ignored by
/// the init program, reset for the tool.
inline constexpr int group_signals[] = {SIGTERM, SIGINT,  SIGHUP, SIGQUIT,
                                        SIGUSR1, SIGUSR2, SIGPIPE};

struct run_options {
    const char* program = nullptr; ///< absolute
    char** argv = nullptr;         ///< null-terminated
    char** envp = nullptr;         ///< null-terminated
    bool exec_once = false;        ///< let the tool's first execve through, refuse the rest
    int record_fd = -1;            ///< a learning run's record (init_record.hpp)
    int status_fd = -1;            ///< the tool's wait status is written here (an int)
    /// A zygote run's channel to meithd (SOCK_SEQPACKET): 'K'+int asks for a signal to the
    /// run's process group; at the end 'X'+int carries the tool's wait status; EOF ends the run.
    int channel = -1;
};

/// Runs the tool (a child of this process, which it reaps with every orphan of its PID
/// namespace), answers its exec notifications, reports its wait status, and exits with its
/// code (128 + the signal when it was killed). Errors go to stderr.
[[noreturn]] void run_tool(const run_options& o);

/// "meith-sandbox-init: WHAT: strerror(errno)" on stderr, exit 127.
[[noreturn]] void die(const char* what);

/// What every init process of the program does first: SIGCHLD blocked and read from the
/// returned signalfd (non-blocking, close-on-exec), the group's signals ignored. Dies when the
/// kernel gives no signalfd.
int reaper_signals();

/// The zygote mode's main (init_zygote.cpp).
int zygote_main(int argc, char** argv);

} // namespace meith::sandbox::init
