// End-to-end: sources that start on demand (`start = "on-demand"`, `idle_stop_ms`;
// docs/configuration.md "Starting on demand"): listed from their pinned definitions without
// running, started by the call that needs them (which hears why it waits), stopped again after
// idle_stop_ms without calls, and nothing of them running before a call.
#include "e2e/daemon_fixture.hpp"

#include <catch2/catch.hpp>

#include <dirent.h>

#include <fstream>
#include <set>
#include <thread>

using namespace meith::test;
using namespace std::chrono_literals;

namespace e2e_on_demand_test { // one namespace per file: the tests build as unity batches

namespace {

std::string mcp_fixture_toml(const std::string& name, const std::string& extra) {
    const std::string server = std::string(MEITH_SOURCE_DIR) + "/tests/mcp/fake_server.mjs";
    return "[[sources]]\nname = \"" + name + "\"\nkind = \"mcp\"\ncommand = [\"node\", \"" +
           server + "\"]\nprefix = \"" + name + "_\"\ntrust_annotations = true\n" + extra + "\n";
}

/// Eight on-demand sources: four tool hosts, three MCP servers, one exec server.
std::string eight_sources(std::uint64_t idle_stop_ms) {
    const std::string on_demand =
        "start = \"on-demand\"\nidle_stop_ms = " + std::to_string(idle_stop_ms) + "\n";
    std::string toml;
    for (int i = 1; i <= 4; ++i) {
        const std::string name = "h" + std::to_string(i);
        toml += host_source_toml(name, {"--name-prefix=" + name + "_"}, on_demand);
    }
    for (int i = 1; i <= 3; ++i)
        toml += mcp_fixture_toml("m" + std::to_string(i), on_demand);
    toml += exec_source_toml("x1", "server", "server.mjs", "x1_echo", {}, on_demand);
    return toml;
}

const std::vector<std::string> names{"h1", "h2", "h3", "h4", "m1", "m2", "m3", "x1"};

/// The processes whose parent is `pid` (from /proc/N/stat).
std::set<pid_t> children_of(pid_t pid) {
    std::set<pid_t> out;
    DIR* proc = ::opendir("/proc");
    if (proc == nullptr) return out;
    while (const dirent* e = ::readdir(proc)) {
        const pid_t child = static_cast<pid_t>(std::atoi(e->d_name));
        if (child <= 0) continue;
        std::ifstream stat("/proc/" + std::to_string(child) + "/stat");
        std::string line;
        std::getline(stat, line);
        const auto close = line.rfind(')');
        if (close == std::string::npos || close + 4 >= line.size()) continue;
        if (line[close + 2] == 'Z') continue; // exited, not yet reaped
        const pid_t parent = static_cast<pid_t>(std::atoi(line.c_str() + close + 4));
        if (parent == pid) out.insert(child);
    }
    ::closedir(proc);
    return out;
}

std::string state_of(client& c, const std::string& name) {
    return source_status(c, name).value("state", "");
}

bool all_idle(client& c) {
    for (const auto& n : names)
        if (state_of(c, n) != "idle") return false;
    return true;
}

} // namespace

TEST_CASE("start = on-demand: eight sources listed from their pins with nothing running, a call "
          "starts only its source and idle_stop_ms stops it again",
          "[e2e][on-demand]") {
    daemon_process d(eight_sources(1500));
    client c(d.socket());
    // Never seen: each (but the exec server, whose one tool its config declares) starts to
    // list its tools, is pinned, and stops after idle_stop_ms without calls.
    REQUIRE(eventually([&] { return all_idle(c); }));
    CHECK(d.audit_events("source_idle_stopped").size() == 7);
    CHECK(eventually([&] { return children_of(d.pid()).empty(); }, 5s));

    // meithd's next start: nothing runs, every tool is listed from the pins.
    d.stop();
    d.restart();
    client c2(d.socket());
    CHECK(all_idle(c2));
    CHECK(children_of(d.pid()).empty());
    for (const auto& tool : {"h1_t_echo", "h4_t_echo", "m1_echo", "m3_echo", "x1_echo"})
        CHECK(has_tool(c2, tool));
    const json h2 = source_status(c2, "h2");
    CHECK(h2["pid"].is_null());
    CHECK(h2["start"] == "on-demand");
    CHECK(h2["idleStopMs"] == 1500);
    CHECK(h2["tools"].get<int>() > 0);
    const auto listed = run_cli({"sources"}, d.home());
    CHECK_THAT(listed.out, Catch::Contains("idle"));

    // A tool listed from its pin checks arguments against its pinned schema (compiled at this
    // first call, not as meithd started), and a call it refuses starts nothing.
    const json refused = c2.call("m2_echo", {{"text", 42}});
    CHECK(refused["result"]["ok"] == false);
    CHECK(refused["result"]["error"]["code"] == "VALIDATION_ERROR");
    CHECK_THAT(refused["result"]["error"]["message"].get<std::string>(), Catch::Contains("/text"));
    CHECK(state_of(c2, "m2") == "idle");
    CHECK(children_of(d.pid()).empty());

    // A call starts its source alone; the caller hears why it waits.
    std::vector<json> events;
    const json r = c2.call("m2_echo", {{"text", "wake"}}, json::object(), &events);
    CHECK(r["result"]["ok"] == true);
    REQUIRE_FALSE(events.empty());
    CHECK(events.front()["type"] == "progress");
    CHECK_THAT(events.front().value("message", ""),
               Catch::Contains("starting MCP server 'm2' on demand"));
    const json m2 = source_status(c2, "m2");
    CHECK(m2["state"] == "ready");
    REQUIRE(m2["pid"].is_number());
    for (const auto& n : names)
        if (n != "m2") CHECK(state_of(c2, n) == "idle");
    CHECK(children_of(d.pid()).size() == 1);
    CHECK(d.audit_events("source_waking").size() == 1);

    // Calls keep it running; idle_stop_ms after the last one it stops, and its process is gone.
    CHECK(c2.call("m2_echo", {{"text", "again"}})["result"]["ok"] == true);
    const pid_t pid = m2["pid"].get<pid_t>();
    REQUIRE(eventually([&] { return state_of(c2, "m2") == "idle"; }));
    // Its pid stays listed until the process has exited.
    CHECK(eventually([&] { return source_status(c2, "m2")["pid"].is_null(); }, 5s));
    CHECK(eventually([&] { return ::kill(pid, 0) != 0; }, 5s));
    CHECK(eventually([&] { return children_of(d.pid()).empty(); }, 5s));

    // The next call starts it again; an exec server too.
    CHECK(c2.call("m2_echo", {{"text", "back"}})["result"]["ok"] == true);
    CHECK(c2.call("x1_echo", {{"mode", "echo"}})["result"]["ok"] == true);
    CHECK(state_of(c2, "x1") == "ready");
    const auto waking = run_cli({"audit", "--event", "source_waking"}, d.home());
    CHECK_THAT(waking.out, Catch::Contains("starting on demand"));
    const auto stopped = run_cli({"audit", "--event", "source_idle_stopped"}, d.home());
    CHECK_THAT(stopped.out, Catch::Contains("stopped after 1500 ms without calls"));
}

TEST_CASE("start = on-demand: a call that arrives while its source stops for idleness waits and "
          "runs, and a source stopped by a reload is not started by a late call",
          "[e2e][on-demand]") {
    daemon_process d(
        host_source_toml("h", {"--name-prefix=h_"}, "start = \"on-demand\"\nidle_stop_ms = 200\n"));
    client c(d.socket());
    REQUIRE(eventually([&] { return state_of(c, "h") == "idle"; }));
    // Many short calls across several idle stops: every one is answered.
    for (int i = 0; i < 20; ++i) {
        CHECK(c.call("h_t_echo", {{"i", i}})["result"]["ok"] == true);
        std::this_thread::sleep_for(std::chrono::milliseconds(20 * (i % 15)));
    }
    // Removed by a reload: its tools go, nothing starts it again.
    std::ofstream(d.home() / "meithd.toml") << "";
    c.send({{"type", "reload_config"}, {"requestId", "r"}, {"clientInfo", {{"caller", "cli"}}}});
    CHECK(c.read()["type"] == "config_reloaded");
    CHECK(c.call("h_t_echo", json::object())["result"]["error"]["code"] == "UNKNOWN_TOOL");
    CHECK(eventually([&] { return children_of(d.pid()).empty(); }, 5s));
}

TEST_CASE("start = on-demand: a source is confined at its first start, and a sandbox it cannot "
          "have fails that call saying why",
          "[e2e][on-demand]") {
    const std::string on_demand = "start = \"on-demand\"\nidle_stop_ms = 60000\n";
    daemon_process d(host_source_toml("h", {"--name-prefix=h_"}, on_demand));
    {
        client c(d.socket()); // never seen: it starts to list (and pin) its tools
        REQUIRE(eventually([&] { return state_of(c, "h") == "ready"; }));
    }
    d.stop();
    // Its program is gone by the next start: listed from its pins all the same (its sandbox,
    // which needs the program's path, is not worked out before a call needs it)...
    std::string toml = host_source_toml("h", {"--name-prefix=h_"}, on_demand);
    toml.replace(toml.find("[\"node\""), 7, "[\"no-such-node-here\"");
    std::ofstream(d.home() / "meithd.toml") << toml;
    d.restart();
    client c(d.socket());
    CHECK(state_of(c, "h") == "idle");
    CHECK(has_tool(c, "h_t_echo"));
    // ...and the call that starts it fails with the refusal; nothing ran.
    const json r = c.call("h_t_echo", {{"x", 1}});
    CHECK(r["result"]["ok"] == false);
    CHECK_THAT(r["result"]["error"]["message"].get<std::string>(),
               Catch::Contains("cannot start: program 'no-such-node-here' not found"));
    CHECK(state_of(c, "h") == "failed");
    CHECK(children_of(d.pid()).empty());
}

TEST_CASE("an eager source whose tools are pinned is listed at once and meithd does not wait for "
          "it: a call waits for its start and hears why",
          "[e2e][on-demand]") {
    temp_dir scratch;
    const fs::path hold = scratch.path / "hold";
    // The first start lists and pins its tools; the next one is held at init until `hold` goes.
    daemon_process d(host_source_toml(
        "slow", {"--name-prefix=s_", "--hold-init-while=" + hold.string()}, "sandbox = \"off\"\n"));
    {
        client c(d.socket());
        CHECK(c.call("s_t_echo", {{"x", 1}})["result"]["ok"] == true);
    }
    d.stop();
    std::ofstream(hold) << "";
    d.restart(false); // ready although the host cannot be
    client c(d.socket());
    CHECK(state_of(c, "slow") == "starting");
    CHECK(has_tool(c, "s_t_echo"));
    c.send({{"type", "tool_call"},
            {"requestId", "w"},
            {"toolName", "s_t_echo"},
            {"arguments", {{"x", 2}}}});
    const json event = c.read();
    REQUIRE(event["type"] == "tool_event");
    CHECK(event["event"]["type"] == "progress");
    CHECK_THAT(event["event"].value("message", ""),
               Catch::Contains("waiting for tool host 'slow' to start (its tools were listed from "
                               "their pins"));
    fs::remove(hold);
    const json r = c.wait_result("w");
    CHECK(r["result"]["ok"] == true);
    CHECK(state_of(c, "slow") == "ready");
}

} // namespace e2e_on_demand_test
