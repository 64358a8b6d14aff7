// protocol client tests: the request encoders (valid JSON whatever the strings hold, escaped as
// the daemon's writer does), request ids, and client_channel against a real socketpair or Unix
// socket — framing across read chunks, CRLF and empty lines, the frame bound, close, timeout,
// the wake fd, sending, half-close and connect errors (docs/protocol.md §2-§3).
#include "protocol/client_channel.hpp"
#include "protocol/client_frames.hpp"
#include "protocol/json_writer.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

using namespace meith::protocol;
using json = nlohmann::json;
using namespace std::chrono_literals;
using status = client_channel::read_status;
using kind = client_error::kind;

namespace unit_protocol_client_test { // one namespace per file: the tests build as unity batches

namespace {

/// Parses `frame` strictly (nlohmann rejects invalid UTF-8) and checks it is one line.
json parse(const std::string& frame) {
    REQUIRE(frame.find('\n') == std::string::npos);
    REQUIRE(frame.find('\r') == std::string::npos);
    return json::parse(frame);
}

/// What the daemon's writer makes of `s`, decoded again.
std::string as_daemon_writes(std::string_view s) {
    std::string out;
    append_json_string(out, s);
    return json::parse(out).get<std::string>();
}

/// A channel connected to `peer` over a socketpair; `peer` is the raw other end.
struct pair_fixture {
    client_channel channel;
    int peer = -1;

    explicit pair_fixture(std::size_t max_frame_bytes = client_channel::default_max_frame_bytes)
        : channel(max_frame_bytes) {
        int fds[2];
        REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) == 0);
        channel.adopt(fds[0]);
        peer = fds[1];
    }
    ~pair_fixture() { close_peer(); }
    pair_fixture(const pair_fixture&) = delete;
    pair_fixture& operator=(const pair_fixture&) = delete;

    /// Writes all of `bytes`; false when the channel's end went away. No Catch macros: it
    /// also runs on writer threads.
    bool try_write(std::string_view bytes) const {
        while (!bytes.empty()) {
            const ssize_t n = ::send(peer, bytes.data(), bytes.size(), MSG_NOSIGNAL);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) return false;
            bytes.remove_prefix(static_cast<std::size_t>(n));
        }
        return true;
    }
    void write(std::string_view bytes) const { REQUIRE(try_write(bytes)); }
    void close_peer() {
        if (peer >= 0) ::close(peer);
        peer = -1;
    }
    /// Everything the peer can read until EOF.
    std::string read_all() const {
        std::string out;
        char buf[4096];
        for (;;) {
            const ssize_t n = ::recv(peer, buf, sizeof buf, 0);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) return out;
            out.append(buf, static_cast<std::size_t>(n));
        }
    }

    client_channel::read_result read(std::chrono::milliseconds timeout = 5s, int wake_fd = -1) {
        return channel.read_frame(client_channel::clock::now() + timeout, wake_fd);
    }
    /// Reads with no deadline: returns only on what the bytes or the wake fd say (a test that
    /// would wait instead hangs to ctest's timeout and fails; no clock is asserted on).
    client_channel::read_result read_unbounded(int wake_fd = -1) {
        return channel.read_frame(std::nullopt, wake_fd);
    }
};

std::string expect_frame(pair_fixture& p) {
    auto r = p.read();
    REQUIRE(r.status == status::frame);
    return r.frame;
}

/// A folder under /tmp for socket files, removed afterwards.
struct socket_dir {
    std::filesystem::path path;
    socket_dir() {
        char tmpl[] = "/tmp/meith-pc-XXXXXX";
        REQUIRE(::mkdtemp(tmpl) != nullptr);
        path = tmpl;
    }
    ~socket_dir() {
        std::error_code ec;
        std::filesystem::remove_all(path, ec);
    }
};

int bound_socket(const std::filesystem::path& path) {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    path.native().copy(addr.sun_path, sizeof addr.sun_path - 1);
    REQUIRE(::bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0);
    return fd;
}

const std::string hostile = "q\"uo\\te \x01\x1f\x7f\n\r\t end \xff\xfe bad \xe2\x82 cut \xc3\xa9";

} // namespace

// ---- encoders ------------------------------------------------------------------------------

