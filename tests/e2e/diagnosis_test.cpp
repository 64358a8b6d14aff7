// End-to-end tests of issue 28's diagnosis: what a person reads when a source is down — the
// CLI's `sources`, `sources NAME`, `status`, `tools`, `sources restart` and `reload` run as a
// person runs them, against the real meithd.
#include "daemon_fixture.hpp"

#include <catch2/catch.hpp>

#include <fstream>
#include <thread>

using namespace meith::test;
using namespace std::chrono_literals;

namespace e2e_diagnosis_test { // one namespace per file: the tests build as unity batches

namespace {

/// A host that writes two stderr lines (one holding a secret) and exits 3, every time.
std::string crashy_toml() {
    return "[[sources]]\nname = \"crashy\"\nkind = \"host\"\ncommand = [\"node\", \"-e\", "
           "\"console.error('boom: cannot find module x'); "
           "console.error('api_key=sk-live-THISISSECRET12345'); process.exit(3)\"]\n";
}

/// A host whose program does not exist.
std::string missing_toml() {
    return "[[sources]]\nname = \"missing\"\nkind = \"host\"\ncommand = "
           "[\"node-does-not-exist-anywhere\", \"host.mjs\"]\n";
}

/// The CLI with a terminal of `columns` columns ($COLUMNS: standard output is a pipe here).
cli_result cli(const daemon_process& d, const std::vector<std::string>& args,
               const std::string& columns = "160") {
    return run_program({MEITH_CLI}, args,
                       {{"MEITH_HOME", d.home().string()}, {"COLUMNS", columns}});
}

void wait_failed(const daemon_process& d, const std::string& source) {
    d.wait_audit(
        [&](const json& l) {
            return l.value("event", "") == "source_failed" && l.value("source", "") == source;
        },
        30s);
}

} // namespace

TEST_CASE("meith sources shows a failed source's whole error and where to read more",
          "[e2e][cli][diagnosis]") {
    daemon_process d(missing_toml() + crashy_toml());
    wait_failed(d, "missing");
    wait_failed(d, "crashy");
    const auto r = cli(d, {"sources"});
    CHECK(r.status == 0);
    // The whole error, not cut at the table's column (it was "cannot start: progr…").
    CHECK_THAT(r.out, Catch::Contains("missing (failed): cannot start: program "
                                      "'node-does-not-exist-anywhere' not found"));
    CHECK_THAT(r.out, Catch::Contains("crashy (failed): exited 5 times within 60 s; last: "
                                      "exited with status 3"));
    CHECK_THAT(r.out, Catch::Contains("its last stderr lines: meith sources crashy"));
    CHECK_THAT(r.out, Catch::Contains("the daemon's log: meithd's standard error"));
    // The sandbox column says what a confined source may do, the right way round.
    CHECK_THAT(r.out, Catch::Contains("confined: read-only"));

    const auto one = cli(d, {"sources", "crashy"});
    CHECK(one.status == 0);
    CHECK_THAT(one.out, Catch::Contains("boom: cannot find module x"));
    CHECK_THAT(one.out, Catch::Contains("api_key=[REDACTED]"));
    CHECK_THAT(one.out, !Catch::Contains("THISISSECRET"));
    CHECK_THAT(one.out, Catch::Contains("last error:  exited 5 times within 60 s"));

    const auto unknown = cli(d, {"sources", "crashyy"});
    CHECK(unknown.status == 1);
    CHECK_THAT(unknown.err,
               Catch::Contains("no source 'crashyy'") && Catch::Contains("did you mean 'crashy'"));
}

TEST_CASE("meith status and meith tools name the sources that are down, and why",
          "[e2e][cli][diagnosis]") {
    daemon_process d(missing_toml() + host_source_toml("th"));
    wait_failed(d, "missing");
    const auto status = cli(d, {"status"});
    CHECK(status.status == 0);
    CHECK_THAT(status.out, Catch::Contains("sources:  3 (1 failed: missing; see meith sources)"));
    const auto tools = cli(d, {"tools"});
    CHECK(tools.status == 0);
    CHECK_THAT(tools.out, Catch::Contains("source 'missing' is failed and lists no tools: "
                                          "cannot start: program "
                                          "'node-does-not-exist-anywhere' not found"));
    CHECK_THAT(tools.out, Catch::Contains("meith sources missing shows why"));
}

TEST_CASE("a tool of a source that went down is listed unavailable with the reason",
          "[e2e][cli][diagnosis]") {
    daemon_process d(host_source_toml("th", {"--exit-after-list"}));
    // Its tools were registered, then it crash-looped into failed.
    wait_failed(d, "th");
    const auto tools = cli(d, {"tools"}, "200");
    CHECK(tools.status == 0);
    CHECK_THAT(tools.out, Catch::Contains("t_echo (unavailable)"));
    CHECK_THAT(tools.out, Catch::Contains("unavailable: source 'th' is failed: exited 5 times"));
}

TEST_CASE("meith sources restart and meith reload wait for the outcome and exit 1 when a "
          "source fails",
          "[e2e][cli][diagnosis]") {
    daemon_process d(crashy_toml());
    wait_failed(d, "crashy");
    const auto restart = cli(d, {"sources", "restart", "crashy"});
    CHECK(restart.status == 1);
    CHECK_THAT(restart.err, Catch::Contains("source 'crashy' failed again: exited 5 times "
                                            "within 60 s; last: exited with status 3"));
    CHECK_THAT(restart.err, Catch::Contains("its last stderr lines: meith sources crashy"));
    CHECK_THAT(restart.out, !Catch::Contains("restarted source"));

    std::ofstream(d.home() / "meithd.toml", std::ios::app) << missing_toml();
    const auto reload = cli(d, {"reload"});
    CHECK(reload.status == 1);
    CHECK_THAT(reload.out, Catch::Contains("sources added: missing"));
    CHECK_THAT(reload.err, Catch::Contains("source 'missing' failed: cannot start: program "
                                           "'node-does-not-exist-anywhere' not found"));
}

TEST_CASE("a restart that succeeds says ready and exits 0", "[e2e][cli][diagnosis]") {
    daemon_process d(host_source_toml("th"));
    const auto restart = cli(d, {"sources", "restart", "th"});
    CHECK(restart.status == 0);
    CHECK_THAT(restart.out, Catch::Contains("restarted source 'th': ready, "));
}

// ---- item 2: sandbox refusals name the capability -------------------------------------------

namespace {

std::string probe_toml(const std::string& name, const std::string& caps,
                       const std::string& extra = "") {
    return "[[sources]]\nname = \"" + name + "\"\nkind = \"exec\"\ncommand = [\"node\", \"" +
           std::string(MEITH_SOURCE_DIR) + "/tests/exec/sandbox_probe.mjs\"]\ntool = { name = \"" +
           name + "\", description = \"sandbox probe\", capabilities = " + caps + " }\n" + extra +
           "\n[permissions.callers.plugin]\nallow = [\"read-only\", \"writes-files\", "
           "\"accesses-network\"]\n";
}

std::string message_of(const json& r) {
    return r["result"]["error"]["message"].get<std::string>();
}

} // namespace

TEST_CASE("a write the sandbox refuses says which declaration would allow it",
          "[e2e][diagnosis][sandbox]") {
    REQUIRE_KERNEL_SANDBOX(false);
    temp_dir work;
    daemon_process d(
        probe_toml("ro", "[\"read-only\"]", "cwd = " + json(work.path.string()).dump()));
    client c(d.socket());
    const json r = c.call("ro", {{"action", "write"}, {"path", "note.txt"}, {"fail", true}});
    REQUIRE(r["result"]["ok"] == false);
    const std::string m = message_of(r);
    CHECK_THAT(m, Catch::Contains("meith's sandbox may have refused this: the source may only "
                                  "read; declare `writes-files`"));
    CHECK_THAT(m, Catch::Contains(work.path.string()));
    // The audit line carries the same message.
    const auto line = d.wait_audit([](const json& l) {
        return l.value("event", "") == "tool_call" && l.value("toolName", "") == "ro";
    });
    CHECK_THAT(line.dump(), Catch::Contains("declare `writes-files`"));
}

TEST_CASE("a connection the sandbox refuses names accesses-network", "[e2e][diagnosis][sandbox]") {
    REQUIRE_KERNEL_SANDBOX(false);
    daemon_process d(probe_toml("nonet", "[\"read-only\"]"));
    client c(d.socket());
    const json r = c.call("nonet", {{"action", "connect"}, {"port", 9}, {"fail", true}});
    REQUIRE(r["result"]["ok"] == false);
    CHECK_THAT(message_of(r), Catch::Contains("the source may not use the network; declare "
                                              "`accesses-network`"));
}

TEST_CASE("a failure that is not a refusal gets no sandbox hint", "[e2e][diagnosis][sandbox]") {
    daemon_process d(exec_source_toml("x", "oneshot", "oneshot.mjs", "x_tool"));
    client c(d.socket());
    const json r = c.call("x_tool", {{"mode", "exit3"}});
    REQUIRE(r["result"]["ok"] == false);
    CHECK_THAT(message_of(r), !Catch::Contains("sandbox"));
}

TEST_CASE("a cwd that holds meithd's home is warned about at start and shown by meith sources",
          "[e2e][diagnosis][sandbox]") {
    REQUIRE_KERNEL_SANDBOX(false);
    // No cwd: the config's folder, which is the home here.
    daemon_process d(probe_toml("homecwd", "[\"writes-files\"]"));
    CHECK_THAT(d.log(), Catch::Contains("holds meithd's home, so the sandbox withholds writes "
                                        "there"));
    const auto r = cli(d, {"sources", "homecwd"});
    CHECK_THAT(r.out, Catch::Contains("confined: writes; not in " + d.home().string() +
                                      " (meithd's home)"));
    client c(d.socket());
    const json w = c.call("homecwd", {{"action", "write"}, {"path", "note.txt"}, {"fail", true}});
    REQUIRE(w["result"]["ok"] == false);
    CHECK_THAT(message_of(w), Catch::Contains("writes are withheld from " + d.home().string() +
                                              " because it holds meithd's home"));
}

// ---- item 7: errors in the user's words ------------------------------------------------------

TEST_CASE("refusals that are not malformed frames carry codes of their own", "[e2e][diagnosis]") {
    daemon_process d;
    client c(d.socket());
    const auto error_of = [&](const json& frame) {
        c.send(frame);
        for (;;) {
            json f = c.read();
            if (f["type"] == "error") return f;
        }
    };
    // A grant from a connection that is not an approver (e.g. no terminal).
    const json grant = error_of({{"type", "grant"},
                                 {"protocol", 1},
                                 {"requestId", "g1"},
                                 {"grant", {{"capabilities", {"writes-files"}}}}});
    CHECK(grant["code"] == "NOT_AN_APPROVER");
    // approver_hello from a process without a terminal.
    const json hello = error_of({{"type", "approver_hello"},
                                 {"protocol", 1},
                                 {"requestId", "a1"},
                                 {"secret", approver_secret(d.home())}});
    CHECK(hello["code"] == "APPROVER_REFUSED");
    CHECK_THAT(hello["message"].get<std::string>(), Catch::Contains("not accepted as an approver"));
    // An operator's frame from a plugin.
    const json reload = error_of({{"type", "reload_config"},
                                  {"protocol", 1},
                                  {"requestId", "r1"},
                                  {"clientInfo", {{"caller", "plugin"}}}});
    CHECK(reload["code"] == "NOT_ALLOWED");
    const json restart = error_of({{"type", "restart_source"},
                                   {"protocol", 1},
                                   {"requestId", "s1"},
                                   {"name", "nope"},
                                   {"clientInfo", {{"caller", "cli"}}}});
    CHECK(restart["code"] == "NO_SUCH_SOURCE");
    // A malformed frame is still PROTOCOL_ERROR.
    c.send_raw("{not json\n");
    CHECK(c.read()["code"] == "PROTOCOL_ERROR");
}

TEST_CASE("revoking a grant that is used up says so with its own code, in the CLI too",
          "[e2e][diagnosis]") {
    daemon_process d;
    auto approver = connect_approver(d);
    approver->send({{"type", "grant"},
                    {"protocol", 1},
                    {"requestId", "g1"},
                    {"grant", {{"capabilities", {"writes-files"}}, {"uses", 1}}}});
    json granted;
    for (;;) {
        granted = approver->read();
        if (granted["type"] == "grant_result") break;
    }
    const std::string id = granted["grantId"];
    approver->send({{"type", "revoke"}, {"protocol", 1}, {"requestId", "r1"}, {"grantId", id}});
    REQUIRE(approver->read()["type"] == "revoke_result");
    approver->send({{"type", "revoke"}, {"protocol", 1}, {"requestId", "r2"}, {"grantId", id}});
    json again;
    for (;;) {
        again = approver->read();
        if (again["type"] == "error") break;
    }
    CHECK(again["code"] == "NO_SUCH_GRANT");
    CHECK_THAT(again["message"].get<std::string>(),
               Catch::Contains("(revoked, used up or expired already?)"));
}

TEST_CASE("a misspelt required key is reported at its own line, with the key it meant",
          "[e2e][diagnosis][config]") {
    temp_dir home;
    std::ofstream(home.path / "meithd.toml")
        << "[[sources]]\nname = \"x\"\nkind = \"host\"\ncomand = [\"node\", \"x.mjs\"]\n";
    const auto [status, err] = run_meithd_expect_exit(
        {"--home", home.path.string(), "--socket", (home.path / "s.sock").string()});
    CHECK(status == 1);
    CHECK_THAT(err, Catch::Contains("meithd.toml:4:1: unknown key 'comand' in source 'x' (did you "
                                    "mean 'command'?)"));
    CHECK_THAT(err, !Catch::Contains("missing required key"));
}

TEST_CASE("a source whose cwd is inside meithd's home fails saying so",
          "[e2e][diagnosis][sandbox]") {
    REQUIRE_KERNEL_SANDBOX(false);
    daemon_process d(host_source_toml("inhome", {}, "cwd = \"tools\"\n"), {},
                     [](const fs::path& home) { fs::create_directories(home / "tools"); });
    wait_failed(d, "inhome");
    const auto r = cli(d, {"sources", "inhome"});
    CHECK_THAT(r.out, Catch::Contains("is inside meithd's home, which the sandbox hides from "
                                      "every tool"));
}

TEST_CASE("meith init says when the running daemon reads another config file",
          "[e2e][diagnosis][cli]") {
    temp_dir project, other;
    std::ofstream(other.path / "other.toml") << "";
    daemon_process d("", {"--config", (other.path / "other.toml").string()});
    const auto r =
        run_program({"/bin/sh"}, {"-c", "cd '" + project.path.string() + "' && \"$MEITH\" init"},
                    {{"MEITH", MEITH_CLI}, {"MEITH_HOME", d.home().string()}});
    REQUIRE(r.status == 0);
    CHECK_THAT(r.out, Catch::Contains("reads " + (other.path / "other.toml").string() +
                                      " (started with --config): `meith reload` re-reads that "
                                      "file, not this one"));
}

TEST_CASE("a wrapper script that cannot run its program in the sandbox is named, with the fix",
          "[e2e][diagnosis][sandbox]") {
    REQUIRE_KERNEL_SANDBOX(false);
    temp_dir shims;
    // A pyenv-like shim: a script whose exec of the real program the sandbox refuses (126).
    std::ofstream(shims.path / "python3") << "#!/bin/sh\nexec /usr/bin/env true \"$@\"\n";
    fs::permissions(shims.path / "python3", fs::perms::owner_all);
    daemon_process d("[[sources]]\nname = \"shimmed\"\nkind = \"host\"\ncommand = [" +
                     json((shims.path / "python3").string()).dump() + ", \"-m\", \"tools\"]\n");
    wait_failed(d, "shimmed");
    const auto r = cli(d, {"sources", "--json"});
    CHECK_THAT(r.out, Catch::Contains("is a wrapper script") &&
                          Catch::Contains("name the program it runs by its absolute path"));
}

TEST_CASE("a program a shell tool may not run is named, with the declaration that allows it",
          "[e2e][diagnosis][sandbox]") {
    REQUIRE_KERNEL_SANDBOX(false);
    temp_dir tools;
    const fs::path script = tools.path / "tool.sh";
    std::ofstream(script) << "read -r _\nprintf 'x\\n' | sed 's/x/y/'\nexit 1\n";
    daemon_process d("[[sources]]\nname = \"sh\"\nkind = \"exec\"\ncommand = [\"sh\", " +
                     json(script.string()).dump() +
                     "]\ntool = { name = \"shell_tool\", description = \"runs sed\", "
                     "capabilities = [\"read-only\"] }\n");
    client c(d.socket());
    const json r = c.call("shell_tool", json::object());
    REQUIRE(r["result"]["ok"] == false);
    CHECK_THAT(message_of(r),
               Catch::Contains("the source may not run other programs (its shell could not run "
                               "`sed`); declare `starts-process`, or name the program in "
                               "`sandbox_paths.exec`"));
}

namespace {

/// `meith sources NAME` once it shows `text` (its stderr is read as it comes), else its last
/// output after 5 s.
std::string sources_once_showing(const daemon_process& d, const std::string& name,
                                 const std::string& text) {
    std::string shown;
    for (int i = 0; i < 100; ++i) {
        shown = run_cli({"sources", name}, d.home()).out;
        if (shown.find(text) != std::string::npos) break;
        std::this_thread::sleep_for(50ms);
    }
    return shown;
}

} // namespace

TEST_CASE("a start the sandbox may have refused is explained in meith sources: a name lookup "
          "without the network",
          "[e2e][diagnosis][sandbox]") {
    REQUIRE_KERNEL_SANDBOX(false);
    // npx confined without the network: npm says EAI_AGAIN on stderr and exits.
    daemon_process d("[[sources]]\nname = \"offline\"\nkind = \"mcp\"\ncommand = [\"node\", "
                     "\"-e\", \"console.error('npm error code EAI_AGAIN getaddrinfo "
                     "registry.npmjs.org'); process.exit(1)\"]\n");
    const std::string shown = sources_once_showing(d, "offline", "hint:");
    INFO(shown);
    CHECK_THAT(shown, Catch::Contains("hint:        meith's sandbox may have refused this: the "
                                      "source may not use"));
    CHECK_THAT(shown, Catch::Contains("network; declare `accesses-network`"));
}

TEST_CASE("a start that failed for its own reasons gets no sandbox hint",
          "[e2e][diagnosis][sandbox]") {
    REQUIRE_KERNEL_SANDBOX(false);
    daemon_process d("[[sources]]\nname = \"broken\"\nkind = \"mcp\"\ncommand = [\"node\", "
                     "\"-e\", \"console.error('SyntaxError: Unexpected token'); "
                     "process.exit(1)\"]\n");
    const std::string shown = sources_once_showing(d, "broken", "Unexpected token");
    INFO(shown);
    CHECK_THAT(shown, Catch::Contains("Unexpected token"));
    CHECK(shown.find("hint:") == std::string::npos);
}

} // namespace e2e_diagnosis_test
