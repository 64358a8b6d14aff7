// A socket-level mutation fuzzer against the real meithd (issue 11, "Fuzzing and fault tests"):
// several connections at once send valid frames, mutated frames (bit flips, deleted and
// duplicated bytes, type confusion, invalid UTF-8, deep nesting), truncated and oversized
// frames, split at random points with random pauses, half-closes and abrupt closes, while
// tool calls run on the built-in echo and on a real tool-host subprocess. The test asserts
// what a client of a daemon that must never fall over on input can rely on: the daemon
// survives, every byte it sends back is a complete line that parses as a JSON object with a
// "type", a fresh client is served afterwards, and every audit line parses.
//
// Bounded: MEITH_SOCKET_FUZZ_SECONDS (default 8) of fuzzing; the seed is printed and can be
// replayed with MEITH_SOCKET_FUZZ_SEED.
#include "daemon_fixture.hpp"

#include <catch2/catch.hpp>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <iterator>
#include <poll.h>
#include <random>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

using namespace meith::test;
using namespace std::chrono_literals;

namespace e2e_socket_fuzz_test { // one namespace per file: the tests build as unity batches

namespace {

constexpr std::size_t max_frame_bytes = 16 * 1024; // the daemon's limit in this test

int connect_nonblocking(const fs::path& socket) {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(fd >= 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, socket.c_str(), sizeof addr.sun_path - 1);
    REQUIRE(::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0);
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
    return fd;
}

/// Makes frames: valid ones from templates, then mutated in one of many ways.
class frame_maker {
  public:
    explicit frame_maker(std::uint64_t seed) : rng_(seed) {}

    std::size_t pick(std::size_t n) {
        return std::uniform_int_distribution<std::size_t>(0, n - 1)(rng_);
    }
    bool chance(int percent) { return static_cast<int>(pick(100)) < percent; }

    std::string valid() {
        const std::string id = "f" + std::to_string(++counter_);
        switch (pick(9)) {
        case 0:
            return json{
                {"type", "hello"},
                {"protocol", 1},
                {"clientInfo", {{"name", "fuzz"}, {"caller", chance(50) ? "cli" : "plugin"}}}}
                .dump();
        case 1:
            return json{{"type", "list_tools"}, {"requestId", id}}.dump();
        case 2:
            return json{{"type", "cancel_tool_call"},
                        {"requestId", "f" + std::to_string(pick(counter_ + 1))}}
                .dump();
        case 3:
            return json{{"type", "tool_call"},
                        {"requestId", id},
                        {"toolName", "t_sleep"},
                        {"arguments", {{"ms", pick(200)}}},
                        {"timeoutMs", 50 + pick(300)}}
                .dump();
        case 4:
            return json{{"type", "tool_call"},
                        {"requestId", id},
                        {"toolName", "t_stream"},
                        {"arguments", {{"n", pick(20)}, {"interval_ms", 1}}}}
                .dump();
        case 5:
            return json{{"type", "list_sources"}, {"requestId", id}}.dump();
        case 6:
            return json{{"type", "check_policy"},
                        {"requestId", id},
                        {"toolName", chance(50) ? "echo" : "t_echo"}}
                .dump();
        default:
            return json{
                {"type", "tool_call"},
                {"requestId", chance(10) ? "dup" : id},
                {"toolName", chance(50) ? "echo" : "t_echo"},
                {"arguments",
                 {{"text", random_text(pick(64))}, {"n", pick(1000)}, {"password", "hunter2"}}}}
                .dump();
        }
    }

    std::string random_text(std::size_t n) {
        std::string s;
        for (std::size_t i = 0; i < n; ++i)
            s.push_back(static_cast<char>(32 + pick(95)));
        return s;
    }

