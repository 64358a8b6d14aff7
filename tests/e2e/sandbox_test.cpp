// End-to-end: capabilities enforced by the kernel (PROTOCOL.md §13, docs/protocol.md §15) —
// one-shot exec tools (tests/exec/sandbox_probe.mjs) that try to write, connect and spawn,
// confined to what they declare, against the real meithd. Needs Landlock and seccomp (the
// kernels this project's CI runs on have both); without them each case is skipped, saying so.
#include "daemon_fixture.hpp"

#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <netinet/in.h>
#include <string>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

using namespace meith::test;

namespace e2e_sandbox_test { // one namespace per file: the tests build as unity batches

namespace {

std::string probe_source(const std::string& name, const std::string& caps,
                         const std::string& extra = "") {
    return "[[sources]]\nname = \"" + name + "\"\nkind = \"exec\"\ncommand = [\"node\", \"" +
           std::string(MEITH_SOURCE_DIR) + "/tests/exec/sandbox_probe.mjs\"]\ntool = { name = \"" +
           name + "\", description = \"sandbox probe\", capabilities = " + caps + " }\n" + extra +
           "\n";
}

/// Every caller may use every capability: the policy is not what these tests are about.
const std::string allow_all = "[permissions.callers.cli]\nallow = [\"read-only\", "
                              "\"writes-files\", \"starts-process\", \"accesses-network\", "
                              "\"destructive\"]\n";

json probe(client& c, const std::string& tool, const json& args) {
    const json r = c.call(tool, args, {{"clientInfo", {{"caller", "cli"}}}});
    INFO(r.dump());
    REQUIRE(r["result"]["ok"] == true);
    return r["result"]["content"];
}

/// list_sources' `sandbox` object of source `name`.
json sandbox_of(client& c, const std::string& name) {
    const json s = source_status(c, name);
    REQUIRE(s.is_object());
    return s["sandbox"];
}

/// A listening TCP socket on 127.0.0.1; its port.
struct listener {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int port = 0;
    listener() {
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
        ::listen(fd, 8);
        socklen_t len = sizeof a;
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
        port = ntohs(a.sin_port);
    }
    ~listener() { ::close(fd); }
};

} // namespace

TEST_CASE("a read-only tool cannot write outside its temporary folder, with writes-files it "
          "writes under its root only",
          "[e2e][sandbox]") {
    REQUIRE_KERNEL_SANDBOX(false);
    temp_dir root, elsewhere;
    // `elsewhere` is named readable: the test's folders are in /tmp, which is private in a
    // tool's view (ENOENT), and this case is about writes to what it can see.
    const std::string readable =
        "sandbox_paths = { read = [" + json(elsewhere.path.string()).dump() + "] }\n";
    daemon_process d(probe_source("ro", "[\"read-only\"]", readable) +
                     probe_source("rw", "[\"writes-files\"]",
                                  "cwd = " + json(root.path.string()).dump() + "\n" + readable) +
                     allow_all);
    client c(d.socket());
    // With namespaces the tree outside its writable roots is read-only (EROFS) before
    // Landlock's EACCES is reached.
    const std::string refused = sandbox_of(c, "ro")["ns"] == "none" ? "EACCES" : "EROFS";
    const auto outside = elsewhere.path / "escaped.txt";
    const json denied = probe(c, "ro", {{"action", "write"}, {"path", outside.string()}});
    CHECK(denied["done"] == false);
    CHECK(denied["code"] == refused);
    CHECK_FALSE(fs::exists(outside));
    // Its own temporary folder is writable.
    CHECK(probe(c, "ro", {{"action", "tmpdir"}})["done"] == true);

    // writes-files: under its cwd (the source's root), and nowhere else.
    const auto inside = root.path / "note.txt";
    CHECK(probe(c, "rw", {{"action", "write"}, {"path", inside.string()}})["done"] == true);
    CHECK(fs::exists(inside));
    const json out = probe(c, "rw", {{"action", "write"}, {"path", outside.string()}});
    CHECK(out["code"] == refused);
    CHECK_FALSE(fs::exists(outside));

    // list_sources says how each is confined.
    const json s = sandbox_of(c, "ro");
    CHECK(s["mode"] == "enforce");
    CHECK(s["fs"].get<std::string>().rfind("landlock-abi-", 0) == 0);
    CHECK(s["net"] == "seccomp");
    CHECK(s["exec"] == "landlock,once");
}

TEST_CASE("a tool without accesses-network cannot connect to 127.0.0.1, with it, it can",
          "[e2e][sandbox]") {
    REQUIRE_KERNEL_SANDBOX(false);
    listener l;
    REQUIRE(l.port > 0);
    daemon_process d(probe_source("offline", "[\"read-only\"]") +
                     probe_source("online", "[\"read-only\", \"accesses-network\"]") + allow_all);
    client c(d.socket());
    const json blocked = probe(c, "offline", {{"action", "connect"}, {"port", l.port}});
    CHECK(blocked["done"] == false);
    CHECK(blocked["code"] == "EACCES");
    CHECK(probe(c, "online", {{"action", "connect"}, {"port", l.port}})["done"] == true);
}

TEST_CASE("a tool without starts-process cannot run /bin/sh, with it, it can", "[e2e][sandbox]") {
    REQUIRE_KERNEL_SANDBOX(false);
    daemon_process d(probe_source("nospawn", "[\"read-only\"]") +
                     probe_source("spawns", "[\"read-only\", \"starts-process\"]") + allow_all);
    client c(d.socket());
    const json blocked = probe(c, "nospawn", {{"action", "spawn"}});
    CHECK(blocked["done"] == false);
    CHECK(blocked["code"] == "EACCES");
    CHECK(probe(c, "spawns", {{"action", "spawn"}})["done"] == true);
}

TEST_CASE("sandbox = off restores everything", "[e2e][sandbox]") {
    temp_dir elsewhere;
    listener l;
    daemon_process d(probe_source("free", "[\"read-only\"]", "sandbox = \"off\"") + allow_all);
    client c(d.socket());
    const auto outside = elsewhere.path / "free.txt";
    CHECK(probe(c, "free", {{"action", "write"}, {"path", outside.string()}})["done"] == true);
    CHECK(fs::exists(outside));
    CHECK(probe(c, "free", {{"action", "connect"}, {"port", l.port}})["done"] == true);
    CHECK(probe(c, "free", {{"action", "spawn"}})["done"] == true);
}

TEST_CASE("sandbox = require refuses a source the kernel cannot confine (Landlock forced absent)",
          "[e2e][sandbox]") {
    REQUIRE_KERNEL_SANDBOX(false);
    ::setenv("MEITH_SANDBOX_TEST_ABSENT", "landlock", 1);
    daemon_process d(probe_source("strict", "[\"read-only\"]", "sandbox = \"require\"") +
                     probe_source("lenient", "[\"read-only\"]") + allow_all);
    ::unsetenv("MEITH_SANDBOX_TEST_ABSENT");
    client c(d.socket());
    const json r = c.call("strict", {{"action", "tmpdir"}}, {{"clientInfo", {{"caller", "cli"}}}});
    CHECK(r["result"]["ok"] == false);
    CHECK_THAT(r["result"]["error"]["message"].get<std::string>(), Catch::Contains("require"));
    // enforce runs it with what there is: seccomp still blocks the network.
    listener l;
    CHECK(probe(c, "lenient", {{"action", "connect"}, {"port", l.port}})["code"] == "EACCES");
    CHECK_THAT(d.log(), Catch::Contains("no Landlock"));
}

/// The example file host (examples/node-host) as source "files", its root `root`; cli may do
/// everything.
std::string files_host(const fs::path& root) {
    return "[[sources]]\nname = \"files\"\nkind = \"host\"\ncommand = [\"node\", \"" +
           std::string(MEITH_SOURCE_DIR) +
           "/examples/node-host/host.mjs\"]\nconfig = { root = " + json(root.string()).dump() +
           " }\n" + allow_all;
}

TEST_CASE("a tool host's sandbox is remembered: the next daemon start starts it once",
          "[e2e][sandbox]") {
    REQUIRE_KERNEL_SANDBOX(false);
    temp_dir root;
    daemon_process d(files_host(root.path));
    const auto starts = [&] {
        std::size_t n = 0;
        for (const auto& l : d.audit_events("source_start"))
            n += l.value("source", "") == "files";
        return n;
    };
    // First start: read-only, then again in its tools' sandbox (writes, deletes).
    CHECK(starts() == 2);
    const fs::path memory = d.home() / "sandbox-memory.json";
    REQUIRE(fs::exists(memory));
    const auto mode = fs::status(memory).permissions() & fs::perms::all;
    CHECK((mode == (fs::perms::owner_read | fs::perms::owner_write)));
    d.stop();
    d.restart();
    client c(d.socket());
    c.send({{"type", "list_sources"}, {"protocol", 1}, {"requestId", "s"}});
    const json reply = c.read();
    json files;
    for (const auto& s : reply["sources"])
        if (s["name"] == "files") files = s;
    INFO(reply.dump());
    CHECK(files["sandbox"]["capabilities"] ==
          json::array({"read-only", "writes-files", "destructive"}));
    CHECK(starts() == 3); // once more, straight into its sandbox
    // A file others could have written is not trusted: back to starting twice.
    d.stop();
    fs::permissions(memory, fs::perms::group_write | fs::perms::others_write,
                    fs::perm_options::add);
    d.restart();
    CHECK(starts() == 5);
}

TEST_CASE("a tool host is started again in its tools' sandbox and writes only where that lets it",
          "[e2e][sandbox]") {
    REQUIRE_KERNEL_SANDBOX(false);
    temp_dir root;
    daemon_process d(files_host(root.path));
    client c(d.socket());
    c.send({{"type", "list_sources"}, {"protocol", 1}, {"requestId", "s"}});
    const json sources = c.read();
    json files;
    for (const auto& s : sources["sources"])
        if (s["name"] == "files") files = s;
    REQUIRE(files.is_object());
    INFO(files.dump());
    // Its tools write and delete files: the union it now runs in (it started read-only).
    CHECK(files["sandbox"]["capabilities"] ==
          json::array({"read-only", "writes-files", "destructive"}));
    CHECK(files["sandbox"]["fs"].get<std::string>().rfind("landlock-abi-", 0) == 0);
    CHECK(files["restarts"] == 0); // moving into its sandbox is not a restart
    // Its cwd (the config's folder) is meithd's home: never writable, and said so.
    CHECK(files["sandbox"]["writeWithheld"].size() == 1);
    // The running process really is the confined one: no new privileges, a seccomp filter.
    const std::string status =
        slurp("/proc/" + std::to_string(files["pid"].get<int>()) + "/status");
    CHECK_THAT(status, Catch::Contains("NoNewPrivs:\t1"));
    CHECK_THAT(status, Catch::Contains("Seccomp:\t2"));
    // It writes under its root; the home (its cwd) stays out of reach.
    const json ok = c.call("write_file", {{"path", "note.txt"}, {"content", "x"}},
                           {{"clientInfo", {{"caller", "cli"}}}});
    CHECK(ok["result"]["ok"] == true);
    CHECK(fs::exists(root.path / "note.txt"));
}

TEST_CASE("a tool that declares nothing runs confined in the default profile: it writes its "
          "state folder and TMPDIR only, cannot connect or run a program, and says so",
          "[e2e][sandbox][profiles]") {
    REQUIRE_KERNEL_SANDBOX(false);
    listener l;
    temp_dir work, elsewhere;
    env_override state("XDG_STATE_HOME", (work.path / "state").string());
    const std::string readable =
        "sandbox_paths = { read = [" + json(elsewhere.path.string()).dump() + "] }\n";
    // `capabilities = []`: the tool declares nothing (`unknown`), which the policy may allow.
    daemon_process d(probe_source("bare", "[]", readable) +
                     "[permissions.callers.cli]\nallow = [\"read-only\", \"unknown\"]\n");
    client c(d.socket());
    const fs::path own = work.path / "state" / "meith" / "sources" / "bare";
    CHECK(fs::is_directory(own)); // made for it, owner-only
    CHECK((fs::status(own).permissions() & fs::perms::group_all) == fs::perms::none);

    const json wrote = probe(c, "bare", {{"action", "write"}, {"path", (own / "n.txt").string()}});
    CHECK(wrote["done"] == true);
    CHECK(fs::exists(own / "n.txt"));
    CHECK(probe(c, "bare", {{"action", "tmpdir"}})["done"] == true);
    const auto outside = elsewhere.path / "escaped.txt";
    const json refused = probe(c, "bare", {{"action", "write"}, {"path", outside.string()}});
    CHECK(refused["done"] == false);
    CHECK_FALSE(fs::exists(outside));
    const json offline = probe(c, "bare", {{"action", "connect"}, {"port", l.port}});
    CHECK(offline["code"] == "EACCES");
    const json nospawn = probe(c, "bare", {{"action", "spawn"}});
    CHECK(nospawn["code"] == "EACCES");

    // Its status: confined, in the default profile, its process read-only.
    const json s = sandbox_of(c, "bare");
    CHECK_FALSE(s.contains("unconfined"));
    CHECK(s["profile"] == "default");
    CHECK(s["capabilities"] == json::array({"read-only"}));
    CHECK(s["exec"] == "landlock,once");
    const auto listed = run_cli({"sources"}, d.home());
    CHECK_THAT(listed.out, Catch::Contains("confined: read-only (profile default)"));
}

TEST_CASE("a declared profile is the process's sandbox whatever its tool declares: npx may run "
          "programs and connect, a read-only tool's process too",
          "[e2e][sandbox][profiles]") {
    REQUIRE_KERNEL_SANDBOX(false);
    listener l;
    temp_dir work;
    env_override state("XDG_STATE_HOME", (work.path / "state").string());
    daemon_process d(probe_source("launcher", "[\"read-only\"]", "profile = \"npx\"\n") +
                     probe_source("plain", "[\"read-only\"]") + allow_all);
    client c(d.socket());
    CHECK(probe(c, "launcher", {{"action", "spawn"}})["done"] == true);
    CHECK(probe(c, "launcher", {{"action", "connect"}, {"port", l.port}})["done"] == true);
    // The same tool without the profile: its capabilities are its sandbox.
    CHECK(probe(c, "plain", {{"action", "spawn"}})["code"] == "EACCES");
    const json s = sandbox_of(c, "launcher");
    CHECK(s["profile"] == "npx");
    CHECK_FALSE(sandbox_of(c, "plain").contains("profile"));
    // The profile's environment: npm's cache in the state folder, TMPDIR short enough for a
    // Unix socket's path inside it (unix(7): 108 bytes with the NUL).
    const json env = probe(c, "launcher", {{"action", "env"}});
    INFO(env.dump());
    CHECK(env["npm_config_cache"] ==
          (work.path / "state" / "meith" / "sources" / "launcher" / "npm-cache").string());
    CHECK(env["TMPDIR"].get<std::string>().size() <= 47);
}

TEST_CASE("a sandbox_paths.write folder that is not there yet is made for the source, "
          "owner-only, and the tool writes in it",
          "[e2e][sandbox][profiles]") {
    REQUIRE_KERNEL_SANDBOX(false);
    temp_dir base;
    const fs::path cache = base.path / "cache" / "ms-playwright";
    daemon_process d(
        probe_source("w", "[\"writes-files\"]",
                     "sandbox_paths = { write = [" + json(cache.string()).dump() + "] }\n") +
        allow_all);
    client c(d.socket());
    CHECK(fs::is_directory(cache));
    CHECK((fs::status(cache).permissions() & fs::perms::others_all) == fs::perms::none);
    const json wrote = probe(c, "w", {{"action", "write"}, {"path", (cache / "x").string()}});
    CHECK(wrote["done"] == true);
    CHECK(fs::exists(cache / "x"));
}

TEST_CASE("a source's state folder is its own: another confined source does not see it",
          "[e2e][sandbox][profiles]") {
    REQUIRE_KERNEL_SANDBOX(true);
    temp_dir work;
    env_override state("XDG_STATE_HOME", (work.path / "state").string());
    daemon_process d(probe_source("a", "[]") + probe_source("b", "[]") +
                     "[permissions.callers.cli]\nallow = [\"read-only\", \"unknown\"]\n");
    client c(d.socket());
    const fs::path secret = work.path / "state" / "meith" / "sources" / "a" / "cookies";
    CHECK(probe(c, "a", {{"action", "write"}, {"path", secret.string()}})["done"] == true);
    CHECK(probe(c, "a", {{"action", "read"}, {"path", secret.string()}})["done"] == true);
    const json other = probe(c, "b", {{"action", "read"}, {"path", secret.string()}});
    INFO(other.dump());
    CHECK(other["done"] == false);
    CHECK(other["code"] == "ENOENT");
}

TEST_CASE("a browser-profile source may open Unix sockets of its own, and /tmp is private to it: "
          "an agent's socket there is out of reach",
          "[e2e][sandbox][profiles]") {
    REQUIRE_KERNEL_SANDBOX(true);
    temp_dir work, agent_dir;
    env_override state("XDG_STATE_HOME", (work.path / "state").string());
    // A socket in /tmp, as ssh-agent makes one (/tmp/ssh-XXXX/agent.N).
    const fs::path sock = agent_dir.path / "agent.sock";
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::snprintf(a.sun_path, sizeof a.sun_path, "%s", sock.c_str());
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    REQUIRE(::listen(fd, 4) == 0);
    daemon_process d(probe_source("br", "[\"read-only\"]", "profile = \"browser\"\n") +
                     probe_source("plain", "[\"read-only\"]", "sandbox = \"off\"\n") + allow_all);
    client c(d.socket());
    const json refused = probe(c, "br", {{"action", "unix"}, {"path", sock.string()}});
    INFO(refused.dump());
    CHECK(refused["done"] == false);
    CHECK(refused["code"] == "ENOENT");
    // The control: unconfined, the same connect works.
    CHECK(probe(c, "plain", {{"action", "unix"}, {"path", sock.string()}})["done"] == true);
    ::close(fd);
}

} // namespace e2e_sandbox_test
