// instance: the daemon's footprint in its home (docs/protocol.md §1) — the single-instance lock,
// the runtime record config.json, the instance record instances/<pid>.json, and the socket
// path checks. Plain blocking file work, done at startup and shutdown only.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

namespace meith::daemon {

/// Holds `meithd.lock` (flock) for the daemon's lifetime.
class instance_lock {
  public:
    /// Takes the lock or throws std::runtime_error naming the pid that holds it
    /// ("another meithd (pid 123) is already running with home /x").
    explicit instance_lock(const std::filesystem::path& home);
    ~instance_lock();
    instance_lock(const instance_lock&) = delete;
    instance_lock& operator=(const instance_lock&) = delete;

  private:
    int fd_ = -1;
};

/// Checks `socket` fits in sun_path and that its folder is fit (created 0700 when missing;
/// else owned by us and not group/other-writable, or sticky). Returns an error message.
std::optional<std::string> check_socket_path(const std::filesystem::path& socket);

/// Writes `home/config.json` atomically (temp + rename), keeping top-level keys it does not
/// own: {"socketPath","pid","protocol","version"}. Throws std::runtime_error on I/O failure.
/// Also records `auditPath` (our addition) so `meith audit` finds a configured log, and `log`:
/// where the daemon's own log goes (`log_file`, else "stderr", or "journal" when standard
/// error is the systemd journal: $JOURNAL_STREAM), for the CLI's messages; and `configPath`, the
/// config file a reload re-reads (--config, else HOME/meithd.toml), so `meith init` can say when
/// the running daemon reads another file.
void write_runtime_record(const std::filesystem::path& home, const std::filesystem::path& socket,
                          const std::filesystem::path& audit_path,
                          const std::filesystem::path& log_file = {},
                          const std::filesystem::path& config_file = {});

/// Writes `home/instances/<pid>.json` {"pid","socketPath","protocol","version","startedAt"}.
std::filesystem::path write_instance_record(const std::filesystem::path& home,
                                            const std::filesystem::path& socket);

/// The approver secret (PROTOCOL.md §12): `home/approver.secret`, created at first start with
/// mode 0600 holding 32 random bytes as 64 hex digits; read (trailing whitespace dropped)
/// afterwards. Throws std::runtime_error when it cannot be read or made, or when it is open to
/// group or others (a secret others can read proves nothing).
std::string load_approver_secret(const std::filesystem::path& home);

/// Remembers the daemon's home as it was at startup (its device and inode), so that a home
/// removed under a running daemon (`rm -rf ~/.meith`) can be named as the cause of what then
/// fails: the audit log, the runtime record and the lock live there. Process-wide: set once by
/// run_daemon, read by the connections when a call is refused.
void watch_home(const std::filesystem::path& home);

/// Why the home watched by watch_home is not the daemon's any more ("meithd's home X was
/// removed while meithd ran …; restart meithd: meith restart"), or nullopt while it is there
/// (or was never watched). One stat(2).
std::optional<std::string> home_gone_reason();

/// Removes instance records whose pid is no longer alive; returns how many.
std::size_t sweep_instance_records(const std::filesystem::path& home);

} // namespace meith::daemon
