// End-to-end: meithd as a user service (docs/protocol.md §12) — socket activation through
// systemd-socket-activate (Debian's systemd package), sd_notify messages caught on a test
// NOTIFY_SOCKET, client auto-start from a cold home and --no-autostart, and what
// `meith service install|uninstall|status --dry-run` would do, its units checked with
// `systemd-analyze verify` and its launchd plist with xmllint and Python's plistlib.
#include "daemon_fixture.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <csignal>
#include <fcntl.h>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <poll.h>
#include <sstream>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

using namespace meith::test;

namespace e2e_service_test { // one namespace per file: the tests build as unity batches

namespace {

/// Starts `argv` with `env` added, stdin /dev/null, stdout+stderr to `log`. Not waited for.
pid_t start(const std::vector<std::string>& argv,
            const std::vector<std::pair<std::string, std::string>>& env, const fs::path& log) {
    const pid_t pid = ::fork();
    if (pid < 0) throw std::runtime_error("fork failed");
    if (pid == 0) {
        const int out = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
        const int in = ::open("/dev/null", O_RDONLY);
        ::dup2(in, 0);
        ::dup2(out, 1);
        ::dup2(out, 2);
        ::unsetenv("XDG_RUNTIME_DIR");
        ::unsetenv("MEITH_HOME");
        ::unsetenv("NOTIFY_SOCKET");
        ::unsetenv("LISTEN_FDS");
        ::unsetenv("LISTEN_PID");
        for (const auto& [k, v] : env)
            ::setenv(k.c_str(), v.c_str(), 1);
        std::vector<char*> args;
        for (const auto& a : argv)
            args.push_back(const_cast<char*>(a.c_str()));
        args.push_back(nullptr);
        ::execvp(args[0], args.data());
        ::_exit(127);
    }
    return pid;
}

/// The exit status of our child `pid`, or -1 if it is still running after `timeout`.
int wait_child(pid_t pid, std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    int status = 0;
    while (std::chrono::steady_clock::now() < deadline) {
        if (::waitpid(pid, &status, WNOHANG) == pid)
            return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        std::this_thread::sleep_for(10ms);
    }
    return -1;
}

/// Kills and reaps our child at scope exit unless it was reaped already (pid set to -1).
struct child_guard {
    pid_t pid;
    ~child_guard() {
        if (pid > 0) {
            ::kill(pid, SIGKILL);
            ::waitpid(pid, nullptr, 0);
        }
    }
};

bool wait_for(const std::function<bool()>& pred, std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
        if (pred()) return true;
        std::this_thread::sleep_for(10ms);
    }
    return pred();
}

/// Connects to `path` once something listens there: systemd-socket-activate makes the socket
/// file at bind(2) and listens a moment later, and a connection in between is refused (under
/// load the moment is long). Retries until `timeout`; throws the last error then.
std::unique_ptr<client> connect_when_listening(const fs::path& path,
                                               std::chrono::milliseconds timeout) {
    const auto until = std::chrono::steady_clock::now() + timeout;
    for (;;) {
        try {
            return std::make_unique<client>(path);
        } catch (const std::exception&) {
            if (std::chrono::steady_clock::now() >= until) throw;
        }
        std::this_thread::sleep_for(20ms);
    }
}

bool alive(pid_t pid) {
    return pid > 0 && ::kill(pid, 0) == 0;
}

/// A datagram socket standing in for systemd's NOTIFY_SOCKET: collects sd_notify messages.
class notify_listener {
  public:
    explicit notify_listener(const fs::path& path) : path_(path) {
        fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        sockaddr_un addr{};
        addr.sun_family = AF_UNIX;
        std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path.c_str());
        if (::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
            throw std::runtime_error("bind notify socket failed");
    }
    ~notify_listener() { ::close(fd_); }

