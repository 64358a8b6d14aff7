// End-to-end: no tool escapes its capabilities (issue 26, docs/security.md "What stops each
// attack"). Each case is one attack an outside probe made on 375b46a, tried by a real confined
// tool — tests/exec/escape_probe.py as a one-shot exec tool, and the npm server-filesystem as
// an MCP server — against the real meithd, and each failed to be stopped there. Kernel
// features are required, not assumed: without Landlock, seccomp or namespaces a case is
// skipped, saying so.
#include "daemon_fixture.hpp"
#include "escape_probe.hpp"

#include <catch2/catch.hpp>

#include <csignal>
#include <cstdlib>
#include <fstream>
#include <string>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <thread>
#include <unistd.h>

using namespace meith::test;

namespace e2e_escape_test { // one namespace per file: the tests build as unity batches

namespace {

/// Waits (bounded) for `path` to appear; its contents as JSON.
json wait_json_file(const fs::path& path, std::chrono::milliseconds timeout = 15s) {
    const auto until = std::chrono::steady_clock::now() + timeout;
    while (!fs::exists(path)) {
        if (std::chrono::steady_clock::now() > until) FAIL("no " << path << " in time");
        std::this_thread::sleep_for(20ms);
    }
    return json::parse(slurp(path));
}

/// The mode bits of `p`.
unsigned mode_of(const fs::path& p) {
    struct stat st {};
    REQUIRE(::stat(p.c_str(), &st) == 0);
    return st.st_mode & 07777;
}

} // namespace

TEST_CASE("attack 1: a tool cannot call meithd as cli to write outside its sandbox",
          "[e2e][sandbox][escape]") {
    REQUIRE_KERNEL_SANDBOX(true);
    temp_dir elsewhere;
    const auto target = elsewhere.path / "written-by-the-tool.txt";
    daemon_process d(
        probe_source("ro", "[\"read-only\"]") +
        probe_source("net", "[\"read-only\", \"accesses-network\"]") +
        probe_source("free", "[\"read-only\", \"starts-process\"]", "sandbox = \"off\"") +
        probe_source("writer", "[\"writes-files\"]",
                     "cwd = " + json(elsewhere.path.string()).dump()) +
        policy);
    client c(d.socket());
    const json call = {{"action", "call_daemon"},
                       {"socket", d.socket().string()},
                       {"tool", "writer"},
                       {"arguments", {{"action", "write"}, {"path", target.string()}}}};
    // Without accesses-network no socket opens at all.
    const json ro = probe(c, "ro", call);
    CHECK(ro["done"] == false);
    CHECK(ro.value("code", "") == "EACCES");
    // With accesses-network, still no Unix socket: that is a right of its own.
    const json net = probe(c, "net", call);
    CHECK(net["done"] == false);
    CHECK(net.value("code", "") == "EACCES");
    // Unconfined (sandbox = "off"), it reaches the socket: meithd knows its own tool's
    // process, sends why, closes, and audits it.
    const json free = probe(c, "free", call);
    INFO(free.dump());
    CHECK(free["done"] == false);
    CHECK(free.value("code", "") == "EOF");
    const json replies = free.value("replies", json::array());
    REQUIRE(replies.size() == 1);
    CHECK(replies[0].value("type", "") == "error");
    CHECK_THAT(replies[0].value("message", ""),
               Catch::Contains("does not take connections from the tools it runs"));
    CHECK_FALSE(fs::exists(target));
    const json rejected = d.wait_audit([](const json& l) {
        return l["event"] == "connection_rejected" &&
               l["reason"].get<std::string>().find("a tool's process") != std::string::npos;
    });
    CHECK(rejected["pid"].get<int>() > 0);
    // A daemonised grandchild, after the tool has exited, is still the tool's: refused.
    const auto out = elsewhere.path / "detached.json";
    CHECK(probe(c, "free",
                {{"action", "detached"}, {"out", out.string()}, {"then", call}})["done"] == true);
    const json later = wait_json_file(out);
    INFO(later.dump());
    CHECK(later.value("code", "") == "EOF");
    CHECK_FALSE(fs::exists(target));
    // The writer itself works for a real client.
    CHECK(probe(c, "writer", {{"action", "write"}, {"path", target.string()}})["done"] == true);
}

TEST_CASE("attack 2: a tool cannot become an approver, even with the secret and a terminal",
          "[e2e][sandbox][escape][approvals]") {
    REQUIRE_KERNEL_SANDBOX(true);
    daemon_process d(probe_source("ro", "[\"read-only\"]") +
                     probe_source("free", "[\"read-only\"]", "sandbox = \"off\"") + policy);
    client c(d.socket());
    const json attack = {{"action", "approver"},
                         {"socket", d.socket().string()},
                         {"secret_path", (d.home() / "approver.secret").string()}};
    // Confined: the secret is not in its file view, and no socket opens.
    const json confined = probe(c, "ro", attack);
    INFO(confined.dump());
    CHECK(confined["done"] == false);
    CHECK(confined.value("secret_error", "") == "ENOENT");
    CHECK(confined.value("code", "") == "EACCES");
    // Unconfined it reads the secret and gets a terminal, and is still refused.
    const json free = probe(c, "free", attack);
    INFO(free.dump());
    CHECK_FALSE(free.contains("secret_error"));
    CHECK(free.value("tty", false) == true);
    CHECK(free["done"] == false);
    CHECK(free.value("code", "") == "REFUSED");
    CHECK_THAT(free.value("hello_reply", json::object()).value("message", ""),
               Catch::Contains("does not take connections from the tools it runs"));
    CHECK(d.audit_events("grant_created").empty());
    CHECK(d.audit_events("approver_hello").empty());
}

TEST_CASE("attack 3: no chmod, utimes, xattr or chown outside the writable roots",
          "[e2e][sandbox][escape]") {
    REQUIRE_KERNEL_SANDBOX(true);
    temp_dir outside_dir, root;
    const auto victim = outside_dir.path / "private.txt";
    std::ofstream(victim) << "mine\n";
    fs::permissions(victim, fs::perms::owner_read | fs::perms::owner_write);
    const auto own = root.path / "own.txt";
    std::ofstream(own) << "the tool's\n";
    // The victim's folder is named readable: /tmp, where the test's folders are, is private in
    // a tool's view (docs/protocol.md §15), and this case is about the read-only tree.
    const std::string readable =
        "sandbox_paths = { read = [" + json(outside_dir.path.string()).dump() + "] }\n";
    daemon_process d(probe_source("ro", "[\"read-only\"]", readable) +
                     probe_source("rw", "[\"writes-files\"]",
                                  "cwd = " + json(root.path.string()).dump() + "\n" + readable) +
                     policy);
    client c(d.socket());
    for (const std::string tool : {"ro", "rw"}) {
        INFO(tool);
        for (const char* action : {"chmod", "utime", "setxattr", "chown"}) {
            INFO(action);
            const json r =
                probe(c, tool, {{"action", action}, {"path", victim.string()}, {"mode", "4777"}});
            CHECK(r["done"] == false);
            CHECK(r.value("code", "") == "EROFS");
        }
    }
    CHECK(mode_of(victim) == 0600);
    char value[8];
    CHECK(::getxattr(victim.c_str(), "user.meith_probe", value, sizeof value) < 0);
    // meithd's secret is not even visible, so it cannot be made 0644 (which would stop the
    // next start on this home).
    const auto secret = d.home() / "approver.secret";
    const json s =
        probe(c, "ro", {{"action", "chmod"}, {"path", secret.string()}, {"mode", "644"}});
    CHECK(s.value("code", "") == "ENOENT");
    CHECK(mode_of(secret) == 0600);
    // Inside its own writable root, a writes-files tool still may.
    CHECK(probe(c, "rw", {{"action", "chmod"}, {"path", own.string()}, {"mode", "640"}})["done"] ==
          true);
    CHECK(mode_of(own) == 0640);
    d.restart(); // the home is intact
    client again(d.socket());
    CHECK(again.call("echo", {{"x", 1}})["result"]["ok"] == true);
}

TEST_CASE("attack 4: without starts-process no program runs by the loader or from a memfd",
          "[e2e][sandbox][escape]") {
    REQUIRE_KERNEL_SANDBOX(true);
    daemon_process d(probe_source("ro", "[\"read-only\"]") +
                     probe_source("spawns", "[\"read-only\", \"starts-process\"]") + policy);
    client c(d.socket());
    const json loader = probe(c, "ro", {{"action", "loader"}});
    INFO(loader.dump());
    CHECK(loader["done"] == false);
    CHECK(loader.value("code", "") == "EACCES");
    const json memfd = probe(c, "ro", {{"action", "memfd_exec"}});
    INFO(memfd.dump());
    CHECK(memfd["done"] == false);
    CHECK(memfd.value("code", "") == "EACCES");
    // Nor by taking the init program's exec listener to answer its own execve.
    const json steal = probe(c, "ro", {{"action", "steal_listener"}});
    INFO(steal.dump());
    CHECK(steal["done"] == false);
    CHECK(steal.value("proc_fd", json()) == "EACCES");
    // With starts-process both are what it declared.
    CHECK(probe(c, "spawns", {{"action", "loader"}})["done"] == true);
    CHECK(probe(c, "spawns", {{"action", "memfd_exec"}})["done"] == true);
}

TEST_CASE("attack 5: no packet, netlink, vsock or raw sockets, and no capabilities, even as root",
          "[e2e][sandbox][escape]") {
    REQUIRE_KERNEL_SANDBOX(true);
    daemon_process d(probe_source("ro", "[\"read-only\"]") +
                     probe_source("net", "[\"read-only\", \"accesses-network\"]") + policy);
    client c(d.socket());
    for (const char* family : {"packet", "netlink", "vsock", "raw", "inet", "unix"}) {
        INFO(family);
        const json r = probe(c, "ro", {{"action", "socket"}, {"family", family}});
        CHECK(r["done"] == false);
        CHECK(r.value("code", "") == "EACCES");
    }
    // A path Unix socket is its own right (sandbox_paths.sockets), not the network's.
    for (const char* family : {"packet", "vsock", "raw", "unix"}) {
        INFO(family);
        const json r = probe(c, "net", {{"action", "socket"}, {"family", family}});
        CHECK(r["done"] == false);
        CHECK(r.value("code", "") == "EACCES");
    }
    CHECK(probe(c, "net", {{"action", "socket"}, {"family", "inet"}})["done"] == true);
    // No nested user namespace, whose capabilities would open the kernel's netlink and more.
    const json userns = probe(c, "net", {{"action", "nested_userns"}});
    CHECK(userns["done"] == false);
    CHECK(userns.value("code", "") == "EPERM");
    for (const std::string tool : {"ro", "net"}) {
        const json caps = probe(c, tool, {{"action", "caps"}});
        INFO(tool << ": " << caps.dump());
        CHECK(caps["CapEff"] == "0000000000000000");
        CHECK(caps["CapPrm"] == "0000000000000000");
        CHECK(caps["CapBnd"] == "0000000000000000");
    }
}

TEST_CASE("attack 6: other processes' environment, command line and memory are out of reach",
          "[e2e][sandbox][escape]") {
    REQUIRE_KERNEL_SANDBOX(true);
    // A process of the user's holding an API key in its environment and command line.
    const pid_t victim = ::fork();
    if (victim == 0) {
        ::setenv("VICTIM_API_KEY", "sk-victim-0123456789", 1);
        ::execl("/bin/sh", "sh", "-c", "sleep 30", "sk-victim-0123456789", nullptr);
        ::_exit(127);
    }
    struct reap {
        pid_t pid;
        ~reap() {
            ::kill(pid, SIGKILL);
            ::waitpid(pid, nullptr, 0);
        }
    } guard{victim};
    // Another tool host's process too: its environment has the host's secrets.
    daemon_process d(probe_source("ro", "[\"read-only\"]") +
                     host_source_toml("th", {}, "env = { HOST_TOKEN = \"tok-host-secret-42\" }") +
                     policy);
    client c(d.socket());
    const int host_pid = source_status(c, "th")["pid"].get<int>();
    for (const int pid : {static_cast<int>(victim), host_pid}) {
        INFO("pid " << pid);
        const json env =
            probe(c, "ro", {{"action", "environ"}, {"pid", pid}, {"needle", "secret"}});
        CHECK(env["done"] == false);
        CHECK(env.value("code", "") == "ENOENT");
        CHECK(probe(c, "ro", {{"action", "pids"}, {"pid", pid}})["has_pid"] == false);
        const json trace = probe(c, "ro", {{"action", "ptrace"}, {"pid", pid}});
        CHECK(trace["done"] == false);
    }
}

TEST_CASE("attack 7: a tool filling its temporary folder cannot stop the audit trail",
          "[e2e][sandbox][escape]") {
    REQUIRE_KERNEL_SANDBOX(true);
    daemon_process d(probe_source("ro", "[\"read-only\"]") + policy);
    client c(d.socket());
    const json where = probe(c, "ro", {{"action", "tmpdir"}});
    const std::string tmpdir = where["tmpdir"].get<std::string>();
    INFO(tmpdir);
    CHECK(tmpdir.rfind(d.home().string(), 0) != 0); // not in meithd's home
    // Its tmpfs holds 64 MiB; it stops there, at ENOSPC.
    const json filled = probe(c, "ro", {{"action", "fill_tmp"}, {"mib", 100}});
    INFO(filled.dump());
    CHECK(filled.value("code", "") == "ENOSPC");
    CHECK(filled["written_mib"].get<int>() <= 64);
    // Every call after it is still audited and answered.
    CHECK(c.call("echo", {{"after", "fill"}})["result"]["ok"] == true);
    d.wait_audit([](const json& l) {
        return l["event"] == "tool_call" && l.value("toolName", "") == "echo";
    });
}

TEST_CASE("the MCP filesystem server, confined, reads neither meithd's home nor the user's keys",
          "[e2e][sandbox][escape][mcp]") {
    REQUIRE_KERNEL_SANDBOX(true);
    // A home of the user's with an SSH key and cloud credentials (meithd reads HOME), where a
    // home is: not in /tmp, which is private in a tool's view.
    temp_dir user_home(fs::current_path());
    fs::create_directories(user_home.path / ".ssh");
    fs::create_directories(user_home.path / ".aws");
    std::ofstream(user_home.path / ".ssh/id_ed25519") << "PRIVATE KEY\n";
    std::ofstream(user_home.path / ".aws/credentials") << "aws_secret_access_key = x\n";
    std::ofstream(user_home.path / "notes.txt") << "readable notes\n";
    const std::string saved_home = std::getenv("HOME") ? std::getenv("HOME") : "";
    ::setenv("HOME", user_home.path.string().c_str(), 1);
    const std::string server = std::string(MEITH_SOURCE_DIR) +
                               "/tests/mcp/node_modules/@modelcontextprotocol/"
                               "server-filesystem/dist/index.js";
    REQUIRE(fs::exists(server));
    std::unique_ptr<daemon_process> d;
    // The server's own allow-list is "/": only the sandbox stands in the way.
    d = std::make_unique<daemon_process>(
        "[[sources]]\nname = \"fs\"\nkind = \"mcp\"\nprefix = \"fs_\"\ntrust_annotations = "
        "true\ncommand = [\"node\", " +
        json(server).dump() + ", \"/\"]\n" + policy);
    ::setenv("HOME", saved_home.c_str(), 1);
    client c(d->socket());
    const auto read = [&](const fs::path& p) {
        return c.call("fs_read_text_file", {{"path", p.string()}},
                      {{"clientInfo", {{"caller", "cli"}}}}, nullptr, 20s);
    };
    const json notes = read(user_home.path / "notes.txt");
    INFO(notes.dump());
    CHECK(notes["result"]["ok"] == true);
    for (const fs::path& p :
         {d->home() / "approver.secret", d->home() / "audit.jsonl",
          user_home.path / ".ssh/id_ed25519", user_home.path / ".aws/credentials"}) {
        INFO(p);
        const json r = read(p);
        CHECK(r["result"]["ok"] == false);
        CHECK_THAT(r.dump(),
                   !Catch::Contains("PRIVATE KEY") && !Catch::Contains(approver_secret(d->home())));
    }
    // Its tools need writes-files, so its cwd is writable; anywhere else the tree is read-only.
    temp_dir elsewhere;
    const json w =
        c.call("fs_write_file", {{"path", (elsewhere.path / "x.txt").string()}, {"content", "x"}},
               {{"clientInfo", {{"caller", "cli"}}}}, nullptr, 20s);
    CHECK(w["result"]["ok"] == false);
    CHECK_FALSE(fs::exists(elsewhere.path / "x.txt"));
}

} // namespace e2e_escape_test
