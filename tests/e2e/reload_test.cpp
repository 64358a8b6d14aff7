// End-to-end tests of config reloading (docs/configuration.md "Reloading"): the real meithd
// re-reads HOME/meithd.toml on a `reload_config` frame (`meith reload`) and on SIGHUP.
#include "daemon_fixture.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <csignal>
#include <fstream>
#include <iterator>
#include <thread>

using namespace meith::test;
using namespace std::chrono_literals;

namespace e2e_reload_test { // one namespace per file: the tests build as unity batches

namespace {

std::string error_code(const json& result_frame) {
    return result_frame["result"]["error"]["code"].get<std::string>();
}

void write_config(const daemon_process& d, const std::string& toml) {
    std::ofstream(d.home() / "meithd.toml", std::ios::trunc) << toml;
}

json reload(client& c, const std::string& caller = "cli") {
    c.send({{"type", "reload_config"},
            {"requestId", "reload-1"},
            {"clientInfo", {{"caller", caller}}}});
    for (;;) {
        json f = c.read();
        if (f.value("requestId", "") == "reload-1") return f;
    }
}

/// Polls list_tools until `name` is there (or not, with `present` false).
bool wait_tool(client& c, const std::string& name, bool present = true,
               std::chrono::milliseconds timeout = 10s) {
    const auto until = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < until) {
        if (has_tool(c, name) == present) return true;
        std::this_thread::sleep_for(20ms);
    }
    return false;
}

std::vector<std::string> strings(const json& arr) {
    std::vector<std::string> out;
    for (const auto& v : arr)
        out.push_back(v.get<std::string>());
    return out;
}

} // namespace

TEST_CASE("a reload applies permissions and adds, removes and replaces sources", "[e2e][reload]") {
    daemon_process d(host_source_toml("a", {"--name-prefix=a_"}) +
                     host_source_toml("b", {"--name-prefix=b_"}));
    client c(d.socket());
    REQUIRE(c.call("a_t_echo", json::object())["result"]["ok"] == true);
    REQUIRE(c.call("echo", json::object())["result"]["ok"] == true);

    // "a" goes, "b" changes (another prefix), "c" is new, and echo is denied to everyone.
    write_config(d, host_source_toml("b", {"--name-prefix=b2_"}) +
                        host_source_toml("c", {"--name-prefix=c_"}) +
                        "[[permissions.rules]]\ntool = \"echo\"\ndecision = \"deny\"\n");
    const json r = reload(c);
    REQUIRE(r["type"] == "config_reloaded");
    CHECK(r["ok"] == true);
    CHECK(r["file"] == (d.home() / "meithd.toml").string());
    CHECK(strings(r["changed"]) == std::vector<std::string>{"permissions", "sources"});
    CHECK(strings(r["sources"]["added"]) == std::vector<std::string>{"c"});
    CHECK(strings(r["sources"]["removed"]) == std::vector<std::string>{"a"});
    CHECK(strings(r["sources"]["replaced"]) == std::vector<std::string>{"b"});
    CHECK(r["needsRestart"].empty());

    // The new policy holds for the next call; the removed source's tools are gone at once.
    CHECK(error_code(c.call("echo", json::object())) == "PERMISSION_DENIED");
    CHECK(error_code(c.call("a_t_echo", json::object())) == "UNKNOWN_TOOL");
    CHECK(wait_tool(c, "c_t_echo"));
    CHECK(wait_tool(c, "b2_t_echo"));
    CHECK_FALSE(has_tool(c, "b_t_echo"));
    CHECK(c.call("c_t_echo", {{"x", 1}})["result"]["ok"] == true);
    CHECK(c.call("b2_t_echo", {{"x", 2}})["result"]["ok"] == true);

    const auto line =
        d.wait_audit([](const json& l) { return l.value("event", "") == "config_reload"; });
    CHECK(line["ok"] == true);
    CHECK(strings(line["sources"]["added"]) == std::vector<std::string>{"c"});
    // The removed and replaced hosts were stopped and reaped.
    d.wait_audit([](const json& l) {
        return l.value("event", "") == "source_exit" && l.value("source", "") == "a";
    });
    CHECK(d.running());
}

TEST_CASE("a config with an error is refused and the running config stays", "[e2e][reload]") {
    daemon_process d(host_source_toml("a", {"--name-prefix=a_"}));
    client c(d.socket());
    write_config(d, "[limits]\nmax_connections = \"many\"\n");
    const json r = reload(c);
    CHECK(r["ok"] == false);
    CHECK_THAT(r["error"].get<std::string>(), Catch::Contains("meithd.toml:2"));
    CHECK(c.call("a_t_echo", json::object())["result"]["ok"] == true);
    CHECK(c.call("echo", json::object())["result"]["ok"] == true);
    const auto line = d.wait_audit([](const json& l) {
        return l.value("event", "") == "config_reload" && l.value("ok", true) == false;
    });
    CHECK(line.contains("error"));
    CHECK_THAT(d.log(), Catch::Contains("keeping the running config"));
}