    /// Waits for a message containing `needle` (received after the last one matched), and
    /// returns it; throws with every message seen on timeout.
    std::string wait_for(const std::string& needle, std::chrono::milliseconds timeout = 10s) {
        const auto deadline = std::chrono::steady_clock::now() + timeout;
        for (;;) {
            while (next_ < seen_.size()) {
                const std::string& m = seen_[next_++];
                if (m.find(needle) != std::string::npos) return m;
            }
            const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                deadline - std::chrono::steady_clock::now());
            if (left.count() <= 0) {
                std::string all;
                for (const auto& m : seen_)
                    all += "[" + m + "] ";
                throw std::runtime_error("no sd_notify message with " + needle + "; saw " + all);
            }
            pollfd p{fd_, POLLIN, 0};
            if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
            char buf[4096];
            const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
            if (n > 0) seen_.emplace_back(buf, static_cast<std::size_t>(n));
        }
    }
    const std::vector<std::string>& seen() const { return seen_; }

  private:
    fs::path path_;
    int fd_ = -1;
    std::vector<std::string> seen_;
    std::size_t next_ = 0;
};

json read_record(const fs::path& home) {
    std::ifstream in(home / "config.json");
    return json::parse(in, nullptr, false);
}

/// The files a `meith service ... --dry-run` would write: path -> text.
std::map<std::string, std::string> planned_writes(const std::string& out) {
    std::map<std::string, std::string> files;
    std::istringstream in(out);
    std::string line, current;
    while (std::getline(in, line)) {
        if (line.rfind("write ", 0) == 0) {
            current = line.substr(6, line.find(" (mode") - 6);
            files[current];
        } else if (line.rfind("run: ", 0) == 0 || line.rfind("remove ", 0) == 0) {
            current.clear();
        } else if (!current.empty()) {
            files[current] += line + "\n";
        }
    }
    return files;
}

} // namespace

TEST_CASE("socket activation: meithd serves the socket it is passed, holds early frames until "
          "ready and leaves the socket file at exit",
          "[e2e][service]") {
    temp_dir home;
    {
        std::ofstream(home.path / "meithd.toml")
            << host_source_toml("th", {"--start-delay-ms=400"});
    }
    const fs::path sock = home.path / "activated.sock";
    const pid_t pid = start({"systemd-socket-activate", "-l", sock.string(), MEITH_MEITHD, "--home",
                             home.path.string()},
                            {}, home.path / "log");
    child_guard guard{pid};
    REQUIRE(wait_for([&] { return fs::exists(sock); }, 10s));

    // The first connection starts meithd; its frames arrive before the slow source registered.
    const auto first = connect_when_listening(sock, 10s);
    client& c = *first;
    c.send(
        {{"type", "hello"}, {"protocol", 1}, {"requestId", "h"}, {"clientInfo", {{"name", "t"}}}});
    c.send({{"type", "list_tools"}, {"protocol", 1}, {"requestId", "l"}});
    const json hello = c.read(15s);
    CHECK(hello["type"] == "hello_result");
    const json list = c.read(15s);
    REQUIRE(list["type"] == "tools_list");
    std::vector<std::string> names;
    for (const auto& t : list["tools"])
        names.push_back(t["name"]);
    // Served only once ready: the slow source's tools are there.
    CHECK(std::count(names.begin(), names.end(), "t_echo") == 1);

    const json rec = read_record(home.path);
    CHECK(rec["socketPath"] == sock.string());
    CHECK(rec["pid"] == pid); // systemd-socket-activate execs meithd in place
    bool activated = false;
    for (const auto& line : [&] {
             std::vector<json> v;
             std::ifstream in(home.path / "audit.jsonl");
             for (std::string l; std::getline(in, l);)
                 v.push_back(json::parse(l));
             return v;
         }())
        if (line["event"] == "daemon_start") activated = line.value("socketActivated", false);
    CHECK(activated);

    ::kill(pid, SIGTERM);
    CHECK(wait_child(pid, 15s) == 0);
    guard.pid = -1;
    CHECK(fs::exists(sock)); // systemd's socket: never unlinked by meithd
    CHECK_THAT(slurp(home.path / "log"), Catch::Contains("socket-activated"));
}

