// End-to-end: `meith audit` as a reader of the log — the date in the time column when the
// lines span more than one day, why a call was denied or failed, a summary of source, daemon,
// approval and grant events, and --follow (new lines, rotation by rename, meithd's own
// rotation, truncation, a log that does not exist yet, SIGINT and SIGTERM).
#include "daemon_fixture.hpp"

#include <catch2/catch.hpp>

#include <chrono>
#include <csignal>
#include <ctime>
#include <fcntl.h>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

using namespace meith::test;

namespace e2e_cli_audit_test { // one namespace per file: the tests build as unity batches

namespace {

/// The first line of `text` containing `needle` ("" when none).
std::string line_with(const std::string& text, const std::string& needle) {
    for (const auto& l : lines_of(text))
        if (l.find(needle) != std::string::npos) return l;
    return "";
}

bool has_match(const std::string& text, const std::string& pattern) {
    return std::regex_search(text, std::regex(pattern));
}

/// RFC 3339 UTC, as meithd writes it.
std::string utc_stamp(std::time_t t) {
    std::tm tm{};
    ::gmtime_r(&t, &tm);
    char buf[40];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S.000Z", &tm);
    return buf;
}

/// `t` in local time with `format` (strftime).
std::string local_text(std::time_t t, const char* format) {
    std::tm tm{};
    ::localtime_r(&t, &tm);
    char buf[40];
    std::strftime(buf, sizeof buf, format, &tm);
    return buf;
}

/// A tool_call line; `extra` members are merged in.
std::string call_line(const std::string& ts, const std::string& id, json extra = json::object()) {
    json j = {{"ts", ts},          {"event", "tool_call"}, {"requestId", id},
              {"toolName", "x"},   {"caller", "cli"},      {"decision", "allow"},
              {"durationMs", 1.5}, {"ok", true},           {"errorCode", nullptr}};
    j.update(extra);
    return j.dump() + "\n";
}

void append(const fs::path& file, const std::string& text) {
    std::ofstream(file, std::ios::app) << text;
}

/// How often `needle` occurs in `text`.
std::size_t count_of(const std::string& text, const std::string& needle) {
    std::size_t n = 0;
    for (auto at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1))
        ++n;
    return n;
}

} // namespace

TEST_CASE("meith audit shows the date when the lines shown span more than one day", "[e2e][cli]") {
    temp_dir dir;
    const std::time_t now = std::time(nullptr);
    const std::time_t earlier = now - 48 * 3600; // another calendar day, also across DST

    const fs::path two_days = dir.path / "two.jsonl";
    append(two_days, call_line(utc_stamp(earlier), "req-earlier"));
    append(two_days, call_line(utc_stamp(now), "req-now"));
    auto table = run_cli({"audit", "--file", two_days.string()}, dir.path);
    REQUIRE(table.status == 0);
    // Every row has the date, today's too: the column is one format.
    CHECK_THAT(line_with(table.out, "req-earlier"),
               Catch::StartsWith(local_text(earlier, "%Y-%m-%d %H:%M:%S")));
    CHECK_THAT(line_with(table.out, "req-now"),
               Catch::StartsWith(local_text(now, "%Y-%m-%d %H:%M:%S")));

    // The lines shown decide: the last one alone is today's, so the time only.
    auto last = run_cli({"audit", "--file", two_days.string(), "--limit", "1"}, dir.path);
    REQUIRE(last.status == 0);
    CHECK_THAT(line_with(last.out, "req-now"), Catch::StartsWith(local_text(now, "%H:%M:%S  ")));
    CHECK_THAT(last.out, !Catch::Contains(local_text(now, "%Y-%m-%d")));

    const fs::path one_day = dir.path / "one.jsonl";
    append(one_day, call_line(utc_stamp(now), "req-a"));
    append(one_day, call_line(utc_stamp(now), "req-b"));
    auto today = run_cli({"audit", "--file", one_day.string()}, dir.path);
    REQUIRE(today.status == 0);
    CHECK_THAT(line_with(today.out, "req-a"), Catch::StartsWith(local_text(now, "%H:%M:%S  ")));
    CHECK_THAT(today.out, !Catch::Contains(local_text(now, "%Y-%m-%d")));
}