TEST_CASE("request encoders produce one-line frames of the documented shapes", "[client]") {
    const json hello = parse(encode_hello("r1", "cli"));
    CHECK(hello == json::parse(R"({"type":"hello","protocol":1,"requestId":"r1",
                                   "clientInfo":{"caller":"cli"}})"));
    CHECK(parse(encode_hello("r1")) == json::parse(R"({"type":"hello","protocol":1,
                                                       "requestId":"r1"})"));
    CHECK(parse(encode_list_tools("r2")) ==
          json::parse(R"({"type":"list_tools","protocol":1,"requestId":"r2"})"));
    CHECK(parse(encode_list_tools("r2", "plugin"))["clientInfo"]["caller"] == "plugin");
    CHECK(parse(encode_cancel_tool_call("c1")) ==
          json::parse(R"({"type":"cancel_tool_call","protocol":1,"requestId":"c1"})"));
    CHECK(parse(encode_list_sources("s1")) ==
          json::parse(R"({"type":"list_sources","protocol":1,"requestId":"s1"})"));
    CHECK(parse(encode_restart_source("r3", "kv", "cli")) ==
          json::parse(R"({"type":"restart_source","protocol":1,"requestId":"r3","name":"kv",
                          "clientInfo":{"caller":"cli"}})"));
    CHECK(parse(encode_check_policy("p1", "write_file", "plugin")) ==
          json::parse(R"({"type":"check_policy","protocol":1,"requestId":"p1",
                          "toolName":"write_file","clientInfo":{"caller":"plugin"}})"));
    CHECK(parse(encode_reload_config("r4", "cli")) ==
          json::parse(R"({"type":"reload_config","protocol":1,"requestId":"r4",
                          "clientInfo":{"caller":"cli"}})"));
}

TEST_CASE("tool_call carries raw arguments, timeoutMs and the caller", "[client]") {
    const json full = parse(encode_tool_call({.request_id = "c1",
                                              .tool_name = "count",
                                              .arguments_json = R"({"n":2,"s":"a\nb"})",
                                              .timeout_ms = 1500,
                                              .caller = "cli"}));
    CHECK(full == json::parse(R"({"type":"tool_call","protocol":1,"requestId":"c1",
                                  "toolName":"count","arguments":{"n":2,"s":"a\nb"},
                                  "timeoutMs":1500,"clientInfo":{"caller":"cli"}})"));

    const json bare = parse(encode_tool_call({.request_id = "c2", .tool_name = "echo"}));
    CHECK(bare["arguments"] == json::object());
    CHECK_FALSE(bare.contains("timeoutMs"));
    CHECK_FALSE(bare.contains("clientInfo"));

    // Pretty-printed arguments: their line breaks are whitespace and must not split the frame.
    const json args = {{"a", {1, 2}}, {"text", "x\ny"}};
    const json pretty = parse(encode_tool_call(
        {.request_id = "c3", .tool_name = "echo", .arguments_json = args.dump(2)}));
    CHECK(pretty["arguments"] == args);
    const std::string crlf = "{\r\n  \"k\": true\r\n}";
    CHECK(parse(encode_tool_call(
              {.request_id = "c4", .tool_name = "echo", .arguments_json = crlf}))["arguments"] ==
          json{{"k", true}});
}

TEST_CASE("hostile strings are escaped as the daemon's writer does", "[client]") {
    const std::string expected = as_daemon_writes(hostile);
    CHECK(expected.find("\xef\xbf\xbd") != std::string::npos); // invalid bytes became U+FFFD
    CHECK(expected.find("\xc3\xa9") != std::string::npos);     // valid UTF-8 kept

    const json hello = parse(encode_hello(hostile, hostile));
    CHECK(hello["requestId"] == expected);
    CHECK(hello["clientInfo"]["caller"] == expected);
    const json call = parse(encode_tool_call(
        {.request_id = hostile, .tool_name = hostile, .timeout_ms = 1, .caller = hostile}));
    CHECK(call["toolName"] == expected);
    CHECK(call["type"] == "tool_call");
    const json restart = parse(encode_restart_source("r", hostile));
    CHECK(restart["name"] == expected);
    CHECK(parse(encode_check_policy("p", hostile))["toolName"] == expected);
    CHECK(parse(encode_cancel_tool_call(hostile))["requestId"] == expected);

    // Keys a hostile value might try to inject stay inside the string.
    const json inject = parse(encode_check_policy("p", R"(x","type":"reload_config)"));
    CHECK(inject["type"] == "check_policy");
    CHECK(inject["toolName"] == R"(x","type":"reload_config)");
}

