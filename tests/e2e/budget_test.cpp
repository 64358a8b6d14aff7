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
/// The same for one MCP tools/call of `echo` through the pipes `meith mcp` handed to meithd
/// (docs/protocol.md §10 "Handoff"), measured 2026-11-30 (bench/PROFILE.md, round six): 33
/// allocations — 149 while the session read the client's message and the reply frame with
/// nlohmann; its fast path (bridge/fast_path.cpp) reads both with simdjson and writes the frame
/// and the answer as text — and two writes: the answer to the client's pipe and the audit
/// line; the session's frames reach its connection in memory.
constexpr double mcp_allocation_budget = 33.5;
constexpr double mcp_write_budget = 2.5;
/// The same for one call of a confined one-shot exec tool (bench/oneshot.sh), each run started
/// by its source's zygote (process/zygote.hpp), measured 2026-11-29: 108 allocations and 4
/// write calls (the request to the child's stdin, the reply and the audit line among them;
/// the run's request to the zygote is one sendmsg). Started directly (MEITH_ZYGOTE=0): 119.
constexpr double oneshot_allocation_budget = 108.5;
constexpr double oneshot_write_budget = 4.5;

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

/// meithd on a temporary home with `config_toml`, the counter preloaded into it alone: the
/// variables are gone before this process starts anything else.
std::unique_ptr<daemon_process> counted_daemon(const fs::path& file,
                                               const std::string& config_toml = "") {
    env_override preload("LD_PRELOAD", MEITH_COUNT_SHIM);
    env_override where("MEITH_COUNT_FILE", file.string());
    return std::make_unique<daemon_process>(config_toml);
}

} // namespace

TEST_CASE("hot path budget: a built-in call costs meithd at most its budget of allocations and "
          "writes",
          "[e2e][budget]") {
    temp_dir t;
    const fs::path file = t.path / "counts";
    const auto d = counted_daemon(file);
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

TEST_CASE("hot path budget: an MCP tools/call through the pipes meith mcp handed over costs "
          "meithd at most its budget of allocations and writes",
          "[e2e][budget][handoff]") {
    // docs/protocol.md §10 "Handoff": meithd reads the client's pipe, the session's frames go
    // through its in-process socket pair to an ordinary connection, the answer to the pipe.
    temp_dir t;
    const fs::path file = t.path / "counts";
    const auto d = counted_daemon(file);
    mcp_child m(d->home());
    m.send({{"jsonrpc", "2.0"},
            {"id", 1},
            {"method", "initialize"},
            {"params",
             {{"protocolVersion", "2025-11-25"},
              {"capabilities", json::object()},
              {"clientInfo", {{"name", "budget"}, {"version", "1"}}}}}});
    REQUIRE(m.answer(1)["result"]["serverInfo"]["name"] == "meith");
    REQUIRE(!d->audit_events("mcp_handoff").empty());
    const auto call = [&](int id) {
        m.send(
            {{"jsonrpc", "2.0"},
             {"id", id},
             {"method", "tools/call"},
             {"params", {{"name", "echo"}, {"arguments", {{"text", "the hot path"}, {"n", 42}}}}}});
        REQUIRE(m.answer(id)["result"]["structuredContent"]["n"] == 42);
    };
    // Ids of the same width throughout: 100000.. (their digits are copied per call).
    int id = 100000;
    for (int i = 0; i < 300; ++i)
        call(id++);
    const counts before = snapshot(d->pid(), file);
    constexpr int calls = 1000;
    for (int i = 0; i < calls; ++i)
        call(id++);
    const counts after = snapshot(d->pid(), file);
    const double allocations = (after.allocations - before.allocations) / calls;
    const double writes = (after.writes - before.writes) / calls;
    INFO("per MCP call through the handed-over pipes: "
         << allocations << " allocations (budget " << mcp_allocation_budget << "), " << writes
         << " writes (budget " << mcp_write_budget << ")");
    CHECK(allocations <= mcp_allocation_budget);
    CHECK(writes <= mcp_write_budget);
    WARN("per MCP call through the handoff: " << allocations << " allocations, " << writes
                                              << " writes");
}

TEST_CASE("hot path budget: a confined one-shot exec run costs meithd at most its budget of "
          "allocations and writes",
          "[e2e][budget][sandbox]") {
    // Each call of a one-shot exec tool starts a process in the kernel sandbox (docs/protocol.md
    // §15): namespaces, mounts, Landlock, seccomp, meith-sandbox-init. What meithd itself
    // spends on it is counted here, so that a cheaper start (issue 46 (k)) shows as fewer
    // counts and a costlier one fails.
    REQUIRE_KERNEL_SANDBOX(true);
    temp_dir t;
    const fs::path file = t.path / "counts";
    const std::string toml =
        "[[sources]]\nname = \"k_on\"\nkind = \"exec\"\ncommand = [\"sh\", \"" +
        std::string(MEITH_SOURCE_DIR) +
        "/bench/oneshot.sh\"]\ntool = { name = \"k_on\", capabilities = "
        "[\"read-only\"] }\n";
    const auto d = counted_daemon(file, toml);
    client c(d->socket());
    for (int i = 0; i < 20; ++i)
        REQUIRE(c.call("k_on", json::object())["result"]["ok"] == true);
    const counts before = snapshot(d->pid(), file);
    constexpr int calls = 200;
    for (int i = 0; i < calls; ++i)
        REQUIRE(c.call("k_on", json::object())["result"]["ok"] == true);
    const counts after = snapshot(d->pid(), file);
    const double allocations = (after.allocations - before.allocations) / calls;
    const double writes = (after.writes - before.writes) / calls;
    INFO("per confined one-shot run: " << allocations << " allocations (budget "
                                       << oneshot_allocation_budget << "), " << writes
                                       << " writes (budget " << oneshot_write_budget << ")");
    CHECK(allocations <= oneshot_allocation_budget);
    CHECK(writes <= oneshot_write_budget);
    WARN("per confined one-shot run: " << allocations << " allocations, " << writes << " writes");
}

} // namespace e2e_budget_test
