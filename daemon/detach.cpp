#include "daemon/detach.hpp"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <fmt/format.h>
#include <stdexcept>
#include <string>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

namespace meith::daemon {

namespace fs = std::filesystem;

namespace {

/// What the child appended to the log after `offset`: its startup error, for the parent.
std::string log_since(const fs::path& log_file, off_t offset) {
    std::string text;
    const int fd = ::open(log_file.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return text;
    char buf[4096];
    ssize_t n;
    while ((n = ::pread(fd, buf, sizeof buf, offset)) > 0 && text.size() < 64 * 1024) {
        text.append(buf, static_cast<std::size_t>(n));
        offset += n;
    }
    ::close(fd);
    return text;
}

} // namespace

int detach(const fs::path& log_file) {
    std::error_code ec;
    if (fs::file_size(log_file, ec) > detached_log_rotate_bytes && !ec)
        fs::rename(log_file, fs::path(log_file).concat(".1"), ec);
    const int log_fd = ::open(log_file.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    if (log_fd < 0)
        throw std::runtime_error(
            fmt::format("cannot open the log {}: {}", log_file.string(), std::strerror(errno)));
    const off_t start = ::lseek(log_fd, 0, SEEK_END);
    int ready[2];
    if (::pipe2(ready, O_CLOEXEC) != 0) throw std::runtime_error("pipe2 failed");
    std::fflush(nullptr);
    const pid_t pid = ::fork();
    if (pid < 0) throw std::runtime_error(fmt::format("fork failed: {}", std::strerror(errno)));

    if (pid == 0) {
        ::close(ready[0]);
        ::setsid(); // no controlling terminal: a closed terminal's SIGHUP is not a reload
        const int null_fd = ::open("/dev/null", O_RDONLY);
        if (null_fd >= 0) {
            ::dup2(null_fd, STDIN_FILENO);
            if (null_fd != STDIN_FILENO) ::close(null_fd);
        }
        ::dup2(log_fd, STDOUT_FILENO);
        ::dup2(log_fd, STDERR_FILENO);
        ::close(log_fd);
        // The home, not the caller's folder: a detached daemon pins no random directory.
        // (Relative paths on the command line were made absolute before the fork.)
        if (::chdir(log_file.parent_path().c_str()) != 0) {
        }
        return ready[1];
    }

    ::close(ready[1]);
    ::close(log_fd);
    std::string got;
    char buf[64];
    ssize_t n;
    while ((n = ::read(ready[0], buf, sizeof buf)) != 0) {
        if (n < 0) {
            if (errno == EINTR) continue;
            break;
        }
        got.append(buf, static_cast<std::size_t>(n));
        if (got.find('\n') != std::string::npos) break;
    }
    ::close(ready[0]);
    if (got.rfind("ready\n", 0) == 0) {
        fmt::print("meithd {} ready; log {}\n", pid, log_file.string());
        std::exit(0);
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    std::string text = log_since(log_file, start);
    fmt::print(stderr,
               "{}meithd: the detached daemon exited (status {}) before it was ready; "
               "log {}\n",
               text, WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status),
               log_file.string());
    std::exit(1);
}

} // namespace meith::daemon