TEST_CASE("request ids count up from a prefix", "[client]") {
    request_id_generator ids("t");
    CHECK(ids.next() == "t1");
    CHECK(ids.next() == "t2");
    const std::string prefix = request_id_generator::process_prefix("cli");
    CHECK(prefix == "cli_" + std::to_string(::getpid()) + "_");
    request_id_generator cli(prefix);
    CHECK(cli.next() == prefix + "1");
}

// ---- channel: reading ----------------------------------------------------------------------

TEST_CASE("frames are reassembled across writes and read chunks", "[client]") {
    pair_fixture p;
    // A frame larger than several read chunks, then small ones, written in odd pieces by a
    // thread so the reader sees every split (inside a frame, inside "\r\n", between frames).
    const std::string big(3 * client_channel::read_chunk + 17, 'b');
    const std::string stream =
        "{\"a\":1}\n" + big + "\r\n{\"b\":2}\r\n" + "\n\r\n\n" + "x\ny\n" + "{\"c\":3}\n";
    bool written = true;
    std::thread writer([&] {
        std::size_t pos = 0, piece = 1;
        while (pos < stream.size() && written) {
            const std::size_t n = std::min(piece, stream.size() - pos);
            written = p.try_write(std::string_view(stream).substr(pos, n));
            pos += n;
            piece = piece * 3 % 10007 + 1;
            if (pos < 64) std::this_thread::sleep_for(1ms); // byte by byte at the start
        }
    });
    std::vector<std::string> got;
    for (int i = 0; i < 6; ++i)
        got.push_back(expect_frame(p));
    writer.join();
    CHECK(written);
    CHECK(got == std::vector<std::string>{"{\"a\":1}", big, "{\"b\":2}", "x", "y", "{\"c\":3}"});
    CHECK(p.read(20ms).status == status::timed_out);
}

TEST_CASE("CRLF endings are stripped and empty lines skipped", "[client]") {
    pair_fixture p;
    p.write("\r\n\n{\"k\":1}\r\n\r\n\n{\"k\":2}\n");
    CHECK(expect_frame(p) == "{\"k\":1}");
    CHECK(expect_frame(p) == "{\"k\":2}");
    // A lone '\r' inside a line is data, only the one before '\n' is the ending.
    p.write("a\rb\r\r\n");
    CHECK(expect_frame(p) == "a\rb\r");
}

TEST_CASE("the frame bound: exactly the limit passes, one byte more fails", "[client]") {
    SECTION("at the limit, with either ending") {
        pair_fixture p(1024);
        const std::string at(1024, 'x');
        p.write(at + "\n" + at + "\r\n");
        CHECK(expect_frame(p) == at);
        CHECK(expect_frame(p) == at);
    }
    SECTION("over the limit with its newline") {
        pair_fixture p(1024);
        p.write(std::string(1025, 'x') + "\n");
        try {
            p.read();
            FAIL("no error");
        } catch (const client_error& e) {
            CHECK(e.error_kind() == kind::frame_too_large);
            CHECK(std::string(e.what()) == "frame from meithd exceeds the 1024 bytes limit");
        }
    }
    SECTION("over the limit before any newline arrives: an error at once") {
        pair_fixture p(1024);
        p.write(std::string(4096, 'x')); // no newline, and the peer stays open
        CHECK_THROWS_AS(p.read_unbounded(), client_error);
    }
    SECTION("the default bound is named in MiB") {
        pair_fixture p(2 * 1024 * 1024);
        std::thread writer([&] { p.try_write(std::string(2 * 1024 * 1024 + 10, 'x') + "\n"); });
        try {
            p.read();
            FAIL("no error");
        } catch (const client_error& e) {
            CHECK(e.error_kind() == kind::frame_too_large);
            CHECK(std::string(e.what()) == "frame from meithd exceeds the 2 MiB limit");
        }
        p.channel.close(); // lets the writer finish
        writer.join();
    }
}