TEST_CASE("SIGHUP reloads the config file", "[e2e][reload]") {
    daemon_process d;
    client c(d.socket());
    REQUIRE(c.call("echo", json::object())["result"]["ok"] == true);
    write_config(d, "[[permissions.rules]]\ntool = \"ec*\"\ndecision = \"deny\"\n");
    ::kill(d.pid(), SIGHUP);
    const auto line =
        d.wait_audit([](const json& l) { return l.value("event", "") == "config_reload"; });
    CHECK(line["ok"] == true);
    CHECK(strings(line["changed"]) == std::vector<std::string>{"permissions"});
    CHECK(error_code(c.call("echo", json::object())) == "PERMISSION_DENIED");
    CHECK(d.running());
    // A broken file on SIGHUP: refused, audited, the daemon keeps serving.
    write_config(d, "this is not toml");
    ::kill(d.pid(), SIGHUP);
    d.wait_audit([](const json& l) {
        return l.value("event", "") == "config_reload" && l.value("ok", true) == false;
    });
    CHECK(d.running());
    CHECK(error_code(c.call("echo", json::object())) == "PERMISSION_DENIED");
}

TEST_CASE("a reload restarts a source marked failed and reports what needs a restart",
          "[e2e][reload]") {
    const std::string cfg = host_source_toml("th", {"--exit-after-init-ms=1"});
    daemon_process d(cfg);
    client c(d.socket());
    d.wait_audit([](const json& l) { return l.value("event", "") == "source_failed"; }, 20s);
    // Same sources, but [audit] and [[hooks]] changed: those wait for a restart.
    write_config(d, cfg + "[audit]\nfsync = \"always\"\n" +
                        hook_toml("h", "observe", "oneshot", "before_execution", {}));
    const json r = reload(c);
    CHECK(r["ok"] == true);
    CHECK(strings(r["sources"]["restarted"]) == std::vector<std::string>{"th"});
    CHECK(strings(r["needsRestart"]) == std::vector<std::string>{"audit", "hooks"});
    CHECK(r["changed"].empty());
    d.wait_audit([](const json& l) { return l.value("event", "") == "source_restart_requested"; });
}

TEST_CASE("only the cli caller may reload", "[e2e][reload]") {
    daemon_process d;
    client c(d.socket());
    write_config(d, "[[permissions.rules]]\ntool = \"echo\"\ndecision = \"deny\"\n");
    const json r = reload(c, "plugin");
    CHECK(r["type"] == "error");
    CHECK_THAT(r["message"].get<std::string>(), Catch::Contains("cli"));
    CHECK(c.call("echo", json::object())["result"]["ok"] == true);
    // The refusal of an operator's act is on file.
    const json line = d.wait_audit([](const json& l) {
        return l.value("event", "") == "frame_refused" && l.value("frame", "") == "reload_config";
    });
    CHECK(line["caller"] == "plugin");
    CHECK(line["sessionId"].is_string());
}

TEST_CASE("meith reload reports the change, and exits 1 when the file is refused",
          "[e2e][reload][cli]") {
    daemon_process d;
    write_config(d, "[[permissions.rules]]\ntool = \"echo\"\ndecision = \"deny\"\n");
    auto ok = run_cli({"reload"}, d.home());
    CHECK(ok.status == 0);
    CHECK_THAT(ok.out, Catch::Contains("changed permissions"));
    write_config(d, "[limits]\nnope = 1\n");
    auto bad = run_cli({"reload"}, d.home());
    CHECK(bad.status == 1);
    CHECK_THAT(bad.err, Catch::Contains("reload refused"));
    CHECK_THAT(bad.err, Catch::Contains("nope"));
}

TEST_CASE("a reload that cannot read its config file keeps the running config",
          "[e2e][reload][cli]") {
    // Issue 40: with HOME/meithd.toml gone, a reload loaded the built-in defaults, removed
    // every source and `meith reload` exited 0.
    daemon_process d(host_source_toml("a", {"--name-prefix=a_"}) +
                     "[[permissions.rules]]\ntool = \"echo\"\ndecision = \"deny\"\n");
    client c(d.socket());
    REQUIRE(error_code(c.call("echo", json::object())) == "PERMISSION_DENIED");
    REQUIRE(source_status(c, "a").is_object());
    fs::remove(d.home() / "meithd.toml");

    const json r = reload(c);
    CHECK(r["ok"] == false);
    const std::string why = r.value("error", "");
    CHECK_THAT(why, Catch::Contains("meithd.toml") && Catch::Contains("no longer exists") &&
                        Catch::Contains("running config"));
    // Nothing changed: the rule still denies, the source is still there.
    CHECK(error_code(c.call("echo", json::object())) == "PERMISSION_DENIED");
    CHECK(source_status(c, "a").is_object());
    d.wait_audit([](const json& l) {
        return l.value("event", "") == "config_reload" && l.value("ok", true) == false;
    });
    CHECK_THAT(d.log(), Catch::Contains("keeping the running config"));

    // meith reload says why and exits non-zero.
    const auto cli = run_cli({"reload"}, d.home());
    CHECK(cli.status == 1);
    CHECK_THAT(cli.err, Catch::Contains("no longer exists") && Catch::Contains("meithd.toml"));
    CHECK(source_status(c, "a").is_object());

    // Put back, it reloads again.
    write_config(d, host_source_toml("a", {"--name-prefix=a_"}));
    CHECK(reload(c)["ok"] == true);
    CHECK(c.call("echo", json::object())["result"]["ok"] == true);
}