    /// A frame that is valid, mutated, oversized or garbage (no '\n' inside unless meant).
    std::string next() {
        std::string f = valid();
        switch (pick(16)) {
        case 0:
        case 1:
        case 2:
        case 3:
        case 4:
            return f; // valid
        case 5:       // bit flips
            for (int i = 0, n = 1 + static_cast<int>(pick(4)); i < n && !f.empty(); ++i)
                f[pick(f.size())] ^= static_cast<char>(1u << pick(8));
            return f;
        case 6: // deleted bytes
            for (int i = 0, n = 1 + static_cast<int>(pick(8)); i < n && f.size() > 1; ++i)
                f.erase(pick(f.size()), 1 + pick(4));
            return f;
        case 7: { // a duplicated slice
            const auto at = pick(f.size());
            const auto len = pick(f.size() - at) + 1;
            f.insert(pick(f.size()), f.substr(at, len));
            return f;
        }
        case 8: // invalid UTF-8 and control bytes inside strings
            f.insert(f.find(':') + 2 <= f.size() ? f.find(':') + 2 : 0, "\xff\xfe\xc0\x80\x01\x7f");
            return f;
        case 9: { // type confusion
            static const char* const values[] = {
                "null", "[]", "{}", "1e400", "-1", "\"\"", "true", "18446744073709551616", "0.5"};
            for (const char* key : {"\"requestId\":", "\"toolName\":", "\"arguments\":",
                                    "\"timeoutMs\":", "\"type\":", "\"protocol\":"}) {
                const auto at = f.find(key);
                if (at == std::string::npos || !chance(50)) continue;
                const auto vstart = at + std::strlen(key);
                auto vend = f.find_first_of(",}", vstart);
                if (f[vstart] == '{') vend = f.find('}', vstart) + 1;
                if (vend == std::string::npos) continue;
                f.replace(vstart, vend - vstart, values[pick(std::size(values))]);
            }
            return f;
        }
        case 10: { // deep nesting in the arguments
            const std::size_t depth = 100 + pick(20000);
            return R"({"type":"tool_call","requestId":"deep)" + std::to_string(++counter_) +
                   R"(","toolName":"echo","arguments":{"a":)" + std::string(depth, '[') +
                   std::string(depth, ']') + "}}";
        }
        case 11: // oversized: over the frame limit
            return R"({"type":"tool_call","requestId":"big)" + std::to_string(++counter_) +
                   R"(","toolName":"echo","arguments":{"p":")" +
                   std::string(max_frame_bytes + pick(3 * max_frame_bytes), 'x') + "\"}}";
        case 12: // just under the frame limit
            return R"({"type":"tool_call","requestId":"near)" + std::to_string(++counter_) +
                   R"(","toolName":"echo","arguments":{"p":")" +
                   std::string(max_frame_bytes - 100 - pick(200), 'y') + "\"}}";
        case 13: { // random bytes
            std::string g;
            for (std::size_t i = 0, n = pick(300); i < n; ++i) {
                char c = static_cast<char>(pick(256));
                g.push_back(c == '\n' ? ' ' : c);
            }
            return g;
        }
        case 14: // truncated (the next frame's start completes the line)
            return f.substr(0, pick(f.size()));
        default: // several frames in one line, or JSON that is not an object
            return chance(50) ? f + f : "[" + f + "]";
        }
    }

  private:
    std::mt19937_64 rng_;
    std::size_t counter_ = 0;
};

/// One fuzzing connection: bytes to send (in random pieces), replies read and checked.
struct fuzz_conn {
    int fd = -1;
    std::string out; ///< not yet sent
    std::string in;  ///< received, not yet a whole line
    bool write_shut = false;
    std::size_t replies = 0;
};

void check_replies(fuzz_conn& c, std::vector<std::string>& bad) {
    for (;;) {
        const auto nl = c.in.find('\n');
        if (nl == std::string::npos) return;
        const std::string line = c.in.substr(0, nl);
        c.in.erase(0, nl + 1);
        ++c.replies;
        const json f = json::parse(line, nullptr, false);
        if (f.is_discarded() || !f.is_object() || !f.contains("type") || !f["type"].is_string())
            bad.push_back(line.substr(0, 300));
    }
}

} // namespace

