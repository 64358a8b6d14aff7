// End-to-end: a tool reaches only the Unix sockets it declares (issue 40, defects 1-4;
// docs/protocol.md §15 "Unix sockets", docs/security.md). Each case runs the real service a
// probe of main at 5308421 reached — a session bus (dbus-daemon with GNOME Keyring on it), the
// user's ssh-agent holding a key, a tmux server, a root-owned socket under /run — where the
// probe found it, and has the hostile probe tool (tests/exec/escape_probe.py) talk to it:
// confined, it cannot; with `sandbox = "off"` (the control) it can, so each case would fail if
// the service were not really there.
#include "daemon_fixture.hpp"
#include "escape_probe.hpp"

#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>
#include <string>
#include <sys/socket.h>
#include <sys/un.h>
#include <thread>
#include <unistd.h>

using namespace meith::test;

namespace e2e_sockets_test { // one namespace per file: the tests build as unity batches

namespace {

/// A listening Unix socket at `path` (its folder made), closed and removed at scope exit.
struct unix_listener {
    explicit unix_listener(const fs::path& path) : path_(path) {
        fs::create_directories(path.parent_path());
        fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        REQUIRE(fd_ >= 0);
        sockaddr_un addr{};
        addr.sun_family = AF_UNIX;
        REQUIRE(path.string().size() < sizeof addr.sun_path);
        std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
        REQUIRE(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
        REQUIRE(::listen(fd_, 16) == 0);
    }
    ~unix_listener() {
        ::close(fd_);
        std::error_code ec;
        fs::remove(path_, ec);
    }
    unix_listener(const unix_listener&) = delete;
    unix_listener& operator=(const unix_listener&) = delete;

  private:
    fs::path path_;
    int fd_ = -1;
};

/// Waits (bounded) until `path` exists: a service made its socket.
void wait_for_path(const fs::path& path, std::chrono::milliseconds timeout = 10s) {
    const auto until = std::chrono::steady_clock::now() + timeout;
    while (!fs::exists(path)) {
        if (std::chrono::steady_clock::now() > until) FAIL("no " << path << " in time");
        std::this_thread::sleep_for(20ms);
    }
}

bool have(const char* program) {
    return std::system((std::string("command -v ") + program + " >/dev/null 2>&1").c_str()) == 0;
}

/// A fresh name under /tmp like the ones services pick there (dbus-run-session's
/// /tmp/dbus-XXXXXXXXXX, ssh-agent's /tmp/ssh-XXXXXXXXXX).
fs::path fresh_tmp_name(const std::string& stem) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "/tmp/%s-%d-%lx", stem.c_str(), static_cast<int>(::getpid()),
                  static_cast<unsigned long>(
                      std::chrono::steady_clock::now().time_since_epoch().count() & 0xffffffUL));
    return buf;
}

/// A tool with `accesses-network` (plain, and behind the egress proxy), one with
/// `starts-process` too, and the unconfined control.
std::string attackers() {
    return probe_source("net", "[\"read-only\", \"accesses-network\"]") +
           probe_source("proxied", "[\"read-only\", \"accesses-network\"]",
                        "network = { allow = [\"*\"] }") +
           probe_source("spawner", "[\"read-only\", \"accesses-network\", \"starts-process\"]") +
           probe_source("control", "[\"read-only\", \"accesses-network\"]", "sandbox = \"off\"") +
           policy;
}

/// Checks that every confined attacker fails to open the socket (no Unix socket without
/// sandbox_paths.sockets: EACCES from socket(2)) and that the control reaches it; the
/// control's answer.
json attack_all(client& c, const json& attack) {
    for (const char* tool : {"net", "proxied", "spawner"}) {
        INFO(tool);
        const json r = probe(c, tool, attack);
        INFO(r.dump());
        CHECK(r["done"] == false);
        CHECK(r.value("code", "") == "EACCES");
    }
    const json control = probe(c, "control", attack);
    INFO(control.dump());
    REQUIRE(control["done"] == true);
    return control;
}

/// D-Bus's first words (the SASL EXTERNAL handshake, dbus-specification "Authentication"):
/// a NUL, then AUTH EXTERNAL with our uid in hex of its decimal digits.
std::string dbus_auth_hex() {
    const std::string uid = std::to_string(::geteuid());
    std::string hex_uid;
    char b[3];
    for (char ch : uid) {
        std::snprintf(b, sizeof b, "%02x", static_cast<unsigned char>(ch));
        hex_uid += b;
    }
    const std::string line = "AUTH EXTERNAL " + hex_uid + "\r\n";
    std::string out = "00";
    for (char ch : line) {
        std::snprintf(b, sizeof b, "%02x", static_cast<unsigned char>(ch));
        out += b;
    }
    return out;
}

} // namespace

