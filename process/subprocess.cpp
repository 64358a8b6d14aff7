#include "process/subprocess.hpp"

#include "process/zygote.hpp"
#include "sandbox/fd_passing.hpp"
#include "sandbox/restrict.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>

#include <fcntl.h>
#include <filesystem>
#include <sched.h>
#include <spawn.h>
#include <string_view>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <system_error>
#include <unistd.h>

#include <asio/post.hpp>
#include <fmt/format.h>

extern char** environ;

namespace meith::process {

child_reaper::child_reaper(asio::any_io_executor ex) : signals_(ex, SIGCHLD) {
    arm();
}

void child_reaper::arm() {
    signals_.async_wait([this](const std::error_code& ec, int) {
        if (ec) return;
        poll();
        arm();
    });
}

void child_reaper::watch(pid_t pid, std::function<void(int)> on_exit) {
    handlers_[pid] = std::move(on_exit);
    // The child may already have exited (its SIGCHLD came before it was registered): look
    // again after this turn — never from inside watch(), whose caller is still setting up
    // what the handler tears down (a tool host that exits at once, e.g. a script whose
    // interpreter the sandbox does not let it run).
    asio::post(signals_.get_executor(), [this, alive = std::weak_ptr<char>(alive_)] {
        if (alive.lock()) poll();
    });
}

void child_reaper::poll() {
    std::vector<std::pair<std::function<void(int)>, int>> done;
    for (auto it = handlers_.begin(); it != handlers_.end();) {
        int status = 0;
        const pid_t r = ::waitpid(it->first, &status, WNOHANG);
        if (r == it->first || (r < 0 && errno == ECHILD)) {
            done.emplace_back(std::move(it->second), r < 0 ? 0 : status);
            it = handlers_.erase(it);
        } else {
            ++it;
        }
    }
    // Orphans of unconfined tools come to meithd (a child subreaper: daemon/server.cpp) and
    // are reaped here; a registered child is left to the scan above. WNOWAIT looks without
    // reaping, so no registered child's status is ever taken here.
    for (;;) {
        siginfo_t info{};
        if (::waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT | __WALL) != 0 ||
            info.si_pid == 0 || handlers_.count(info.si_pid) != 0)
            break;
        ::waitpid(info.si_pid, nullptr, WNOHANG | __WALL);
    }
    // Handlers run after the scan: they may watch new children.
    for (auto& [fn, status] : done)
        fn(status);
}

std::string describe_wait_status(int status) {
    if (WIFEXITED(status)) return fmt::format("exited with status {}", WEXITSTATUS(status));
    if (WIFSIGNALED(status))
        return fmt::format("killed by signal {} ({})", WTERMSIG(status),
                           ::strsignal(WTERMSIG(status)));
    return fmt::format("ended with wait status {}", status);
}

std::vector<std::string> child_environment(const std::vector<std::string>& allow,
                                           const std::map<std::string, std::string>& extra) {
    std::vector<std::string> env;
    for (char** e = environ; e && *e; ++e) {
        const std::string_view item(*e);
        const auto eq = item.find('=');
        if (eq == std::string_view::npos) continue;
        const auto name = item.substr(0, eq);
        if (extra.count(std::string(name))) continue;
        for (const auto& pattern : allow) {
            const bool prefix = !pattern.empty() && pattern.back() == '*';
            const bool match = prefix ? name.substr(0, pattern.size() - 1) ==
                                            std::string_view(pattern).substr(0, pattern.size() - 1)
                                      : name == pattern;
            if (match) {
                env.emplace_back(item);
                break;
            }
        }
    }
    for (const auto& [name, value] : extra)
        env.push_back(name + "=" + value);
    return env;
}

namespace {

struct pipe_pair {
    int read = -1, write = -1;
    pipe_pair() {
        int fds[2];
        if (::pipe2(fds, O_CLOEXEC) != 0)
            throw std::system_error(errno, std::generic_category(), "pipe2");
        read = fds[0];
        write = fds[1];
    }
    ~pipe_pair() {
        if (read >= 0) ::close(read);
        if (write >= 0) ::close(write);
    }
    int release_read() { return std::exchange(read, -1); }
    int release_write() { return std::exchange(write, -1); }
};

} // namespace