TEST_CASE("socket activation: more than one passed socket is a clear startup error",
          "[e2e][service]") {
    temp_dir home;
    const fs::path a = home.path / "a.sock", b = home.path / "b.sock";
    const pid_t pid = start({"systemd-socket-activate", "-l", a.string(), "-l", b.string(),
                             MEITH_MEITHD, "--home", home.path.string()},
                            {}, home.path / "log");
    child_guard guard{pid};
    REQUIRE(wait_for([&] { return fs::exists(a); }, 10s));
    connect_when_listening(a, 10s); // wakes it; meithd refuses before accepting
    CHECK(wait_child(pid, 15s) == 1);
    guard.pid = -1;
    CHECK_THAT(slurp(home.path / "log"), Catch::Contains("systemd passed 2 sockets"));
    CHECK_FALSE(fs::exists(home.path / "config.json"));
}

TEST_CASE("socket activation: LISTEN_FDS meant for another process is ignored and meithd binds "
          "its own socket",
          "[e2e][service]") {
    temp_dir home;
    const fs::path sock = home.path / "own.sock";
    // LISTEN_PID 1 is not meithd: sd_listen_fds(3) must not take fd 3 (here /dev/null's slot
    // or nothing at all) for a listener.
    const pid_t pid = start({MEITH_MEITHD, "--home", home.path.string(), "--socket", sock.string()},
                            {{"LISTEN_FDS", "1"}, {"LISTEN_PID", "1"}}, home.path / "log");
    child_guard guard{pid};
    REQUIRE(wait_for([&] { return fs::exists(home.path / "config.json"); }, 15s));
    CHECK(read_record(home.path)["socketPath"] == sock.string());
    client c(sock);
    c.send({{"type", "hello"}, {"protocol", 1}, {"requestId", "h"}});
    CHECK(c.read()["type"] == "hello_result");
    ::kill(pid, SIGTERM);
    CHECK(wait_child(pid, 15s) == 0);
    guard.pid = -1;
    CHECK_FALSE(fs::exists(sock)); // its own socket: removed at exit
    CHECK_THAT(slurp(home.path / "log"), !Catch::Contains("socket-activated"));
}

TEST_CASE("sd_notify: READY, STATUS, WATCHDOG, RELOADING and STOPPING reach NOTIFY_SOCKET",
          "[e2e][service]") {
    temp_dir home;
    notify_listener notify(home.path / "notify.sock");
    const pid_t pid = start(
        {MEITH_MEITHD, "--home", home.path.string(), "--socket", (home.path / "d.sock").string()},
        {{"NOTIFY_SOCKET", (home.path / "notify.sock").string()}, {"WATCHDOG_USEC", "200000"}},
        home.path / "log");
    child_guard guard{pid};

    const std::string ready = notify.wait_for("READY=1", 15s);
    CHECK_THAT(ready, Catch::Contains("STATUS=1 tool from 1 source, 0 connections"));
    CHECK(fs::exists(home.path / "config.json")); // ready means the records are written
    notify.wait_for("WATCHDOG=1", 2s);
    notify.wait_for("WATCHDOG=1", 2s); // every WATCHDOG_USEC / 2, not once

    {
        client c(home.path / "d.sock");
        c.send({{"type", "hello"}, {"protocol", 1}, {"requestId", "h"}});
        c.read();
        notify.wait_for("STATUS=1 tool from 1 source, 1 connection", 5s);
    }
    notify.wait_for("0 connections", 5s);

    ::kill(pid, SIGHUP);
    const std::string reloading = notify.wait_for("RELOADING=1", 5s);
    CHECK_THAT(reloading, Catch::Contains("MONOTONIC_USEC="));
    notify.wait_for("READY=1", 5s); // back to ready after the reload

    ::kill(pid, SIGTERM);
    notify.wait_for("STOPPING=1", 5s);
    CHECK(wait_child(pid, 15s) == 0);
    guard.pid = -1;
}