TEST_CASE("meith audit says why a call was denied or failed", "[e2e][cli]") {
    daemon_process d(host_source_toml("th"));
    REQUIRE(run_cli({"call", "echo", R"({"a":1})"}, d.home()).status == 0);
    REQUIRE(run_cli({"call", "t_write", "{}", "--caller", "plugin"}, d.home()).status == 1);
    REQUIRE(run_cli({"call", "t_fail"}, d.home()).status == 1);
    REQUIRE(run_cli({"call", "no_such_tool"}, d.home()).status == 1);

    auto table = run_cli({"audit"}, d.home());
    REQUIRE(table.status == 0);
    CHECK_THAT(lines_of(table.out).at(0), Catch::EndsWith("DETAILS"));
    // The policy's reason for the denial, the tool's error message for the failures.
    CHECK_THAT(line_with(table.out, "t_write"),
               Catch::Contains("deny") && Catch::Contains("capability 'writes-files'"));
    CHECK_THAT(line_with(table.out, "t_fail"),
               Catch::Contains("TOOL_FAILED") && Catch::Contains("tool said no"));
    CHECK_THAT(line_with(table.out, "no_such_tool"),
               Catch::Contains("UNKNOWN_TOOL") && Catch::Contains("no tool named"));
    // An allowed call's reason ("capabilities [...] allowed") is not shown.
    CHECK_THAT(line_with(table.out, "echo"), !Catch::Contains("allowed for"));
    CHECK_THAT(line_with(run_cli({"audit", "--denied"}, d.home()).out, "t_write"),
               Catch::Contains("capability 'writes-files'"));

    // A long reason is cut to fit, ending in "…".
    temp_dir dir;
    const fs::path log = dir.path / "long.jsonl";
    const std::string reason = "denied because " + std::string(300, 'x') + " END";
    append(log, call_line(utc_stamp(std::time(nullptr)), "req-long",
                          {{"decision", "deny"},
                           {"reason", reason},
                           {"ok", false},
                           {"errorCode", "PERMISSION_DENIED"}}));
    auto cut = run_cli({"audit", "--file", log.string()}, dir.path);
    const std::string row = line_with(cut.out, "req-long");
    CHECK_THAT(row, Catch::Contains("denied because xxx") && Catch::EndsWith("…") &&
                        !Catch::Contains("END"));
    CHECK(row.size() < 200);
}

