// End-to-end: the zygote that starts a source's confined one-shot runs (issue 46 (k),
// docs/protocol.md §15 "Zygote"). The sandbox is prepared once per source; each run gets fresh
// PID, IPC and mount namespaces from it, so nothing one run leaves — a file in its TMPDIR, a
// SysV segment or queue, a daemonised process — is there for the next, and runs in flight do
// not see each other. Driven with the hostile probe (tests/exec/escape_probe.py) against the
// real meithd; the zygote is found as meithd's child in /proc. The §15 attacks of
// escape_test.cpp, sockets_test.cpp and limits_test.cpp run through the zygote as well (it is
// the default for every confined one-shot run).
#include "daemon_fixture.hpp"
#include "escape_probe.hpp"

#include <catch2/catch.hpp>

#include <csignal>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

using namespace meith::test;

namespace e2e_zygote_test { // one namespace per file: the tests build as unity batches

namespace {

/// The pids of meithd's children that run meith-sandbox-init --zygote.
std::vector<pid_t> zygotes_of(pid_t daemon) {
    std::vector<pid_t> out;
    for (const auto& entry : fs::directory_iterator("/proc")) {
        const std::string name = entry.path().filename();
        if (name.find_first_not_of("0123456789") != std::string::npos) continue;
        std::ifstream stat(entry.path() / "stat");
        std::string line;
        if (!std::getline(stat, line)) continue;
        // pid (comm) state ppid ...: the comm may hold spaces, the last ')' ends it.
        const auto close = line.rfind(')');
        if (close == std::string::npos) continue;
        std::istringstream rest(line.substr(close + 2));
        char state = 0;
        pid_t ppid = 0;
        rest >> state >> ppid;
        if (ppid != daemon) continue;
        std::ifstream cmd(entry.path() / "cmdline");
        const std::string cmdline((std::istreambuf_iterator<char>(cmd)), {});
        if (cmdline.find("meith-sandbox-init") != std::string::npos &&
            cmdline.find("--zygote") != std::string::npos)
            out.push_back(std::stoi(name));
    }
    return out;
}

/// Whether a process named `comm` runs anywhere on the machine (the test sees every pid).
bool comm_running(const std::string& comm) {
    for (const auto& entry : fs::directory_iterator("/proc")) {
        std::ifstream f(entry.path() / "comm");
        std::string c;
        if (std::getline(f, c) && c == comm.substr(0, 15)) return true;
    }
    return false;
}

/// Waits (bounded) until `done()`; false when it never was.
template <class F>
bool eventually(F done, std::chrono::milliseconds within = 10s) {
    const auto until = std::chrono::steady_clock::now() + within;
    while (!done()) {
        if (std::chrono::steady_clock::now() > until) return false;
        std::this_thread::sleep_for(20ms);
    }
    return true;
}

std::string code_of(const json& f) {
    return f["result"]["error"].value("code", "");
}

void write_file(const fs::path& p, const std::string& text) {
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
}

/// Starts the probe `holder` taking `max` processes and holding them until `dir`/release
/// appears (request id "hold", not waited for), and waits until it holds them.
void start_hold(client& c, const fs::path& dir, int max) {
    c.send({{"type", "tool_call"},
            {"protocol", 1},
            {"requestId", "hold"},
            {"toolName", "holder"},
            {"clientInfo", {{"caller", "cli"}}},
            {"timeoutMs", 60000},
            {"arguments",
             {{"action", "hoard"}, {"what", "processes"}, {"dir", dir.string()}, {"max", max}}}});
    REQUIRE(eventually([&] { return fs::exists(dir / "at_limit"); }, 30s));
}

/// A SysV key of this test process's own (two test binaries may run at once).
int sysv_key(int salt) {
    return 0x4d000000 + ((static_cast<int>(::getpid()) & 0xffff) << 4) + salt;
}

} // namespace

TEST_CASE("zygote: one sandbox serves every run, and nothing a run leaves is there for the next",
          "[e2e][sandbox][zygote]") {
    REQUIRE_KERNEL_SANDBOX(true);
    daemon_process d(probe_source("ro", "[\"read-only\"]") + policy);
    client c(d.socket());
    CHECK(zygotes_of(d.pid()).empty()); // nothing runs before the first call
    const int key = sysv_key(1);
    const std::string token = "mz-left-" + std::to_string(::getpid() % 100000);
    const json left = probe(c, "ro", {{"action", "leave"}, {"key", key}, {"token", token}});
    CHECK(left["done"] == true);
    CHECK(left["shm"] == true); // it could make them in its run
    CHECK(left["msq"] == true);
    const auto first = zygotes_of(d.pid());
    REQUIRE(first.size() == 1);
    // Its daemonised process ended with its run (the run's PID namespace).
    CHECK(eventually([&] { return !comm_running(token); }));
    for (int run = 0; run < 3; ++run) {
        const json found =
            probe(c, "ro", {{"action", "find_left"}, {"key", key}, {"token", token}});
        INFO(found.dump());
        CHECK(found["tmp_file"] == false); // a fresh TMPDIR
        CHECK(found["shm"] == false);      // a fresh IPC namespace
        CHECK(found["msq"] == false);
        CHECK(found["token_seen"] == false);
        CHECK(found["pids"] == 2); // its init and itself: a fresh PID namespace and /proc
    }
    // Prepared once: the same zygote started all four runs.
    CHECK(zygotes_of(d.pid()) == first);
}

TEST_CASE("zygote: a one-shot hook runs from a zygote too", "[e2e][sandbox][zygote][hooks]") {
    REQUIRE_KERNEL_SANDBOX(true);
    // A tool host (a long-running child, never a zygote's) and a one-shot filter hook, confined
    // since it declares capabilities.
    daemon_process d(host_source_toml("th") +
                     hook_toml("only-echo", "filter", "oneshot", "before_execution",
                               {"--deny=no echo"},
                               "tools = [\"t_ec*\"]\ncapabilities = [\"read-only\"]\n"));
    client c(d.socket());
    for (int call = 0; call < 3; ++call)
        CHECK(code_of(c.call("t_echo", json::object())) == "PERMISSION_DENIED");
    CHECK(zygotes_of(d.pid()).size() == 1);
}

TEST_CASE("zygote: runs in flight at once do not see each other's processes",
          "[e2e][sandbox][zygote]") {
    REQUIRE_KERNEL_SANDBOX(true);
    temp_dir work;
    daemon_process d(
        probe_source("holder", "[\"writes-files\"]", "cwd = " + json(work.path.string()).dump()) +
        probe_source("ro", "[\"read-only\"]") + policy);
    client a(d.socket());
    start_hold(a, work.path, 3);
    client b(d.socket());
    const json seen = probe(b, "ro", {{"action", "pids"}, {"pid", 3}});
    INFO(seen.dump());
    CHECK(seen["count"] == 2); // the holder's five processes are not in its view
    std::ofstream(work.path / "release") << "";
    const json r = a.wait_result("hold", nullptr, 30s);
    INFO(r.dump());
    CHECK(r["result"]["ok"] == true);
    CHECK(r["result"]["content"]["held"] == 3);
}

TEST_CASE("zygote: a run that times out is ended with everything it started, even a tool that "
          "left its process group",
          "[e2e][sandbox][zygote]") {
    REQUIRE_KERNEL_SANDBOX(true);
    daemon_process d(probe_source("ro", "[\"read-only\"]") + policy +
                     "[tools]\nkill_grace_ms = 300\n");
    client c(d.socket());
    const std::string token = "mz-hold-" + std::to_string(::getpid() % 100000);
    const json r = c.call("ro",
                          {{"action", "leave"},
                           {"key", sysv_key(2)},
                           {"token", token},
                           {"hold_s", 30},
                           {"setsid", true}},
                          {{"timeoutMs", 1500}, {"clientInfo", {{"caller", "cli"}}}});
    INFO(r.dump());
    CHECK(code_of(r) == "TIMEOUT");
    CHECK(eventually([&] { return !comm_running(token); }));
    // The zygote is still there for the next run.
    CHECK(zygotes_of(d.pid()).size() == 1);
    CHECK(probe(c, "ro", {{"action", "tmpdir"}})["done"] == true);
}

TEST_CASE("zygote: a protected or hidden file the host replaces by rename stays so in the next "
          "run",
          "[e2e][sandbox][zygote][protected]") {
    REQUIRE_KERNEL_SANDBOX(true);
    // git rewrites .git/config, and credential stores their file, by writing a new file and
    // renaming it over the old: the kernel then detaches the mounts on the old one in every
    // other mount namespace — the zygote's prepared tree too.
    temp_dir work;
    temp_dir user_home(fs::current_path()); // not in /tmp, which is private in a tool's view
    write_file(work.path / ".git/config", "[core]\n");
    write_file(user_home.path / ".git-credentials", "https://me:tok-old-1234567@example.com\n");
    std::unique_ptr<daemon_process> d;
    {
        env_override home("HOME", user_home.path.string());
        d = std::make_unique<daemon_process>(
            probe_source("w", "[\"writes-files\"]", "cwd = " + json(work.path.string()).dump()) +
            policy);
    }
    client c(d->socket());
    const auto attempt = [&](const json& args) {
        const json r = probe(c, "w", args);
        INFO(r.dump());
        return r;
    };
    const std::string cfg = (work.path / ".git/config").string();
    const std::string creds = (user_home.path / ".git-credentials").string();
    const auto replace = [](const fs::path& p, const std::string& text) {
        write_file(p.string() + ".lock", text);
        fs::rename(p.string() + ".lock", p);
    };
    for (int round = 0; round < 2; ++round) {
        INFO("round " << round);
        CHECK(attempt({{"action", "write"}, {"path", cfg}})["code"] == "EROFS");
        const json read = attempt({{"action", "read"}, {"path", creds}});
        CHECK(read.value("text", "x").find("tok-") == std::string::npos);
        replace(work.path / ".git/config", "[core]\n\tbare = false\n");
        replace(user_home.path / ".git-credentials", "https://me:tok-new-7654321@example.com\n");
    }
    CHECK(slurp(work.path / ".git/config") == "[core]\n\tbare = false\n");
    CHECK(zygotes_of(d->pid()).size() == 1); // the same zygote served every run
}

TEST_CASE("zygote: meith-sandbox-init in a tool's writable root stays read-only, so no tool "
          "rewrites what the next zygote runs",
          "[e2e][sandbox][zygote][protected]") {
    REQUIRE_KERNEL_SANDBOX(true);
    // A build tree in the project an agent works on: the init program a zygote runs, with
    // CAP_SYS_ADMIN in the sandbox's user namespace, before anything of it is confined.
    temp_dir work;
    const fs::path init = work.path / "build/bin/meith-sandbox-init";
    fs::create_directories(init.parent_path());
    fs::copy_file(fs::canonical(fs::path(MEITH_CLI).parent_path() / "meith-sandbox-init"), init);
    env_override use("MEITH_SANDBOX_INIT", init.string());
    daemon_process d(
        probe_source("w", "[\"writes-files\"]", "cwd = " + json(work.path.string()).dump()) +
        policy);
    client c(d.socket());
    const json rewrite = probe(c, "w", {{"action", "write"}, {"path", init.string()}});
    INFO(rewrite.dump());
    CHECK(rewrite.value("code", "") == "EROFS");
    const json beside =
        probe(c, "w", {{"action", "write"}, {"path", (work.path / "build/other").string()}});
    CHECK(beside["done"] == true);
    CHECK(zygotes_of(d.pid()).size() == 1); // and the zygote ran from it
}

TEST_CASE("zygote: killed, its run in flight fails and the next run gets a new one",
          "[e2e][sandbox][zygote]") {
    REQUIRE_KERNEL_SANDBOX(true);
    temp_dir work;
    daemon_process d(
        probe_source("holder", "[\"writes-files\"]", "cwd = " + json(work.path.string()).dump()) +
        policy);
    client c(d.socket());
    start_hold(c, work.path, 1);
    const auto zygotes = zygotes_of(d.pid());
    REQUIRE(zygotes.size() == 1);
    ::kill(zygotes[0], SIGKILL);
    const json r = c.wait_result("hold", nullptr, 30s);
    INFO(r.dump());
    CHECK(r["result"]["ok"] == false); // not a hang, not a success
    fs::remove(work.path / "at_limit");
    const json again = probe(c, "holder", {{"action", "tmpdir"}});
    CHECK(again["done"] == true);
    const auto now = zygotes_of(d.pid());
    REQUIRE(now.size() == 1);
    CHECK(now[0] != zygotes[0]);
}

TEST_CASE("zygote: one that does not start leaves its plan's runs to direct starts, and the log "
          "says why",
          "[e2e][sandbox][zygote]") {
    REQUIRE_KERNEL_SANDBOX(true);
    // An init program that knows no zygote (an older install), else the real one.
    temp_dir bin;
    const fs::path fake = bin.path / "meith-sandbox-init";
    const std::string real =
        fs::canonical(fs::path(MEITH_CLI).parent_path() / "meith-sandbox-init");
    std::ofstream(fake)
        << "#!/bin/sh\nif [ \"$1\" = --zygote ]; then\n"
           "  echo \"meith-sandbox-init: unknown option '--zygote'\" >&2; exit 127\n"
           "fi\nexec "
        << real << " \"$@\"\n";
    fs::permissions(fake, fs::perms::owner_all);
    env_override init("MEITH_SANDBOX_INIT", fake.string());
    // starts-process: the fake init (a script) may run the real one.
    daemon_process d(probe_source("sp", "[\"read-only\", \"starts-process\"]") + policy);
    client c(d.socket());
    for (int run = 0; run < 2; ++run)
        CHECK(probe(c, "sp", {{"action", "tmpdir"}})["done"] == true);
    CHECK(zygotes_of(d.pid()).empty());
    CHECK_THAT(d.log(), Catch::Contains("did not start: meith-sandbox-init: unknown option"));
    CHECK_THAT(d.log(), Catch::Contains("each run is started on its own"));
}

TEST_CASE("zygote: an idle zygote is stopped, and MEITH_ZYGOTE=0 starts runs without one",
          "[e2e][sandbox][zygote]") {
    REQUIRE_KERNEL_SANDBOX(true);
    SECTION("idle") {
        env_override idle("MEITH_ZYGOTE_IDLE_MS", "200");
        daemon_process d(probe_source("ro", "[\"read-only\"]") + policy);
        client c(d.socket());
        CHECK(probe(c, "ro", {{"action", "tmpdir"}})["done"] == true);
        CHECK(eventually([&] { return zygotes_of(d.pid()).empty(); }));
        CHECK(probe(c, "ro", {{"action", "tmpdir"}})["done"] == true); // and a new one starts
    }
    SECTION("switched off") {
        env_override off("MEITH_ZYGOTE", "0");
        daemon_process d(probe_source("ro", "[\"read-only\"]") + policy);
        client c(d.socket());
        const json found =
            probe(c, "ro", {{"action", "find_left"}, {"key", sysv_key(3)}, {"token", "x"}});
        CHECK(found["pids"] == 2);
        CHECK(zygotes_of(d.pid()).empty());
    }
}

} // namespace e2e_zygote_test
