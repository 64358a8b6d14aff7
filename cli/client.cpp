#include "cli/client.hpp"

#include "cli/errors.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include <fmt/core.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

namespace meith::cli {

namespace {

constexpr std::size_t read_chunk = 64 * 1024;

std::string errno_text(int err) {
    return std::strerror(err);
}

} // namespace

client::~client() {
    close_fd();
}

client::client(client&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), max_frame_bytes_(other.max_frame_bytes_),
      buffer_(std::move(other.buffer_)), start_(other.start_), scan_(other.scan_), eof_(other.eof_),
      counter_(other.counter_) {
}

client& client::operator=(client&& other) noexcept {
    if (this != &other) {
        close_fd();
        fd_ = std::exchange(other.fd_, -1);
        max_frame_bytes_ = other.max_frame_bytes_;
        buffer_ = std::move(other.buffer_);
        start_ = other.start_;
        scan_ = other.scan_;
        eof_ = other.eof_;
        counter_ = other.counter_;
    }
    return *this;
}

void client::close_fd() {
    if (fd_ >= 0) {
        ::close(fd_);
        fd_ = -1;
    }
}

void client::connect(const std::filesystem::path& path) {
    close_fd();
    const std::string& p = path.native();
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (p.empty() || p.size() >= sizeof(addr.sun_path)) {
        throw cli_error(exit_error, fmt::format("socket path is empty or too long: {}", p));
    }
    std::memcpy(addr.sun_path, p.data(), p.size());

    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) {
        throw cli_error(exit_error, fmt::format("socket: {}", errno_text(errno)));
    }
    int rc;
    do {
        rc = ::connect(fd_, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr));
    } while (rc < 0 && errno == EINTR);
    if (rc == 0) return;

    const int err = errno;
    close_fd();
    switch (err) {
    case ENOENT:
        throw cli_error(
            exit_error,
            fmt::format("meithd is not running (no socket at {}); start it with: meithd", p));
    case ECONNREFUSED:
        throw cli_error(exit_error, fmt::format("meithd is not running (connection refused at "
                                                "{}); start it with: meithd",
                                                p));
    default:
        throw cli_error(exit_error, fmt::format("cannot connect to {}: {}", p, errno_text(err)));
    }
}

void client::send_frame(std::string_view frame) {
    if (fd_ < 0) throw cli_error(exit_error, "not connected to meithd");
    std::string out;
    out.reserve(frame.size() + 1);
    out.append(frame);
    out.push_back('\n');
    std::size_t sent = 0;
    while (sent < out.size()) {
        // MSG_NOSIGNAL: a daemon that went away is an error to report, not a SIGPIPE death.
        ssize_t n = ::send(fd_, out.data() + sent, out.size() - sent, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR) continue;
            if (errno == EPIPE || errno == ECONNRESET) {
                throw cli_error(exit_error, "connection to meithd closed");
            }
            throw cli_error(exit_error, fmt::format("send to meithd: {}", errno_text(errno)));
        }
        sent += static_cast<std::size_t>(n);
    }
}

std::optional<std::string> client::take_line() {
    for (;;) {
        const std::size_t pos = buffer_.find('\n', scan_);
        if (pos == std::string::npos) {
            scan_ = buffer_.size();
            if (buffer_.size() - start_ > max_frame_bytes_) {
                throw cli_error(exit_error,
                                fmt::format("frame from meithd exceeds the {} MiB limit",
                                            max_frame_bytes_ / (1024 * 1024)));
            }
            return std::nullopt;
        }
        const std::size_t len = pos - start_;
        if (len > max_frame_bytes_) {
            throw cli_error(exit_error, fmt::format("frame from meithd exceeds the {} MiB limit",
                                                    max_frame_bytes_ / (1024 * 1024)));
        }
        std::string line = buffer_.substr(start_, len);
        start_ = scan_ = pos + 1;
        if (start_ == buffer_.size()) {
            buffer_.clear();
            start_ = scan_ = 0;
        }
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (!line.empty()) return line;
    }
}

client::read_result client::read_frame(std::optional<clock::time_point> deadline, int wake_fd) {
    if (fd_ < 0) throw cli_error(exit_error, "not connected to meithd");
    for (;;) {
        if (auto line = take_line()) return {read_status::frame, std::move(*line)};
        if (eof_) return {read_status::closed, {}};

        int timeout_ms = -1;
        if (deadline) {
            auto left = std::chrono::ceil<std::chrono::milliseconds>(*deadline - clock::now());
            if (left.count() <= 0) return {read_status::timed_out, {}};
            timeout_ms = static_cast<int>(std::min<long long>(left.count(), 60 * 60 * 1000));
        }
        pollfd fds[2] = {{fd_, POLLIN, 0}, {wake_fd, POLLIN, 0}};
        const int n = ::poll(fds, wake_fd >= 0 ? 2 : 1, timeout_ms);
        if (n < 0) {
            if (errno == EINTR) continue; // a signal's self-pipe byte shows up on the next poll
            throw cli_error(exit_error, fmt::format("poll: {}", errno_text(errno)));
        }
        if (n == 0) continue; // re-checks the deadline
        if (wake_fd >= 0 && (fds[1].revents & POLLIN)) return {read_status::woken, {}};
        if (fds[0].revents == 0) continue;

        // Compact only when the consumed prefix dominates, so each byte moves O(1) times.
        if (start_ > 0 && start_ >= buffer_.size() / 2) {
            buffer_.erase(0, start_);
            scan_ -= start_;
            start_ = 0;
        }
        const std::size_t old_size = buffer_.size();
        buffer_.resize(old_size + read_chunk);
        const ssize_t got = ::recv(fd_, buffer_.data() + old_size, read_chunk, 0);
        buffer_.resize(old_size + (got > 0 ? static_cast<std::size_t>(got) : 0));
        if (got == 0) {
            eof_ = true;
        } else if (got < 0) {
            if (errno == EINTR || errno == EAGAIN) continue;
            if (errno == ECONNRESET) {
                eof_ = true;
                continue;
            }
            throw cli_error(exit_error, fmt::format("read from meithd: {}", errno_text(errno)));
        }
    }
}

std::string client::next_request_id() {
    return fmt::format("cli_{}_{}", static_cast<long>(::getpid()), ++counter_);
}

} // namespace meith::cli
