// End-to-end tests of issue 28's diagnosis: what a person reads when a source is down — the
// CLI's `sources`, `sources NAME`, `status`, `tools`, `sources restart` and `reload` run as a
// person runs them, against the real meithd.
#include "daemon_fixture.hpp"

#include <catch2/catch.hpp>

#include <fstream>

using namespace meith::test;
using namespace std::chrono_literals;

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
    CHECK_THAT(unknown.err, Catch::Contains("no source 'crashyy'") &&
                                Catch::Contains("did you mean 'crashy'"));
}

TEST_CASE("meith status and meith tools name the sources that are down, and why",
          "[e2e][cli][diagnosis]") {
    daemon_process d(missing_toml() + host_source_toml("th"));
    wait_failed(d, "missing");
    const auto status = cli(d, {"status"});
    CHECK(status.status == 0);
    CHECK_THAT(status.out,
               Catch::Contains("sources:  3 (1 failed: missing; see meith sources)"));
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