TEST_CASE("sockets (40.1): a tool with accesses-network cannot reach a session bus in /tmp "
          "(dbus-daemon with GNOME Keyring)",
          "[e2e][sandbox][sockets]") {
    REQUIRE_KERNEL_SANDBOX(true);
    if (!have("dbus-daemon") || !have("gnome-keyring-daemon"))
        SKIP_TEST("dbus-daemon or gnome-keyring-daemon is not installed (scripts/install-deps)");
    const fs::path dir = fresh_tmp_name("dbus");
    fs::create_directories(dir);
    const fs::path bus = dir / "bus";
    const std::string address = "unix:path=" + bus.string();
    background_process dbus({"dbus-daemon", "--session", "--nofork", "--address=" + address});
    wait_for_path(bus);
    // The user's keyring on that bus, unlocked: what the probe read through it.
    background_process keyring({"sh", "-c",
                                "printf pw | gnome-keyring-daemon --unlock --components=secrets "
                                "--foreground"},
                               {{"DBUS_SESSION_BUS_ADDRESS", address}, {"HOME", dir.string()}});
    // meithd's own environment does not name the bus (as under `meith service install`).
    env_override no_bus("DBUS_SESSION_BUS_ADDRESS", "");
    daemon_process d(attackers());
    client c(d.socket());
    const json control = attack_all(
        c,
        {{"action", "unix"}, {"path", bus.string()}, {"send_hex", dbus_auth_hex()}, {"read", 256}});
    // The bus answered the handshake: a tool with a socket would be on the user's bus.
    CHECK_THAT(control.value("reply_text", ""), Catch::StartsWith("OK "));
    std::error_code ec;
    fs::remove_all(dir, ec);
}

TEST_CASE("sockets (40.2): a tool cannot have the user's ssh-agent sign, in /tmp/ssh-* or the "
          "runtime dir",
          "[e2e][sandbox][sockets]") {
    REQUIRE_KERNEL_SANDBOX(true);
    if (!have("ssh-agent") || !have("ssh-add") || !have("ssh-keygen"))
        SKIP_TEST("openssh-client is not installed (scripts/install-deps)");
    temp_dir keys, runtime;
    REQUIRE(std::system(
                ("ssh-keygen -q -t ed25519 -N '' -C meith-test -f " + (keys.path / "id").string())
                    .c_str()) == 0);
    const fs::path login_dir = fresh_tmp_name("ssh");
    // `eval $(ssh-agent)` in a login shell, and the common user unit's socket.
    const fs::path login_socket = login_dir / "agent.4242";
    const fs::path unit_socket = runtime.path / "ssh-agent.socket";
    fs::create_directories(login_dir);
    background_process login_agent({"ssh-agent", "-D", "-a", login_socket.string()});
    background_process unit_agent({"ssh-agent", "-D", "-a", unit_socket.string()});
    wait_for_path(login_socket);
    wait_for_path(unit_socket);
    for (const auto& s : {login_socket, unit_socket})
        REQUIRE(std::system(("SSH_AUTH_SOCK=" + s.string() + " ssh-add -q " +
                             (keys.path / "id").string() + " 2>/dev/null")
                                .c_str()) == 0);
    env_override no_agent("SSH_AUTH_SOCK", "");
    env_override xdg("XDG_RUNTIME_DIR", runtime.path.string());
    daemon_process d(attackers());
    client c(d.socket());
    for (const auto& s : {login_socket, unit_socket}) {
        INFO(s);
        // SSH_AGENTC_REQUEST_IDENTITIES (draft-miller-ssh-agent §4.4): length 1, type 11.
        const json control = attack_all(
            c,
            {{"action", "unix"}, {"path", s.string()}, {"send_hex", "000000010b"}, {"read", 4096}});
        // SSH_AGENT_IDENTITIES_ANSWER (12) with one key: the agent would have signed.
        CHECK(control.value("reply_hex", "").substr(8, 10) == "0c00000001");
    }
    std::error_code ec;
    fs::remove_all(login_dir, ec);
}

