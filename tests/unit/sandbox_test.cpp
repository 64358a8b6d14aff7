// Unit tests of the sandbox library (sandbox/sandbox.hpp): program lookup, interpreters, and
// what a plan confines with what a kernel offers. The confinement itself is tested end to end
// (tests/e2e/sandbox_test.cpp) with real processes.
#include "sandbox/learn.hpp"
#include "sandbox/sandbox.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

namespace fs = std::filesystem;
using namespace meith::sandbox;
using meith::permissions::capability_set_from;

namespace unit_sandbox_test { // one namespace per file: the tests build as unity batches

TEST_CASE("resolve_program looks a bare name up in PATH and makes it absolute", "[sandbox]") {
    const auto sh = resolve_program("sh", "/nonexistent:/usr/bin:/bin");
    REQUIRE(sh);
    CHECK(sh->is_absolute());
    CHECK(sh->filename() == "sh");
    CHECK_FALSE(resolve_program("no-such-program-here", "/usr/bin:/bin"));
    CHECK_FALSE(resolve_program("", "/usr/bin"));
    // A path with a slash is taken as it is (and must be executable).
    CHECK(resolve_program("/bin/sh", ""));
    CHECK_FALSE(resolve_program("/etc/passwd", ""));
}

TEST_CASE("interpreters_of: an ELF binary's loader, a script's interpreter and env's program",
          "[sandbox]") {
    const auto sh = *resolve_program("sh", "/usr/bin:/bin");
    const auto elf = interpreters_of(sh, "/usr/bin:/bin");
    REQUIRE_FALSE(elf.empty()); // dynamically linked: ld-linux
    CHECK(fs::exists(elf[0]));

    char dir[] = "/tmp/meith-sandbox-unit.XXXXXX";
    REQUIRE(::mkdtemp(dir));
    const fs::path script = fs::path(dir) / "tool.sh";
    std::ofstream(script) << "#!/usr/bin/env sh\necho hi\n";
    const auto via_env = interpreters_of(script, "/usr/bin:/bin");
    REQUIRE(via_env.size() >= 2);
    CHECK(via_env[0] == "/usr/bin/env");
    bool has_sh = false;
    for (const auto& p : via_env)
        has_sh = has_sh || p.filename() == "sh";
    CHECK(has_sh);
    std::ofstream(script, std::ios::trunc) << "plain text, no interpreter\n";
    CHECK(interpreters_of(script, "/usr/bin:/bin").empty());
    fs::remove_all(dir);
}

TEST_CASE("prepare: what a plan confines with what the kernel offers", "[sandbox]") {
    request r;
    r.program = *resolve_program("sh", "/usr/bin:/bin");
    r.cwd = "/tmp";
    r.tmp_dir = "/tmp";

    // Nothing to confine with: nothing confined, and it says so.
    r.capabilities = capability_set_from(std::vector<std::string>{"read-only"});
    const auto bare = prepare(r, kernel_support{0, false, false, ""});
    CHECK(bare->ruleset_fd < 0);
    CHECK(bare->seccomp_bpf.empty());
    CHECK(bare->fs == "none");
    CHECK(bare->net == "none");
    CHECK_FALSE(bare->complete);

    // Network allowed by its capabilities: still a filter (packet, vsock, raw sockets, io_uring).
    r.capabilities = capability_set_from(std::vector<std::string>{"read-only", "accesses-network"});
    const auto net_ok = prepare(r, kernel_support{0, true, false, ""});
    CHECK(net_ok->net == "allowed");
    CHECK_FALSE(net_ok->seccomp_bpf.empty());

    // Seccomp only: the filter is built (whole sock_filter records).
    r.capabilities = capability_set_from(std::vector<std::string>{"read-only"});
    const auto filtered = prepare(r, kernel_support{0, true, false, ""});
    CHECK(filtered->net == "seccomp");
    CHECK(filtered->ns == "none"); // no namespaces offered: none asked for, incomplete
    // Namespaces without seccomp: an empty network namespace cuts IP off instead.
    const auto netns = prepare(r, kernel_support{0, false, true, ""});
    CHECK(netns->ns == "user,mount,ipc,pid,net");
    CHECK(netns->net == "netns");
    CHECK(filtered->clone_flags == 0);
    CHECK_FALSE(filtered->complete);
    CHECK_FALSE(filtered->seccomp_bpf.empty());
    CHECK(filtered->seccomp_bpf.size() % 8 == 0);

    // With the running kernel's Landlock (when it has it): a ruleset, exec confined.
    if (detect().landlock_abi > 0) {
        const auto full = prepare(r, detect());
        CHECK(full->ruleset_fd >= 0);
        CHECK(full->fs == "landlock-abi-" + std::to_string(detect().landlock_abi));
        // The init program is built beside the tests: exec once, and complete with namespaces.
        REQUIRE_FALSE(init_program().empty());
        CHECK(full->exec == "landlock,once");
        CHECK(full->complete == (detect().seccomp && detect().namespaces));
        if (detect().namespaces) {
            // No network namespace where seccomp refuses every socket already (its cost).
            CHECK(full->ns == "user,mount,ipc,pid");
            CHECK(full->home == "hidden");
        }
        r.capabilities =
            capability_set_from(std::vector<std::string>{"read-only", "starts-process"});
        CHECK(prepare(r, detect())->exec == "allowed");
    } else {
        WARN("this kernel has no Landlock: the ruleset part is checked end to end only");
    }
    CHECK_FALSE(describe(kernel_support{0, false, false, ""}).empty());
}

namespace {

/// Runs `body` in a forked child under `plan`'s filter; the child's exit status (0: passed).
template <typename Body>
int under_filter(const plan& p, Body body) {
    const pid_t pid = ::fork();
    if (pid == 0) ::_exit(apply(p) != 0 ? 3 : body());
    int status = 0;
    ::waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/// socket(2) with the family's upper 32 bits set as given: the errno, or 0 when it opened.
int socket_errno(long family, int type, int protocol) {
    const long fd = ::syscall(SYS_socket, family, type, protocol);
    if (fd < 0) return errno;
    ::close(static_cast<int>(fd));
    return 0;
}

} // namespace

TEST_CASE("with accesses-network only AF_INET(6) and NETLINK_ROUTE sockets open, not AF_UNIX",
          "[sandbox]") {
    if (!detect().seccomp) {
        WARN("no seccomp here: skipped");
        return;
    }
    request r;
    r.program = *resolve_program("sh", "/usr/bin:/bin");
    r.capabilities = capability_set_from(std::vector<std::string>{"read-only", "accesses-network"});
    const auto plan = prepare(r, kernel_support{0, true, false, ""});
    CHECK(under_filter(*plan, [] {
              const bool ok = socket_errno(AF_INET, SOCK_STREAM, 0) == 0 &&
                              socket_errno(AF_INET6, SOCK_DGRAM, 0) == 0 &&
                              socket_errno(AF_UNIX, SOCK_STREAM, 0) == EACCES &&
                              socket_errno(AF_NETLINK, SOCK_RAW, 0 /* NETLINK_ROUTE */) == 0 &&
                              socket_errno(AF_NETLINK, SOCK_RAW, 9 /* NETLINK_AUDIT */) == EACCES &&
                              socket_errno(AF_PACKET, SOCK_RAW, 0) == EACCES &&
                              socket_errno(0x100000000L | AF_PACKET, SOCK_RAW, 0) == EACCES &&
                              socket_errno(40 /* AF_VSOCK */, SOCK_STREAM, 0) == EACCES &&
                              socket_errno(AF_INET, SOCK_RAW, IPPROTO_UDP) == EACCES &&
                              ::syscall(SYS_io_uring_setup, 1, nullptr) == -1 && errno == EACCES;
              return ok ? 0 : 1;
          }) == 0);
}

TEST_CASE("declared socket paths open AF_UNIX only where namespaces make the socket places "
          "private",
          "[sandbox]") {
    if (!detect().seccomp) {
        WARN("no seccomp here: skipped");
        return;
    }
    request r;
    r.program = *resolve_program("sh", "/usr/bin:/bin");
    r.extra.sockets = {"/run/postgresql"};
    for (const char* caps : {"read-only", "accesses-network"}) {
        INFO(caps);
        r.capabilities = capability_set_from(std::vector<std::string>{caps});
        // Without namespaces the declaration is refused: every socket would be in reach.
        const auto bare = prepare(r, kernel_support{0, true, false, "none here"});
        CHECK_FALSE(bare->unix_sockets);
        CHECK(bare->unix == "refused");
        CHECK_FALSE(bare->complete);
        CHECK(under_filter(*bare, [] {
                  return socket_errno(AF_UNIX, SOCK_STREAM, 0) == EACCES ? 0 : 1;
              }) == 0);
        const auto ns = prepare(r, kernel_support{0, true, true, ""});
        CHECK(ns->unix_sockets);
        CHECK(ns->unix == "declared");
        CHECK(under_filter(*ns, [] {
                  const bool ok = socket_errno(AF_UNIX, SOCK_STREAM, 0) == 0 &&
                                  socket_errno(0x100000000L | AF_UNIX, SOCK_STREAM, 0) == EACCES;
                  return ok ? 0 : 1;
              }) == 0);
        // /run and /dev/shm are masked; /run/postgresql (when it exists) is bound back.
        std::vector<std::string> masks;
        for (const auto& step : ns->steps)
            if (step.what == mount_step::kind::mask) masks.push_back(step.path);
        CHECK(std::find(masks.begin(), masks.end(), "/run") != masks.end());
        CHECK(std::find(masks.begin(), masks.end(), "/dev/shm") != masks.end());
    }
}

TEST_CASE("the network filter compares the socket family as the kernel reads it (32 bits)",
          "[sandbox]") {
    if (!detect().seccomp) {
        WARN("no seccomp here: skipped");
        return;
    }
    request r;
    r.program = *resolve_program("sh", "/usr/bin:/bin");
    r.capabilities = capability_set_from(std::vector<std::string>{"read-only"});
    const auto plan = prepare(r, kernel_support{0, true, false, ""});
    // In a child (the filter cannot be taken off): socket(AF_INET) plainly, and with garbage
    // in the upper half of the register, which the kernel ignores; both must fail EACCES.
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        if (apply(*plan) != 0) ::_exit(3);
        const long plain = ::syscall(SYS_socket, AF_INET, SOCK_STREAM, 0);
        const int e1 = errno;
        const long high = ::syscall(SYS_socket, 0x100000000L | AF_INET, SOCK_STREAM, 0);
        const int e2 = errno;
        // Without accesses-network no socket at all (meithd's socket, a session bus, an
        // agent's); a socketpair of AF_UNIX only (asyncio's self-pipe).
        const long unix_socket = ::syscall(SYS_socket, AF_UNIX, SOCK_STREAM, 0);
        const int e3 = errno;
        int pair[2];
        const long unix_pair = ::syscall(SYS_socketpair, AF_UNIX, SOCK_STREAM, 0, pair);
        const long inet_pair = ::syscall(SYS_socketpair, AF_INET, SOCK_STREAM, 0, pair);
        ::_exit(plain == -1 && e1 == EACCES && high == -1 && e2 == EACCES && unix_socket == -1 &&
                        e3 == EACCES && unix_pair == 0 && inet_pair == -1
                    ? 0
                    : 1);
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE("a learned profile covers the record with the fewest entries and keeps the entry's own",
          "[sandbox][learn]") {
    namespace sb = meith::sandbox;
    const fs::path tmp = fs::temp_directory_path() / ("meith-learn-" + std::to_string(::getpid()));
    fs::create_directories(tmp / "home" / "existing" / "deep");
    sb::learn_context ctx;
    ctx.home = tmp / "home";
    ctx.state_dir = tmp / "state";
    ctx.tmp_root = tmp / "mt";
    ctx.programs = {"/usr/bin/sh"};
    ctx.write = {"/srv/kept"};
    const std::string h = ctx.home.string();
    const std::string record = "x /usr/bin/sh\nx /usr/bin/date\nx /nonexistent/bin/date\n"
                               "w /dev/null\n"
                               "w " +
                               h + "\nw " + h + "/existing\nw " + h + "/existing/deep\n" + "w " +
                               h + "/existing/deep/f.txt\nw " + h + "/existing/deep/g.txt\n" +
                               "w " + h + "/.history\nw " + (tmp / "state" / "x").string() + "\n" +
                               "w " + (tmp / "mt" / "s" / "tmp" / "y").string() + "\n" +
                               "u /run/user/0/bus\nu @/tmp/.X11-unix/X0\nn 127.0.0.1:5432\n" +
                               "n 203.0.113.7:443\nd api.example.com\nd localhost\n! truncated\n";
    const auto p = sb::summarize(record, ctx);
    CHECK(p.profile == std::vector<std::string>{"default"});
    CHECK(p.new_profile);
    // mkdir -p's existing ancestors left out; a file straight in the home stays that file.
    CHECK(p.write == std::vector<std::string>{"/srv/kept", h + "/.history", h + "/existing/deep"});
    CHECK(p.exec == std::vector<std::string>{fs::canonical("/usr/bin/date").string()});
    CHECK(p.sockets == std::vector<std::string>{"/run/user/0/bus"});
    CHECK(p.network == std::vector<std::string>{"127.0.0.1:5432", "api.example.com"});
    CHECK(p.allow_private);
    CHECK(p.truncated);
    REQUIRE(p.notes.size() == 1);
    CHECK_THAT(p.notes[0], Catch::Contains("abstract socket @/tmp/.X11-unix/X0"));
    const auto keys = p.toml_keys();
    REQUIRE(keys.size() == 3);
    CHECK(keys[0] == std::pair<std::string, std::string>{"profile", "[\"default\"]"});
    CHECK(keys[2].second ==
          "{ allow = [\"127.0.0.1:5432\", \"api.example.com\"], allow_private = true }");
    fs::remove_all(tmp);
}

} // namespace unit_sandbox_test
