// fd_passing: one descriptor over a Unix socket (SCM_RIGHTS, unix(7)), with raw system calls
// only, so the sandbox may use it between clone and exec (async-signal-safe): the egress
// listener from a confined child to meithd (docs/protocol.md §19), the exec filter's listener
// inside meith-sandbox-init (§15).
#pragma once

#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

namespace meith::sandbox {

/// A one-byte message with room for one descriptor.
struct fd_message {
    char byte = 0;
    iovec iov{&byte, 1};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
    msghdr msg{};
    fd_message() {
        msg.msg_iov = &iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control;
        msg.msg_controllen = sizeof control;
    }
    fd_message(const fd_message&) = delete;
    fd_message& operator=(const fd_message&) = delete;
};

/// Sends `fd` over the Unix socket `sock`: 0, or the errno.
inline int send_fd(int sock, int fd) noexcept {
    fd_message m;
    cmsghdr* c = CMSG_FIRSTHDR(&m.msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    __builtin_memcpy(CMSG_DATA(c), &fd, sizeof fd);
    return ::syscall(SYS_sendmsg, sock, &m.msg, MSG_NOSIGNAL) == 1 ? 0 : errno;
}

/// Receives one descriptor from `sock` (close-on-exec); -1 when none came. `flags`: recvmsg's
/// (MSG_DONTWAIT for one that must be there already).
inline int receive_fd(int sock, int flags = 0) noexcept {
    fd_message m;
    long n;
    do
        n = ::syscall(SYS_recvmsg, sock, &m.msg, MSG_CMSG_CLOEXEC | flags);
    while (n < 0 && errno == EINTR);
    cmsghdr* c = n == 1 ? CMSG_FIRSTHDR(&m.msg) : nullptr;
    if (c == nullptr || c->cmsg_type != SCM_RIGHTS || c->cmsg_len != CMSG_LEN(sizeof(int)))
        return -1;
    int fd;
    __builtin_memcpy(&fd, CMSG_DATA(c), sizeof fd);
    return fd;
}

} // namespace meith::sandbox