TEST_CASE("meith audit summarizes source, daemon, approval and grant events", "[e2e][cli]") {
    SECTION("a real daemon's source and daemon lines") {
        daemon_process d(host_source_toml("th"));
        const auto starts = d.audit_events("source_start");
        REQUIRE(!starts.empty());
        const int host_pid = starts.back()["pid"].get<int>(); // the first one is restarted
                                                              // under its sandbox
        ::kill(host_pid, SIGKILL);
        d.wait_audit(
            [&](const json& l) { return l["event"] == "source_exit" && l["pid"] == host_pid; });
        d.wait_audit([](const json& l) { return l["event"] == "source_restart"; });

        auto all = run_cli({"audit", "--event", "all"}, d.home());
        REQUIRE(all.status == 0);
        const std::string pid = std::to_string(host_pid);
        CHECK(has_match(all.out, "source_start +th +pid " + pid + " started"));
        CHECK(has_match(all.out, "source_exit +th +pid " + pid + " killed by signal 9"));
        CHECK(has_match(all.out, "source_restart +th +restart 1 in [0-9]+ ms"));
        CHECK(has_match(all.out, "daemon_start +meithd +pid " + std::to_string(d.pid()) + " on " +
                                     d.socket().string() + ", [0-9]+ tools"));

        // One event named: a table of its own, TIME EVENT SUBJECT DETAILS.
        auto exits = run_cli({"audit", "--event", "source_exit"}, d.home());
        REQUIRE(exits.status == 0);
        const auto rows = lines_of(exits.out);
        REQUIRE(rows.size() == 2);
        CHECK(has_match(rows[0], "^TIME +EVENT +SUBJECT +DETAILS$"));
        CHECK(has_match(rows[1], "source_exit +th +pid " + pid + " killed by signal 9"));
    }
    SECTION("a written log's other events") {
        temp_dir dir;
        const fs::path log = dir.path / "events.jsonl";
        const std::string ts = utc_stamp(std::time(nullptr));
        const auto event = [&](const std::string& name, json fields) {
            fields["ts"] = ts;
            fields["event"] = name;
            append(log, fields.dump() + "\n");
        };
        event("source_exit",
              {{"source", "files"}, {"pid", 123}, {"status", "exited with status 1"}});
        event("source_exit",
              {{"source", "gone"}, {"pid", nullptr}, {"status", "cannot start: no x"}});
        event("source_failed", {{"source", "files"}, {"reason", "exited 5 times within 60 s"}});
        event("source_start", {{"hook", "guard"}, {"pid", 77}});
        event("daemon_stop", {{"pid", 4242}});
        event("approval_decision", {{"approvalId", "a_1"},
                                    {"decision", "deny"},
                                    {"reason", "not on a Friday"},
                                    {"approverSession", "s_9"}});
        event("grant_created", {{"grant",
                                 {{"grantId", "g_7"},
                                  {"caller", "plugin"},
                                  {"sessionId", nullptr},
                                  {"tool", "fs_*"},
                                  {"capabilities", {"writes-files"}},
                                  {"usesLeft", 3},
                                  {"expiresAt", nullptr}}},
                                {"by", "s_9"}});
        event("grant_expired", {{"grantId", "g_7"}, {"why", "used_up"}, {"by", nullptr}});
        event("some_future_event", {{"count", 5}, {"what", "thing"}});

        auto r = run_cli({"audit", "--event", "all", "--file", log.string()}, dir.path);
        REQUIRE(r.status == 0);
        CHECK(has_match(r.out, "source_exit +files +pid 123 exited with status 1"));
        CHECK(has_match(r.out, "source_exit +gone +cannot start: no x"));
        CHECK(has_match(r.out, "source_failed +files +failed: exited 5 times within 60 s"));
        CHECK(has_match(r.out, "source_start +hook guard +pid 77 started"));
        CHECK(has_match(r.out, "daemon_stop +meithd +pid 4242 stopped"));
        CHECK(has_match(r.out, "approval_decision +a_1 +deny: not on a Friday \\(by s_9\\)"));
        CHECK(has_match(
            r.out, "grant_created +g_7 +\\[writes-files\\] tool fs_\\* caller plugin, 3 uses"));
        CHECK(has_match(r.out, "grant_expired +g_7 +used up"));
        CHECK(has_match(r.out, "some_future_event +- +count 5, what thing"));
    }
}

