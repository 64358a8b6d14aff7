#include "daemon/instance.hpp"

#include "audit/audit_log.hpp"
#include "config/paths.hpp"
#include "permissions/secret.hpp"

#include <cerrno>
#include <charconv>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace meith::daemon {

namespace fs = std::filesystem;

instance_lock::instance_lock(const fs::path& home) {
    const auto path = home / "meithd.lock";
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd_ < 0)
        throw std::runtime_error(
            fmt::format("cannot open {}: {}", path.string(), std::strerror(errno)));
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
        char buf[32] = {};
        const auto n = ::pread(fd_, buf, sizeof buf - 1, 0);
        std::string pid = n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : "?";
        while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' '))
            pid.pop_back();
        ::close(fd_);
        fd_ = -1;
        throw std::runtime_error(fmt::format(
            "another meithd (pid {}) is already running with home {}", pid, home.string()));
    }
    const std::string pid = std::to_string(::getpid()) + "\n";
    if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, pid.data(), pid.size(), 0) < 0)
        throw std::runtime_error(
            fmt::format("cannot write {}: {}", path.string(), std::strerror(errno)));
}

instance_lock::~instance_lock() {
    if (fd_ >= 0) ::close(fd_); // releases the flock
}

std::optional<std::string> check_socket_path(const fs::path& socket) {
    const std::size_t max = sizeof(sockaddr_un{}.sun_path) - 1;
    if (socket.native().size() > max)
        return fmt::format("socket path {} is {} bytes, longer than the {} bytes a Unix socket "
                           "address allows; choose a shorter --socket or [socket] path",
                           socket.string(), socket.native().size(), max);
    if (!socket.is_absolute())
        return fmt::format("socket path {} must be absolute", socket.string());
    return config::ensure_private_dir(socket.parent_path(), /*allow_sticky=*/true);
}

namespace {

void write_atomically(const fs::path& path, const std::string& text) {
    const fs::path tmp = path.string() + ".tmp." + std::to_string(::getpid());
    {
        // Created fresh and private, never through a link planted at the temporary name.
        ::unlink(tmp.c_str());
        const int fd =
            ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0)
            throw std::runtime_error(
                fmt::format("cannot write {}: {}", tmp.string(), std::strerror(errno)));
        std::size_t done = 0;
        while (done < text.size()) {
            const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) {
                const int err = errno;
                ::close(fd);
                throw std::runtime_error(
                    fmt::format("cannot write {}: {}", tmp.string(), std::strerror(err)));
            }
            done += static_cast<std::size_t>(n);
        }
        ::close(fd);
    }
    std::error_code ec;
    fs::rename(tmp, path, ec);
    if (ec) {
        fs::remove(tmp, ec);
        throw std::runtime_error(fmt::format("cannot replace {}: {}", path.string(), ec.message()));
    }
}

} // namespace

void write_runtime_record(const fs::path& home, const fs::path& socket, const fs::path& audit_path,
                          const fs::path& log_file, const fs::path& config_file) {
    const auto path = home / "config.json";
    nlohmann::json record = nlohmann::json::object();
    if (std::ifstream in(path); in) {
        std::stringstream ss;
        ss << in.rdbuf();
        auto old = nlohmann::json::parse(ss.str(), nullptr, /*allow_exceptions=*/false);
        if (old.is_object()) record = std::move(old); // keep keys we do not own (§1)
    }
    record["socketPath"] = socket.string();
    record["pid"] = ::getpid();
    record["protocol"] = 1;
    record["version"] = MEITH_VERSION;
    record["auditPath"] = audit_path.string();
    if (!config_file.empty()) record["configPath"] = config_file.string();
    record["log"] = !log_file.empty()               ? log_file.string()
                    : std::getenv("JOURNAL_STREAM") ? std::string("journal")
                                                    : std::string("stderr");
    write_atomically(path, record.dump(2) + "\n");
}

namespace {
/// Nothing in the home is followed through a symbolic link (a planted `instances` link would
/// make the sweep delete files elsewhere).
void refuse_link(const fs::path& p) {
    std::error_code ec;
    if (fs::is_symlink(fs::symlink_status(p, ec)))
        throw std::runtime_error(fmt::format(
            "{} is a symbolic link; meithd does not follow links in its home (remove it)",
            p.string()));
}
} // namespace

fs::path write_instance_record(const fs::path& home, const fs::path& socket) {
    const auto dir = home / "instances";
    refuse_link(dir);
    if (auto err = config::ensure_private_dir(dir, false)) throw std::runtime_error(*err);
    const auto path = dir / (std::to_string(::getpid()) + ".json");
    nlohmann::json record = {{"pid", ::getpid()},
                             {"socketPath", socket.string()},
                             {"protocol", 1},
                             {"version", MEITH_VERSION},
                             {"startedAt", audit::now_rfc3339()}};
    write_atomically(path, record.dump(2) + "\n");
    return path;
}

