// End-to-end checks only a build without the sanitizers can make (binary test_e2e_unsanitized,
// label `unsanitized`, run by the dev preset; everything else in tests/e2e runs under ASan +
// UBSan): the daemon's peak memory against a bound (the sanitizers' shadow memory and
// quarantine would swamp it), and accept running out of descriptors (UBSan's vptr check opens
// a pipe of its own whenever a type misses its cache: with every descriptor taken, a valid
// object reads as "invalid vptr"). The hot path's allocation budget (budget_test.cpp) is in the
// same binary, for the same reason: the sanitizers bring their own allocator.
#include "daemon_fixture.hpp"

#include <catch2/catch.hpp>

#include <sys/resource.h>

#include <fstream>
#include <thread>

using namespace meith::test;
using namespace std::chrono_literals;

namespace e2e_unsanitized_test { // one namespace per file: the tests build as unity batches

TEST_CASE("oversized frames are discarded, answered, and memory stays bounded", "[e2e]") {
    daemon_process d("[limits]\nmax_frame_bytes = 4096\nmax_result_bytes = 4096\n");
    client c(d.socket());
    // 64 MiB in one frame: far more than the limit; the daemon must drop it as it streams in.
    std::string big =
        R"({"type":"tool_call","requestId":"big","toolName":"echo","arguments":{"s":")";
    big += std::string(64 * 1024 * 1024, 'x');
    big += "\"}}\n";
    std::thread writer([&] { c.send_raw(big); });
    auto f = c.read(30s);
    writer.join();
    CHECK(f["type"] == "error");
    CHECK(f["code"] == "FRAME_TOO_LARGE");
    CHECK_THAT(f["message"].get<std::string>(),
               Catch::Contains("raise `max_frame_bytes` under [limits] in meithd.toml"));
    auto r = c.call("echo", {{"after", true}});
    CHECK(r["result"]["content"]["after"] == true);
    // Resident memory of the daemon stays far below the frame size.
    std::ifstream status("/proc/" + std::to_string(d.pid()) + "/status");
    std::string line;
    long rss_kb = 0;
    while (std::getline(status, line))
        if (line.rfind("VmHWM:", 0) == 0) rss_kb = std::stol(line.substr(6));
    CHECK(rss_kb > 0);
    CHECK(rss_kb < 48 * 1024);
}

TEST_CASE("a client that never reads is cut off while the daemon's memory stays bounded",
          "[e2e][audit]") {
    daemon_process d("[limits]\nmax_result_bytes = 1048576\nmax_outbound_bytes = "
                     "2097152\nwrite_stall_ms = 300\n");
    client c(d.socket());
    const std::string payload(500000, 'q');
    for (int i = 0; i < 200; ++i) {
        try {
            c.send({{"type", "tool_call"},
                    {"requestId", "m" + std::to_string(i)},
                    {"toolName", "echo"},
                    {"arguments", {{"p", payload}}}});
        } catch (const std::exception&) {
            break;
        }
    }
    d.wait_audit([](const json& l) {
        return l.value("event", "") == "connection_close" &&
               l["reason"].get<std::string>().find("max_outbound_bytes") != std::string::npos;
    });
    std::ifstream status("/proc/" + std::to_string(d.pid()) + "/status");
    std::string line;
    long hwm_kb = 0;
    while (std::getline(status, line))
        if (line.rfind("VmHWM:", 0) == 0) hwm_kb = std::stol(line.substr(6));
    CHECK(hwm_kb < 64 * 1024); // 100 MB were sent; a few MiB of buffers at most are kept
}

TEST_CASE("accept failing for lack of descriptors is logged once, then summarised",
          "[e2e][hardening]") {
    daemon_process d;
    // The count of descriptors in use can include some a moment from closing: the limit leaves one
    // spare and far more clients than any such slack connect, so accept runs out of descriptors
    // whatever the count was.
    const std::size_t in_use = open_fds(d.pid());
    rlimit old{};
    REQUIRE(::prlimit(d.pid(), RLIMIT_NOFILE, nullptr, &old) == 0);
    rlimit lim{in_use + 1, old.rlim_max}; // only the soft limit: it can be raised again
    REQUIRE(::prlimit(d.pid(), RLIMIT_NOFILE, &lim, nullptr) == 0);
    std::vector<std::unique_ptr<client>> clients;
    for (int i = 0; i < 48; ++i)
        clients.push_back(std::make_unique<client>(d.socket()));
    if (!d.wait_for_log("accept failed", 20s)) FAIL("no accept failure logged:\n" << d.log());
    // Retries every 100 ms: let a dozen of them fail before the descriptors come back.
    std::this_thread::sleep_for(1200ms);
    clients.clear();
    REQUIRE(::prlimit(d.pid(), RLIMIT_NOFILE, &old, nullptr) == 0);
    client c(d.socket());
    CHECK(c.call("echo", {{"x", 1}})["result"]["ok"] == true);
    if (!d.wait_for_log("accepting again after", 20s)) FAIL("no summary logged:\n" << d.log());
    const std::string log = d.log();
    std::size_t lines = 0;
    for (std::size_t at = log.find("accept failed"); at != std::string::npos;
         at = log.find("accept failed", at + 1))
        ++lines;
    CHECK(lines == 1);
    // The summary counts every failure that the single line stood for.
    const auto at =
        log.find("accepting again after ") + std::string("accepting again after ").size();
    CHECK(std::stoul(log.substr(at)) >= 2);
}

} // namespace e2e_unsanitized_test
