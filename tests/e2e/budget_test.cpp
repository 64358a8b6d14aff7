// The built-in path's budget, counted, not timed (issue 33): meithd runs with
// tests/support/call_counter.cpp preloaded, which counts its allocations and write-family system
// calls; the test reads the counts before and after a run of sequential built-in calls and fails
// when a call costs more than the budget below. Counts per call do not move with the machine's
// speed, so this cannot flake the way a timed test would. When a change must add to the hot
// path, raise the budget here and say why in bench/PROFILE.md ("The hot path's budget").
#include "daemon_fixture.hpp"

#include <catch2/catch.hpp>

#include <csignal>
#include <fstream>
#include <thread>

using namespace meith::test;

namespace e2e_budget_test { // one namespace per file: the tests build as unity batches

namespace {

/// Allocations and write-family system calls made by one built-in `echo` call in meithd, one
/// call in flight, audit on (measured 2026-11-26 at the commit that adds this test: see
/// bench/PROFILE.md). A budget is the measured count plus less than one: one more allocation
/// or write per call fails.
constexpr double allocation_budget = 7.5;
constexpr double write_budget = 2.5;

struct counts {
    double allocations = 0, writes = 0;
};

/// Asks meithd's preloaded counter for its counts (SIGUSR2) and waits for the file.
counts snapshot(pid_t pid, const fs::path& file) {
    fs::remove(file);
    REQUIRE(::kill(pid, SIGUSR2) == 0);
    for (int i = 0; i < 500 && !fs::exists(file); ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    std::ifstream in(file);
    counts c;
    REQUIRE(in >> c.allocations >> c.writes);
    return c;
}

} // namespace

TEST_CASE("hot path budget: a built-in call costs meithd at most its budget of allocations and "
          "writes",
          "[e2e][budget]") {
    temp_dir t;
    const fs::path file = t.path / "counts";
    std::unique_ptr<daemon_process> d;
    {
        // Only meithd loads the counter: the variables are gone before this process starts
        // anything else.
        env_override preload("LD_PRELOAD", MEITH_COUNT_SHIM);
        env_override where("MEITH_COUNT_FILE", file.string());
        d = std::make_unique<daemon_process>();
    }
    client c(d->socket());
    const json args = {{"text", "the hot path"}, {"n", 42}};
    for (int i = 0; i < 300; ++i) // warm: caches, buffers and the audit file's first writes
        REQUIRE(c.call("echo", args)["result"]["ok"] == true);
    const counts before = snapshot(d->pid(), file);
    constexpr int calls = 2000;
    for (int i = 0; i < calls; ++i)
        REQUIRE(c.call("echo", args)["result"]["ok"] == true);
    const counts after = snapshot(d->pid(), file);
    const double allocations = (after.allocations - before.allocations) / calls;
    const double writes = (after.writes - before.writes) / calls;
    INFO("per built-in call: " << allocations << " allocations (budget " << allocation_budget
                               << "), " << writes << " writes (budget " << write_budget << ")");
    CHECK(allocations <= allocation_budget);
    CHECK(writes <= write_budget);
    WARN("per built-in call: " << allocations << " allocations, " << writes << " writes");
}

} // namespace e2e_budget_test