TEST_CASE("meith audit --follow prints new lines, across a rename and a truncation", "[e2e][cli]") {
    temp_dir dir;
    const fs::path log = dir.path / "f.jsonl";
    const std::string ts = utc_stamp(std::time(nullptr));
    for (const char* id : {"req-a1", "req-a2", "req-a3"})
        append(log, call_line(ts, id));

    auto f_ =
        background_cli({"audit", "--follow", "--limit", "2", "--file", log.string()}, dir.path);
    auto& f = *f_;
    REQUIRE(f.wait_for("req-a3"));
    CHECK_THAT(f.out(), Catch::Contains("req-a2") && !Catch::Contains("req-a1"));
    CHECK_THAT(f.out(), Catch::StartsWith("TIME"));

    append(log, call_line(ts, "req-b1"));
    REQUIRE(f.wait_for("req-b1"));

    // Rotation as meithd (or logrotate) does it: renamed away, a new file at the path. A line
    // still written to the old file is read before the new file's.
    fs::rename(log, dir.path / "f.jsonl.1");
    append(dir.path / "f.jsonl.1", call_line(ts, "req-b2"));
    append(log, call_line(ts, "req-c1"));
    REQUIRE(f.wait_for("req-c1"));
    append(log, call_line(ts, "req-c2"));
    REQUIRE(f.wait_for("req-c2"));

    // Truncated in place (copytruncate), then written again: read from the start.
    std::ofstream(log, std::ios::trunc) << call_line(ts, "req-d1");
    REQUIRE(f.wait_for("req-d1"));
    CHECK_THAT(f.err(), Catch::Contains("truncated"));

    CHECK(f.running());
    CHECK(f.stop(SIGINT) == 0);
    const std::string out = f.out();
    std::size_t at = 0;
    for (const char* id : {"req-a2", "req-a3", "req-b1", "req-b2", "req-c1", "req-c2", "req-d1"}) {
        INFO(id << " in order, once, in:\n" << out);
        CHECK(count_of(out, id) == 1);
        const auto found = out.find(id, at);
        CHECK(found != std::string::npos);
        if (found != std::string::npos) at = found;
    }
}

TEST_CASE("meith audit --follow --json waits for the log and ends on SIGTERM", "[e2e][cli]") {
    temp_dir dir;
    const fs::path log = dir.path / "later.jsonl";
    auto f_ = background_cli({"audit", "-f", "--json", "--file", log.string()}, dir.path);
    auto& f = *f_;
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (f.err().find("waiting") == std::string::npos &&
           std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(20ms);
    CHECK_THAT(f.err(), Catch::Contains("no audit log") && Catch::Contains("waiting"));

    const std::string ts = utc_stamp(std::time(nullptr));
    append(log, call_line(ts, "req-j1"));
    REQUIRE(f.wait_for("req-j1"));
    append(log, call_line(ts, "req-j2"));
    REQUIRE(f.wait_for("req-j2"));
    CHECK(f.stop(SIGTERM) == 0);
    const auto lines = lines_of(f.out());
    REQUIRE(lines.size() == 2);
    CHECK(json::parse(lines[0])["requestId"] == "req-j1");
    CHECK(json::parse(lines[1])["requestId"] == "req-j2");
}

TEST_CASE("meith audit --follow keeps up with meithd rotating its log", "[e2e][cli]") {
    daemon_process d("[audit]\nmax_bytes = 2048\nkeep = 50\n");
    client c(d.socket());
    REQUIRE(c.call("echo", {{"i", -1}}, {{"requestId", "r-first"}})["result"]["ok"] == true);
    auto f_ = background_cli({"audit", "--follow", "--json", "--event", "tool_call"}, d.home());
    auto& f = *f_;
    REQUIRE(f.wait_for("\"r-first\""));

    constexpr int calls = 40;
    for (int i = 0; i < calls; ++i) {
        auto r = c.call("echo", {{"i", i}}, {{"requestId", "r" + std::to_string(i)}});
        REQUIRE(r["result"]["ok"] == true);
    }
    REQUIRE(fs::exists(d.home() / "audit.jsonl.3")); // rotated several times, quickly
    REQUIRE(f.wait_for("\"r" + std::to_string(calls - 1) + "\""));
    CHECK(f.stop(SIGINT) == 0);

    const auto lines = lines_of(f.out());
    REQUIRE(lines.size() == calls + 1);
    CHECK(json::parse(lines[0])["requestId"] == "r-first");
    for (int i = 0; i < calls; ++i)
        CHECK(json::parse(lines[i + 1])["requestId"] == "r" + std::to_string(i));
}

} // namespace e2e_cli_audit_test
