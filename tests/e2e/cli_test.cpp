// End-to-end: the `meith` CLI against the real daemon — discovery through config.json,
// status, tools, call (events, exit status, timeouts, permissions), Ctrl-C cancel, audit
// (reading the log, rotated files, filters, corrupt lines) and policy check.
#include "daemon_fixture.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <ctime>
#include <fcntl.h>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

using namespace meith::test;

namespace e2e_cli_test { // one namespace per file: the tests build as unity batches

TEST_CASE("meith status and tools find the daemon through config.json", "[e2e][cli]") {
    daemon_process d(host_source_toml("th"));
    auto status = run_cli({"status"}, d.home());
    CHECK(status.status == 0);
    CHECK_THAT(status.out, Catch::Contains(d.socket().string()));
    CHECK_THAT(status.out, Catch::Contains("s_"));

    auto tools = run_cli({"tools"}, d.home());
    CHECK(tools.status == 0);
    CHECK_THAT(tools.out,
               Catch::Contains("t_echo") && Catch::Contains("echo") && Catch::Contains("builtin"));
    auto as_json = run_cli({"tools", "--json"}, d.home());
    REQUIRE(as_json.status == 0);
    auto parsed = json::parse(as_json.out);
    CHECK(parsed.is_array());
    CHECK(parsed.size() > 10);
}

TEST_CASE("meith call prints events and the result, and its exit status follows ok", "[e2e][cli]") {
    daemon_process d(host_source_toml("th"));
    auto ok = run_cli({"call", "t_stream", R"({"n":3,"interval_ms":10})"}, d.home());
    CHECK(ok.status == 0);
    CHECK(json::parse(ok.out)["done"] == 3);
    CHECK_THAT(ok.err, Catch::Contains("[part]"));

    auto failed = run_cli({"call", "t_fail"}, d.home());
    CHECK(failed.status == 1);
    CHECK_THAT(failed.err, Catch::Contains("TOOL_FAILED") && Catch::Contains("tool said no"));

    auto denied = run_cli({"call", "t_write", "{}", "--caller", "plugin"}, d.home());
    CHECK(denied.status == 1);
    CHECK_THAT(denied.err, Catch::Contains("PERMISSION_DENIED"));

    auto timed_out =
        run_cli({"call", "t_sleep", R"({"ms":5000})", "--timeout-ms", "300"}, d.home());
    CHECK(timed_out.status == 1);
    CHECK_THAT(timed_out.err, Catch::Contains("TIMEOUT"));

    auto bad_json = run_cli({"call", "t_echo", "{not json"}, d.home());
    CHECK(bad_json.status == 2);

    auto lines = d.audit_events("tool_call");
    CHECK(lines.size() == 4); // the bad JSON never reached the daemon
}

TEST_CASE("meith call: Ctrl-C sends cancel_tool_call and waits for CANCELLED", "[e2e][cli]") {
    daemon_process d(host_source_toml("th"));
    temp_dir out;
    const pid_t pid = ::fork();
    if (pid == 0) {
        const int o = ::open((out.path / "out").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
        const int e = ::open((out.path / "err").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
        ::dup2(o, 1);
        ::dup2(e, 2);
        ::setenv("MEITH_HOME", d.home().c_str(), 1);
        ::execl(MEITH_CLI, MEITH_CLI, "call", "t_stream", R"({"n":1000,"interval_ms":50})",
                static_cast<char*>(nullptr));
        ::_exit(127);
    }
    // Wait for the first streamed event, then press Ctrl-C.
    for (int i = 0; i < 500 && slurp(out.path / "err").find("[part]") == std::string::npos; ++i)
        std::this_thread::sleep_for(10ms);
    REQUIRE_THAT(slurp(out.path / "err"), Catch::Contains("[part]"));
    ::kill(pid, SIGINT);
    int status = 0;
    for (int i = 0; i < 500 && ::waitpid(pid, &status, WNOHANG) == 0; ++i)
        std::this_thread::sleep_for(10ms);
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 130); // the shell's convention for SIGINT
    CHECK_THAT(slurp(out.path / "err"), Catch::Contains("CANCELLED"));
    auto line = d.wait_audit([](const json& l) { return l.value("event", "") == "tool_call"; });
    CHECK(line["errorCode"] == "CANCELLED");
    CHECK(line["end"] == "cancel");
}

// `meith call` from a shell is mostly process start (bench (l)): libcurl alone pulled in 30
// more libraries and 6 ms. The commands that need libcurl, libcrypto or libsystemd run in
// meith-credentials; this keeps them out of `meith` itself.
TEST_CASE("meith loads neither libcurl, libcrypto nor libsystemd, and meith secret still works "
          "through meith-credentials",
          "[e2e][cli]") {
    auto needed = run_program({"/usr/bin/readelf"}, {"-d", MEITH_CLI}, {});
    REQUIRE(needed.status == 0);
    REQUIRE_THAT(needed.out, Catch::Contains("(NEEDED)") && Catch::Contains("libstdc++"));
    CHECK_THAT(needed.out, !Catch::Contains("libcurl") && !Catch::Contains("libcrypto") &&
                               !Catch::Contains("libsystemd"));

    temp_dir home;
    const std::vector<std::pair<std::string, std::string>> env{
        {"MEITH_HOME", home.path.string()},
        {"MEITH_SECRET_SERVICE", "off"},
        {"MEITH_SECRETS_KEY", (home.path / "keys" / "secrets.key").string()}};
    auto list = run_program({MEITH_CLI}, {"secret", "list"}, env);
    CHECK(list.status == 0);
    CHECK(list.out.empty());
    auto missing = run_program({MEITH_CLI}, {"secret", "list"},
                               {{"MEITH_HOME", home.path.string()},
                                {"MEITH_CREDENTIALS", (home.path / "nowhere").string()}});
    CHECK(missing.status == 2);
    CHECK_THAT(missing.err, Catch::Contains("meith-credentials (which runs `meith secret`) is not "
                                            "installed") &&
                                Catch::Contains("MEITH_CREDENTIALS"));
}

TEST_CASE("meith without a running daemon says how to start it", "[e2e][cli]") {
    temp_dir home;
    auto r = run_cli({"tools"}, home.path);
    CHECK(r.status == 2);
    CHECK_THAT(r.err, Catch::Contains("not running"));
}

TEST_CASE("meith audit shows calls as a table, filters them and prints JSON Lines", "[e2e][cli]") {
    daemon_process d(host_source_toml("th"));
    REQUIRE(run_cli({"call", "echo", R"({"a":1})"}, d.home()).status == 0);
    REQUIRE(run_cli({"call", "t_write", "{}", "--caller", "plugin"}, d.home()).status == 1);
    REQUIRE(run_cli({"call", "no_such_tool"}, d.home()).status == 1);

    auto table = run_cli({"audit"}, d.home());
    CHECK(table.status == 0);
    CHECK(table.err.empty());
    CHECK_THAT(table.out, Catch::Contains("TOOL") && Catch::Contains("echo") &&
                              Catch::Contains("t_write") && Catch::Contains("no_such_tool") &&
                              Catch::Contains("deny") && Catch::Contains("UNKNOWN_TOOL"));
    CHECK_THAT(table.out, !Catch::Contains("daemon_start")); // the table shows calls by default
    CHECK_THAT(run_cli({"audit", "--event", "all"}, d.home()).out, Catch::Contains("daemon_start"));

    auto denied = run_cli({"audit", "--denied"}, d.home());
    CHECK(denied.status == 0);
    CHECK_THAT(denied.out, Catch::Contains("t_write") && Catch::Contains("deny"));
    CHECK_THAT(denied.out, !Catch::Contains("echo") && !Catch::Contains("no_such_tool"));
    CHECK(lines_of(denied.out).size() == 2); // header + the one denied call

    auto plugin = run_cli({"audit", "--caller", "plugin"}, d.home());
    CHECK_THAT(plugin.out, Catch::Contains("t_write") && !Catch::Contains("echo"));

    auto echo = run_cli({"audit", "--tool", "echo", "--json"}, d.home());
    CHECK(echo.status == 0);
    const auto echo_lines = lines_of(echo.out);
    REQUIRE(echo_lines.size() == 1);
    for (const auto& l : echo_lines) {
        const json j = json::parse(l);
        CHECK(j["toolName"] == "echo");
        CHECK(j["event"] == "tool_call");
        CHECK(j["decision"] == "allow");
    }

    auto recent = run_cli({"audit", "--since", "1h", "--json", "--event", "tool_call"}, d.home());
    CHECK(recent.status == 0);
    CHECK(lines_of(recent.out).size() == 3);
    auto last = run_cli({"audit", "--json", "--event", "tool_call", "--limit", "1"}, d.home());
    REQUIRE(lines_of(last.out).size() == 1);
    CHECK(json::parse(lines_of(last.out)[0])["toolName"] == "no_such_tool");

    CHECK(run_cli({"audit", "--since", "soon"}, d.home()).status == 2);
    CHECK(run_cli({"tools", "--denied"}, d.home()).status == 2);
}

TEST_CASE("meith audit reads rotated files oldest first", "[e2e][cli]") {
    daemon_process d("[audit]\nmax_bytes = 2048\nkeep = 50\n");
    constexpr int calls = 30;
    {
        client c(d.socket());
        for (int i = 0; i < calls; ++i) {
            auto r = c.call("echo", {{"i", i}}, {{"requestId", "r" + std::to_string(i)}});
            REQUIRE(r["result"]["ok"] == true);
        }
    }
    REQUIRE(fs::exists(d.home() / "audit.jsonl.1"));
    REQUIRE(fs::exists(d.home() / "audit.jsonl.2"));

    auto r = run_cli({"audit", "--json", "--event", "tool_call"}, d.home());
    CHECK(r.status == 0);
    const auto lines = lines_of(r.out);
    REQUIRE(lines.size() == calls);
    for (int i = 0; i < calls; ++i)
        CHECK(json::parse(lines[i])["requestId"] == "r" + std::to_string(i));

    auto limited = run_cli({"audit", "--limit", "3"}, d.home());
    CHECK(lines_of(limited.out).size() == 4); // header + 3
    CHECK_THAT(limited.out, Catch::Contains("r29") && !Catch::Contains("r26"));
}

TEST_CASE("meith audit --file: order, --since and ts parsing on a written log", "[e2e][cli]") {
    temp_dir dir;
    const auto now = std::chrono::system_clock::now();
    const auto stamp = [](std::chrono::system_clock::time_point t) {
        const std::time_t s = std::chrono::system_clock::to_time_t(t);
        std::tm tm{};
        ::gmtime_r(&s, &tm);
        char buf[40];
        std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S.000Z", &tm);
        return std::string(buf);
    };
    const auto line = [](const std::string& ts, const std::string& id) {
        return json({{"ts", ts},
                     {"event", "tool_call"},
                     {"requestId", id},
                     {"toolName", "x"},
                     {"caller", "cli"},
                     {"decision", "allow"},
                     {"durationMs", 1.5},
                     {"ok", true},
                     {"errorCode", nullptr}})
                   .dump() +
               "\n";
    };
    const fs::path log = dir.path / "my.jsonl";
    std::ofstream(dir.path / "my.jsonl.2") << line("2020-01-02T03:04:05.678Z", "old");
    std::ofstream(dir.path / "my.jsonl.1") << line(stamp(now - std::chrono::hours(3)), "hours");
    std::ofstream(log) << line(stamp(now - std::chrono::seconds(5)), "fresh");

    auto all = run_cli({"audit", "--json", "--file", log.string()}, dir.path);
    REQUIRE(all.status == 0);
    const auto lines = lines_of(all.out);
    REQUIRE(lines.size() == 3);
    CHECK(json::parse(lines[0])["requestId"] == "old");
    CHECK(json::parse(lines[1])["requestId"] == "hours");
    CHECK(json::parse(lines[2])["requestId"] == "fresh");

    CHECK(lines_of(
              run_cli({"audit", "--json", "--file", log.string(), "--since", "1d"}, dir.path).out)
              .size() == 2);
    CHECK(lines_of(
              run_cli({"audit", "--json", "--file", log.string(), "--since", "2h"}, dir.path).out)
              .size() == 1);
    auto table = run_cli({"audit", "--file", log.string()}, dir.path);
    CHECK_THAT(table.out, Catch::Contains("2020-01-0") && Catch::Contains("fresh") &&
                              Catch::Contains("1.5") && Catch::Contains("ok"));

    auto missing = run_cli({"audit", "--file", (dir.path / "nope.jsonl").string()}, dir.path);
    CHECK(missing.status == 2);
    CHECK_THAT(missing.err, Catch::Contains("no audit log"));
}

TEST_CASE("meith audit reports a corrupt line with file:line and shows the rest", "[e2e][cli]") {
    daemon_process d(host_source_toml("th"));
    REQUIRE(run_cli({"call", "echo"}, d.home()).status == 0);
    d.stop();
    const fs::path log = d.home() / "audit.jsonl";
    const std::size_t before = lines_of(slurp(log)).size();
    std::ofstream(log, std::ios::app) << "{\"ts\": garbage, not json\n";

    auto r = run_cli({"audit"}, d.home()); // config.json still names the log
    CHECK(r.status == 0);
    CHECK_THAT(r.err, Catch::Contains(log.string() + ":" + std::to_string(before + 1)) &&
                          Catch::Contains("skipped"));
    CHECK_THAT(r.out, Catch::Contains("echo") && Catch::Contains("ok"));
    auto as_json = run_cli({"audit", "--json"}, d.home());
    CHECK(as_json.status == 0);
    CHECK(lines_of(as_json.out).size() == before);
}

TEST_CASE("meith policy check explains the decision, exit 0 allow, 1 deny", "[e2e][cli]") {
    SECTION("default permissions") {
        daemon_process d(host_source_toml("th"));
        auto w = run_cli({"policy", "check", "t_write", "--caller", "plugin"}, d.home());
        CHECK(w.status == 1);
        CHECK_THAT(w.out, Catch::Contains("t_write for caller plugin: deny") &&
                              Catch::Contains("writes-files") && Catch::Contains("reason:"));

        auto unknown = run_cli({"policy", "check", "no_such_tool"}, d.home());
        CHECK(unknown.status == 1);
        CHECK_THAT(unknown.out, Catch::Contains("deny") && Catch::Contains("unknown tool"));

        auto echo = run_cli({"policy", "check", "echo", "--json"}, d.home());
        CHECK(echo.status == 0);
        const json j = json::parse(echo.out);
        CHECK(j["decision"] == "allow");
        CHECK(j["toolName"] == "echo");
        CHECK(j["caller"] == "cli");

        CHECK(run_cli({"policy", "check"}, d.home()).status == 2);
        CHECK(run_cli({"policy"}, d.home()).status == 2);
    }
    SECTION("a config granting cli writes-files") {
        daemon_process d(host_source_toml("th") +
                         "[permissions.callers.cli]\nallow = [\"read-only\", \"writes-files\"]\n");
        auto w = run_cli({"policy", "check", "t_write", "--caller", "cli"}, d.home());
        CHECK(w.status == 0);
        CHECK_THAT(w.out, Catch::Contains("t_write for caller cli: allow") &&
                              Catch::Contains("writes-files"));
        CHECK(run_cli({"policy", "check", "t_write", "--caller", "plugin"}, d.home()).status == 1);
    }
}

// ==== issue 19: arguments from anywhere, output for people and scripts, help, init ==========

namespace {
/// Runs `script` with sh -c, MEITH (the CLI's path) and MEITH_HOME=home in its environment.
cli_result run_shell(const std::string& script, const fs::path& home) {
    return run_program({"/bin/sh"}, {"-c", script},
                       {{"MEITH", MEITH_CLI}, {"MEITH_HOME", home.string()}});
}
} // namespace

TEST_CASE("meith call takes arguments from standard input (-) and from @FILE, past argv's limit",
          "[e2e][cli]") {
    daemon_process d;
    // 200 KB in one word: more than Linux passes as one argv string (MAX_ARG_STRLEN, 128 KiB).
    const std::string big(200 * 1024, 'x');
    const json args{{"blob", big}, {"n", 1}};
    std::ofstream(d.home() / "args.json") << args.dump();
    auto from_file = run_cli({"call", "echo", "@" + (d.home() / "args.json").string()}, d.home());
    REQUIRE(from_file.status == 0);
    CHECK(json::parse(from_file.out) == args);
    auto from_stdin = run_shell("\"$MEITH\" call echo - < \"$MEITH_HOME/args.json\"", d.home());
    REQUIRE(from_stdin.status == 0);
    CHECK(json::parse(from_stdin.out) == args);
    // Bad input is named by where it came from, and nothing is sent.
    std::ofstream(d.home() / "bad.json") << "[1, 2";
    auto bad = run_cli({"call", "echo", "@" + (d.home() / "bad.json").string()}, d.home());
    CHECK(bad.status == 2);
    CHECK_THAT(bad.err, Catch::Contains("arguments in ") && Catch::Contains("not valid JSON"));
    auto missing = run_cli({"call", "echo", "@/no/such/args.json"}, d.home());
    CHECK(missing.status == 2);
    CHECK_THAT(missing.err, Catch::Contains("cannot read /no/such/args.json"));
    auto array = run_shell("echo '[1]' | \"$MEITH\" call echo -", d.home());
    CHECK(array.status == 2);
    CHECK_THAT(array.err, Catch::Contains("arguments on standard input must be a JSON object"));
}

TEST_CASE("meith call --raw prints a result's text as is, JSON into a pipe is one line",
          "[e2e][cli]") {
    daemon_process d;
    // A file tool's answer shape: {"content": "..."}; echo returns its arguments.
    auto raw = run_cli({"call", "echo", R"({"path":"a.txt","content":"line 1\nline 2"})", "--raw"},
                       d.home());
    REQUIRE(raw.status == 0);
    CHECK(raw.out == "line 1\nline 2"); // exactly the text: no JSON, no added newline
    auto other = run_cli({"call", "echo", R"({"n":1})", "--raw"}, d.home());
    CHECK(other.out == "{\"n\":1}\n");
    // Not a terminal: JSON on one line per value, for scripts.
    auto piped = run_cli({"call", "echo", R"({"a":{"b":1}})"}, d.home());
    CHECK(piped.out == "{\"a\":{\"b\":1}}\n");
    auto tools = run_cli({"tools", "--json"}, d.home());
    CHECK(std::count(tools.out.begin(), tools.out.end(), '\n') == 1);
    CHECK(run_cli({"status", "--raw"}, d.home()).status == 2); // --raw is call's
}

TEST_CASE("meith status --json, meith tools NAME and did-you-mean for tools", "[e2e][cli]") {
    daemon_process d(host_source_toml("th"));
    auto st = run_cli({"status", "--json"}, d.home());
    REQUIRE(st.status == 0);
    const json s = json::parse(st.out);
    CHECK(s["running"] == true);
    CHECK(s["pid"] == d.pid());
    CHECK(s["tools"]["total"].get<int>() > 1);
    CHECK(s["caller"] == "cli");

    auto one = run_cli({"tools", "t_echo"}, d.home());
    REQUIRE(one.status == 0);
    CHECK_THAT(one.out, Catch::StartsWith("t_echo"));
    CHECK_THAT(one.out, Catch::Contains("source:        th"));
    CHECK_THAT(one.out, Catch::Contains("permission:    allow for caller cli"));
    CHECK_THAT(one.out, Catch::Contains("input schema:"));
    auto one_json = run_cli({"tools", "t_echo", "--json"}, d.home());
    CHECK(json::parse(one_json.out)["name"] == "t_echo");

    auto typo = run_cli({"tools", "t_ech"}, d.home());
    CHECK(typo.status == 1);
    CHECK_THAT(typo.err, Catch::Contains("no tool 't_ech'; did you mean 't_echo'"));
    auto call = run_cli({"call", "t_ecoh"}, d.home());
    CHECK(call.status == 1);
    CHECK_THAT(call.err, Catch::Contains("UNKNOWN_TOOL"));
    CHECK_THAT(call.err, Catch::Contains("did you mean 't_echo'"));
    auto far = run_cli({"call", "zzzzzzzz"}, d.home());
    CHECK(far.err.find("did you mean") == std::string::npos);
}

TEST_CASE("meith help, COMMAND --help, version and did-you-mean for commands", "[e2e][cli]") {
    temp_dir home;
    auto help = run_cli({"help"}, home.path);
    CHECK(help.status == 0);
    CHECK_THAT(help.out, Catch::Contains("meith help COMMAND"));
    auto call_help = run_cli({"help", "call"}, home.path);
    CHECK(call_help.status == 0);
    CHECK_THAT(call_help.out, Catch::StartsWith("usage: meith call TOOL"));
    CHECK_THAT(call_help.out, Catch::Contains("@FILE") && Catch::Contains("--raw"));
    CHECK(run_cli({"call", "--help"}, home.path).out == call_help.out);
    auto service = run_cli({"help", "service"}, home.path);
    CHECK_THAT(service.out,
               Catch::Contains("service install") && Catch::Contains("service uninstall"));
    auto version = run_cli({"version"}, home.path);
    CHECK(version.status == 0);
    CHECK_THAT(version.out, Catch::StartsWith("meith "));
    CHECK(version.out == run_cli({"--version"}, home.path).out);
    auto typo = run_cli({"sourcse"}, home.path);
    CHECK(typo.status == 2);
    CHECK_THAT(typo.err, Catch::Contains("unknown command 'sourcse'; did you mean 'sources'?"));
    auto bad_help = run_cli({"help", "tool"}, home.path);
    CHECK(bad_help.status == 2);
    CHECK_THAT(bad_help.err, Catch::Contains("did you mean 'tools'"));
    // A usage error points at the command's own help.
    auto usage = run_cli({"call"}, home.path);
    CHECK(usage.status == 2);
    CHECK_THAT(usage.err, Catch::Contains("meith help call"));
}

TEST_CASE("meith without a daemon names the command that starts it, with its config",
          "[e2e][cli]") {
    temp_dir home;
    auto none = run_cli({"status"}, home.path);
    CHECK(none.status == 2);
    CHECK_THAT(none.err, Catch::Contains("meithd --config FILE") && Catch::Contains("meith init"));
    std::ofstream(home.path / "meithd.toml") << "";
    auto with = run_cli({"status"}, home.path);
    CHECK_THAT(with.err, Catch::Contains("(it reads ") && Catch::Contains("meithd.toml)"));
}

TEST_CASE("meith init writes a config that works from anywhere, and keeps an existing one",
          "[e2e][cli]") {
    temp_dir home, project;
    std::ofstream(project.path / "notes.txt") << "hello from the project\n";
    const std::string init = "cd '" + project.path.string() + "' && \"$MEITH\" init";
    auto r = run_shell(init, home.path);
    REQUIRE(r.status == 0);
    CHECK_THAT(r.out, Catch::Contains("wrote"));
    const fs::path file = home.path / "meithd.toml";
    REQUIRE(fs::exists(file));
    CHECK((fs::status(file).permissions() & fs::perms::group_all) == fs::perms::none);
    std::string text;
    {
        std::ifstream in(file);
        text.assign(std::istreambuf_iterator<char>(in), {});
    }
    // Refused twice without --force; --force keeps the old one as .bak.
    auto again = run_shell(init, home.path);
    CHECK(again.status == 2);
    CHECK_THAT(again.err, Catch::Contains("--force"));
    CHECK(run_shell(init + " --force", home.path).status == 0);
    CHECK(fs::exists(home.path / "meithd.toml.bak"));
    // A folder that holds the home is refused: tools may never write there.
    auto inside =
        run_shell("cd '" + home.path.string() + "/..' && \"$MEITH\" init --force", home.path);
    CHECK(inside.status == 2);
    CHECK_THAT(inside.err, Catch::Contains("holds the meith home"));

    // The config works from a daemon started anywhere: its tools find their files.
    daemon_process d(text);
    auto read = run_cli({"call", "read_file", R"({"path":"notes.txt"})", "--raw"}, d.home());
    CHECK(read.status == 0);
    CHECK(read.out == "hello from the project\n");
    auto words = run_cli({"call", "word_count", R"({"text":"a b c"})"}, d.home());
    CHECK(words.status == 0);
    CHECK_THAT(words.out, Catch::Contains("\"words\":3"));
    auto kv = run_cli({"call", "kv", R"({"op":"list"})"}, d.home());
    CHECK(kv.status == 0);
}

TEST_CASE("meith init leaves out examples that cannot run and says why, a python3 wrapper "
          "script is replaced by a real interpreter",
          "[e2e][cli][diagnosis]") {
    if (!fs::exists("/usr/bin/python3")) SKIP_TEST("no /usr/bin/python3 on this machine");
    temp_dir home, project, shims;
    // A pyenv-like shim: a script that runs python3 (inside the sandbox it exits 126).
    std::ofstream(shims.path / "python3") << "#!/bin/sh\nexec /usr/bin/python3 \"$@\"\n";
    fs::permissions(shims.path / "python3", fs::perms::owner_all);
    // PATH holds only the shim: no node either.
    const auto r = run_program(
        {"/bin/sh"}, {"-c", "cd '" + project.path.string() + "' && \"$MEITH\" init"},
        {{"MEITH", MEITH_CLI}, {"MEITH_HOME", home.path.string()}, {"PATH", shims.path.string()}});
    REQUIRE(r.status == 0);
    CHECK_THAT(r.out, Catch::Contains("note: node is not on PATH: the Node.js examples"));
    CHECK_THAT(r.out, Catch::Contains("is a wrapper script (a pyenv shim?)") &&
                          Catch::Contains("the Python example uses /usr/bin/python3"));
    std::string text;
    {
        std::ifstream in(home.path / "meithd.toml");
        text.assign(std::istreambuf_iterator<char>(in), {});
    }
    CHECK_THAT(text, !Catch::Contains("name = \"files\""));
    CHECK_THAT(text, Catch::Contains("command = [\"/usr/bin/python3\", \"-m\", \"meith_tools\""));
    // The Python example runs, confined, under the interpreter init chose.
    daemon_process d(text);
    auto echo = run_cli({"call", "py_echo", R"({"value":"hi"})"}, d.home());
    INFO(echo.err);
    CHECK(echo.status == 0);
    CHECK_THAT(echo.out, Catch::Contains("hi"));
}

TEST_CASE("meith stop shuts meithd down gracefully, and meith restart starts it again",
          "[e2e][cli]") {
    // Issue 40: there was no `meith stop` / `meith restart`.
    daemon_process d;
    autostarted_daemon stop_restarted{d.home()};
    const auto stop = run_cli({"stop"}, d.home());
    INFO(stop.out + stop.err);
    CHECK(stop.status == 0);
    CHECK_THAT(stop.out, Catch::Contains("pid " + std::to_string(d.pid())) &&
                             Catch::Contains("meithd stopped"));
    CHECK_FALSE(d.running()); // exited (SIGTERM: graceful, exit 0)
    CHECK_THAT(d.log(), Catch::Contains("signal 15 received: shutting down"));

    // Nothing to stop is not an error.
    const auto again = run_cli({"stop"}, d.home());
    CHECK(again.status == 0);
    CHECK_THAT(again.out, Catch::Contains("not running"));

    // restart starts one even with auto-start off (run_cli sets MEITH_NO_AUTOSTART=1).
    const auto first = run_cli({"restart"}, d.home());
    INFO(first.out + first.err);
    REQUIRE(first.status == 0);
    CHECK_THAT(first.out, Catch::Contains("was not running") && Catch::Contains("running again"));
    const json rec1 = json::parse(slurp(d.home() / "config.json"));
    const pid_t pid1 = rec1["pid"].get<pid_t>();
    CHECK(run_cli({"status"}, d.home()).status == 0);

    // restart of a running daemon: another pid answers afterwards, the old one is gone.
    const auto second = run_cli({"restart"}, d.home());
    INFO(second.out + second.err);
    REQUIRE(second.status == 0);
    CHECK_THAT(second.out, Catch::Contains("stopping meithd (pid " + std::to_string(pid1)));
    const pid_t pid2 = json::parse(slurp(d.home() / "config.json"))["pid"].get<pid_t>();
    CHECK(pid2 != pid1);
    // Gone, or a zombie nobody reaps (PID 1 of a container may not).
    const std::string stat = slurp("/proc/" + std::to_string(pid1) + "/stat");
    CHECK((stat.empty() || stat.find(") Z ") != std::string::npos));
    CHECK(run_cli({"call", "echo", "{}"}, d.home()).status == 0);

    // Both are in meith help.
    const auto help = run_cli({"help"}, d.home());
    CHECK_THAT(help.out, Catch::Contains("  stop ") && Catch::Contains("  restart "));
}

} // namespace e2e_cli_test
