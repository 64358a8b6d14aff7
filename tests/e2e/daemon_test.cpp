// End-to-end: the real meithd on a real socket with the built-in `echo` tool — framing,
// frames, limits, identity, startup errors and shutdown (docs/protocol.md §1-§6).
#include "daemon_fixture.hpp"

#include <catch2/catch.hpp>

#include <csignal>
#include <fstream>
#include <regex>
#include <set>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

using namespace meith::test;

namespace e2e_daemon_test { // one namespace per file: the tests build as unity batches

TEST_CASE("hello assigns a server session id and downgrades claimed callers", "[e2e]") {
    daemon_process d;
    client a(d.socket()), b(d.socket());
    a.send({{"type", "hello"},
            {"requestId", "r1"},
            {"clientInfo", {{"caller", "internal"}, {"sessionId", "mine"}}}});
    auto ha = a.read();
    CHECK(ha["type"] == "hello_result");
    CHECK(ha["protocol"] == 1);
    CHECK(ha["requestId"] == "r1");
    CHECK(ha["caller"] == "plugin");
    CHECK(ha["server"]["name"] == "meithd");
    const std::string sid = ha["sessionId"];
    CHECK(std::regex_match(sid, std::regex("s_[0-9a-f]{32}")));
    b.send({{"type", "hello"}, {"clientInfo", {{"caller", "cli"}}}});
    auto hb = b.read();
    CHECK(hb["caller"] == "cli");
    CHECK_FALSE(hb.contains("requestId"));
    CHECK(hb["sessionId"] != sid);

    // The session id is the connection's for every call; the claim is kept for the audit.
    auto r = a.call("echo", {{"x", 1}});
    REQUIRE(r["result"]["ok"] == true);
    auto line = d.wait_audit([](const json& l) { return l.value("event", "") == "tool_call"; });
    CHECK(line["sessionId"] == sid);
    CHECK(line["caller"] == "plugin");
    CHECK(line["claimedCaller"] == "internal");
}

TEST_CASE("list_tools describes echo with the caller's permission", "[e2e]") {
    daemon_process d;
    client c(d.socket());
    c.send({{"type", "list_tools"}, {"requestId", "l1"}});
    auto f = c.read();
    REQUIRE(f["type"] == "tools_list");
    CHECK(f["protocol"] == 1);
    CHECK(f["requestId"] == "l1");
    REQUIRE(f["tools"].size() == 1);
    auto& t = f["tools"][0];
    CHECK(t["name"] == "echo");
    CHECK(t["source"] == "builtin");
    CHECK(t["capabilities"] == json::array({"read-only"}));
    CHECK(t["permission"] == "allow");
    CHECK(t["inputSchema"]["type"] == "object");
    CHECK(t["timeoutMs"].is_null());
    CHECK(d.audit_events("list_tools").size() == 1);
}

TEST_CASE("echo returns its arguments and the audit line is written before the reply", "[e2e]") {
    daemon_process d;
    client c(d.socket());
    json args = {{"text", "héllo"}, {"n", 3}, {"nested", {{"a", json::array({1, 2})}}}};
    auto r = c.call("echo", args, {{"clientInfo", {{"caller", "cli"}}}});
    CHECK(r["type"] == "tool_result");
    CHECK(r["protocol"] == 1);
    CHECK(r["result"]["ok"] == true);
    CHECK(r["result"]["content"] == args);
    // No waiting: the line must already be there when the reply arrives (§6).
    auto calls = d.audit_events("tool_call");
    REQUIRE(calls.size() == 1);
    CHECK(calls[0]["requestId"] == r["requestId"]);
    CHECK(calls[0]["toolName"] == "echo");
    CHECK(calls[0]["decision"] == "allow");
    CHECK(calls[0]["ok"] == true);
    CHECK(calls[0]["errorCode"].is_null());
    CHECK(calls[0]["args"] == args);
    CHECK(calls[0]["timeoutMs"] == 30000);
}

TEST_CASE("pipelined calls on one connection all get their own result", "[e2e]") {
    daemon_process d;
    client c(d.socket());
    std::string burst;
    for (int i = 0; i < 200; ++i)
        burst += json{{"type", "tool_call"},
                      {"requestId", "p" + std::to_string(i)},
                      {"toolName", "echo"},
                      {"arguments", {{"i", i}}}}
                     .dump() +
                 "\n";
    c.send_raw(burst);
    std::set<std::string> seen;
    for (int i = 0; i < 200; ++i) {
        auto f = c.read();
        REQUIRE(f["type"] == "tool_result");
        const std::string id = f["requestId"];
        CHECK(f["result"]["content"]["i"] == std::stoi(id.substr(1)));
        seen.insert(id);
    }
    CHECK(seen.size() == 200);
}

TEST_CASE("malformed frames get PROTOCOL_ERROR and the connection stays usable", "[e2e]") {
    daemon_process d;
    client c(d.socket());
    auto expect_error = [&](const std::string& raw, const char* why) {
        INFO(why);
        c.send_raw(raw + "\n");
        auto f = c.read();
        CHECK(f["type"] == "error");
        CHECK(f["code"] == "PROTOCOL_ERROR");
        CHECK(f["protocol"] == 1);
        CHECK_FALSE(f["message"].get<std::string>().empty());
        return f;
    };
    expect_error("this is not json", "not JSON");
    expect_error("[1,2,3]", "not an object");
    expect_error("\"str\"", "a string");
    expect_error(R"({"requestId":"x"})", "no type");
    expect_error(R"({"type":5})", "type not a string");
    expect_error(R"({"type":"frobnicate","requestId":"q"})", "unknown type");
    // Not JSON, but its requestId and type are readable: the error names the request.
    auto t = expect_error(R"({"type":"tool_call","requestId":"x","toolName":"echo","arguments":{})",
                          "truncated");
    CHECK(t["requestId"] == "x");
    expect_error("{\"type\":\"list_tools\",\"x\":\"\xff\xfe\"}", "invalid UTF-8");
    auto f = expect_error(
        R"({"type":"tool_call","protocol":2,"requestId":"v2","toolName":"echo","arguments":{}})",
        "protocol mismatch");
    CHECK(f["requestId"] == "v2");
    auto g =
        expect_error(R"({"type":"tool_call","toolName":"echo","arguments":{}})", "no requestId");
    CHECK_FALSE(g.contains("requestId"));
    auto h = expect_error(R"({"type":"tool_call","requestId":")" + std::string(129, 'a') +
                              R"(","toolName":"echo","arguments":{}})",
                          "requestId too long");
    CHECK_FALSE(h.contains("requestId"));

    // Empty lines are ignored, \r\n is accepted, and the connection still works.
    c.send_raw("\n\r\n\n");
    c.send_raw(R"({"type":"tool_call","requestId":"ok1","toolName":"echo","arguments":{"a":1}})"
               "\r\n");
    auto r = c.read();
    CHECK(r["type"] == "tool_result");
    CHECK(r["requestId"] == "ok1");
    CHECK(r["result"]["content"]["a"] == 1);
    // The refused tool_call with a usable id was audited as tool_call_rejected.
    auto rejected = d.audit_events("tool_call_rejected");
    REQUIRE(rejected.size() == 4); // truncated, v2, and the two without a usable requestId
    CHECK(rejected[0]["requestId"] == "x");
    CHECK(rejected[1]["requestId"] == "v2");
    CHECK(rejected[1]["decision"].is_null());
}

