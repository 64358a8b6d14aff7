#include "protocol/client_channel.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

namespace meith::protocol {

namespace {

std::string errno_text(int err) {
    return std::strerror(err);
}

std::string size_text(std::size_t bytes) {
    constexpr std::size_t mib = 1024 * 1024;
    if (bytes >= mib && bytes % mib == 0) return std::to_string(bytes / mib) + " MiB";
    return std::to_string(bytes) + " bytes";
}

/// Writes every byte of `iov[0..count)`, advancing through partial writes.
void send_all(int fd, iovec* iov, std::size_t count) {
    if (fd < 0) throw client_error(client_error::kind::not_connected, "not connected to meithd");
    while (count > 0) {
        if (iov->iov_len == 0) {
            ++iov;
            --count;
            continue;
        }
        msghdr msg{};
        msg.msg_iov = iov;
        msg.msg_iovlen = count;
        const ssize_t n = ::sendmsg(fd, &msg, MSG_NOSIGNAL);
        if (n < 0) {
            const int err = errno;
            if (err == EINTR) continue;
            if (err == EPIPE || err == ECONNRESET) {
                throw client_error(client_error::kind::closed, "connection to meithd closed", err);
            }
            throw client_error(client_error::kind::io, "send to meithd: " + errno_text(err), err);
        }
        auto left = static_cast<std::size_t>(n);
        while (count > 0 && left >= iov->iov_len) {
            left -= iov->iov_len;
            ++iov;
            --count;
        }
        if (count > 0) {
            iov->iov_base = static_cast<char*>(iov->iov_base) + left;
            iov->iov_len -= left;
        }
    }
}

} // namespace

client_channel::client_channel(std::size_t max_frame_bytes)
    : max_frame_bytes_(max_frame_bytes), framer_(max_frame_bytes, read_chunk) {
}

client_channel::~client_channel() {
    close();
}

client_channel::client_channel(client_channel&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), max_frame_bytes_(other.max_frame_bytes_),
      framer_(std::exchange(other.framer_, line_framer(other.max_frame_bytes_, read_chunk))),
      eof_(std::exchange(other.eof_, false)) {
}

client_channel& client_channel::operator=(client_channel&& other) noexcept {
    if (this != &other) {
        close();
        fd_ = std::exchange(other.fd_, -1);
        max_frame_bytes_ = other.max_frame_bytes_;
        framer_ = std::exchange(other.framer_, line_framer(other.max_frame_bytes_, read_chunk));
        eof_ = std::exchange(other.eof_, false);
    }
    return *this;
}

void client_channel::close() {
    if (fd_ >= 0) {
        ::close(fd_);
        fd_ = -1;
    }
    framer_ = line_framer(max_frame_bytes_, read_chunk);
    eof_ = false;
}

void client_channel::adopt(int fd) {
    close();
    fd_ = fd;
}

void client_channel::connect(const std::filesystem::path& path) {
    using k = client_error::kind;
    close();
    const std::string& p = path.native();
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (p.empty() || p.size() >= sizeof(addr.sun_path)) {
        throw client_error(k::connect_failed, "socket path is empty or too long: " + p);
    }
    std::memcpy(addr.sun_path, p.data(), p.size());

    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        const int err = errno;
        throw client_error(k::connect_failed, "socket: " + errno_text(err), err);
    }
    int rc;
    do {
        rc = ::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr));
    } while (rc < 0 && errno == EINTR);
    if (rc == 0) {
        fd_ = fd;
        return;
    }
    const int err = errno;
    ::close(fd);
    switch (err) {
    case ENOENT:
        throw client_error(k::not_running, "meithd is not running (no socket at " + p + ")", err);
    case ECONNREFUSED:
        throw client_error(k::not_running,
                           "meithd is not running (connection refused at " + p + ")", err);
    default:
        throw client_error(k::connect_failed, "cannot connect to " + p + ": " + errno_text(err),
                           err);
    }
}

void client_channel::send_frame(std::string_view frame) {
    if (frame.find('\n') != std::string_view::npos) {
        throw client_error(client_error::kind::invalid_frame,
                           "a frame to meithd must not contain a newline");
    }
    char newline = '\n';
    iovec iov[2] = {{const_cast<char*>(frame.data()), frame.size()}, {&newline, 1}};
    send_all(fd_, iov, 2);
}

void client_channel::send_bytes(std::string_view bytes) {
    iovec iov[1] = {{const_cast<char*>(bytes.data()), bytes.size()}};
    send_all(fd_, iov, 1);
}

void client_channel::shutdown_write() {
    if (fd_ < 0) throw client_error(client_error::kind::not_connected, "not connected to meithd");
    if (::shutdown(fd_, SHUT_WR) != 0) {
        const int err = errno;
        throw client_error(client_error::kind::io, "shutdown: " + errno_text(err), err);
    }
}

client_channel::read_result client_channel::read_frame(std::optional<clock::time_point> deadline,
                                                       int wake_fd) {
    using k = client_error::kind;
    if (fd_ < 0) throw client_error(k::not_connected, "not connected to meithd");
    const auto too_large = [this] {
        return client_error(k::frame_too_large, "frame from meithd exceeds the " +
                                                    size_text(max_frame_bytes_) + " limit");
    };
    for (;;) {
        switch (framer_.next()) {
        case line_framer::status::frame: {
            std::string line(framer_.line());
            framer_.shrink_if_idle(); // after a huge frame, an idle channel keeps no big buffer
            return {read_status::frame, std::move(line)};
        }
        case line_framer::status::oversized:
            throw too_large();
        case line_framer::status::need_more:
            // The framer drops an over-long line as it streams in; for a client that is an
            // error at once, not after the rest of the line arrived.
            if (framer_.discarding()) throw too_large();
            break;
        }
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
            const int err = errno;
            if (err == EINTR) continue; // a signal's self-pipe byte shows up on the next poll
            throw client_error(k::io, "poll: " + errno_text(err), err);
        }
        if (n == 0) continue; // re-checks the deadline
        // A pipe whose writer closed polls POLLHUP without POLLIN (poll(2)): that is a wake-up
        // too (the caller reads EOF), or a bridge whose stdin closed would spin here.
        if (wake_fd >= 0 && (fds[1].revents & (POLLIN | POLLHUP | POLLERR)))
            return {read_status::woken, {}};
        if (fds[0].revents == 0) continue;

        const auto space = framer_.prepare();
        const ssize_t got = ::recv(fd_, space.data(), space.size(), 0);
        if (got > 0) {
            framer_.commit(static_cast<std::size_t>(got));
        } else if (got == 0) {
            eof_ = true;
        } else {
            const int err = errno;
            if (err == EINTR || err == EAGAIN || err == EWOULDBLOCK) continue;
            if (err == ECONNRESET) {
                eof_ = true;
                continue;
            }
            throw client_error(k::io, "read from meithd: " + errno_text(err), err);
        }
    }
}

} // namespace meith::protocol
