// End-to-end: cancellation reaches the tool (docs/protocol.md §16, PROTOCOL.md §14). A call
// that ends without its result — cancel_tool_call, its timeout, its client going away, the
// daemon shutting down — is answered at once, and the work itself stops: the tool host gets
// `cancel`, an exec server `notifications/cancelled`. The tools here append "tick N" to a file
// while they run, so a test sees their side effects stop, not only the caller's answer.
#include "daemon_fixture.hpp"

#include <catch2/catch.hpp>

#include <csignal>
#include <fstream>
#include <sstream>
#include <thread>

using namespace meith::test;

namespace e2e_cancel_test { // one namespace per file: the tests build as unity batches

namespace {

std::string read_text(const fs::path& p) {
    std::ifstream in(p);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

/// Waits until the file's text contains `needle`; returns the text then (or at the deadline).
std::string wait_for_text(const fs::path& p, const std::string& needle,
                          std::chrono::milliseconds timeout = 5s) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    std::string text;
    while (std::chrono::steady_clock::now() < deadline) {
        text = read_text(p);
        if (text.find(needle) != std::string::npos) break;
        std::this_thread::sleep_for(20ms);
    }
    return text;
}

/// True when the file stops growing: the same size after `quiet` (ticks come every 20 ms).
bool stays_still(const fs::path& p, std::chrono::milliseconds quiet = 400ms) {
    const auto before = read_text(p).size();
    std::this_thread::sleep_for(quiet);
    return read_text(p).size() == before;
}

json ticker_call(const std::string& id, const fs::path& file) {
    return {{"type", "tool_call"},
            {"requestId", id},
            {"toolName", "t_ticker"},
            {"arguments", {{"path", file.string()}, {"interval_ms", 20}}}};
}

const std::string sandbox_off = "sandbox = \"off\"\n"; // the ticker writes where it is told

} // namespace

TEST_CASE("cancel_tool_call stops the tool in its host, which says so in list_sources",
          "[e2e][cancel]") {
    temp_dir work;
    const auto file = work.path / "ticks";
    daemon_process d(host_source_toml("th", {}, sandbox_off));
    client c(d.socket());
    CHECK(source_status(c, "th")["cancel"].is_null()); // no cancel sent yet
    c.send(ticker_call("tick", file));
    REQUIRE(wait_for_text(file, "tick 3").find("tick 3") != std::string::npos);
    c.send({{"type", "cancel_tool_call"}, {"requestId", "tick"}});
    CHECK(c.wait_result("tick")["result"]["error"]["code"] == "CANCELLED");
    const auto text = wait_for_text(file, "stopped:");
    CHECK(text.find(": cancelled") != std::string::npos);
    CHECK(stays_still(file)); // the work stopped, not only the answer
    CHECK(source_status(c, "th")["cancel"] == true);
    CHECK(c.silent_for(200ms)); // the host's late answer is not passed on
}

TEST_CASE("a timeout stops the tool with reason timeout", "[e2e][cancel]") {
    temp_dir work;
    const auto file = work.path / "ticks";
    daemon_process d(host_source_toml("th", {}, sandbox_off));
    client c(d.socket());
    auto frame = ticker_call("slow", file);
    frame["timeoutMs"] = 200;
    c.send(frame);
    CHECK(c.wait_result("slow")["result"]["error"]["code"] == "TIMEOUT");
    CHECK(wait_for_text(file, "stopped:").find(": timeout") != std::string::npos);
    CHECK(stays_still(file));
}

TEST_CASE("a client that goes away stops its tools with reason disconnected", "[e2e][cancel]") {
    temp_dir work;
    const auto file = work.path / "ticks";
    daemon_process d(host_source_toml("th", {}, sandbox_off));
    {
        client c(d.socket());
        c.send(ticker_call("gone", file));
        REQUIRE(wait_for_text(file, "tick 2").find("tick 2") != std::string::npos);
    }
    CHECK(wait_for_text(file, "stopped:").find(": disconnected") != std::string::npos);
    CHECK(stays_still(file));
}

TEST_CASE("shutdown stops the tools still running after the grace with reason shutdown",
          "[e2e][cancel]") {
    temp_dir work;
    const auto file = work.path / "ticks";
    daemon_process d(host_source_toml("th", {}, sandbox_off) +
                     "[tools]\nshutdown_grace_ms = 300\n");
    client c(d.socket());
    c.send(ticker_call("long", file));
    REQUIRE(wait_for_text(file, "tick 2").find("tick 2") != std::string::npos);
    ::kill(d.pid(), SIGTERM);
    CHECK(c.wait_result("long")["result"]["error"]["code"] == "RUNTIME_SHUTTING_DOWN");
    CHECK(d.wait_exit(10s) == 0);
    // The host gets `cancel` (reason shutdown), then EOF, then SIGTERM: the work stops by the
    // cancel or with the process, whichever comes first, and never outlives the daemon.
    const auto text = read_text(file);
    if (const auto stopped = text.find("stopped:"); stopped != std::string::npos)
        CHECK(text.find(": shutdown", stopped) != std::string::npos);
    CHECK(stays_still(file));
}

TEST_CASE("a host without cancel runs on after the caller's answer, and list_sources says "
          "cancel false",
          "[e2e][cancel]") {
    temp_dir work;
    const auto file = work.path / "ticks";
    daemon_process d(host_source_toml("th", {"--no-cancel"}, sandbox_off));
    client c(d.socket());
    c.send(ticker_call("tick", file));
    REQUIRE(wait_for_text(file, "tick 2").find("tick 2") != std::string::npos);
    c.send({{"type", "cancel_tool_call"}, {"requestId", "tick"}});
    CHECK(c.wait_result("tick")["result"]["error"]["code"] == "CANCELLED");
    // The answer was at once; the host could not stop the work (what §16 exists to fix).
    CHECK_FALSE(stays_still(file, 200ms));
    const auto deadline = std::chrono::steady_clock::now() + 5s;
    json status;
    while (std::chrono::steady_clock::now() < deadline) {
        status = source_status(c, "th");
        if (!status["cancel"].is_null()) break;
        std::this_thread::sleep_for(20ms);
    }
    CHECK(status["cancel"] == false);
    CHECK(read_text(file).find("stopped:") == std::string::npos);
}

TEST_CASE("an exec server gets notifications/cancelled for a cancelled or timed-out call",
          "[e2e][cancel]") {
    temp_dir work;
    const auto a = work.path / "a", b = work.path / "b";
    daemon_process d(exec_source_toml("ex", "server", "server.mjs", "ex_run", {}, sandbox_off));
    client c(d.socket());
    c.send({{"type", "tool_call"},
            {"requestId", "a"},
            {"toolName", "ex_run"},
            {"arguments", {{"mode", "ticker"}, {"path", a.string()}}}});
    REQUIRE(wait_for_text(a, "tick 2").find("tick 2") != std::string::npos);
    c.send({{"type", "cancel_tool_call"}, {"requestId", "a"}});
    CHECK(c.wait_result("a")["result"]["error"]["code"] == "CANCELLED");
    CHECK(wait_for_text(a, "stopped:").find("stopped: cancelled") != std::string::npos);
    CHECK(stays_still(a));

    c.send({{"type", "tool_call"},
            {"requestId", "b"},
            {"toolName", "ex_run"},
            {"arguments", {{"mode", "ticker"}, {"path", b.string()}}},
            {"timeoutMs", 200}});
    CHECK(c.wait_result("b")["result"]["error"]["code"] == "TIMEOUT");
    CHECK(wait_for_text(b, "stopped:").find("stopped: timeout") != std::string::npos);
    CHECK(stays_still(b));
}

} // namespace e2e_cancel_test
