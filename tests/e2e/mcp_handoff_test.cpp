// End-to-end tests of the handoff (docs/protocol.md §10 "Handoff"): `meith mcp` started as an
// MCP client starts it — stdin and stdout pipes — hands them to meithd, which speaks MCP on
// them itself; the real meith CLI, the real meithd, real pipes. And the attacks on the new
// door: descriptors attached to any other frame, a handoff of descriptors meithd must not take.
#include "daemon_fixture.hpp"

#include "platform/fd_passing.hpp"

#include <catch2/catch.hpp>

#include <array>
#include <csignal>
#include <fcntl.h>
#include <poll.h>
#include <set>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace meith::test;

namespace e2e_mcp_handoff_test { // one namespace per file: the tests build as unity batches

namespace {

json initialize(int id) {
    return {{"jsonrpc", "2.0"},
            {"id", id},
            {"method", "initialize"},
            {"params",
             {{"protocolVersion", "2025-11-25"},
              {"capabilities", json::object()},
              {"clientInfo", {{"name", "handoff-test"}, {"version", "1"}}}}}};
}

json call(int id, const std::string& tool, const json& args) {
    return {{"jsonrpc", "2.0"},
            {"id", id},
            {"method", "tools/call"},
            {"params", {{"name", tool}, {"arguments", args}}}};
}

/// The inode of the pipe behind /proc/PID/fd/FD ("pipe:[N]"), or "".
std::string pipe_of(pid_t pid, int fd) {
    std::error_code ec;
    const auto target =
        fs::read_symlink("/proc/" + std::to_string(pid) + "/fd/" + std::to_string(fd), ec);
    return ec ? std::string() : target.string();
}

/// Whether process `pid` holds a descriptor on `pipe` ("pipe:[N]").
bool holds(pid_t pid, const std::string& pipe) {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec)) {
        std::error_code ignored;
        if (fs::read_symlink(e.path(), ignored).string() == pipe) return true;
    }
    return false;
}

} // namespace

TEST_CASE("meith mcp hands its pipes to meithd, which answers on them, and exits with "
          "meithd's verdict",
          "[e2e][mcp][handoff]") {
    daemon_process d(host_source_toml("th"));
    mcp_child m(d.home());
    m.send(initialize(1));
    CHECK(m.answer(1)["result"]["serverInfo"]["name"] == "meith");
    m.send(call(2, "echo", {{"via", "meithd"}}));
    CHECK(m.answer(2)["result"]["structuredContent"]["via"] == "meithd");
    // The handoff is on file, and meithd itself holds the client's stdin and stdout.
    const json handoff =
        d.wait_audit([](const json& l) { return l.value("event", "") == "mcp_handoff"; });
    CHECK(handoff["pid"] == m.pid());
    const std::string in = pipe_of(m.pid(), 0), out = pipe_of(m.pid(), 1);
    REQUIRE_THAT(in, Catch::StartsWith("pipe:"));
    CHECK(holds(d.pid(), in));
    CHECK(holds(d.pid(), out));
    // The call went through the session's own connection, as the MCP client's agent.
    const json line = d.wait_audit([](const json& l) {
        return l.value("event", "") == "tool_call" && l.value("toolName", "") == "echo";
    });
    CHECK(line["agent"] == "handoff-test");
    CHECK(line["caller"] == "plugin");
    // Many in flight at once, each answered under its id.
    for (int i = 0; i < 20; ++i)
        m.send(call(100 + i, "t_sleep", {{"ms", 10 * (i % 4)}}));
    std::set<int> answered;
    while (answered.size() < 20) {
        auto msg = m.read();
        REQUIRE(msg.has_value());
        if (msg->contains("id")) answered.insert((*msg)["id"].get<int>());
    }
    CHECK(*answered.begin() == 100);
    CHECK(*answered.rbegin() == 119);
    // EOF: the requests in flight are answered (the drain), then meithd ends the session and
    // meith mcp exits with its verdict, 0.
    m.send(call(3, "t_sleep", {{"ms", 300}}));
    m.close_input();
    CHECK(m.answer(3)["result"]["structuredContent"]["slept"] == 300);
    CHECK(m.eof_within(10s));
    CHECK(m.wait() == 0);
    CHECK(eventually([&] { return !holds(d.pid(), out); }, 5s));
}

