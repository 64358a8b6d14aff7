// End-to-end: limits a tool cannot exhaust (issue 40, defects 12 and 13; docs/protocol.md §15
// "Limits"). The hostile probe (tests/exec/escape_probe.py `hoard`) takes processes or inotify
// instances until the kernel refuses and then holds them; while it holds them, meithd answers,
// another tool starts, and the test process (the user's shell) forks and watches files.
#include "daemon_fixture.hpp"
#include "escape_probe.hpp"

#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>
#include <string>
#include <sys/inotify.h>
#include <thread>
#include <unistd.h>

using namespace meith::test;

namespace e2e_limits_test { // one namespace per file: the tests build as unity batches

namespace {

/// Starts the hoard in tool `tool` on `c` (not waited for); the request id.
std::string start_hoard(client& c, const std::string& tool, const std::string& what,
                        const fs::path& dir) {
    const std::string id = "hoard-" + what;
    c.send({{"type", "tool_call"},
            {"protocol", 1},
            {"requestId", id},
            {"toolName", tool},
            {"clientInfo", {{"caller", "cli"}}},
            {"timeoutMs", 60000},
            {"arguments",
             {{"action", "hoard"}, {"what", what}, {"dir", dir.string()}, {"max", 5000}}}});
    return id;
}

/// Waits (bounded) until the hoard says it holds all it could get; how many.
int wait_at_limit(const fs::path& dir) {
    const auto until = std::chrono::steady_clock::now() + 90s;
    while (!fs::exists(dir / "at_limit")) {
        if (std::chrono::steady_clock::now() > until) FAIL("the hoard never reached a limit");
        std::this_thread::sleep_for(50ms);
    }
    std::this_thread::sleep_for(50ms); // its one short write
    return std::stoi(slurp(dir / "at_limit"));
}

/// While the hoard holds what it took: meithd answers, another confined tool starts, and this
/// process can fork and make an inotify instance.
void others_still_work(const daemon_process& d) {
    client other(d.socket());
    CHECK(other.call("echo", {{"x", 1}})["result"]["ok"] == true);
    CHECK(probe(other, "ro", {{"action", "tmpdir"}})["done"] == true);
    CHECK(std::system("true") == 0);
    const int fd = ::inotify_init1(IN_CLOEXEC);
    CHECK(fd >= 0);
    if (fd >= 0) ::close(fd);
}

} // namespace

TEST_CASE("limits (40.12): a tool's fork loop is bounded, and meithd, other tools and the user's "
          "shell keep working",
          "[e2e][sandbox][limits]") {
    REQUIRE_KERNEL_SANDBOX(true);
    temp_dir work;
    daemon_process d(
        probe_source("bomb", "[\"writes-files\"]", "cwd = " + json(work.path.string()).dump()) +
        probe_source("ro", "[\"read-only\"]") + policy);
    client c(d.socket());
    // As root the kernel ignores RLIMIT_NPROC: a cgroup must bound it.
    if (::geteuid() == 0 && ::access("/sys/fs/cgroup/pids", W_OK) != 0)
        SKIP_TEST("meithd runs as root and no pids cgroup hierarchy is writable here");
    const json st = source_status(c, "bomb")["sandbox"];
    INFO(st.dump());
    CHECK(st.value("limits", "").find(::geteuid() == 0 ? "pids" : "rlimit") != std::string::npos);
    const std::string id = start_hoard(c, "bomb", "processes", work.path);
    const int held = wait_at_limit(work.path);
    CHECK(held < 1024); // the default bound, tasks of the whole tree
    CHECK(held > 100);
    others_still_work(d);
    std::ofstream(work.path / "release") << "";
    const json r = c.wait_result(id, nullptr, 60s);
    INFO(r.dump());
    REQUIRE(r["result"]["ok"] == true);
    CHECK(r["result"]["content"]["code"] == "EAGAIN");
}

TEST_CASE("limits (40.13): a tool takes at most 32 inotify instances, not the user's 128",
          "[e2e][sandbox][limits]") {
    REQUIRE_KERNEL_SANDBOX(true);
    temp_dir work;
    daemon_process d(
        probe_source("watcher", "[\"writes-files\"]", "cwd = " + json(work.path.string()).dump()) +
        probe_source("ro", "[\"read-only\"]") + policy);
    client c(d.socket());
    const std::string id = start_hoard(c, "watcher", "inotify", work.path);
    const int held = wait_at_limit(work.path);
    CHECK(held <= 32);
    others_still_work(d);
    std::ofstream(work.path / "release") << "";
    const json r = c.wait_result(id, nullptr, 60s);
    INFO(r.dump());
    REQUIRE(r["result"]["ok"] == true);
    CHECK(r["result"]["content"]["code"] == "EMFILE");
}

} // namespace e2e_limits_test