TEST_CASE("close: buffered frames first, then closed, a partial last line is dropped", "[client]") {
    pair_fixture p;
    p.write("{\"last\":true}\n{\"partial");
    p.close_peer();
    CHECK(expect_frame(p) == "{\"last\":true}");
    CHECK(p.read().status == status::closed);
    CHECK(p.read().status == status::closed); // and stays closed
}

TEST_CASE("a deadline that passes gives timed_out", "[client]") {
    pair_fixture p;
    const auto t0 = client_channel::clock::now();
    CHECK(p.read(80ms).status == status::timed_out);
    CHECK(client_channel::clock::now() - t0 >= 80ms);
    // A deadline already past returns at once; a late frame is still read afterwards.
    CHECK(p.channel.read_frame(client_channel::clock::now() - 1s).status == status::timed_out);
    p.write("late\n");
    CHECK(expect_frame(p) == "late");
}

TEST_CASE("a wake fd whose writer closed wakes the wait (POLLHUP), it does not spin", "[client]") {
    // `meith mcp` reads the daemon with its stdin as the wake fd: a client that closes a pipe
    // must end the wait, or the bridge spins at 100% CPU forever.
    pair_fixture p;
    int wake[2];
    REQUIRE(::pipe2(wake, O_CLOEXEC) == 0);
    ::close(wake[1]);
    CHECK(p.read_unbounded(wake[0]).status == status::woken);
    ::close(wake[0]);
}

TEST_CASE("the wake fd interrupts a wait, but buffered frames come first", "[client]") {
    pair_fixture p;
    int wake[2];
    REQUIRE(::pipe2(wake, O_CLOEXEC) == 0);
    std::thread waker([&] {
        std::this_thread::sleep_for(30ms);
        [[maybe_unused]] const ssize_t n = ::write(wake[1], "i", 1);
    });
    CHECK(p.read(5s, wake[0]).status == status::woken);
    waker.join();
    // The wake byte is still unread. Two frames in one write: reading the first buffers the
    // second, which is returned before the wake fd is looked at; then the wake fd wins again.
    p.write("f1\nf2\n");
    std::this_thread::sleep_for(10ms);
    auto r = p.channel.read_frame(std::nullopt, wake[0]);
    CHECK(r.status == status::woken);       // both readable: the wake fd is checked first
    r = p.channel.read_frame(std::nullopt); // no wake fd: reads the socket
    CHECK(r.status == status::frame);
    CHECK(r.frame == "f1");
    r = p.channel.read_frame(std::nullopt, wake[0]);
    CHECK(r.status == status::frame);
    CHECK(r.frame == "f2");
    CHECK(p.channel.read_frame(std::nullopt, wake[0]).status == status::woken);
    ::close(wake[0]);
    ::close(wake[1]);
}

// ---- channel: sending, half-close, errors --------------------------------------------------

TEST_CASE("send_frame appends the newline, send_bytes sends verbatim", "[client]") {
    pair_fixture p;
    p.channel.send_frame(encode_list_tools("r1"));
    p.channel.send_bytes("raw\r\nbytes");
    const std::string big(1024 * 1024, 'z'); // more than a socket buffer: partial sends
    bool sent = false;
    std::thread sender([&] {
        try {
            p.channel.send_frame(big);
            sent = true;
        } catch (const client_error&) {
        }
    });
    std::string got;
    char buf[65536];
    const std::size_t want = encode_list_tools("r1").size() + 1 + 10 + big.size() + 1;
    while (got.size() < want) {
        const ssize_t n = ::recv(p.peer, buf, sizeof buf, 0);
        REQUIRE(n > 0);
        got.append(buf, static_cast<std::size_t>(n));
    }
    sender.join();
    CHECK(sent);
    CHECK(got == encode_list_tools("r1") + "\nraw\r\nbytes" + big + "\n");
}