namespace {

/// argv / envp for exec: pointers into `items`, null-terminated (`items` must outlive them).
std::vector<char*> c_strings(const std::vector<std::string>& items) {
    std::vector<char*> out;
    out.reserve(items.size() + 1);
    for (const auto& i : items)
        out.push_back(const_cast<char*>(i.c_str()));
    out.push_back(nullptr);
    return out;
}

/// "cannot start 'node' in /x: No such file or directory".
std::system_error start_error(const child_process::options& opts, int code) {
    return std::system_error(code, std::generic_category(),
                             fmt::format("cannot start '{}'{}", opts.argv[0],
                                         opts.cwd.empty() ? "" : " in " + opts.cwd.string()));
}

/// Extensions that mark an argument as a script the program runs (node host.mjs, python3
/// tool.py, sh run.sh).
constexpr std::array<std::string_view, 13> script_extensions{".js",  ".mjs", ".cjs",  ".ts", ".mts",
                                                             ".py",  ".sh",  ".bash", ".rb", ".pl",
                                                             ".php", ".lua", ".jar"};

/// Throws ENOENT naming the first argument after the program that names a script by its
/// extension and does not exist from the child's cwd. The interpreter would fail on it in its
/// own words, after a start; a source copied without its files should say so at once.
void check_scripts(const child_process::options& opts) {
    for (std::size_t i = 1; i < opts.argv.size(); ++i) {
        const std::string_view arg = opts.argv[i];
        if (arg.empty() || arg.front() == '-' || arg.find('=') != std::string_view::npos) continue;
        // Code, not a path: `sh -c "cd x && node host.mjs"`, `node -e "…"`, `python3 -m pkg.py`.
        const std::string_view before = opts.argv[i - 1];
        if (before == "-c" || before == "-e" || before == "--eval" || before == "-p" ||
            before == "--print" || before == "-m" ||
            arg.find_first_of(" \t\n") != std::string_view::npos)
            continue;
        const bool script = std::any_of(script_extensions.begin(), script_extensions.end(),
                                        [&](std::string_view ext) { return arg.ends_with(ext); });
        if (!script) continue;
        const std::filesystem::path path(arg);
        const auto from = path.is_absolute() || opts.cwd.empty() ? path : opts.cwd / path;
        std::error_code ec;
        if (std::filesystem::exists(from, ec) || ec) continue; // there, or not ours to judge
        throw std::system_error(ENOENT, std::generic_category(),
                                fmt::format("cannot start '{}'{}: its script '{}'", opts.argv[0],
                                            opts.cwd.empty() ? "" : " in " + opts.cwd.string(),
                                            arg));
    }
}

/// What the confined child needs, all made before the clone.
struct confined_child {
    const char* program;
    char* const* argv;
    char* const* envp;
    const char* cwd; ///< null: stay
    const sandbox::plan* plan;
    int in, out, err, report;
    int status; ///< the init program's --status-fd, -1 when none
    int record; ///< the init program's --record-fd, -1 when none
    int egress; ///< where the egress listener goes (a socketpair end), -1 when none
    /// A zygote (zygote.hpp): its control socket's end and the Landlock ruleset it applies to
    /// each run are kept open, and CAP_SYS_ADMIN in place of apply(); -1 when not one.
    int zygote_control;
};

/// The kernel's struct sigaction for rt_sigaction(2) (not glibc's): SIG_DFL, no flags.
struct kernel_sigaction {
    void (*handler)(int);
    unsigned long flags;
    void (*restorer)();
    unsigned long mask;
};

/// The child, on its own stack in the daemon's address space (CLONE_VM | CLONE_VFORK: the
/// daemon waits until it execs or exits). Raw system calls only: no libc state, no sanitizer
/// interceptors, no allocation.
int confined_child_main(void* arg) {
    const auto& a = *static_cast<const confined_child*>(arg);
    const kernel_sigaction dfl{SIG_DFL, 0, nullptr, 0};
    for (int sig = 1; sig < 65; ++sig)
        if (sig != SIGKILL && sig != SIGSTOP) ::syscall(SYS_rt_sigaction, sig, &dfl, nullptr, 8);
    const unsigned long none = 0;
    ::syscall(SYS_rt_sigprocmask, SIG_SETMASK, &none, nullptr, 8);
    long code = 0;
    // dup2 onto itself keeps close-on-exec: clear it instead (a daemon started with 0-2 closed
    // gets its pipes there).
    const auto to = [](int from, int target) {
        return from == target ? ::syscall(SYS_fcntl, target, F_SETFD, 0)
                              : ::syscall(SYS_dup2, from, target);
    };
    // It dies with meithd (the thread that made it: meithd's one I/O thread), so no tool
    // outlives the daemon that knows it for a tool and meets a new one's socket.
    if (::syscall(SYS_setsid) < 0 || ::syscall(SYS_prctl, PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0 ||
        to(a.in, 0) < 0 || to(a.out, 1) < 0 || to(a.err, 2) < 0)
        code = errno;
    // The namespaces' mounts first: the working folder may be a writable root mounted again.
    if (code == 0) code = sandbox::enter(*a.plan);
    // In its own network namespace: the listener meithd's egress proxy serves (§19).
    if (code == 0 && a.egress >= 0) code = sandbox::open_egress_listener(*a.plan, a.egress);
    // No cwd given: "/", not meithd's own folder (which may be the home, beneath its mask).
    if (code == 0 && ::syscall(SYS_chdir, a.cwd != nullptr ? a.cwd : "/") != 0) code = errno;
    const bool zygote = a.zygote_control >= 0;
    if (code == 0) code = zygote ? sandbox::keep_namespace_admin() : sandbox::apply(*a.plan);
    if (code == 0) {
        // Nothing of ours past stderr but the report pipe (close-on-exec), the init
        // program's status pipe and its record file (a zygote's: its control socket and the
        // ruleset): the gaps between them are closed.
        const int second = zygote ? a.zygote_control : a.status;
        const int third = zygote ? a.plan->ruleset_fd : a.record;
        unsigned keep[3] = {static_cast<unsigned>(a.report),
                            static_cast<unsigned>(second < 0 ? a.report : second),
                            static_cast<unsigned>(third < 0 ? a.report : third)};
        for (int i = 0; i < 2; ++i) // sorted, without syscalls' help
            for (int j = 0; j < 2 - i; ++j)
                if (keep[j] > keep[j + 1]) std::swap(keep[j], keep[j + 1]);
        unsigned from = 3;
        for (const unsigned k : keep) {
            if (k > from) ::syscall(SYS_close_range, from, k - 1, 0);
            if (k + 1 > from) from = k + 1;
        }
        ::syscall(SYS_close_range, from, ~0U, 0);
        for (const int fd : {second, third})
            if (fd >= 0) ::syscall(SYS_fcntl, fd, F_SETFD, 0);
        ::syscall(SYS_execve, a.program, a.argv, a.envp);
        code = errno;
    }
    const int c = static_cast<int>(code);
    ::syscall(SYS_write, a.report, &c, sizeof c);
    ::syscall(SYS_exit, 127);
    return 127;
}

/// Starts a confined child: clone(CLONE_VM | CLONE_VFORK) as posix_spawn does (no copy of the
/// daemon's page tables, which fork() would make: bench/PROFILE.md (k)), into the plan's
/// namespaces, with the sandbox applied between clone and exec; the program runs under the
/// sandbox's init program when the plan has one, which writes the program's own wait status
/// to `status_read`'s pipe. Returns the pid; throws std::system_error naming the command when
/// it cannot start (its errno comes back through a close-on-exec pipe).
/// Stays whole (~120 lines): the descriptors and pipes it sets up are used on both sides of
/// clone, in an order the child relies on.
pid_t spawn_confined(const child_process::options& opts, int in, int out, int err, int& status_read,
                     int& egress_listener, std::vector<int>& forward_listeners) {
    const auto program =
        sandbox::resolve_program(opts.argv[0], sandbox::program_search_path(), opts.cwd);
    const auto fail = [&](int code) { return start_error(opts, code); };
    if (!program) throw fail(ENOENT);
    const sandbox::plan& plan = *opts.sandbox;
    int status[2] = {-1, -1};
    if (!plan.init.empty() && opts.zygote_control < 0 &&
        ::pipe2(status, O_CLOEXEC | O_NONBLOCK) != 0)
        throw fail(errno);
    const auto close_status = [&] {
        for (int fd : status)
            if (fd >= 0) ::close(fd);
    };
    // A learning run's record (docs/protocol.md §15 "Learned profiles"): appended to by every
    // start, closed here once the child has it.
    struct owned_fd {
        int fd = -1;
        ~owned_fd() {
            if (fd >= 0) ::close(fd);
        }
    } record;
    if (!plan.init.empty() && !plan.record.empty()) {
        record.fd = ::open(plan.record.c_str(),
                           O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (record.fd < 0) {
            const int e = errno;
            close_status();
            throw fail(e);
        }
    }
    // meith-sandbox-init [--exec-once | --record-fd=N] --status-fd=N -- PROGRAM ARGV...
    // or, for a zygote: meith-sandbox-init --zygote --control-fd=N ... (init_zygote.cpp)
    std::vector<std::string> items;
    if (opts.zygote_control >= 0) {
        items = zygote::arguments(plan, opts.zygote_control);
    } else if (!plan.init.empty()) {
        items.push_back(plan.init);
        if (record.fd >= 0)
            items.push_back("--record-fd=" + std::to_string(record.fd));
        else if (plan.exec_once)
            items.emplace_back("--exec-once");
        items.push_back("--status-fd=" + std::to_string(status[1]));
        items.emplace_back("--");
        items.push_back(program->string());
    }
    if (opts.zygote_control < 0) items.insert(items.end(), opts.argv.begin(), opts.argv.end());
    const std::string& program_path = plan.init.empty() ? program->string() : plan.init;
    const auto argv = c_strings(plan.init.empty() ? opts.argv : items);
    const auto envp = c_strings(opts.env);
    const std::string cwd = opts.cwd.string();
    int report[2];
    if (::pipe2(report, O_CLOEXEC) != 0) {
        const int e = errno;
        close_status();
        throw fail(e);
    }
    int egress[2] = {-1, -1};
    // A zygote opens no listener of its own: each of its runs does.
    if (plan.egress_port != 0 && opts.zygote_control < 0 &&
        ::socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, egress) != 0) {
        const int e = errno;
        ::close(report[0]);
        ::close(report[1]);
        close_status();
        throw fail(e);
    }
    const auto close_egress = [&] {
        for (int& fd : egress)
            if (fd >= 0) ::close(std::exchange(fd, -1));
    };
    confined_child args{program_path.c_str(),
                        argv.data(),
                        envp.data(),
                        cwd.empty() ? nullptr : cwd.c_str(),
                        &plan,
                        in,
                        out,
                        err,
                        report[1],
                        status[1],
                        record.fd,
                        egress[1],
                        opts.zygote_control};
    constexpr std::size_t stack_size = 64 * 1024;
    void* stack = ::mmap(nullptr, stack_size, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (stack == MAP_FAILED) {
        const int e = errno;
        ::close(report[0]);
        ::close(report[1]);
        close_status();
        throw fail(e);
    }
    // Every signal blocked across the clone (as posix_spawn does): none may run the daemon's
    // handlers in the child before it has reset them.
    sigset_t all, saved;
    sigfillset(&all);
    ::pthread_sigmask(SIG_SETMASK, &all, &saved);
    const pid_t pid = ::clone(confined_child_main, static_cast<char*>(stack) + stack_size,
                              CLONE_VM | CLONE_VFORK | SIGCHLD | plan.clone_flags, &args);
    const int clone_errno = errno;
    ::pthread_sigmask(SIG_SETMASK, &saved, nullptr);
    ::munmap(stack, stack_size);
    ::close(report[1]);
    if (status[1] >= 0) ::close(std::exchange(status[1], -1));
    if (egress[1] >= 0) ::close(std::exchange(egress[1], -1));
    if (pid < 0) {
        ::close(report[0]);
        close_status();
        close_egress();
        throw fail(clone_errno);
    }
    int code = 0;
    ssize_t n;
    do
        n = ::read(report[0], &code, sizeof code);
    while (n < 0 && errno == EINTR);
    ::close(report[0]);
    if (n == static_cast<ssize_t>(sizeof code)) {
        ::waitpid(pid, nullptr, 0);
        close_status();
        close_egress();
        throw fail(code);
    }
    status_read = std::exchange(status[0], -1);
    if (egress[0] >= 0) {
        // Sent before the exec, which the vfork-style clone waited for: already here.
        egress_listener = sandbox::receive_fd(egress[0], MSG_DONTWAIT);
        for (std::size_t i = 0; egress_listener >= 0 && i < plan.forward_ports.size(); ++i)
            forward_listeners.push_back(sandbox::receive_fd(egress[0], MSG_DONTWAIT));
        close_egress();
    }
    return pid;
}

} // namespace

child_process::child_process(asio::any_io_executor ex)
    : stdin_(ex), stdout_(ex), stderr_(ex), channel_(ex) {
}

child_process::child_process(asio::any_io_executor ex, const options& opts)
    : stdin_(ex), stdout_(ex), stderr_(ex), channel_(ex) {
    if (opts.argv.empty())
        throw std::system_error(EINVAL, std::generic_category(), "empty command");
    check_scripts(opts);
    pipe_pair in, out, err;
    const auto adopt_pipes = [&] {
        for (int fd : {in.write, out.read, err.read})
            ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
        stdin_.assign(in.release_write());
        stdout_.assign(out.release_read());
        stderr_.assign(err.release_read());
    };
    if (opts.sandbox) {
        int listener = -1;
        std::vector<int> forwards;
        pid_ = spawn_confined(opts, in.read, out.write, err.write, status_fd_, listener, forwards);
        if (listener >= 0) {
            if (opts.egress)
                egress_ = egress::proxy::start(ex, listener, *opts.egress);
            else
                ::close(listener);
        }
        // Its loopback forwards (docs/protocol.md §19 "Loopback ports"): the same rules and
        // audit, one fixed target each.
        for (std::size_t i = 0; i < forwards.size(); ++i) {
            if (forwards[i] < 0) continue;
            if (!opts.egress) {
                ::close(forwards[i]);
                continue;
            }
            auto fwd = *opts.egress;
            fwd.forward_port = opts.sandbox->forward_ports[i];
            forwards_.push_back(egress::proxy::start(ex, forwards[i], std::move(fwd)));
        }
        adopt_pipes();
        return;
    }

    posix_spawn_file_actions_t actions;
    posix_spawnattr_t attr;
    posix_spawn_file_actions_init(&actions);
    posix_spawnattr_init(&attr);
    // dup2 clears FD_CLOEXEC on the target; every other descriptor of ours is close-on-exec.
    posix_spawn_file_actions_adddup2(&actions, in.read, 0);
    posix_spawn_file_actions_adddup2(&actions, out.write, 1);
    posix_spawn_file_actions_adddup2(&actions, err.write, 2);
#if defined(__GLIBC__) && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 34)
    // Belt and braces: whatever a library opened without O_CLOEXEC (Asio's sockets, for one)
    // must not leak into a tool, or it could accept() our clients itself.
    posix_spawn_file_actions_addclosefrom_np(&actions, 3);
#endif
    if (!opts.cwd.empty()) posix_spawn_file_actions_addchdir_np(&actions, opts.cwd.c_str());
    posix_spawnattr_setpgroup(&attr, 0);
    sigset_t defaults;
    sigemptyset(&defaults);
    sigaddset(&defaults, SIGPIPE);
    sigaddset(&defaults, SIGINT);
    sigaddset(&defaults, SIGTERM);
    sigaddset(&defaults, SIGCHLD);
    sigaddset(&defaults, SIGHUP);
    posix_spawnattr_setsigdefault(&attr, &defaults);
    sigset_t none;
    sigemptyset(&none);
    posix_spawnattr_setsigmask(&attr, &none);
#if defined(POSIX_SPAWN_SETSID)
    // A session of its own (and so a process group whose id is its pid): the child has no
    // controlling terminal even when meithd runs in one, so a tool cannot pass as an approver
    // (docs/security.md) nor read from or inject into the user's terminal.
    constexpr short group_flag = POSIX_SPAWN_SETSID;
#else
    constexpr short group_flag = POSIX_SPAWN_SETPGROUP;
#endif
    posix_spawnattr_setflags(
        &attr, static_cast<short>(group_flag | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK));

    const auto argv = c_strings(opts.argv);
    const auto envp = c_strings(opts.env);
    const int rc = ::posix_spawnp(&pid_, argv[0], &actions, &attr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
    if (rc != 0) {
        pid_ = -1;
        throw start_error(opts, rc);
    }
    adopt_pipes();
}

std::unique_ptr<child_process> child_process::from_zygote(asio::any_io_executor ex,
                                                          const options& opts, zygote& z) {
    if (opts.argv.empty())
        throw std::system_error(EINVAL, std::generic_category(), "empty command");
    check_scripts(opts);
    // What the direct start would refuse, refused the same way (the run's init reports only a
    // status): a program not found, a working folder that is not one.
    const auto program =
        sandbox::resolve_program(opts.argv[0], sandbox::program_search_path(), opts.cwd);
    if (!program) throw start_error(opts, ENOENT);
    if (!opts.cwd.empty()) {
        struct stat st {};
        if (::stat(opts.cwd.c_str(), &st) != 0) throw start_error(opts, errno);
        if (!S_ISDIR(st.st_mode)) throw start_error(opts, ENOTDIR);
    }
    pipe_pair in, out, err;
    auto lease = z.lease();
    const int channel =
        z.send_run(program->string(), opts.cwd, opts.argv, opts.env, in.read, out.write, err.write);
    if (channel < 0) return nullptr;
    std::unique_ptr<child_process> c(new child_process(ex));
    c->channel_.assign(channel);
    c->lease_ = std::move(lease);
    c->run_egress_ = opts.egress;
    c->run_forward_ports_ = opts.sandbox->forward_ports;
    for (int fd : {in.write, out.read, err.read})
        ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
    c->stdin_.assign(in.release_write());
    c->stdout_.assign(out.release_read());
    c->stderr_.assign(err.release_read());
    return c;
}

child_process::~child_process() {
    // The owner stops children before dropping them; this is the last line of defence.
    if (!exited_ && pid_ > 0) ::kill(-pid_, SIGKILL);
    if (status_fd_ >= 0) ::close(status_fd_);
}

int child_process::exit_status(int wait_status) {
    if (status_fd_ < 0) return wait_status;
    int tool = 0;
    const ssize_t n = ::read(status_fd_, &tool, sizeof tool);
    ::close(std::exchange(status_fd_, -1));
    // Nothing written: the init program itself was killed (SIGKILL from a stop or a user).
    return n == static_cast<ssize_t>(sizeof tool) ? tool : wait_status;
}

void child_process::signal_group(int sig) {
    if (exited_) return;
    if (from_zygote()) {
        // The run's init signals its process group (it is PID 1 of the run's namespace).
        char msg[1 + sizeof sig] = {'K'};
        std::memcpy(msg + 1, &sig, sizeof sig);
        ::send(channel_.native_handle(), msg, sizeof msg, MSG_NOSIGNAL | MSG_DONTWAIT);
        return;
    }
    if (pid_ > 0) ::kill(-pid_, sig);
}

void child_process::close_stdin() {
    std::error_code ec;
    stdin_.close(ec);
}

void child_process::kill_stragglers() {
    if (pid_ > 0) ::kill(-pid_, SIGKILL);
}

void child_process::close_output() {
    std::error_code ec;
    stdout_.close(ec);
    stderr_.close(ec);
}

} // namespace meith::process
