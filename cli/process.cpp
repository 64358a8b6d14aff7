#include "cli/process.hpp"

#include <cerrno>
#include <cstdlib>
#include <fcntl.h>
#include <functional>
#include <spawn.h>
#include <string_view>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace meith::cli {

namespace fs = std::filesystem;

namespace {

/// posix_spawnp + waitpid; `err_fd` >= 0 becomes the program's stderr.
int spawn_and_wait(const std::vector<std::string>& argv, output out, int err_fd,
                   const std::function<void()>& while_running) {
    if (argv.empty()) return 127;
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
    if (err != 0) return 127;
    if (while_running) while_running();
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) return 127;
    }
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    return 128 + WTERMSIG(status);
}

} // namespace

int run_program(const std::vector<std::string>& argv, output out) {
    return spawn_and_wait(argv, out, -1, {});
}

program_result run_program_capturing(const std::vector<std::string>& argv) {
    int pipe_fds[2];
    if (::pipe2(pipe_fds, O_CLOEXEC) != 0) return {127, "pipe2 failed"};
    std::string text;
    const int status = spawn_and_wait(argv, output::discard, pipe_fds[1], [&] {
        ::close(pipe_fds[1]);
        pipe_fds[1] = -1;
        char buf[4096];
        for (;;) {
            const ssize_t n = ::read(pipe_fds[0], buf, sizeof buf);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) break;
            if (text.size() < 64 * 1024) text.append(buf, static_cast<std::size_t>(n));
        }
    });
    if (pipe_fds[1] >= 0) ::close(pipe_fds[1]);
    ::close(pipe_fds[0]);
    return {status, std::move(text)};
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
#if defined(__linux__)
    const fs::path self = fs::read_symlink("/proc/self/exe", ec);
    if (!ec) {
        const fs::path next = self.parent_path() / "meithd";
        if (::access(next.c_str(), X_OK) == 0) return next;
    }
#endif
    if (auto found = which("meithd")) return *found;
    return "meithd";
}

} // namespace meith::cli
