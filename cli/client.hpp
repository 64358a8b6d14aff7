// client: a blocking connection to meithd's unix socket, one `\n`-terminated frame per line
// (docs/protocol.md §2). Transport only: frames are strings here; JSON lives in session.hpp.
#pragma once

#include <chrono>
#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace meith::cli {

class client {
  public:
    using clock = std::chrono::steady_clock;
    static constexpr std::size_t default_max_frame_bytes = 64 * 1024 * 1024;

    enum class read_status {
        frame,     ///< `frame` holds one line, without its `\n`
        woken,     ///< `wake_fd` became readable first
        closed,    ///< the daemon closed the connection (a partial last line is dropped)
        timed_out, ///< the deadline passed
    };
    struct read_result {
        read_status status;
        std::string frame;
    };

    explicit client(std::size_t max_frame_bytes = default_max_frame_bytes)
        : max_frame_bytes_(max_frame_bytes) {}
    ~client();
    client(client&& other) noexcept;
    client& operator=(client&& other) noexcept;
    client(const client&) = delete;
    client& operator=(const client&) = delete;

    /// Connects to the socket at `path`; throws cli_error(exit_error) naming the cause.
    void connect(const std::filesystem::path& path);

    /// Sends `frame` plus `\n`; `frame` must not contain a newline. Throws cli_error on failure.
    void send_frame(std::string_view frame);

    /// Returns the next non-empty line, waiting until `deadline` (none: forever) while also
    /// watching `wake_fd` (if >= 0). Throws cli_error when a line exceeds the frame limit or
    /// the socket fails.
    read_result read_frame(std::optional<clock::time_point> deadline, int wake_fd = -1);

    /// "cli_<pid>_<n>", unique per process.
    std::string next_request_id();

  private:
    std::optional<std::string> take_line();
    void close_fd();

    int fd_ = -1;
    std::size_t max_frame_bytes_;
    std::string buffer_;
    std::size_t start_ = 0; ///< bytes before this are consumed lines
    std::size_t scan_ = 0;  ///< no `\n` in [start_, scan_)
    bool eof_ = false;
    unsigned long counter_ = 0;
};

} // namespace meith::cli