TEST_CASE("send errors: a newline in a frame, a peer that went away", "[client]") {
    pair_fixture p;
    try {
        p.channel.send_frame("{\"a\":\n1}");
        FAIL("no error");
    } catch (const client_error& e) {
        CHECK(e.error_kind() == kind::invalid_frame);
    }
    p.close_peer();
    // MSG_NOSIGNAL: no SIGPIPE (which would end the test run), an error instead.
    try {
        p.channel.send_frame("{}");
        FAIL("no error");
    } catch (const client_error& e) {
        CHECK(e.error_kind() == kind::closed);
        CHECK(std::string(e.what()) == "connection to meithd closed");
        CHECK(e.error_number() == EPIPE);
    }
}

TEST_CASE("shutdown_write: the peer sees EOF and can still answer", "[client]") {
    pair_fixture p;
    p.channel.send_frame("{\"last\":1}");
    p.channel.shutdown_write();
    CHECK(p.read_all() == "{\"last\":1}\n");
    p.write("reply\n");
    CHECK(expect_frame(p) == "reply");
}

TEST_CASE("a channel without a connection refuses to work", "[client]") {
    client_channel c;
    CHECK_FALSE(c.connected());
    CHECK(c.fd() == -1);
    for (auto attempt : {0, 1, 2}) {
        try {
            if (attempt == 0) c.send_frame("{}");
            if (attempt == 1) c.read_frame(std::nullopt);
            if (attempt == 2) c.shutdown_write();
            FAIL("no error");
        } catch (const client_error& e) {
            CHECK(e.error_kind() == kind::not_connected);
            CHECK(std::string(e.what()) == "not connected to meithd");
        }
    }
}

TEST_CASE("connect: not running, refused, bad paths, and a real listener", "[client]") {
    socket_dir dir;
    client_channel c;
    const auto connect_error = [&](const std::filesystem::path& path) {
        try {
            c.connect(path);
        } catch (const client_error& e) {
            return e;
        }
        FAIL("connected");
        return client_error(kind::io, "");
    };

    const auto missing = dir.path / "none.sock";
    auto e = connect_error(missing);
    CHECK(e.error_kind() == kind::not_running);
    CHECK(e.error_number() == ENOENT);
    CHECK(std::string(e.what()) == "meithd is not running (no socket at " + missing.string() + ")");

    const auto stale = dir.path / "stale.sock"; // a socket file nobody listens on
    ::close(bound_socket(stale));
    e = connect_error(stale);
    CHECK(e.error_kind() == kind::not_running);
    CHECK(std::string(e.what()) ==
          "meithd is not running (connection refused at " + stale.string() + ")");

    e = connect_error(std::filesystem::path("/tmp/" + std::string(200, 'l')));
    CHECK(e.error_kind() == kind::connect_failed);
    CHECK_THAT(e.what(), Catch::StartsWith("socket path is empty or too long: /tmp/lll"));
    CHECK(connect_error({}).error_kind() == kind::connect_failed);

    // Not a socket (a folder): Linux says ECONNREFUSED (unix(7)), read as nothing listening.
    e = connect_error(dir.path);
    CHECK(e.error_kind() == kind::not_running);
    CHECK_FALSE(c.connected());

    const auto live = dir.path / "live.sock";
    const int listener = bound_socket(live);
    REQUIRE(::listen(listener, 4) == 0);
    c.connect(live);
    CHECK(c.connected());
    const int server = ::accept(listener, nullptr, nullptr);
    REQUIRE(server >= 0);
    c.send_frame(encode_hello("h1", "cli"));
    REQUIRE(::send(server, "{\"type\":\"hello_result\"}\n", 24, MSG_NOSIGNAL) == 24);
    auto r = c.read_frame(client_channel::clock::now() + 5s);
    CHECK(r.status == status::frame);
    CHECK(json::parse(r.frame)["type"] == "hello_result");
    char buf[256];
    const ssize_t n = ::recv(server, buf, sizeof buf, 0);
    REQUIRE(n > 0);
    CHECK(json::parse(std::string(buf, static_cast<std::size_t>(n) - 1))["requestId"] == "h1");

    client_channel moved = std::move(c); // moves keep the connection and its buffer
    CHECK_FALSE(c.connected());
    CHECK(moved.connected());
    ::close(server);
    CHECK(moved.read_frame(client_channel::clock::now() + 5s).status == status::closed);
    ::close(listener);
}

} // namespace unit_protocol_client_test
