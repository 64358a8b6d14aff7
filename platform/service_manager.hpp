// service_manager: meithd's side of systemd's service protocols (docs/protocol.md §12) —
// socket activation (sd_listen_fds(3): LISTEN_PID/LISTEN_FDS, the listener on fd 3) and
// readiness/status notifications (sd_notify(3): READY=1, STATUS=, RELOADING=1 +
// MONOTONIC_USEC, STOPPING=1, WATCHDOG=1 every WATCHDOG_USEC / 2).
//
// Built on libsystemd where CMake finds it (MEITH_HAVE_SYSTEMD=1). Without it (macOS, a
// minimal build) every call is a no-op: no activation is seen, no message is sent.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace meith::platform {

/// The listening socket systemd passed in, when this process was socket-activated.
struct activated_listener {
    int fd = -1;      ///< SD_LISTEN_FDS_START (3); owned by the caller from here on
    std::string path; ///< its bound path (getsockname), the socket path for config.json
};

/// Takes the listener from the environment (sd_listen_fds(3)). LISTEN_PID must be this
/// process and LISTEN_FDS exactly 1, a Unix stream socket in the listening state with a path;
/// the variables are unset either way so tool hosts never see them.
/// Returns nullopt when not activated (no LISTEN_FDS, or LISTEN_PID names another process);
/// throws std::runtime_error with a message for the user when the passed descriptors are
/// not what meithd can serve (several sockets, a datagram or TCP socket, an abstract name).
std::optional<activated_listener> take_activated_listener();

/// Sends sd_notify(3) messages when NOTIFY_SOCKET is set; otherwise does nothing. Stateless
/// apart from the watchdog interval read once at construction (WATCHDOG_USEC, honoured only
/// when WATCHDOG_PID is unset or this process).
class service_notifier {
  public:
    service_notifier();

    /// True when NOTIFY_SOCKET is set (and libsystemd is built in).
    bool enabled() const { return enabled_; }
    /// How often to send WATCHDOG=1 (half of WATCHDOG_USEC), or nullopt when not asked.
    std::optional<std::chrono::microseconds> watchdog_interval() const { return watchdog_; }

    /// READY=1 plus STATUS=`status`.
    void ready(std::string_view status) const;
    /// STATUS=`status` alone.
    void status(std::string_view status) const;
    /// RELOADING=1 with MONOTONIC_USEC=now (CLOCK_MONOTONIC), as systemd 253+ expects.
    void reloading() const;
    /// STOPPING=1.
    void stopping() const;
    /// WATCHDOG=1.
    void watchdog() const;

  private:
    void send(const std::string& message) const;
    bool enabled_ = false;
    std::optional<std::chrono::microseconds> watchdog_;
};

} // namespace meith::platform