TEST_CASE("bad tool_call fields resolve as VALIDATION_ERROR or UNKNOWN_TOOL results", "[e2e]") {
    daemon_process d;
    client c(d.socket());
    auto send = [&](json frame) {
        frame["type"] = "tool_call";
        c.send(frame);
        auto f = c.read();
        CHECK(f["type"] == "tool_result");
        CHECK(f["requestId"] == frame["requestId"]);
        CHECK(f["result"]["ok"] == false);
        return f["result"]["error"]["code"].get<std::string>();
    };
    CHECK(send({{"requestId", "a"}, {"arguments", json::object()}}) == "VALIDATION_ERROR");
    CHECK(send({{"requestId", "b"}, {"toolName", 7}, {"arguments", json::object()}}) ==
          "VALIDATION_ERROR");
    CHECK(send({{"requestId", "c"}, {"toolName", "echo"}}) == "VALIDATION_ERROR");
    CHECK(send({{"requestId", "d"}, {"toolName", "echo"}, {"arguments", json::array()}}) ==
          "VALIDATION_ERROR");
    CHECK(send({{"requestId", "e"}, {"toolName", "echo"}, {"arguments", "x"}}) ==
          "VALIDATION_ERROR");
    CHECK(send({{"requestId", "f"},
                {"toolName", "echo"},
                {"arguments", json::object()},
                {"timeoutMs", -5}}) == "VALIDATION_ERROR");
    CHECK(send({{"requestId", "g"},
                {"toolName", "echo"},
                {"arguments", json::object()},
                {"timeoutMs", "10"}}) == "VALIDATION_ERROR");
    CHECK(send({{"requestId", "h"}, {"toolName", "no_such_tool"}, {"arguments", json::object()}}) ==
          "UNKNOWN_TOOL");
    // Every one of them has its audit line.
    auto lines = d.audit_events("tool_call");
    CHECK(lines.size() == 8);
    CHECK(lines.back()["errorCode"] == "UNKNOWN_TOOL");
}

