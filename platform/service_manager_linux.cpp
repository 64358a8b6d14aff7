#include "platform/service_manager.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fmt/format.h>
#include <stdexcept>
#include <system_error>

#if MEITH_HAVE_SYSTEMD
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <systemd/sd-daemon.h>
#endif

namespace meith::platform {

#if MEITH_HAVE_SYSTEMD

std::optional<activated_listener> take_activated_listener() {
    // unset_environment = 1: LISTEN_PID, LISTEN_FDS and LISTEN_FDNAMES are gone after this,
    // whatever the outcome, so no tool host inherits them.
    const int n = ::sd_listen_fds(1);
    if (n < 0)
        throw std::runtime_error(
            fmt::format("socket activation: LISTEN_FDS/LISTEN_PID are malformed ({})",
                        std::system_category().message(-n)));
    if (n == 0) return std::nullopt;
    if (n != 1)
        throw std::runtime_error(
            fmt::format("socket activation: systemd passed {} sockets; meithd serves exactly one "
                        "(one ListenStream= in meithd.socket)",
                        n));
    const int fd = SD_LISTEN_FDS_START;
    if (::sd_is_socket_unix(fd, SOCK_STREAM, 1, nullptr, 0) <= 0)
        throw std::runtime_error("socket activation: fd 3 is not a listening Unix stream socket "
                                 "(meithd.socket needs ListenStream=/path, not a port or "
                                 "ListenDatagram=)");
    sockaddr_un addr{};
    socklen_t len = sizeof addr;
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
        throw std::runtime_error("socket activation: getsockname on fd 3 failed");
    const std::size_t path_len =
        len > offsetof(sockaddr_un, sun_path) ? len - offsetof(sockaddr_un, sun_path) : 0;
    if (path_len == 0 || addr.sun_path[0] == '\0')
        throw std::runtime_error("socket activation: the socket on fd 3 has no path (an abstract "
                                 "or unnamed socket); clients find meithd by a path");
    std::string path(addr.sun_path, ::strnlen(addr.sun_path, path_len));
    ::fcntl(fd, F_SETFD, FD_CLOEXEC);
    return activated_listener{fd, std::move(path)};
}

service_notifier::service_notifier() {
    const char* socket = std::getenv("NOTIFY_SOCKET");
    enabled_ = socket != nullptr && *socket != '\0';
    std::uint64_t usec = 0;
    if (::sd_watchdog_enabled(0, &usec) > 0 && usec > 0)
        watchdog_ = std::chrono::microseconds(usec / 2);
}

void service_notifier::send(const std::string& message) const {
    if (enabled_) ::sd_notify(0, message.c_str());
}

void service_notifier::reloading() const {
    timespec ts{};
    ::clock_gettime(CLOCK_MONOTONIC, &ts);
    const auto usec = static_cast<std::uint64_t>(ts.tv_sec) * 1000000u +
                      static_cast<std::uint64_t>(ts.tv_nsec) / 1000u;
    send(fmt::format("RELOADING=1\nMONOTONIC_USEC={}", usec));
}

#else // no libsystemd: nothing is activated, nothing is sent

std::optional<activated_listener> take_activated_listener() {
    return std::nullopt;
}
service_notifier::service_notifier() = default;
void service_notifier::send(const std::string&) const {
}
void service_notifier::reloading() const {
}

#endif

void service_notifier::ready(std::string_view status) const {
    send(fmt::format("READY=1\nSTATUS={}", status));
}

void service_notifier::status(std::string_view status) const {
    send(fmt::format("STATUS={}", status));
}

void service_notifier::stopping() const {
    send("STOPPING=1\nSTATUS=stopping");
}

void service_notifier::watchdog() const {
    send("WATCHDOG=1");
}

} // namespace meith::platform
