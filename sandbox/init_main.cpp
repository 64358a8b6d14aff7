// meith-sandbox-init: the first process of a confined tool (docs/protocol.md §15,
// sandbox/sandbox.hpp). meithd starts it, already confined, as PID 1 of the tool's PID
// namespace:
//
//   meith-sandbox-init [--exec-once | --record-fd=N] [--status-fd=N] -- PROGRAM ARGV0 ARGS...
//
// It runs PROGRAM (the environment passed through), reaps every process of the namespace,
// and when PROGRAM's process ends, writes its wait status (an int, native byte order) to fd N
// and exits with its code (128 + the signal when it was killed). Its own exit ends every
// process left in the namespace (the kernel kills them).
//
// Signals: meithd signals the process group, which the tool shares; this process ignores
// them (a PID 1 cannot be ended but by SIGKILL from outside, which ends the namespace).
//
// --exec-once: the tool's process installs a seccomp filter that turns execve and execveat
// into user notifications for this process, which lets exactly the first one (the tool's own
// start, made here) through and refuses every later one with EACCES: without starts-process,
// neither the ELF loader run as a program nor a memfd executed with fexecve runs anything.
// --record-fd=N: a learning run (`meith sources learn`, sandbox/init_record.hpp): the tool's
// writes, programs, connections and name lookups are let through and recorded to fd N.
// Errors go to stderr (meithd logs a tool's stderr), prefixed "meith-sandbox-init: ".
//
//   meith-sandbox-init --zygote --control-fd=N [options]
//
// A source's zygote (docs/protocol.md §15 "Zygote", sandbox/init_run.hpp): prepared once,
// it starts each one-shot run meithd sends it in fresh PID, IPC and mount namespaces.
#include "sandbox/fd_passing.hpp"
#include "sandbox/init_record.hpp"
#include "sandbox/init_run.hpp"

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include <fcntl.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <seccomp.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace meith::sandbox::init {

namespace {
/// A zygote run's channel (run_options::channel), for die(): -1 outside one.
int run_channel = -1;
} // namespace

[[noreturn]] void die(const char* what) {
    std::fprintf(stderr, "meith-sandbox-init: %s: %s\n", what, std::strerror(errno));
    if (run_channel >= 0) {
        // As waitpid would report exit(127): meithd says the run could not be started.
        const int status = 127 << 8;
        char msg[1 + sizeof status] = {'X'};
        std::memcpy(msg + 1, &status, sizeof status);
        ::send(run_channel, msg, sizeof msg, MSG_NOSIGNAL);
    }
    std::_Exit(127);
}

/// In the tool's process: execve and execveat become notifications to the listener, which
/// is sent to this program's first process over `sock`.
void install_exec_filter(int sock) {
    scmp_filter_ctx ctx = ::seccomp_init(SCMP_ACT_ALLOW);
    if (ctx == nullptr || ::seccomp_rule_add(ctx, SCMP_ACT_NOTIFY, SCMP_SYS(execve), 0) != 0 ||
        ::seccomp_rule_add(ctx, SCMP_ACT_NOTIFY, SCMP_SYS(execveat), 0) != 0 ||
        ::seccomp_load(ctx) != 0)
        die("cannot install the exec filter");
    const int listener = ::seccomp_notify_fd(ctx);
    if (listener < 0 || meith::sandbox::send_fd(sock, listener) != 0)
        die("cannot hand over the exec filter");
    ::close(listener);
    ::seccomp_release(ctx);
}

/// Answers one exec notification: the first one from `tool` continues, every other is EACCES.
void answer_exec(int listener, pid_t tool, bool& started) {
    seccomp_notif req{};
    seccomp_notif_resp resp{};
    if (::ioctl(listener, SECCOMP_IOCTL_NOTIF_RECV, &req) != 0) return; // gone meanwhile
    resp.id = req.id;
    if (!started && static_cast<pid_t>(req.pid) == tool) {
        started = true;
        resp.flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
    } else {
        resp.error = -EACCES;
    }
    ::ioctl(listener, SECCOMP_IOCTL_NOTIF_SEND, &resp); // ENOENT: the caller is gone
}

int reaper_signals() {
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    ::sigprocmask(SIG_BLOCK, &chld, nullptr);
    const int sigfd = ::signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
    if (sigfd < 0) die("signalfd");
    for (int sig : group_signals)
        ::signal(sig, SIG_IGN);
    return sigfd;
}

/// A zygote run's request from meithd on its channel: 'K' and a signal number (native int):
/// sent to the run's process group. False when the run must end now: meithd has gone (EOF)
/// or sent SIGKILL.
bool serve_channel(int channel) {
    char msg[1 + sizeof(int)];
    const ssize_t n = ::recv(channel, msg, sizeof msg, MSG_DONTWAIT);
    if (n == 0) return false;
    if (n < 0) return errno == EAGAIN || errno == EINTR;
    if (n == static_cast<ssize_t>(sizeof msg) && msg[0] == 'K') {
        int sig;
        std::memcpy(&sig, msg + 1, sizeof sig);
        // SIGKILL ends the run whatever left the group (setsid): this process is the run's
        // PID 1, whose exit ends every process of its namespace — as a direct start's init is
        // ended by meithd's SIGKILL. Any other signal goes to the group, as meithd's would.
        if (sig == SIGKILL) return false;
        if (sig > 0 && sig < 65) ::kill(0, sig); // the group; this process ignores it
    }
    return true;
}

// Stays whole (~95 lines): the init program's life in order (fork the tool, seccomp
// notifications, reap, exit with the tool's status); each step uses the state of the last.
[[noreturn]] void run_tool(const run_options& o) {
    run_channel = o.channel;
    bool exec_once = o.exec_once;
    const int record_fd = o.record_fd;
    const int status_fd = o.status_fd;
    const char* program = o.program;
    char** tool_argv = o.argv;
    if (record_fd >= 0) exec_once = false; // a learning run lets every program through
    const bool filtered = exec_once || record_fd >= 0;

    // Outside a PID namespace (the kernel had none), orphans come here rather than to meithd.
    if (::getpid() != 1) ::prctl(PR_SET_CHILD_SUBREAPER, 1);
    const int sigfd = reaper_signals();

    int pair[2] = {-1, -1};
    if (filtered && ::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0)
        die("socketpair");
    const pid_t tool = ::fork();
    if (tool < 0) die("fork");
    if (tool == 0) {
        // The tool: what it would have had without this process in between.
        for (int sig : group_signals)
            ::signal(sig, SIG_DFL);
        sigset_t none;
        sigemptyset(&none);
        ::sigprocmask(SIG_SETMASK, &none, nullptr);
        if (::getpid() != 1) ::prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (exec_once) install_exec_filter(pair[1]);
        if (record_fd >= 0) meith::sandbox::install_record_filter(pair[1]);
        ::execve(program, tool_argv, o.envp);
        const int e = errno;
        std::fprintf(stderr, "meith-sandbox-init: cannot run %s: %s\n", program, std::strerror(e));
        std::_Exit(e == ENOENT ? 127 : 126);
    }
    // Not dumpable: the tool shares this process's uid, user namespace and Landlock domain, and
    // could otherwise take the exec listener (pidfd_getfd, /proc/1/fd) and answer its own
    // execve, or write a status of its choosing. It has no capability that overrides this.
    ::prctl(PR_SET_DUMPABLE, 0);
    // Not the tool's stdin and stdout: their ends close when the tool's do.
    const int null = ::open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null >= 0) {
        ::dup2(null, 0);
        ::dup2(null, 1);
        ::close(null);
    }
    int listener = -1;
    bool started = !exec_once;
    if (filtered) {
        ::close(pair[1]);
        listener = meith::sandbox::receive_fd(pair[0]); // -1 when the tool failed before its filter
        ::close(pair[0]);
    }
    for (;;) {
        // The channel last: poll skips a negative descriptor, and the listener may be -1.
        pollfd fds[3] = {{sigfd, POLLIN, 0}, {listener, POLLIN, 0}, {o.channel, POLLIN, 0}};
        const int n = ::poll(fds, 3, -1);
        if (n < 0) {
            if (errno == EINTR) continue;
            die("poll");
        }
        if (listener >= 0 && (fds[1].revents & POLLIN) != 0) {
            if (record_fd >= 0)
                meith::sandbox::answer_recorded(listener, record_fd);
            else
                answer_exec(listener, tool, started);
        }
        if (listener >= 0 && (fds[1].revents & (POLLHUP | POLLERR)) != 0) {
            ::close(listener); // every filtered process is gone
            listener = -1;
        }
        // meithd gone, or the run dropped: this process's end ends every process of the run.
        if (o.channel >= 0 && fds[2].revents != 0 && !serve_channel(o.channel)) std::_Exit(137);
        if ((fds[0].revents & POLLIN) == 0) continue;
        signalfd_siginfo info;
        while (::read(sigfd, &info, sizeof info) > 0) {
        }
        int status = 0;
        pid_t done;
        while ((done = ::waitpid(-1, &status, WNOHANG)) > 0) {
            if (done != tool) continue;
            if (status_fd >= 0)
                while (::write(status_fd, &status, sizeof status) < 0 && errno == EINTR) {
                }
            if (o.channel >= 0) {
                char msg[1 + sizeof status] = {'X'};
                std::memcpy(msg + 1, &status, sizeof status);
                ::send(o.channel, msg, sizeof msg, MSG_NOSIGNAL);
            }
            // _Exit: no atexit handlers (a sanitizer's leak check would ptrace, which the
            // sandbox refuses), and the status is already with meithd.
            std::_Exit(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
        }
    }
}
} // namespace meith::sandbox::init