TEST_CASE("sd_notify: without NOTIFY_SOCKET nothing is sent and the daemon runs as before",
          "[e2e][service]") {
    daemon_process d; // no NOTIFY_SOCKET in its environment
    client c(d.socket());
    c.send({{"type", "hello"}, {"protocol", 1}, {"requestId", "h"}});
    CHECK(c.read()["type"] == "hello_result");
    CHECK(d.stop() == 0);
}

TEST_CASE("auto-start: a command on a cold home starts meithd detached, waits for it and "
          "proceeds",
          "[e2e][service][autostart]") {
    temp_dir home;
    autostarted_daemon stop_it{home.path};
    const auto r = run_program({MEITH_CLI}, {"tools", "--home", home.path.string()},
                               {{"MEITH_NO_AUTOSTART", ""}});
    INFO(r.err);
    REQUIRE(r.status == 0);
    CHECK_THAT(r.out, Catch::Contains("echo"));
    CHECK_THAT(r.err, Catch::Contains("started meithd") && Catch::Contains("meithd.log"));

    const json rec = read_record(home.path);
    REQUIRE(rec.contains("pid"));
    const pid_t pid = rec["pid"].get<pid_t>();
    CHECK(alive(pid));
    CHECK(::getsid(pid) == pid); // its own session: a closed terminal does not reach it
    struct stat st {};
    REQUIRE(::stat((home.path / "meithd.log").c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0600);
    CHECK_THAT(slurp(home.path / "meithd.log"), Catch::Contains("ready in"));

    // The next command finds it and starts nothing.
    const auto again = run_program({MEITH_CLI}, {"status", "--home", home.path.string()},
                                   {{"MEITH_NO_AUTOSTART", ""}});
    CHECK(again.status == 0);
    CHECK_THAT(again.err, !Catch::Contains("started"));
    CHECK(read_record(home.path)["pid"] == pid);
}

TEST_CASE("meith --home NEW never reaches the default home's daemon through the runtime "
          "folder's socket",
          "[e2e][service][autostart]") {
    // Issue 40: `meith --home NEWDIR` found no record in NEWDIR, fell back to the shared
    // $XDG_RUNTIME_DIR/meith/meithd.sock and silently talked to ~/.meith's daemon.
    temp_dir user; // $HOME: the default home is user/.meith
    const fs::path run = user.path / "run";
    fs::create_directory(run);
    fs::permissions(run, fs::perms::owner_all);
    const std::vector<std::pair<std::string, std::string>> env = {
        {"HOME", user.path.string()}, {"XDG_RUNTIME_DIR", run.string()}};
    background_process first({MEITH_MEITHD}, env);
    const fs::path shared = run / "meith" / "meithd.sock";
    for (int i = 0; i < 500 && !fs::exists(user.path / ".meith" / "config.json"); ++i)
        std::this_thread::sleep_for(20ms);
    REQUIRE(fs::exists(shared));
    const auto mine = run_program({MEITH_CLI}, {"status"}, env);
    REQUIRE(mine.status == 0);
    CHECK_THAT(mine.out, Catch::Contains(shared.string()));

    const fs::path other = user.path / "new-home";
    const auto refused = run_program({MEITH_CLI}, {"status", "--home", other.string()}, env);
    CHECK(refused.status == 2);
    CHECK_THAT(refused.err, Catch::Contains("not running"));
    CHECK_THAT(refused.out, !Catch::Contains("meithd is running"));

    // Auto-start gives NEW its own daemon, on NEW's own socket.
    autostarted_daemon stop_it{other};
    auto with_start = env;
    with_start.emplace_back("MEITH_NO_AUTOSTART", "");
    const auto started = run_program({MEITH_CLI}, {"status", "--home", other.string()}, with_start);
    INFO(started.err);
    CHECK(started.status == 0);
    CHECK_THAT(started.out, Catch::Contains((other / "meithd.sock").string()));
    CHECK(read_record(other)["socketPath"] == (other / "meithd.sock").string());
    // The default home's daemon is still the one on the shared socket.
    CHECK(read_record(user.path / ".meith")["socketPath"] == shared.string());
    // A socket unit for NEW listens where meith looks for NEW's daemon.
    auto units = env;
    units.emplace_back("XDG_CONFIG_HOME", (user.path / "config").string());
    const auto plan = run_program(
        {MEITH_CLI},
        {"service", "install", "--socket-activated", "--dry-run", "--home", other.string()}, units);
    CHECK(plan.status == 0);
    CHECK_THAT(plan.out, Catch::Contains("ListenStream=" + (other / "meithd.sock").string()));
}

TEST_CASE("auto-start: commands racing on a cold home end up with one daemon",
          "[e2e][service][autostart]") {
    temp_dir home;
    autostarted_daemon stop_it{home.path};
    std::vector<cli_result> results(4);
    std::vector<std::thread> threads;
    for (auto& r : results)
        threads.emplace_back([&r, &home] {
            r = run_program({MEITH_CLI}, {"tools", "--home", home.path.string()},
                            {{"MEITH_NO_AUTOSTART", ""}});
        });
    for (auto& t : threads)
        t.join();
    for (const auto& r : results) {
        INFO(r.err);
        CHECK(r.status == 0);
        CHECK_THAT(r.out, Catch::Contains("echo"));
    }
    std::size_t records = 0;
    for ([[maybe_unused]] const auto& e : fs::directory_iterator(home.path / "instances"))
        ++records;
    CHECK(records == 1);
}

TEST_CASE("auto-start: a daemon that cannot start is reported at once with its error",
          "[e2e][service][autostart]") {
    temp_dir home;
    { std::ofstream(home.path / "meithd.toml") << "[limits]\nmax_frame_bytes = \"lots\"\n"; }
    const auto r = run_program({MEITH_CLI}, {"tools", "--home", home.path.string()},
                               {{"MEITH_NO_AUTOSTART", ""}});
    CHECK(r.status == 2);
    CHECK_THAT(r.err, Catch::Contains("meithd.toml") && Catch::Contains("max_frame_bytes"));
    CHECK_THAT(r.err, Catch::Contains("did not come up") && !Catch::Contains("within"));
}

TEST_CASE("auto-start: --no-autostart and MEITH_NO_AUTOSTART refuse and start nothing",
          "[e2e][service][autostart]") {
    temp_dir home;
    const auto flag =
        run_program({MEITH_CLI}, {"tools", "--no-autostart", "--home", home.path.string()},
                    {{"MEITH_NO_AUTOSTART", ""}});
    CHECK(flag.status == 2);
    CHECK_THAT(flag.err, Catch::Contains("not running") && Catch::Contains("auto-start is off"));
    const auto env = run_program({MEITH_CLI}, {"status", "--home", home.path.string()},
                                 {{"MEITH_NO_AUTOSTART", "1"}});
    CHECK(env.status == 2);
    CHECK_THAT(env.err, Catch::Contains("not running"));
    CHECK_FALSE(fs::exists(home.path / "config.json"));
    CHECK_FALSE(fs::exists(home.path / "meithd.log"));
}

TEST_CASE("meith service install --dry-run prints the user units it would write and the "
          "systemctl commands, and changes nothing",
          "[e2e][service]") {
    temp_dir home;
    const std::vector<std::pair<std::string, std::string>> env = {
        {"HOME", home.path.string()}, {"XDG_CONFIG_HOME", (home.path / "config").string()}};
    const fs::path unit_dir = home.path / "config" / "systemd" / "user";

    const auto plain = run_program({MEITH_CLI}, {"service", "install", "--dry-run"}, env);
    INFO(plain.err);
    REQUIRE(plain.status == 0);
    auto files = planned_writes(plain.out);
    REQUIRE(files.size() == 1);
    const std::string service = files[(unit_dir / "meithd.service").string()];
    CHECK_THAT(service, Catch::Contains("Type=notify") && Catch::Contains("WatchdogSec="));
    // The unit runs the meithd next to this meith, by its absolute path.
    CHECK_THAT(service,
               Catch::Contains("ExecStart=" + fs::canonical(MEITH_MEITHD).string() + "\n"));
    CHECK_THAT(plain.out, Catch::Contains("run: systemctl --user daemon-reload\n"
                                          "run: systemctl --user enable --now meithd.service"));
    CHECK_FALSE(fs::exists(unit_dir));

    const auto activated =
        run_program({MEITH_CLI}, {"service", "install", "--socket-activated", "--dry-run"}, env);
    REQUIRE(activated.status == 0);
    files = planned_writes(activated.out);
    REQUIRE(files.size() == 2);
    CHECK_THAT(files[(unit_dir / "meithd.socket").string()],
               Catch::Contains("ListenStream=%t/meith/meithd.sock") &&
                   Catch::Contains("SocketMode=0600") && Catch::Contains("DirectoryMode=0700"));
    CHECK_THAT(activated.out, Catch::Contains("run: systemctl --user enable --now meithd.socket"));

    // A non-default home goes into ExecStart.
    const auto homed =
        run_program({MEITH_CLI}, {"service", "install", "--dry-run", "--home", "/srv/m h"}, env);
    CHECK_THAT(homed.out, Catch::Contains(" --home \"/srv/m h\"\n"));

    const auto uninstall = run_program({MEITH_CLI}, {"service", "uninstall", "--dry-run"}, env);
    CHECK(uninstall.status == 0);
    CHECK_THAT(uninstall.out,
               Catch::Contains("systemctl --user disable --now meithd.socket meithd.service") &&
                   Catch::Contains("remove " + (unit_dir / "meithd.service").string()));

    const auto status = run_program({MEITH_CLI}, {"service", "status", "--dry-run"}, env);
    CHECK(status.status == 0);
    CHECK_THAT(status.out,
               Catch::Contains("not installed") && Catch::Contains("daemon:   not answering"));

    const auto wrong = run_program({MEITH_CLI}, {"tools", "--dry-run"}, env);
    CHECK(wrong.status == 2);
}

TEST_CASE("the units meith service installs pass systemd-analyze verify", "[e2e][service]") {
    temp_dir home;
    const auto out = run_program(
        {MEITH_CLI}, {"service", "install", "--socket-activated", "--dry-run"},
        {{"HOME", home.path.string()}, {"XDG_CONFIG_HOME", (home.path / "config").string()}});
    REQUIRE(out.status == 0);
    const fs::path dir = home.path / "units";
    fs::create_directories(dir);
    for (const auto& [path, text] : planned_writes(out.out))
        std::ofstream(dir / fs::path(path).filename()) << text;
    fs::create_directories(home.path / "run");
    auto verify = [&](const fs::path& unit_dir) {
        return run_program({"/usr/bin/systemd-analyze"},
                           {"--user", "--man=no", "verify", (unit_dir / "meithd.service").string(),
                            (unit_dir / "meithd.socket").string()},
                           {{"XDG_RUNTIME_DIR", (home.path / "run").string()}});
    };
    const auto ok = verify(dir);
    INFO(ok.out + ok.err);
    CHECK(ok.status == 0);
    CHECK(ok.err.empty()); // warnings (unknown keys, bad values) go to stderr

    // The check can fail: a misspelt key is reported.
    std::string service = slurp(dir / "meithd.service");
    service.replace(service.find("WatchdogSec="), 12, "WatchdogSecs=");
    std::ofstream(dir / "meithd.service") << service;
    const auto bad = verify(dir);
    CHECK_THAT(bad.err, Catch::Contains("WatchdogSecs"));
}

TEST_CASE("the launchd plist: well-formed, and the agent meith service installs names real "
          "paths",
          "[e2e][service]") {
    temp_dir home;
    // The plist in the tree, as shipped.
    const auto lint = run_program(
        {"/usr/bin/xmllint"},
        {"--noout", std::string(MEITH_SOURCE_DIR) + "/packaging/launchd/dev.meith.meithd.plist"},
        {});
    INFO(lint.err);
    CHECK(lint.status == 0);

    const auto out =
        run_program({MEITH_CLI}, {"service", "install", "--manager", "launchd", "--dry-run"},
                    {{"HOME", home.path.string()}});
    REQUIRE(out.status == 0);
    const auto files = planned_writes(out.out);
    const fs::path plist = home.path / "Library" / "LaunchAgents" / "dev.meith.meithd.plist";
    REQUIRE(files.count(plist.string()) == 1);
    std::ofstream(home.path / "agent.plist") << files.at(plist.string());
    CHECK_THAT(out.out, Catch::Contains("run: launchctl bootstrap gui/"));

    // plutil is macOS-only: xmllint for the XML, plistlib for the keys launchd reads.
    const auto check = run_program({"/usr/bin/python3"},
                                   {"-c", R"(
import plistlib, sys, os
with open(sys.argv[1], 'rb') as f: p = plistlib.load(f)
home, meithd = sys.argv[2], sys.argv[3]
assert p['Label'] == 'dev.meith.meithd', p['Label']
assert p['ProgramArguments'][0] == meithd, p['ProgramArguments']
assert os.access(p['ProgramArguments'][0], os.X_OK)
assert p['RunAtLoad'] is True
assert p['KeepAlive'] == {'SuccessfulExit': False}
assert isinstance(p['ExitTimeOut'], int) and p['ExitTimeOut'] >= 8
for key in ('StandardErrorPath', 'StandardOutPath'):
    assert p[key] == home + '/Library/Logs/meithd.log', p[key]
assert p['EnvironmentVariables']['PATH'].startswith(home + '/.local/bin:')
assert '__HOME__' not in open(sys.argv[1]).read()
print('ok')
)",
                                    (home.path / "agent.plist").string(), home.path.string(),
                                    fs::canonical(MEITH_MEITHD).string()},
                                   {});
    INFO(check.err);
    CHECK(check.out == "ok\n");

    const auto refused = run_program(
        {MEITH_CLI},
        {"service", "install", "--manager", "launchd", "--socket-activated", "--dry-run"},
        {{"HOME", home.path.string()}});
    CHECK(refused.status == 2);
}

TEST_CASE("meith service install without a systemd user manager says so and writes nothing",
          "[e2e][service][diagnosis]") {
    const auto manager = run_program({"/bin/sh"}, {"-c", "systemctl --user show-environment"}, {});
    if (manager.status == 0)
        SKIP_TEST("a systemd user manager answers here: install would really install");
    temp_dir home;
    const std::vector<std::pair<std::string, std::string>> env = {
        {"HOME", home.path.string()}, {"XDG_CONFIG_HOME", (home.path / "config").string()}};
    const auto r = run_program({MEITH_CLI}, {"service", "install"}, env);
    CHECK(r.status == 2);
    CHECK_THAT(r.err, Catch::Contains("no systemd user manager answers here"));
    CHECK_THAT(r.err, Catch::Contains("any meith command starts meithd when none runs "
                                      "(auto-start)"));
    CHECK_THAT(r.err, Catch::Contains("Nothing was written."));
    CHECK_FALSE(fs::exists(home.path / "config" / "systemd"));
}

} // namespace e2e_service_test