TEST_CASE("meith mcp with MEITH_MCP_HANDOFF=0 keeps the session itself", "[e2e][mcp][handoff]") {
    daemon_process d;
    mcp_child m(d.home(), {"MEITH_MCP_HANDOFF=0"});
    m.send(initialize(1));
    CHECK(m.answer(1)["result"]["serverInfo"]["name"] == "meith");
    m.send(call(2, "echo", {{"via", "bridge"}}));
    CHECK(m.answer(2)["result"]["structuredContent"]["via"] == "bridge");
    CHECK_FALSE(holds(d.pid(), pipe_of(m.pid(), 1)));
    m.close_input();
    CHECK(m.wait() == 0);
    CHECK(d.audit_events("mcp_handoff").empty());
}

TEST_CASE("meith mcp killed mid-call: meithd ends the handed-over session and cancels the call",
          "[e2e][mcp][handoff]") {
    daemon_process d(host_source_toml("th"));
    mcp_child m(d.home());
    m.send(initialize(1));
    m.answer(1);
    const std::string out = pipe_of(m.pid(), 1);
    // A streaming call with a progress token: its first progress shows it runs.
    json streaming = call(2, "t_stream", {{"n", 1000}, {"interval_ms", 20}});
    streaming["params"]["_meta"] = {{"progressToken", "p"}};
    m.send(streaming);
    const auto progress = m.read();
    REQUIRE(progress.has_value());
    CHECK((*progress)["method"] == "notifications/progress");
    ::kill(m.pid(), SIGKILL);
    CHECK(m.wait() == 128 + SIGKILL);
    const json line = d.wait_audit(
        [](const json& l) {
            return l.value("event", "") == "tool_call" && l.value("toolName", "") == "t_stream";
        },
        10s);
    CHECK(line["errorCode"] == "CANCELLED");
    // meithd let go of the client's pipes: the client sees EOF.
    CHECK(m.eof_within(5s));
    CHECK(eventually([&] { return !holds(d.pid(), out); }, 5s));
}

TEST_CASE("meithd gone mid-session: meith mcp takes the session over on the same pipes",
          "[e2e][mcp][handoff]") {
    // Killed, or stopped as a service stops it (SIGTERM: it closes its connections first).
    const int sig = GENERATE(SIGKILL, SIGTERM);
    CAPTURE(sig);
    daemon_process d;
    mcp_child m(d.home());
    m.send(initialize(1));
    m.answer(1);
    m.send(call(2, "echo", {{"n", 1}}));
    CHECK(m.answer(2)["result"]["structuredContent"]["n"] == 1);
    REQUIRE(d.stop(sig) != -1);
    // The bridge answers from here: a ping without meithd, a call with the error that says
    // how to start it; after a restart, calls work again.
    m.send({{"jsonrpc", "2.0"}, {"id", 3}, {"method", "ping"}});
    CHECK(m.answer(3)["result"].is_object());
    m.send(call(4, "echo", {{"n", 4}}));
    const json down = m.answer(4);
    CHECK(down["error"]["code"] == -32603);
    CHECK_THAT(down["error"]["message"].get<std::string>(), Catch::Contains("start it with"));
    d.restart();
    m.send(call(5, "echo", {{"n", 5}}));
    CHECK(m.answer(5)["result"]["structuredContent"]["n"] == 5);
    m.close_input();
    CHECK(m.wait() == 0);
}