TEST_CASE("sockets (40.3): a tool that may start processes cannot drive the user's tmux "
          "(TMUX_TMPDIR, or a TMPDIR that is not /tmp)",
          "[e2e][sandbox][sockets]") {
    REQUIRE_KERNEL_SANDBOX(true);
    if (!have("tmux")) SKIP_TEST("tmux is not installed (scripts/install-deps)");
    temp_dir tmux_dir;
    const fs::path sock = tmux_dir.path / "tmux-" / "default";
    fs::create_directories(sock.parent_path());
    fs::permissions(sock.parent_path(), fs::perms::owner_all);
    REQUIRE(std::system(("tmux -S " + sock.string() + " -f /dev/null new-session -d -s meith-probe")
                            .c_str()) == 0);
    struct stop_tmux {
        fs::path s;
        ~stop_tmux() {
            std::system(("tmux -S " + s.string() + " kill-server 2>/dev/null").c_str());
        }
    } stop{sock};
    env_override tmp("TMUX_TMPDIR", tmux_dir.path.string());
    daemon_process d(attackers());
    client c(d.socket());
    attack_all(c, {{"action", "unix"}, {"path", sock.string()}});
}

TEST_CASE("sockets (40.4): as root, no tool connects to a root service's socket under /run",
          "[e2e][sandbox][sockets][root]") {
    REQUIRE_KERNEL_SANDBOX(true);
    if (::geteuid() != 0) SKIP_TEST("needs root: it plants a socket under /run");
    const fs::path dir = "/run/meith-probe-" + std::to_string(::getpid());
    unix_listener private_socket(dir / "private"); // as /run/systemd/private is
    daemon_process d(attackers());
    client c(d.socket());
    attack_all(c, {{"action", "unix"}, {"path", (dir / "private").string()}});
    std::error_code ec;
    fs::remove_all(dir, ec);
}

TEST_CASE("sockets: a source reaches the sockets it declares and no other, and the places "
          "services put sockets are empty in its view",
          "[e2e][sandbox][sockets]") {
    REQUIRE_KERNEL_SANDBOX(true);
    // The other socket in /var/tmp, one of the private places.
    temp_dir declared_dir, var_tmp(fs::path("/var/tmp"));
    const fs::path other_dir = var_tmp.path / "agent";
    fs::create_directories(other_dir);
    const fs::path declared = declared_dir.path / "db.sock";
    const fs::path other = other_dir / "agent.sock";
    unix_listener a(declared), b(other);
    const std::string sockets =
        "sandbox_paths = { sockets = [" + json(declared.string()).dump() + "] }";
    daemon_process d(probe_source("db", "[\"read-only\", \"accesses-network\"]", sockets) +
                     probe_source("db_offline", "[\"read-only\"]", sockets) +
                     probe_source("net_only", "[\"read-only\", \"accesses-network\"]") + policy);
    client c(d.socket());
    for (const char* tool : {"db", "db_offline"}) {
        INFO(tool);
        CHECK(probe(c, tool, {{"action", "unix"}, {"path", declared.string()}})["done"] == true);
        // Another socket in /tmp is not in its view at all.
        const json r = probe(c, tool, {{"action", "unix"}, {"path", other.string()}});
        CHECK(r["done"] == false);
        CHECK(r.value("code", "") == "ENOENT");
        // Nor is anything else in /tmp, /run or /dev/shm but what it was given.
        const json tmp = probe(c, tool, {{"action", "read"}, {"path", other_dir.string()}});
        CHECK(tmp.value("code", "") == "ENOENT");
    }
    // The status says which sockets it has.
    CHECK(source_status(c, "db")["sandbox"]["unix"] == "declared");
    CHECK(source_status(c, "net_only")["sandbox"]["unix"] == "none");
}

} // namespace e2e_sockets_test
