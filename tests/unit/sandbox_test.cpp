// Unit tests of the sandbox library (sandbox/sandbox.hpp): program lookup, interpreters, and
// what a plan confines with what a kernel offers. The confinement itself is tested end to end
// (tests/e2e/sandbox_test.cpp) with real processes.
#include "sandbox/sandbox.hpp"

#include <catch2/catch.hpp>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

namespace fs = std::filesystem;
using namespace meith::sandbox;
using meith::permissions::capability_set_from;

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
    const auto bare = prepare(r, kernel_support{0, false});
    CHECK(bare->ruleset_fd < 0);
    CHECK(bare->seccomp_bpf.empty());
    CHECK(bare->fs == "none");
    CHECK(bare->net == "none");
    CHECK_FALSE(bare->complete);

    // Network allowed by its capabilities: no filter needed, and that is complete for the net.
    r.capabilities = capability_set_from(std::vector<std::string>{"read-only", "accesses-network"});
    const auto net_ok = prepare(r, kernel_support{0, true});
    CHECK(net_ok->net == "allowed");
    CHECK(net_ok->seccomp_bpf.empty());

    // Seccomp only: the filter is built (whole sock_filter records).
    r.capabilities = capability_set_from(std::vector<std::string>{"read-only"});
    const auto filtered = prepare(r, kernel_support{0, true});
    CHECK(filtered->net == "seccomp");
    CHECK_FALSE(filtered->seccomp_bpf.empty());
    CHECK(filtered->seccomp_bpf.size() % 8 == 0);

    // With the running kernel's Landlock (when it has it): a ruleset, exec confined.
    if (detect().landlock_abi > 0) {
        const auto full = prepare(r, detect());
        CHECK(full->ruleset_fd >= 0);
        CHECK(full->fs == "landlock-abi-" + std::to_string(detect().landlock_abi));
        CHECK(full->exec == "landlock");
        CHECK(full->complete == detect().seccomp);
        r.capabilities =
            capability_set_from(std::vector<std::string>{"read-only", "starts-process"});
        CHECK(prepare(r, detect())->exec == "allowed");
    } else {
        WARN("this kernel has no Landlock: the ruleset part is checked end to end only");
    }
    CHECK_FALSE(describe(kernel_support{0, false}).empty());
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
    const auto plan = prepare(r, kernel_support{0, true});
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
        const long unix_ok = ::syscall(SYS_socket, AF_UNIX, SOCK_STREAM, 0);
        ::_exit(plain == -1 && e1 == EACCES && high == -1 && e2 == EACCES && unix_ok >= 0 ? 0 : 1);
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
}
