// fd_passing: descriptors sent over a Unix stream socket with the bytes of one message
// (SCM_RIGHTS, unix(7), cmsg(3)). `meith mcp` hands its stdin, stdout and stderr to meithd so
// that meithd speaks MCP on the client's pipes itself (docs/protocol.md §10 "Handoff").
#pragma once

#include <cstddef>
#include <span>
#include <sys/types.h>
#include <vector>

namespace meith::platform {

/// The most descriptors one message carries (stdin, stdout, stderr).
inline constexpr std::size_t max_passed_fds = 3;

/// Sends `data` with `fds` attached to its first byte (sendmsg(2), MSG_NOSIGNAL), retrying
/// EINTR and short writes (the rest without descriptors). Returns false with errno set.
bool send_with_fds(int socket, std::span<const char> data, std::span<const int> fds);

/// Reads what is there into `buf` (recvmsg(2), MSG_DONTWAIT, MSG_CMSG_CLOEXEC); descriptors
/// that came with the bytes are appended to `fds` (the caller owns them and must close them).
/// More than max_passed_fds, or a cut control message: every one that came is closed and the
/// bytes are still returned. Returns what read(2) would: bytes read, 0 at EOF, -1 with errno.
ssize_t receive_with_fds(int socket, std::span<char> buf, std::vector<int>& fds);

/// A descriptor meithd may use without blocking, whatever its other holders do with theirs
/// (O_NONBLOCK belongs to the open file description, which a passed descriptor shares with
/// the process that sent it): a pipe is opened again through /proc/self/fd (proc(5)) with
/// O_NONBLOCK, read or write as `write` says, and `fd` closed; a socket is returned as is,
/// to be used only with MSG_DONTWAIT. -1 with errno set (then `fd` is still open): anything
/// else, or the reopening failed (ENXIO: a FIFO's other end is gone). Linux.
int private_nonblocking(int fd, bool write);

} // namespace meith::platform