TEST_CASE("descriptors a client attaches to any other frame are closed, and a handoff of "
          "descriptors meithd must not take is refused and on file",
          "[e2e][handoff][security]") {
    daemon_process d;
    client c(d.socket());
    c.send({{"type", "hello"}, {"requestId", "h"}, {"clientInfo", {{"caller", "plugin"}}}});
    CHECK(c.read()["type"] == "hello_result");
    const std::size_t before = open_fds(d.pid());
    // 300 frames, each with three descriptors attached: none of them stays in meithd.
    const int devnull = ::open("/dev/null", O_RDWR | O_CLOEXEC);
    REQUIRE(devnull >= 0);
    const std::array<int, 3> fds{devnull, devnull, devnull};
    for (int i = 0; i < 300; ++i) {
        const std::string frame =
            R"({"type":"list_tools","requestId":"l)" + std::to_string(i) + "\"}\n";
        REQUIRE(meith::platform::send_with_fds(c.fd(), frame, fds));
        CHECK(c.read()["type"] == "tools_list");
    }
    CHECK(open_fds(d.pid()) <= before + 2);

    // A handoff without descriptors, and one of a character device (not a pipe or a socket).
    c.send({{"type", "mcp_handoff"}, {"requestId", "none"}});
    json r = c.read();
    CHECK(r["type"] == "error");
    CHECK_THAT(r["message"].get<std::string>(),
               Catch::Contains("needs the client's stdin and stdout attached"));
    const std::string frame = R"({"type":"mcp_handoff","requestId":"dev"})"
                              "\n";
    REQUIRE(meith::platform::send_with_fds(c.fd(), frame, std::span(fds.data(), 2)));
    r = c.read();
    CHECK(r["type"] == "error");
    CHECK(r["requestId"] == "dev");
    CHECK_THAT(r["message"].get<std::string>(),
               Catch::Contains("its stdin is not a pipe or a socket"));
    // A pipe's write end given as stdin: refused, it cannot be read.
    int p[2];
    REQUIRE(::pipe2(p, O_CLOEXEC) == 0);
    const std::array<int, 2> wrong{p[1], p[1]};
    const std::string frame2 = R"({"type":"mcp_handoff","requestId":"wo"})"
                               "\n";
    REQUIRE(meith::platform::send_with_fds(c.fd(), frame2, wrong));
    r = c.read();
    CHECK(r["type"] == "error");
    CHECK_THAT(r["message"].get<std::string>(), Catch::Contains("not open for reading"));
    ::close(p[0]);
    ::close(p[1]);
    ::close(devnull);
    CHECK(d.audit_events("mcp_handoff_refused").size() == 3);
    CHECK(d.audit_events("mcp_handoff").empty());
    // Still nothing held: the refused descriptors were closed too.
    CHECK(open_fds(d.pid()) <= before + 2);

    // Descriptors piling up under a frame that never ends: one byte and three descriptors,
    // again and again, without a newline. The connection is closed at the second batch.
    client piler(d.socket());
    const int null2 = ::open("/dev/null", O_RDWR | O_CLOEXEC);
    REQUIRE(null2 >= 0);
    const std::array<int, 3> three{null2, null2, null2};
    for (int i = 0; i < 2; ++i)
        meith::platform::send_with_fds(piler.fd(), std::string_view(i == 0 ? "{" : " "), three);
    CHECK(piler.wait_closed(5s));
    ::close(null2);
    CHECK(eventually([&] { return open_fds(d.pid()) <= before + 2; }, 5s));
}

TEST_CASE("a client that clears O_NONBLOCK on the pipes it handed over and stops reading does "
          "not stall meithd",
          "[e2e][handoff][security]") {
    // O_NONBLOCK belongs to the open file description the client shares with meithd: had
    // meithd relied on it, the client could clear it and leave meithd's one I/O thread in a
    // blocking write to a full pipe. Here a client hands over pipes by hand (as meith mcp
    // does), clears the flag on its own copies, floods requests and never reads.
    daemon_process d(host_source_toml("th"));
    int in[2], out[2];
    REQUIRE(::pipe2(in, O_CLOEXEC) == 0);
    REQUIRE(::pipe2(out, O_CLOEXEC) == 0);
    client c(d.socket());
    c.send({{"type", "hello"}, {"requestId", "h"}, {"clientInfo", {{"caller", "plugin"}}}});
    REQUIRE(c.read()["type"] == "hello_result");
    const std::string frame = R"({"type":"mcp_handoff","requestId":"ho"})"
                              "\n";
    const std::array<int, 2> ends{in[0], out[1]};
    REQUIRE(meith::platform::send_with_fds(c.fd(), frame, ends));
    REQUIRE(c.read()["type"] == "mcp_handoff_result");
    for (int fd : {in[0], in[1], out[0], out[1]})
        ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    // Big answers until the client's stdout pipe (64 KiB) is long full.
    const std::string init =
        R"({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"flood","version":"1"}}})"
        "\n";
    REQUIRE(::write(in[1], init.data(), init.size()) == static_cast<ssize_t>(init.size()));
    const std::string pad(8000, 'x');
    for (int i = 1; i <= 40; ++i) {
        const std::string call = json{{"jsonrpc", "2.0"},
                                      {"id", i},
                                      {"method", "tools/call"},
                                      {"params", {{"name", "echo"}, {"arguments", {{"pad", pad}}}}}}
                                     .dump() +
                                 "\n";
        REQUIRE(::write(in[1], call.data(), call.size()) == static_cast<ssize_t>(call.size()));
    }
    // meithd still answers everyone else.
    CHECK(eventually(
        [&] {
            pollfd p{out[0], POLLIN, 0};
            return ::poll(&p, 1, 0) == 1; // answers are waiting in the pipe
        },
        5s));
    client other(d.socket());
    const json r = other.call("echo", {{"still", "here"}}, json::object(), nullptr, 5s);
    CHECK(r["result"]["ok"] == true);
    for (int fd : {in[0], in[1], out[0], out[1]})
        ::close(fd);
}

} // namespace e2e_mcp_handoff_test