TEST_CASE("a call waiting for a restarting source ends saying the source was stopped",
          "[e2e][reload]") {
    // A child source stopped by a reload (or shutdown) ends the calls waiting for its restart
    // with that reason, not the child's last error; hosts, MCP servers and exec servers share
    // this code (sources/child_source.cpp). The restart is held in its handshake by a file.
    temp_dir tmp;
    const auto hold = tmp.path / "hold";
    const auto pids = tmp.path / "pids";
    daemon_process d(host_source_toml(
        "held", {"--hold-init-while=" + hold.string(), "--pid-file=" + pids.string()},
        "sandbox = \"off\"\n"));
    client c(d.socket());
    REQUIRE(c.call("t_echo", {{"x", 1}})["result"]["ok"] == true);
    std::ofstream(hold) << "held\n";
    pid_t first = 0;
    std::ifstream(pids) >> first;
    REQUIRE(first > 0);
    ::kill(first, SIGKILL);
    // Wait for the restarted child (its pid is the file's second line): it is now held in init.
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    auto lines = [&] {
        std::ifstream in(pids);
        return std::count(std::istreambuf_iterator<char>(in), {}, '\n');
    };
    while (lines() < 2 && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(20ms);
    REQUIRE(lines() == 2);
    REQUIRE(source_status(c, "held")["state"] == "restarting");

    write_config(d, "");
    // One connection's frames are handled in order: the call waits before the reload runs.
    c.send({{"type", "tool_call"},
            {"protocol", 1},
            {"requestId", "waiting"},
            {"toolName", "t_echo"},
            {"arguments", {{"x", 2}}}});
    c.send({{"type", "reload_config"},
            {"requestId", "reload-1"},
            {"clientInfo", {{"caller", "cli"}}}});
    json result, r;
    while (result.is_null() || r.is_null()) {
        json f = c.read();
        if (f.value("requestId", "") == "waiting" && f["type"] == "tool_result") result = f;
        if (f.value("requestId", "") == "reload-1") r = f;
    }
    CHECK(strings(r["sources"]["removed"]) == std::vector<std::string>{"held"});
    CHECK(result["result"]["ok"] == false);
    CHECK(result["result"]["error"]["message"] ==
          "tool host 'held': was stopped (the daemon is shutting down, or a reload removed it)");
    std::filesystem::remove(hold);
}

TEST_CASE("enabled = false keeps a source configured but off: no process, no tools, listed as "
          "disabled, and a reload that flips it starts and stops it",
          "[e2e][reload]") {
    const std::string off = host_source_toml("a", {"--name-prefix=a_"}) + "enabled = false\n" +
                            host_source_toml("b", {"--name-prefix=b_"});
    daemon_process d(off);
    client c(d.socket());
    CHECK_FALSE(has_tool(c, "a_t_echo"));
    CHECK(error_code(c.call("a_t_echo", json::object())) == "UNKNOWN_TOOL");
    const json a = source_status(c, "a");
    CHECK(a["state"] == "disabled");
    CHECK(a["pid"].is_null());
    CHECK(a["tools"] == 0);
    for (const auto& line : d.audit_events("source_start"))
        CHECK(line["source"] == "b"); // a never ran
    const auto listed = run_cli({"sources", "a"}, d.home());
    CHECK(listed.status == 0);
    CHECK_THAT(listed.out, Catch::Contains("a: host, disabled"));

    // On: it starts, with its tools; off again: they go and its process is stopped.
    write_config(d, host_source_toml("a", {"--name-prefix=a_"}) +
                        host_source_toml("b", {"--name-prefix=b_"}));
    json r = reload(c);
    CHECK(strings(r["sources"]["added"]) == std::vector<std::string>{"a"});
    CHECK(r["sources"]["replaced"].empty()); // b goes on untouched
    CHECK(wait_tool(c, "a_t_echo"));
    CHECK(c.call("a_t_echo", json::object())["result"]["ok"] == true);
    write_config(d, off);
    r = reload(c);
    CHECK(strings(r["sources"]["removed"]) == std::vector<std::string>{"a"});
    CHECK(error_code(c.call("a_t_echo", json::object())) == "UNKNOWN_TOOL");
    CHECK(source_status(c, "a")["state"] == "disabled");
    d.wait_audit([](const json& l) {
        return l.value("event", "") == "source_exit" && l.value("source", "") == "a";
    });
    CHECK(c.call("b_t_echo", json::object())["result"]["ok"] == true);
}

} // namespace e2e_reload_test
