#include "cli/process.hpp"
#include "platform/self.hpp"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <string_view>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace meith::cli {

namespace fs = std::filesystem;

namespace {

/// posix_spawnp; `err_fd` >= 0 becomes the program's stderr. -1 when it cannot be run.
pid_t spawn(const std::vector<std::string>& argv, output out, int err_fd) {
    if (argv.empty()) return -1;
    posix_spawn_file_actions_t actions;
    ::posix_spawn_file_actions_init(&actions);
    ::posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    if (err_fd >= 0) {
        ::posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
        ::posix_spawn_file_actions_adddup2(&actions, err_fd, STDERR_FILENO);
    } else if (out == output::to_stderr) {
        ::posix_spawn_file_actions_adddup2(&actions, STDERR_FILENO, STDOUT_FILENO);
    } else if (out == output::stderr_only) {
        ::posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
    } else if (out == output::discard) {
        ::posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
        ::posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
    }
    std::vector<char*> args;
    for (const auto& a : argv)
        args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    pid_t pid = -1;
    const int err = ::posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
    ::posix_spawn_file_actions_destroy(&actions);
    return err == 0 ? pid : -1;
}

int wait_status(pid_t pid) {
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) return 127;
    }
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    return 128 + WTERMSIG(status);
}

} // namespace

int run_program(const std::vector<std::string>& argv, output out) {
    const pid_t pid = spawn(argv, out, -1);
    return pid < 0 ? 127 : wait_status(pid);
}

pid_t start_program(const std::vector<std::string>& argv, output out) {
    return spawn(argv, out, -1);
}

program_result
run_program_capturing(const std::vector<std::string>& argv,
                      std::optional<std::chrono::steady_clock::time_point> deadline) {
    int pipe_fds[2];
    if (::pipe2(pipe_fds, O_CLOEXEC) != 0) return {127, "pipe2 failed"};
    const pid_t pid = spawn(argv, output::discard, pipe_fds[1]);
    ::close(pipe_fds[1]);
    if (pid < 0) {
        ::close(pipe_fds[0]);
        return {127, {}};
    }
    std::string text;
    bool timed_out = false;
    char buf[4096];
    for (;;) {
        int wait_ms = -1;
        if (deadline) {
            const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                *deadline - std::chrono::steady_clock::now());
            if (left.count() <= 0) {
                timed_out = true;
                break;
            }
            wait_ms = static_cast<int>(std::min<long long>(left.count(), 1000));
        }
        pollfd p{pipe_fds[0], POLLIN, 0};
        const int r = ::poll(&p, 1, wait_ms);
        if (r < 0 && errno != EINTR) break;
        if (r <= 0) continue;
        const ssize_t n = ::read(pipe_fds[0], buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        if (text.size() < 64 * 1024) text.append(buf, static_cast<std::size_t>(n));
    }
    ::close(pipe_fds[0]);
    if (timed_out) {
        ::kill(pid, SIGKILL); // meithd --detach's waiting parent; the daemon goes on starting
        wait_status(pid);
        return {124, std::move(text)};
    }
    return {wait_status(pid), std::move(text)};
}

std::optional<fs::path> which(const std::string& name) {
    const char* path = std::getenv("PATH");
    std::string_view rest = path ? path : "/usr/bin:/bin";
    while (!rest.empty()) {
        const auto colon = rest.find(':');
        const std::string_view dir = rest.substr(0, colon);
        rest = colon == std::string_view::npos ? std::string_view() : rest.substr(colon + 1);
        if (dir.empty()) continue;
        const fs::path candidate = fs::path(dir) / name;
        if (::access(candidate.c_str(), X_OK) == 0) return fs::absolute(candidate);
    }
    return std::nullopt;
}

fs::path sibling_meithd() {
    std::error_code ec;
    const fs::path self = platform::executable_path();
    if (!self.empty()) {
        const fs::path next = self.parent_path() / "meithd";
        if (::access(next.c_str(), X_OK) == 0) return next;
    }
    if (auto found = which("meithd")) return *found;
    return "meithd";
}

} // namespace meith::cli
