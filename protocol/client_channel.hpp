// client_channel: the client side of the socket (docs/protocol.md §2) — a blocking Unix-socket
// connection to meithd that sends one frame per line and reads the daemon's frames with the
// daemon's own framing rules (`line_framer`: `\n`-terminated, a trailing `\r` stripped, empty
// lines skipped, a hard bound on the frame size).
//
// Standard library + POSIX only (no Asio, spdlog or simdjson): the `meith` CLI and the
// end-to-end test fixture use it. Failures throw `client_error`, whose `kind()` says what went
// wrong and whose message is ready to show ("meithd is not running (no socket at P)",
// "cannot connect to P: Permission denied", ...). Frames are strings here: encoders for the
// requests are in client_frames.hpp, parsing the replies is up to the caller.
//
// Threads: one thread may send while another reads (they share only the descriptor);
// otherwise a channel is used by one thread at a time.
#pragma once

#include "protocol/framing.hpp"

#include <chrono>
#include <cstddef>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace meith::protocol {

/// A failure of the client side of the connection; `what()` is a complete sentence fragment
/// meant for the user (no trailing period).
class client_error : public std::runtime_error {
  public:
    enum class kind {
        not_running,     ///< connect: no socket file (ENOENT) or nobody listening (ECONNREFUSED)
        connect_failed,  ///< connect: any other failure (bad path, EACCES, socket(2), ...)
        not_connected,   ///< send/read on a channel that has no connection
        closed,          ///< send: the daemon closed the connection (EPIPE, ECONNRESET)
        frame_too_large, ///< read: a frame longer than the channel's bound
        invalid_frame,   ///< send_frame: the frame contains a newline
        io,              ///< any other send/recv/poll failure
    };

    /// `error_number`: the errno behind the failure, 0 when none.
    client_error(kind k, const std::string& message, int error_number = 0)
        : std::runtime_error(message), kind_(k), errno_(error_number) {}

    kind error_kind() const { return kind_; }
    int error_number() const { return errno_; }

  private:
    kind kind_;
    int errno_;
};

class client_channel {
  public:
    using clock = std::chrono::steady_clock;
    /// The CLI's bound: far above the daemon's default max_result_bytes (8 MiB).
    static constexpr std::size_t default_max_frame_bytes = 64 * 1024 * 1024;
    /// Bytes asked of recv(2) at a time.
    static constexpr std::size_t read_chunk = 64 * 1024;

    enum class read_status {
        frame,     ///< `frame` holds one non-empty line, without its `\n` / `\r\n`
        woken,     ///< `wake_fd` became readable first (nothing was consumed from it)
        closed,    ///< the daemon closed the connection (a partial last line is dropped)
        timed_out, ///< the deadline passed
    };
    struct read_result {
        read_status status;
        std::string frame;
    };

    /// `max_frame_bytes`: the longest frame `read_frame` accepts (line ending excluded).
    explicit client_channel(std::size_t max_frame_bytes = default_max_frame_bytes);
    ~client_channel();
    client_channel(client_channel&& other) noexcept;
    client_channel& operator=(client_channel&& other) noexcept;
    client_channel(const client_channel&) = delete;
    client_channel& operator=(const client_channel&) = delete;

    /// Connects to the socket at `path` (closing any previous connection). Throws
    /// client_error: `not_running` for ENOENT / ECONNREFUSED, `connect_failed` otherwise.
    void connect(const std::filesystem::path& path);

    /// Takes ownership of a connected stream socket (e.g. one end of a socketpair, in tests).
    void adopt(int fd);

    bool connected() const { return fd_ >= 0; }
    /// The socket, for setsockopt and the like (-1 when not connected). Still owned here.
    int fd() const { return fd_; }

    /// Sends `frame` plus `\n`, all of it (blocking; EINTR retried; MSG_NOSIGNAL, so a
    /// vanished daemon is an error and not SIGPIPE). `frame` must not contain `\n`
    /// (`invalid_frame`). Throws `closed` on EPIPE/ECONNRESET, `io` otherwise.
    void send_frame(std::string_view frame);

    /// Sends `bytes` verbatim, all of it (several frames, or deliberately broken input).
    void send_bytes(std::string_view bytes);

    /// Returns the next frame, waiting until `deadline` (none: forever) while also watching
    /// `wake_fd` (if >= 0; e.g. a self-pipe written by a signal handler). Frames already
    /// buffered are returned before the wake fd is looked at. ECONNRESET counts as `closed`.
    /// Throws `frame_too_large` as soon as a frame is known to be over the bound (the
    /// connection is then out of step: close it), `io` on a failing socket or poll.
    read_result read_frame(std::optional<clock::time_point> deadline, int wake_fd = -1);

    /// shutdown(SHUT_WR): tells the daemon no more requests follow; replies still arrive
    /// (docs/protocol.md §5, half-closed clients).
    void shutdown_write();

    /// Closes the socket and drops buffered input. Safe to call twice.
    void close();

  private:
    int fd_ = -1;
    std::size_t max_frame_bytes_;
    line_framer framer_;
    bool eof_ = false;
};

} // namespace meith::protocol