TEST_CASE("over limits.max_connections a client gets one error frame and is closed", "[e2e]") {
    daemon_process d("[limits]\nmax_connections = 2\n");
    client a(d.socket()), b(d.socket());
    a.send({{"type", "hello"}});
    b.send({{"type", "hello"}});
    a.read();
    b.read();
    client c(d.socket());
    auto f = c.read();
    CHECK(f["type"] == "error");
    CHECK_THAT(f["message"].get<std::string>(), Catch::Contains("max_connections"));
    CHECK(c.wait_closed());
    CHECK_FALSE(d.audit_events("connection_rejected").empty());
}

TEST_CASE("idle connections are closed after limits.idle_timeout_ms", "[e2e]") {
    daemon_process d("[limits]\nidle_timeout_ms = 200\n");
    client c(d.socket());
    CHECK(c.wait_closed(3s));
    auto closes = d.audit_events("connection_close");
    REQUIRE(closes.size() == 1);
    CHECK_THAT(closes[0]["reason"].get<std::string>(), Catch::Contains("idle"));
}

TEST_CASE("a client that does not read is disconnected at limits.max_outbound_bytes", "[e2e]") {
    daemon_process d(
        "[limits]\nmax_result_bytes = 65536\nmax_outbound_bytes = 262144\nwrite_stall_ms = 300\n");
    client c(d.socket());
    int small = 1 << 12;
    ::setsockopt(c.fd(), SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    // A daemon that neither reads nor closes fails the test instead of hanging it: this test
    // once hung under load when meithd's writer dropped under the limit mid-write and reading
    // stayed paused.
    const timeval send_timeout{20, 0};
    ::setsockopt(c.fd(), SOL_SOCKET, SO_SNDTIMEO, &send_timeout, sizeof send_timeout);
    const std::string payload(60000, 'y');
    bool send_failed = false;
    for (int i = 0; i < 400 && !send_failed; ++i) {
        try {
            c.send({{"type", "tool_call"},
                    {"requestId", "o" + std::to_string(i)},
                    {"toolName", "echo"},
                    {"arguments", {{"p", payload}}}});
        } catch (const std::exception&) {
            send_failed = true;
        }
    }
    auto line = d.wait_audit([](const json& l) {
        return l.value("event", "") == "connection_close" &&
               l["reason"].get<std::string>().find("max_outbound_bytes") != std::string::npos;
    });
    CHECK(line["sessionId"].is_string());
    CHECK(d.running());
}

TEST_CASE("peers with another uid are closed before any frame and audited", "[e2e]") {
    if (::geteuid() != 0) SKIP_TEST("needs root to connect as another uid");
    daemon_process d;
    // Open the way for uid 65534 so the daemon's own check is what stops it.
    ::chmod(d.home().c_str(), 0711);
    ::chmod(d.socket().c_str(), 0666);
    const pid_t child = ::fork();
    if (child == 0) {
        if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(3);
        try {
            client c(d.socket());
            try {
                c.send({{"type", "hello"}}); // may already fail: the daemon closes at once
            } catch (...) {
            }
            ::_exit(c.wait_closed(3s) ? 0 : 1);
        } catch (...) {
            ::_exit(2);
        }
    }
    int status = 0;
    ::waitpid(child, &status, 0);
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
    auto rejected = d.audit_events("connection_rejected");
    REQUIRE(rejected.size() == 1);
    CHECK(rejected[0]["uid"] == 65534);
    CHECK(rejected[0]["pid"].is_number());
    CHECK(d.audit_events("connection_open").empty());
}

TEST_CASE("runtime and instance records follow docs/protocol.md section 1", "[e2e]") {
    temp_dir keep;
    daemon_process d;
    auto record = json::parse(std::ifstream(d.home() / "config.json"));
    CHECK(record["socketPath"] == d.socket().string());
    CHECK(record["pid"] == d.pid());
    CHECK(record["protocol"] == 1);
    CHECK(record["version"].is_string());
    const auto inst = d.home() / "instances" / (std::to_string(d.pid()) + ".json");
    auto ir = json::parse(std::ifstream(inst));
    CHECK(ir["pid"] == d.pid());
    CHECK(std::regex_match(ir["startedAt"].get<std::string>(),
                           std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z)")));
    struct stat st {};
    REQUIRE(::stat(d.socket().c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0600);
    REQUIRE(::stat(d.home().c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0700);

    CHECK(d.stop(SIGTERM) == 0);
    CHECK_FALSE(fs::exists(inst));
    CHECK_FALSE(fs::exists(d.socket()));
    CHECK(d.audit_events("daemon_stop").size() == 1);
}

TEST_CASE("startup errors are clear and exit non-zero", "[e2e]") {
    temp_dir home;
    SECTION("an unknown config key names file and line") {
        std::ofstream(home.path / "bad.toml")
            << "[limits]\nmax_frame_bytes = 2048\nmax_frams_bytes = 1\n";
        auto [code, err] = run_meithd_expect_exit({"--home", home.path.string(), "--socket",
                                                   (home.path / "s").string(), "--config",
                                                   (home.path / "bad.toml").string()});
        CHECK(code == 1);
        CHECK_THAT(err, Catch::Contains("bad.toml:3:") && Catch::Contains("max_frams_bytes"));
    }
    SECTION("a socket path too long for sun_path") {
        const std::string longpath = "/tmp/" + std::string(120, 'a') + "/s.sock";
        auto [code, err] =
            run_meithd_expect_exit({"--home", home.path.string(), "--socket", longpath});
        CHECK(code == 1);
        CHECK_THAT(err, Catch::Contains("sun_path") || Catch::Contains("longer than"));
        CHECK_FALSE(fs::exists("/tmp/" + std::string(120, 'a')));
    }
    SECTION("a home that others can write") {
        ::chmod(home.path.c_str(), 0777);
        auto [code, err] = run_meithd_expect_exit({"--home", home.path.string()});
        CHECK(code == 1);
        CHECK_THAT(err, Catch::Contains("chmod 700"));
    }
    SECTION("a second daemon on the same home names the running pid") {
        daemon_process first;
        auto [code, err] = run_meithd_expect_exit(
            {"--home", first.home().string(), "--socket", (first.home() / "other.sock").string()});
        CHECK(code == 1);
        CHECK_THAT(err, Catch::Contains("pid " + std::to_string(first.pid())));
        client c(first.socket()); // the first one is unharmed
        CHECK(c.call("echo", json::object())["result"]["ok"] == true);
    }
}

TEST_CASE("after kill -9 a restart replaces the stale socket and sweeps dead records", "[e2e]") {
    daemon_process d;
    const pid_t old_pid = d.pid();
    CHECK(d.stop(SIGKILL) == 128 + SIGKILL);
    const auto old_record = d.home() / "instances" / (std::to_string(old_pid) + ".json");
    REQUIRE(fs::exists(old_record)); // left behind by the killed daemon
    REQUIRE(fs::exists(d.socket()));
    d.restart();
    CHECK(d.pid() != old_pid);
    CHECK_FALSE(fs::exists(old_record));
    client c(d.socket());
    CHECK(c.call("echo", {{"again", true}})["result"]["content"]["again"] == true);
}

TEST_CASE("the torn final line of the audit log is cut at startup and recorded", "[e2e]") {
    const std::string torn = R"({"ts":"2026-01-01T00:00:01.000Z","event":"tool_ca)";
    daemon_process d("", {}, [&](const fs::path& home) {
        std::ofstream(home / "audit.jsonl")
            << R"({"ts":"2026-01-01T00:00:00.000Z","event":"daemon_start"})"
            << "\n"
            << torn;
    });
    auto lines = d.audit(); // throws if any line does not parse
    REQUIRE(lines.size() >= 2);
    CHECK(lines[0]["event"] == "daemon_start");
    CHECK(lines[1]["event"] == "audit_repaired");
    CHECK(lines[1]["bytesRemoved"] == torn.size());
}

TEST_CASE("an oversized tool_call is answered with its requestId and audited as rejected",
          "[e2e]") {
    daemon_process d("[limits]\nmax_frame_bytes = 2048\n");
    client c(d.socket());
    c.send_raw(R"({"type":"tool_call","requestId":"huge1","toolName":"echo","arguments":{"s":")" +
               std::string(10000, 'z') + "\"}}\n");
    auto f = c.read();
    CHECK(f["type"] == "error");
    CHECK(f["requestId"] == "huge1");
    auto rejected = d.audit_events("tool_call_rejected");
    REQUIRE(rejected.size() == 1);
    CHECK(rejected[0]["requestId"] == "huge1");
    for (const char* key :
         {"sessionId", "caller", "claimedCaller", "toolName", "source", "capabilities", "decision",
          "reason", "timeoutMs", "durationMs", "ok", "errorCode", "args", "result"})
        CHECK(rejected[0].contains(key));
}

TEST_CASE("frame-level VALIDATION_ERROR calls keep their arguments in the audit line", "[e2e]") {
    daemon_process d;
    client c(d.socket());
    c.send({{"type", "tool_call"},
            {"requestId", "v"},
            {"toolName", "echo"},
            {"arguments", json::array({1, 2})}});
    CHECK(c.read()["result"]["error"]["code"] == "VALIDATION_ERROR");
    auto line = d.audit_events("tool_call").at(0);
    CHECK(line["args"] == json::array({1, 2}));
}

TEST_CASE("requestId length counts characters, not bytes", "[e2e]") {
    daemon_process d;
    client c(d.socket());
    std::string id;
    for (int i = 0; i < 128; ++i)
        id += "é"; // 128 characters, 256 bytes
    auto r = c.call("echo", json::object(), {{"requestId", id}});
    CHECK(r["type"] == "tool_result");
    CHECK(r["requestId"] == id);
}

TEST_CASE("a socket served by another daemon (another home) is not taken over", "[e2e]") {
    daemon_process first;
    temp_dir other;
    auto [code, err] = run_meithd_expect_exit(
        {"--home", other.path.string(), "--socket", first.socket().string()});
    CHECK(code == 1);
    CHECK_THAT(err, Catch::Contains("in use"));
    client c(first.socket());
    CHECK(c.call("echo", json::object())["result"]["ok"] == true);
}

namespace {

/// Waits until a daemon answers on `socket` (connect succeeds).
bool wait_socket(const fs::path& socket, std::chrono::milliseconds timeout = 15s) {
    const auto until = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < until) {
        try {
            client probe(socket);
            return true;
        } catch (const std::exception&) {
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
    }
    return false;
}

} // namespace

TEST_CASE("a home removed under a running meithd is named in the calls' errors and in "
          "meith status",
          "[e2e][cli]") {
    // Issue 40: `rm -rf ~/.meith` under a running daemon made every call fail "the audit log
    // cannot be written" with no cause or fix, while `meith status` said running.
    temp_dir base;
    const fs::path home = base.path / "home";
    const fs::path run = base.path / "run";
    fs::create_directory(run);
    fs::permissions(run, fs::perms::owner_all);
    const fs::path socket = run / "meithd.sock";
    background_process d({MEITH_MEITHD, "--home", home.string(), "--socket", socket.string()});
    REQUIRE(wait_socket(socket));
    client c(socket);
    REQUIRE(c.call("echo", json::object())["result"]["ok"] == true);
    const auto ok = run_cli({"--socket", socket.string(), "status"}, home);
    CHECK(ok.status == 0);
    CHECK_THAT(ok.out, Catch::StartsWith("meithd is running\n"));

    fs::remove_all(home);
    json r;
    for (int i = 0; i < 20; ++i) {
        r = c.call("echo", json::object());
        if (r["result"]["ok"] == false) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    INFO(r.dump());
    REQUIRE(r["result"]["ok"] == false);
    const std::string message = r["result"]["error"]["message"];
    CHECK_THAT(message, Catch::Contains("audit") && Catch::Contains(home.string()) &&
                            Catch::Contains("was removed") && Catch::Contains("meith restart"));

    const auto st = run_cli({"--socket", socket.string(), "status"}, home);
    CHECK(st.status == 1);
    CHECK_THAT(st.out, Catch::Contains("broken") && Catch::Contains("gone") &&
                           Catch::Contains("meith restart"));
    const auto js = run_cli({"--socket", socket.string(), "status", "--json"}, home);
    CHECK(js.status == 1);
    CHECK_THAT(json::parse(js.out)["problem"].get<std::string>(), Catch::Contains("gone"));
    // The daemon's log says it too (checked every 5 s).
    bool logged = false;
    for (int i = 0; i < 80 && !logged; ++i) {
        logged = d.err().find("was removed while meithd ran") != std::string::npos;
        if (!logged) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    CHECK(logged);
}

} // namespace e2e_daemon_test
