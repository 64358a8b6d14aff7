#include "platform/fd_passing.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <string>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

namespace meith::platform {

bool send_with_fds(int socket, std::span<const char> data, std::span<const int> fds) {
    if (fds.size() > max_passed_fds || data.empty()) {
        errno = EINVAL;
        return false;
    }
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * max_passed_fds)] = {};
    std::size_t done = 0;
    bool with_fds = !fds.empty();
    while (done < data.size()) {
        iovec iov{const_cast<char*>(data.data() + done), data.size() - done};
        msghdr msg{};
        msg.msg_iov = &iov;
        msg.msg_iovlen = 1;
        if (with_fds) {
            msg.msg_control = control;
            msg.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
            cmsghdr* c = CMSG_FIRSTHDR(&msg);
            c->cmsg_level = SOL_SOCKET;
            c->cmsg_type = SCM_RIGHTS;
            c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
            std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
        }
        const ssize_t n = ::sendmsg(socket, &msg, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        with_fds = false; // attached to the first byte sent
        done += static_cast<std::size_t>(n);
    }
    return true;
}

ssize_t receive_with_fds(int socket, std::span<char> buf, std::vector<int>& fds) {
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * max_passed_fds)];
    iovec iov{buf.data(), buf.size()};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    ssize_t n;
    do {
        n = ::recvmsg(socket, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    } while (n < 0 && errno == EINTR);
    if (n < 0 || msg.msg_controllen == 0) return n;
    const std::size_t before = fds.size();
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
        const std::size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (std::size_t i = 0; i < count; ++i) {
            int fd;
            std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
            fds.push_back(fd);
        }
    }
    if ((msg.msg_flags & MSG_CTRUNC) != 0 || fds.size() - before > max_passed_fds) {
        for (std::size_t i = before; i < fds.size(); ++i)
            ::close(fds[i]);
        fds.resize(before);
    }
    return n;
}

} // namespace meith::platform

namespace meith::platform {

int private_nonblocking(int fd, bool write) {
    struct stat st {};
    if (::fstat(fd, &st) != 0) return -1;
    if (S_ISSOCK(st.st_mode)) return fd;
    if (!S_ISFIFO(st.st_mode)) {
        errno = EINVAL;
        return -1;
    }
    const std::string path = "/proc/self/fd/" + std::to_string(fd);
    const int own =
        ::open(path.c_str(), (write ? O_WRONLY : O_RDONLY) | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (own < 0) return -1;
    ::close(fd);
    return own;
}

} // namespace meith::platform