int main(int argc, char** argv) {
    using namespace meith::sandbox::init;
    if (argc > 1 && std::string_view(argv[1]) == "--zygote") return zygote_main(argc, argv);
    run_options o;
    o.envp = environ;
    int i = 1;
    for (; i < argc; ++i) {
        const std::string_view a = argv[i];
        if (a == "--") {
            ++i;
            break;
        }
        if (a == "--exec-once")
            o.exec_once = true;
        else if (a.starts_with("--status-fd="))
            o.status_fd = std::atoi(argv[i] + 12);
        else if (a.starts_with("--record-fd="))
            o.record_fd = std::atoi(argv[i] + 12);
        else {
            std::fprintf(stderr, "meith-sandbox-init: unknown option '%s'\n", argv[i]);
            return 127;
        }
    }
    if (argc - i < 2) {
        std::fprintf(stderr, "usage: meith-sandbox-init [--exec-once | --record-fd=N] "
                             "[--status-fd=N] -- PROGRAM ARGV0 [ARGS...]\n"
                             "       meith-sandbox-init --zygote --control-fd=N [OPTIONS]\n");
        return 127;
    }
    o.program = argv[i];
    o.argv = argv + i + 1;
    if (o.status_fd >= 0) ::fcntl(o.status_fd, F_SETFD, FD_CLOEXEC);
    if (o.record_fd >= 0) ::fcntl(o.record_fd, F_SETFD, FD_CLOEXEC);
    run_tool(o);
}