std::string load_approver_secret(const fs::path& home) {
    const fs::path path = home / "approver.secret";
    // O_EXCL: made once; a second daemon start (or a race with one) reads what is there.
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd >= 0) {
        const std::string secret = permissions::random_hex(32) + "\n";
        const bool ok =
            ::write(fd, secret.data(), secret.size()) == static_cast<ssize_t>(secret.size());
        ::close(fd);
        if (!ok) {
            ::unlink(path.c_str());
            throw std::runtime_error(
                fmt::format("cannot write {}: {}", path.string(), std::strerror(errno)));
        }
    } else if (errno != EEXIST) {
        throw std::runtime_error(
            fmt::format("cannot create {}: {}", path.string(), std::strerror(errno)));
    }
    // Read through one descriptor (no symlink followed), checked with fstat: what is checked
    // is what is read.
    const int rfd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (rfd < 0)
        throw std::runtime_error(
            fmt::format("cannot open {}: {}", path.string(), std::strerror(errno)));
    struct stat st {};
    if (::fstat(rfd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != ::geteuid()) {
        ::close(rfd);
        throw std::runtime_error(
            fmt::format("{} is not a regular file owned by this user", path.string()));
    }
    if ((st.st_mode & 077) != 0) {
        ::close(rfd);
        throw std::runtime_error(fmt::format(
            "{} is readable or writable by group or others (mode {:o}); run chmod 600 on it",
            path.string(), st.st_mode & 0777));
    }
    std::string secret;
    char buf[256];
    ssize_t n;
    while (secret.size() < 4096 &&
           ((n = ::read(rfd, buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR)))
        if (n > 0) secret.append(buf, static_cast<std::size_t>(n));
    ::close(rfd);
    if (const auto nl = secret.find('\n'); nl != std::string::npos) secret.resize(nl);
    while (!secret.empty() && std::isspace(static_cast<unsigned char>(secret.back())))
        secret.pop_back();
    if (secret.size() < 32)
        throw std::runtime_error(fmt::format(
            "{} holds no usable secret (under 32 characters); delete it and restart meithd to "
            "make a new one",
            path.string()));
    return secret;
}

namespace {

struct watched_home {
    fs::path path;
    dev_t dev = 0;
    ino_t ino = 0;
    bool set = false;
};

watched_home& the_home() {
    static watched_home h;
    return h;
}

} // namespace

void watch_home(const fs::path& home) {
    struct stat st {};
    if (::stat(home.c_str(), &st) != 0) return;
    the_home() = {home, st.st_dev, st.st_ino, true};
}

std::optional<std::string> home_gone_reason() {
    const watched_home& h = the_home();
    if (!h.set) return std::nullopt;
    struct stat st {};
    const bool missing = ::stat(h.path.c_str(), &st) != 0 && errno == ENOENT;
    const bool replaced = !missing && (st.st_dev != h.dev || st.st_ino != h.ino);
    if (!missing && !replaced) return std::nullopt;
    return fmt::format("meithd's home {} was {} while meithd ran, and with it the audit log, "
                       "the lock and the runtime record: restart meithd (`meith restart`, or "
                       "stop it and run any meith command) to make them again",
                       h.path.string(), missing ? "removed" : "removed and made again");
}

std::size_t sweep_instance_records(const fs::path& home) {
    std::size_t removed = 0;
    std::error_code ec;
    refuse_link(home / "instances");
    for (const auto& entry : fs::directory_iterator(home / "instances", ec)) {
        if (!entry.is_regular_file(ec) || entry.is_symlink(ec)) continue;
        const auto stem = entry.path().stem().string();
        if (entry.path().extension() != ".json" || stem.empty() ||
            stem.find_first_not_of("0123456789") != std::string::npos)
            continue;
        // A name too long for a pid (20 digits) is nobody's record: skipped, not thrown on.
        long value = 0;
        const auto [end, err] = std::from_chars(stem.data(), stem.data() + stem.size(), value);
        if (err != std::errc{} || end != stem.data() + stem.size() || value <= 0 ||
            value > std::numeric_limits<pid_t>::max())
            continue;
        const auto pid = static_cast<pid_t>(value);
        if (pid == ::getpid()) continue;
        if (::kill(pid, 0) != 0 && errno == ESRCH) {
            std::error_code rm;
            if (fs::remove(entry.path(), rm)) ++removed;
        }
    }
    return removed;
}

} // namespace meith::daemon