TEST_CASE("socket fuzzing: the daemon survives, every reply parses, every audit line parses",
          "[e2e][fuzz]") {
    const char* secs_env = std::getenv("MEITH_SOCKET_FUZZ_SECONDS");
    const auto duration = std::chrono::seconds(secs_env ? std::atoi(secs_env) : 8);
    const char* seed_env = std::getenv("MEITH_SOCKET_FUZZ_SEED");
    const std::uint64_t seed =
        seed_env ? std::strtoull(seed_env, nullptr, 10) : std::random_device{}();
    INFO("seed " << seed << " (MEITH_SOCKET_FUZZ_SEED replays it)");
    WARN("socket fuzz seed " << seed);

    daemon_process d("[limits]\nmax_frame_bytes = " + std::to_string(max_frame_bytes) +
                     "\nmax_calls_in_flight_per_connection = 8\n" + host_source_toml("th"));
    frame_maker maker(seed);
    constexpr std::size_t connections = 6;
    std::vector<fuzz_conn> conns(connections);
    std::vector<std::string> bad;
    std::size_t frames = 0, reconnects = 0, replies = 0;

    const auto end = std::chrono::steady_clock::now() + duration;
    while (std::chrono::steady_clock::now() < end) {
        for (auto& c : conns) {
            if (c.fd < 0) {
                c = fuzz_conn{};
                c.fd = connect_nonblocking(d.socket());
                ++reconnects;
            }
            if (c.out.size() < 64 * 1024 && !c.write_shut) {
                for (std::size_t i = 0, n = 1 + maker.pick(8); i < n; ++i) {
                    c.out += maker.next();
                    c.out += maker.chance(3) ? "\r\n" : "\n";
                    ++frames;
                }
            }
            // A random-sized piece of what is pending: frames split anywhere.
            if (!c.out.empty() && !c.write_shut) {
                const std::size_t piece =
                    std::min(c.out.size(), 1 + maker.pick(maker.chance(50) ? 64 : 32 * 1024));
                const ssize_t n = ::send(c.fd, c.out.data(), piece, MSG_NOSIGNAL);
                if (n > 0) c.out.erase(0, static_cast<std::size_t>(n));
            }
            if (maker.chance(1)) { // half-close: the replies must still come
                ::shutdown(c.fd, SHUT_WR);
                c.write_shut = true;
            }
        }
        std::vector<pollfd> pfds;
        for (auto& c : conns)
            pfds.push_back({c.fd, POLLIN, 0});
        ::poll(pfds.data(), pfds.size(), 2);
        for (std::size_t i = 0; i < conns.size(); ++i) {
            auto& c = conns[i];
            char buf[65536];
            for (;;) {
                const ssize_t n = ::recv(c.fd, buf, sizeof buf, 0);
                if (n > 0) {
                    c.in.append(buf, static_cast<std::size_t>(n));
                    continue;
                }
                if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
                    // Closed by the daemon (a half-closed connection when done, or a limit):
                    // whatever came before must be whole lines.
                    check_replies(c, bad);
                    if (!c.in.empty()) bad.push_back("torn frame at close: " + c.in.substr(0, 200));
                    replies += c.replies;
                    ::close(c.fd);
                    c.fd = -1;
                }
                break;
            }
            if (c.fd < 0) continue;
            check_replies(c, bad);
            if (maker.chance(1)) { // abrupt close, maybe mid-frame, calls in flight
                replies += c.replies;
                ::close(c.fd);
                c.fd = -1;
            }
        }
        REQUIRE(d.running());
    }
    for (auto& c : conns)
        if (c.fd >= 0) {
            replies += c.replies;
            ::close(c.fd);
        }
    WARN("socket fuzz: " << frames << " frames on " << reconnects << " connections, " << replies
                         << " replies");
    for (const auto& b : bad)
        UNSCOPED_INFO("unparsable reply: " << b);
    CHECK(bad.empty());
    CHECK(frames > 1000);
    CHECK(replies > 100);

    // Still serving: a fresh client gets a hello, a tool list, and both kinds of tool.
    REQUIRE(d.running());
    client fresh(d.socket());
    fresh.send({{"type", "hello"}, {"protocol", 1}});
    CHECK(fresh.read()["type"] == "hello_result");
    CHECK(fresh.call("echo", {{"after", "fuzz"}})["result"]["ok"] == true);
    CHECK(fresh.call("t_echo", {{"after", "fuzz"}})["result"]["ok"] == true);

    // Every audit line parses (audit() throws on a line that does not), none is torn, and no
    // password under its (intact) key reached the file. Mutations may rename the key, after
    // which its value is an ordinary string.
    const auto lines = d.audit();
    CHECK(lines.size() > 100);
    std::ifstream raw(d.home() / "audit.jsonl");
    const std::string text((std::istreambuf_iterator<char>(raw)), std::istreambuf_iterator<char>());
    CHECK(text.find(R"("password":"hunter2")") == std::string::npos);
    CHECK(d.stop() == 0);
}

} // namespace e2e_socket_fuzz_test
