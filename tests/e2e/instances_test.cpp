// End-to-end: a source run per session or per client (`instances`, `max_instances`,
// `instance_grace_ms`; docs/configuration.md "Instances"): each session's (or client's) calls go
// to a process of its own, bounded, stopped after its last session ends and the grace passed.
#include "e2e/daemon_fixture.hpp"

#include <catch2/catch.hpp>

#include <csignal>
#include <thread>

using namespace meith::test;
using namespace std::chrono_literals;

namespace e2e_instances_test { // one namespace per file: the tests build as unity batches

namespace {

int pid_of_call(client& c, const json& extra = json::object()) {
    const json r = c.call("t_pid", json::object(), extra);
    REQUIRE(r["result"]["ok"] == true);
    return r["result"]["content"].get<int>();
}

std::size_t instance_count(client& c) {
    return source_status(c, "h")["instances"].size();
}

} // namespace

TEST_CASE("instances = per-session: each connection's calls run in a process of its own, at most "
          "max_instances, and one stops after its last session ends and the grace passed",
          "[e2e][instances]") {
    daemon_process d(host_source_toml("h", {},
                                      "sandbox = \"off\"\ninstances = \"per-session\"\n"
                                      "max_instances = 2\ninstance_grace_ms = 300\n"));
    client watcher(d.socket()); // lists sources, calls nothing
    auto a = std::make_unique<client>(d.socket());
    client b(d.socket());
    const int pid_a = pid_of_call(*a);
    const int pid_b = pid_of_call(b);
    CHECK(pid_a != pid_b);
    CHECK(pid_of_call(*a) == pid_a); // its own again
    CHECK(pid_of_call(b) == pid_b);
    json h = source_status(watcher, "h");
    CHECK(h["instancesMode"] == "per-session");
    CHECK(h["state"] == "ready");
    REQUIRE(h["instances"].size() == 2);
    for (const auto& inst : h["instances"]) {
        CHECK(inst["key"].get<std::string>().rfind("session:", 0) == 0);
        CHECK(inst["state"] == "ready");
        const int pid = inst["pid"].get<int>();
        CHECK((pid == pid_a || pid == pid_b));
    }

    // A third session is refused while two run, saying what to do.
    client third(d.socket());
    const json refused = third.call("t_echo", json::object());
    CHECK(refused["result"]["error"]["code"] == "TOOL_FAILED");
    CHECK_THAT(refused["result"]["error"]["message"].get<std::string>(),
               Catch::Contains("runs 2 instances already, its max_instances"));

    // A's session ends: its instance stops after the grace; B's goes on.
    a.reset();
    CHECK(eventually([&] { return instance_count(watcher) == 1; }, 10s));
    CHECK(eventually([&] { return ::kill(pid_a, 0) != 0; }, 5s));
    CHECK(pid_of_call(b) == pid_b);
    // And the third session now gets one.
    const int pid_c = pid_of_call(third);
    CHECK(pid_c != pid_b);
    CHECK(instance_count(watcher) == 2);
    const auto listed = run_cli({"sources", "h"}, d.home());
    CHECK_THAT(listed.out, Catch::Contains("instances:   per-session, 2 running of at most 2"));
    // Audit lines name the instance: its process's, and each call's.
    const auto calls = d.audit_events("tool_call");
    REQUIRE_FALSE(calls.empty());
    CHECK(calls.back()["instance"].get<std::string>().rfind("session:", 0) == 0);
    const auto starts = d.audit_events("source_start");
    REQUIRE(starts.size() >= 3);
    CHECK(starts.back()["source"] == "h");
    CHECK(starts.back()["instance"].get<std::string>().rfind("session:", 0) == 0);
}

TEST_CASE("instances = per-client: connections of one agent share a process, another agent gets "
          "its own",
          "[e2e][instances]") {
    daemon_process d(host_source_toml("h", {},
                                      "sandbox = \"off\"\ninstances = \"per-client\"\n"
                                      "instance_grace_ms = 0\n"));
    const json as_a = {{"clientInfo", {{"agent", "agent-a"}}}};
    const json as_b = {{"clientInfo", {{"agent", "agent-b"}}}};
    client one(d.socket());
    client two(d.socket());
    const int a1 = pid_of_call(one, as_a);
    const int a2 = pid_of_call(two, as_a);
    const int b = pid_of_call(two, as_b);
    CHECK(a1 == a2);
    CHECK(b != a1);
    const json h = source_status(one, "h");
    REQUIRE(h["instances"].size() == 2);
    CHECK(h["instances"][0]["key"] == "agent:agent-a");
    CHECK(h["instances"][0]["agent"] == "agent-a");
    CHECK(h["instances"][1]["key"] == "agent:agent-b");
    // Shutdown with instances and open sessions: every instance ends within its kill grace
    // (a session's end after the stop began once left one waiting for a second stop).
    CHECK(d.stop(SIGTERM, 5s) == 0);
}

} // namespace e2e_instances_test
