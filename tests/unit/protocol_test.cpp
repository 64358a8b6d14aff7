// protocol tests: line framing (bounds, oversized frames, line endings), frame decoding (the
// envelope rules of docs/protocol.md §2-§3), the server-frame encoders, JSON string escaping and
// the ToolResult envelope (§4).
#include "protocol/frames.hpp"
#include "protocol/framing.hpp"
#include "protocol/json_writer.hpp"
#include "protocol/server_frames.hpp"
#include "protocol/suggest.hpp"
#include "protocol/tool_result.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

using namespace meith::protocol;
using json = nlohmann::json;

namespace unit_protocol_test { // one namespace per file: the tests build as unity batches

namespace {

// ---- line_framer helpers -----------------------------------------------------------------

struct framer_event {
    line_framer::status status;
    std::string line;        ///< frame text (status::frame)
    std::size_t dropped = 0; ///< status::oversized
    std::string prefix;      ///< status::oversized
};

/// Drains every event the framer has buffered (until need_more).
void drain(line_framer& f, std::vector<framer_event>& out) {
    for (;;) {
        const auto st = f.next();
        if (st == line_framer::status::need_more) return;
        framer_event ev{st, {}, 0, {}};
        if (st == line_framer::status::frame) {
            ev.line = std::string(f.line());
        } else {
            ev.dropped = f.dropped_bytes();
            ev.prefix = std::string(f.oversized_prefix());
        }
        out.push_back(std::move(ev));
    }
}

/// Feeds `data` through prepare/commit in pieces of at most `piece` bytes, draining after
/// each commit as a connection's read loop does.
std::vector<framer_event> feed(line_framer& f, std::string_view data, std::size_t piece) {
    std::vector<framer_event> events;
    std::size_t pos = 0;
    while (pos < data.size()) {
        auto space = f.prepare();
        const std::size_t n = std::min({piece, space.size(), data.size() - pos});
        std::memcpy(space.data(), data.data() + pos, n);
        f.commit(n);
        pos += n;
        drain(f, events);
    }
    return events;
}

std::vector<framer_event> feed(line_framer& f, std::string_view data) {
    return feed(f, data, data.size() == 0 ? 1 : data.size());
}

// ---- frame_decoder helpers ---------------------------------------------------------------

/// Decodes `text` as the framer would hand it over: followed by frame_padding readable bytes.
client_frame decode(frame_decoder& d, std::string& storage, std::string_view text) {
    storage.assign(text);
    storage.append(frame_padding, ' ');
    return d.decode(std::string_view(storage.data(), text.size()));
}

json parse_line(const std::string& line) {
    REQUIRE(!line.empty());
    REQUIRE(line.back() == '\n');
    REQUIRE(std::count(line.begin(), line.end(), '\n') == 1);
    return json::parse(line);
}

std::string json_string(std::string_view s) {
    std::string out;
    append_json_string(out, s);
    return out;
}

} // namespace

// ==== line_framer ==========================================================================

TEST_CASE("line_framer: several frames in one commit", "[framing]") {
    line_framer f(1024);
    auto events = feed(f, "{\"a\":1}\n{\"b\":2}\n{\"c\":3}\n");
    REQUIRE(events.size() == 3);
    for (const auto& e : events)
        CHECK(e.status == line_framer::status::frame);
    CHECK(events[0].line == "{\"a\":1}");
    CHECK(events[1].line == "{\"b\":2}");
    CHECK(events[2].line == "{\"c\":3}");
    CHECK(f.buffered() == 0);
    CHECK(f.next() == line_framer::status::need_more);
}

TEST_CASE("line_framer: a trailing partial frame stays buffered", "[framing]") {
    line_framer f(1024);
    auto events = feed(f, "{\"a\":1}\n{\"b\"");
    REQUIRE(events.size() == 1);
    CHECK(events[0].line == "{\"a\":1}");
    CHECK(f.buffered() == 4);
    events = feed(f, ":2}\n");
    REQUIRE(events.size() == 1);
    CHECK(events[0].line == "{\"b\":2}");
    CHECK(f.buffered() == 0);
}

TEST_CASE("line_framer: a frame split byte by byte", "[framing]") {
    line_framer f(1024, 16);
    const std::string frame = R"({"type":"tool_call","requestId":"r1","arguments":{"x":"y"}})";
    auto events = feed(f, frame + "\n" + frame + "\r\n", 1);
    REQUIRE(events.size() == 2);
    CHECK(events[0].status == line_framer::status::frame);
    CHECK(events[0].line == frame);
    CHECK(events[1].status == line_framer::status::frame);
    CHECK(events[1].line == frame);
}

TEST_CASE("line_framer: CRLF endings are stripped, a lone CR inside is kept", "[framing]") {
    line_framer f(1024);
    auto events = feed(f, "abc\r\ndef\n a\rb \r\n");
    REQUIRE(events.size() == 3);
    CHECK(events[0].line == "abc");
    CHECK(events[1].line == "def");
    CHECK(events[2].line == " a\rb ");
}

TEST_CASE("line_framer: empty lines are skipped", "[framing]") {
    line_framer f(1024);
    auto events = feed(f, "\n\n\r\nabc\n\n\r\n\ndef\n\n");
    REQUIRE(events.size() == 2);
    CHECK(events[0].line == "abc");
    CHECK(events[1].line == "def");

    // Also when the empty lines arrive one byte at a time.
    line_framer g(1024, 8);
    events = feed(g, "\n\r\n\nx\n\r\n", 1);
    REQUIRE(events.size() == 1);
    CHECK(events[0].line == "x");
}

TEST_CASE("line_framer: frame of exactly max bytes is accepted, max+1 is oversized", "[framing]") {
    constexpr std::size_t max = 100;
    const std::string exact(max, 'a');
    const std::string over(max + 1, 'b');
    const std::string after = "{\"next\":true}";

    auto run = [&](std::string_view eol, std::size_t piece) {
        CAPTURE(piece, eol.size());
        line_framer f(max, 64);
        const std::string e(eol);
        auto events = feed(f, exact + e + over + e + after + e, piece);
        REQUIRE(events.size() == 3);
        CHECK(events[0].status == line_framer::status::frame);
        CHECK(events[0].line == exact);
        CHECK(events[1].status == line_framer::status::oversized);
        CHECK(events[1].dropped == max + 1);
        CHECK(events[2].status == line_framer::status::frame);
        CHECK(events[2].line == after);
    };
    for (const std::size_t piece : {std::size_t{1}, std::size_t{7}, std::size_t{4096}})
        run("\n", piece);
    run("\r\n", 4096);
    // A max-byte frame whose "\r\n" arrives byte by byte is still accepted.
    line_framer f(max, 64);
    auto events = feed(f, exact + "\r\n", 1);
    REQUIRE(events.size() == 1);
    CHECK(events[0].status == line_framer::status::frame);
    CHECK(events[0].line == exact);
}

TEST_CASE("line_framer: oversized frame in one commit reports its size and prefix", "[framing]") {
    line_framer f(1024);
    std::string big = R"({"type":"tool_call","requestId":"big-1","arguments":{"s":")";
    big += std::string(5000, 'x');
    big += "\"}}";
    auto events = feed(f, big + "\n{\"ok\":1}\n");
    REQUIRE(events.size() == 2);
    CHECK(events[0].status == line_framer::status::oversized);
    CHECK(events[0].dropped == big.size());
    CHECK(events[0].prefix == big.substr(0, 256));
    CHECK(events[1].status == line_framer::status::frame);
    CHECK(events[1].line == "{\"ok\":1}");
}

TEST_CASE("line_framer: a long oversized frame keeps memory bounded and is reported once",
          "[framing]") {
    constexpr std::size_t max = 1024;
    constexpr std::size_t chunk = 4096;
    constexpr std::size_t total = 10 * 1024 * 1024;
    line_framer f(max, chunk);

    std::string head = R"({"type":"tool_call","requestId":"huge-7","arguments":{"s":")";
    std::string piece(chunk, 'z');
    std::size_t sent = 0;
    std::size_t max_capacity = 0;
    std::vector<framer_event> events;
    bool first = true;
    while (sent < total) {
        auto space = f.prepare();
        REQUIRE(space.size() >= chunk);
        std::size_t n = chunk;
        if (first) {
            std::memcpy(space.data(), head.data(), head.size());
            std::memcpy(space.data() + head.size(), piece.data(), chunk - head.size());
            first = false;
        } else {
            std::memcpy(space.data(), piece.data(), n);
        }
        f.commit(n);
        sent += n;
        drain(f, events);
        max_capacity = std::max(max_capacity, f.capacity());
    }
    CHECK(events.empty()); // nothing reported before the newline
    CHECK(max_capacity <= max + chunk + frame_padding + 64);

    events = feed(f, "\n{\"after\":1}\n");
    REQUIRE(events.size() == 2);
    CHECK(events[0].status == line_framer::status::oversized);
    CHECK(events[0].dropped == total);
    CHECK(std::string_view(events[0].prefix).substr(0, head.size()) == head);
    CHECK(events[0].prefix.size() == 256);
    CHECK(events[1].status == line_framer::status::frame);
    CHECK(events[1].line == "{\"after\":1}");
    CHECK(f.capacity() <= max + chunk + frame_padding + 64);
}

TEST_CASE("line_framer: dropped_bytes excludes the CR of a CRLF ending however the "
          "frame was chunked",
          "[framing]") {
    // In discarding mode (oversized frame spread over several commits) the '\r' before the
    // newline is counted as dropped, unlike the single-commit path.
    constexpr std::size_t max = 16;
    const std::string over(40, 'q');
    line_framer one_go(max, 64);
    auto a = feed(one_go, over + "\r\n");
    REQUIRE(a.size() == 1);
    CHECK(a[0].dropped == over.size());

    line_framer bytewise(max, 64);
    auto b = feed(bytewise, over + "\r\n", 1);
    REQUIRE(b.size() == 1);
    CHECK(b[0].status == line_framer::status::oversized);
    CHECK(b[0].dropped == over.size()); // actual: 41

    // The boundary case: max+1 bytes, "\r\n", delivered in small pieces.
    const std::string just_over(max + 1, 'j');
    line_framer small(max, 64);
    auto c = feed(small, just_over + "\r\n", 1);
    REQUIRE(c.size() == 1);
    CHECK(c[0].status == line_framer::status::oversized);
    CHECK(c[0].dropped == max + 1); // actual: max + 2
}

TEST_CASE("line_framer: two oversized frames in a row are reported separately", "[framing]") {
    line_framer f(32, 64);
    const std::string a(100, 'a'), b(200, 'b');
    auto events = feed(f, a + "\n" + b + "\nok\n", 10);
    REQUIRE(events.size() == 3);
    CHECK(events[0].status == line_framer::status::oversized);
    CHECK(events[0].dropped == 100);
    CHECK(events[1].status == line_framer::status::oversized);
    CHECK(events[1].dropped == 200);
    CHECK(events[2].line == "ok");
}

TEST_CASE("line_framer: shrink_if_idle releases a grown buffer", "[framing]") {
    line_framer f(1024 * 1024, 1024);
    const std::string big(300 * 1024, 'm');
    auto events = feed(f, big + "\n", 1024);
    REQUIRE(events.size() == 1);
    CHECK(events[0].line.size() == big.size());
    CHECK(f.capacity() > 300 * 1024);
    f.shrink_if_idle();
    CHECK(f.capacity() < 300 * 1024);
    events = feed(f, "after\n");
    REQUIRE(events.size() == 1);
    CHECK(events[0].line == "after");
}

TEST_CASE("line_framer: shrink_if_idle keeps a partial frame", "[framing]") {
    line_framer f(1024 * 1024, 1024);
    const std::string big(300 * 1024, 'm');
    auto events = feed(f, big + "\npart", 1024);
    REQUIRE(events.size() == 1);
    f.shrink_if_idle(); // not idle: "part" is buffered
    events = feed(f, "ial\n");
    REQUIRE(events.size() == 1);
    CHECK(events[0].line == "partial");
}

// ==== frame_decoder ========================================================================

TEST_CASE("frame_decoder: hello", "[frames]") {
    frame_decoder d;
    std::string buf;
    auto f = decode(
        d, buf, R"({"type":"hello","protocol":1,"requestId":"r1","clientInfo":{"caller":"cli"}})");
    CHECK_FALSE(f.error);
    CHECK(f.type == frame_type::hello);
    CHECK(f.type_name == "hello");
    REQUIRE(f.request_id);
    CHECK(*f.request_id == "r1");
    REQUIRE(f.caller_claim);
    CHECK(*f.caller_claim == "cli");

    f = decode(d, buf, R"({"type":"hello"})");
    CHECK_FALSE(f.error);
    CHECK(f.type == frame_type::hello);
    CHECK_FALSE(f.request_id);
    CHECK_FALSE(f.caller_claim);
}

TEST_CASE("frame_decoder: list_tools", "[frames]") {
    frame_decoder d;
    std::string buf;
    auto f = decode(d, buf, R"({"type":"list_tools","requestId":"r2"})");
    CHECK_FALSE(f.error);
    CHECK(f.type == frame_type::list_tools);
    REQUIRE(f.request_id);
    CHECK(*f.request_id == "r2");

    f = decode(d, buf, R"({"type":"list_tools"})");
    CHECK_FALSE(f.error);
    CHECK(f.type == frame_type::list_tools);
    CHECK_FALSE(f.request_id);
}

TEST_CASE("frame_decoder: cancel_tool_call", "[frames]") {
    frame_decoder d;
    std::string buf;
    auto f = decode(d, buf, R"({"type":"cancel_tool_call","requestId":"req_1"})");
    CHECK_FALSE(f.error);
    CHECK(f.type == frame_type::cancel_tool_call);
    REQUIRE(f.request_id);
    CHECK(*f.request_id == "req_1");

    f = decode(d, buf, R"({"type":"cancel_tool_call"})");
    CHECK(f.error);
    CHECK(f.type == frame_type::cancel_tool_call);

    f = decode(d, buf, R"({"type":"cancel_tool_call","requestId":""})");
    CHECK(f.error);
    CHECK_FALSE(f.request_id);
}

TEST_CASE("frame_decoder: tool_call", "[frames]") {
    frame_decoder d;
    std::string buf;
    auto f = decode(d, buf,
                    R"({"type":"tool_call","protocol":1,"requestId":"req_ab12cd34",)"
                    R"("toolName":"open_browser_tab","arguments":{"url":"http://localhost:3000",)"
                    R"("n":[1,2]},"clientInfo":{"caller":"plugin","cwd":"/w"},"timeoutMs":30000})");
    CHECK_FALSE(f.error);
    CHECK_FALSE(f.as<tool_call_frame>().call_error);
    CHECK(f.type == frame_type::tool_call);
    REQUIRE(f.request_id);
    CHECK(*f.request_id == "req_ab12cd34");
    CHECK(f.tool_name == "open_browser_tab");
    REQUIRE(f.arguments.is_object());
    CHECK(simdjson::minify(f.arguments) == R"({"url":"http://localhost:3000","n":[1,2]})");
    REQUIRE(f.as<tool_call_frame>().timeout_ms);
    CHECK(*f.as<tool_call_frame>().timeout_ms == 30000);
    REQUIRE(f.caller_claim);
    CHECK(*f.caller_claim == "plugin");

    SECTION("timeoutMs absent or null") {
        f = decode(d, buf, R"({"type":"tool_call","requestId":"a","toolName":"t","arguments":{}})");
        CHECK_FALSE(f.error);
        CHECK_FALSE(f.as<tool_call_frame>().call_error);
        CHECK_FALSE(f.as<tool_call_frame>().timeout_ms);
        f = decode(d, buf,
                   R"({"type":"tool_call","requestId":"a","toolName":"t","arguments":{},)"
                   R"("timeoutMs":null})");
        CHECK_FALSE(f.error);
        CHECK_FALSE(f.as<tool_call_frame>().call_error);
        CHECK_FALSE(f.as<tool_call_frame>().timeout_ms);
    }
}

TEST_CASE("frame_decoder: requestId rules", "[frames]") {
    frame_decoder d;
    std::string buf;
    const std::string id128(128, 'i');
    const std::string id129(129, 'i');

    SECTION("128 chars is usable") {
        auto f = decode(d, buf, R"({"type":"list_tools","requestId":")" + id128 + "\"}");
        CHECK_FALSE(f.error);
        REQUIRE(f.request_id);
        CHECK(*f.request_id == id128);
    }
    SECTION("1 char is usable") {
        auto f = decode(d, buf, R"({"type":"hello","requestId":"x"})");
        CHECK_FALSE(f.error);
        REQUIRE(f.request_id);
        CHECK(*f.request_id == "x");
    }
    SECTION("unusable ids on hello/list_tools are errors") {
        for (const std::string type : {"hello", "list_tools"}) {
            for (const std::string& id :
                 {std::string("\"\""), "\"" + id129 + "\"", std::string("42"), std::string("null"),
                  std::string("{}"), std::string("[\"a\"]")}) {
                CAPTURE(type, id);
                auto f = decode(d, buf, R"({"type":")" + type + R"(","requestId":)" + id + "}");
                CHECK(f.error);
                CHECK_FALSE(f.request_id);
            }
        }
    }
    SECTION("tool_call without a usable id is an error, not a call_error") {
        for (const std::string& id : {std::string("\"\""), "\"" + id129 + "\"", std::string("7")}) {
            CAPTURE(id);
            auto f = decode(d, buf,
                            R"({"type":"tool_call","requestId":)" + id +
                                R"(,"toolName":"echo","arguments":{}})");
            CHECK(f.error);
            CHECK_FALSE(f.as<tool_call_frame>().call_error);
            CHECK_FALSE(f.request_id);
        }
        auto f = decode(d, buf, R"({"type":"tool_call","toolName":"echo","arguments":{}})");
        CHECK(f.error);
        CHECK_FALSE(f.request_id);
    }
    SECTION("the limit counts characters, not bytes") {
        std::string e128, e129;
        for (int i = 0; i < 128; ++i)
            e128 += "\xC3\xA9"; // é: 2 bytes, 1 character
        e129 = e128 + "\xC3\xA9";
        auto f = decode(d, buf, R"({"type":"hello","requestId":")" + e128 + "\"}");
        CHECK_FALSE(f.error);
        REQUIRE(f.request_id);
        CHECK(*f.request_id == e128);
        f = decode(d, buf, R"({"type":"hello","requestId":")" + e129 + "\"}");
        CHECK(f.error);
        CHECK_FALSE(f.request_id);
        // 4-byte characters, written as escapes.
        std::string s128;
        for (int i = 0; i < 128; ++i)
            s128 += "\\ud83d\\ude00";
        f = decode(d, buf, R"({"type":"hello","requestId":")" + s128 + "\"}");
        CHECK_FALSE(f.error);
        REQUIRE(f.request_id);
        CHECK(f.request_id->size() == 128 * 4);
    }
    SECTION("escaped ids are decoded") {
        auto f = decode(d, buf, R"({"type":"hello","requestId":"a\"b\\c\u0041"})");
        CHECK_FALSE(f.error);
        REQUIRE(f.request_id);
        CHECK(*f.request_id == "a\"b\\cA");
    }
}

TEST_CASE("frame_decoder: protocol field", "[frames]") {
    frame_decoder d;
    std::string buf;
    auto ok = decode(d, buf, R"({"type":"hello","protocol":1,"requestId":"p"})");
    CHECK_FALSE(ok.error);

    for (const std::string p : {"2", "\"1\"", "1.0", "0", "-1", "null", "true"}) {
        CAPTURE(p);
        auto f = decode(d, buf, R"({"type":"hello","requestId":"p","protocol":)" + p + "}");
        REQUIRE(f.error);
        CHECK(f.error->find("protocol") != std::string::npos);
        // The requestId is still reported so the error frame can carry it.
        REQUIRE(f.request_id);
        CHECK(*f.request_id == "p");
    }
    // A tool_call with a bad protocol is an error frame, not a call_error.
    auto f = decode(d, buf,
                    R"({"type":"tool_call","protocol":2,"requestId":"c","toolName":"echo",)"
                    R"("arguments":{}})");
    CHECK(f.error);
    CHECK_FALSE(std::holds_alternative<tool_call_frame>(f.body)); // its members not read
    REQUIRE(f.request_id);
    CHECK(*f.request_id == "c");
}

TEST_CASE("frame_decoder: clientInfo.caller extraction", "[frames]") {
    frame_decoder d;
    std::string buf;
    auto f = decode(d, buf, R"({"type":"hello","clientInfo":{"cwd":"/x","caller":"renderer"}})");
    CHECK_FALSE(f.error);
    REQUIRE(f.caller_claim);
    CHECK(*f.caller_claim == "renderer");

    f = decode(d, buf, R"({"type":"hello","clientInfo":{"caller":5}})");
    CHECK_FALSE(f.error);
    CHECK_FALSE(f.caller_claim);

    f = decode(d, buf, R"({"type":"hello","clientInfo":{"cwd":"/x"}})");
    CHECK_FALSE(f.error);
    CHECK_FALSE(f.caller_claim);

    f = decode(d, buf, R"({"type":"hello","clientInfo":"cli"})");
    CHECK_FALSE(f.error);
    CHECK_FALSE(f.caller_claim);

    f = decode(d, buf, R"({"type":"hello","clientInfo":{"caller":""}})");
    CHECK_FALSE(f.error);
    REQUIRE(f.caller_claim);
    CHECK(f.caller_claim->empty());
}

TEST_CASE("frame_decoder: a string argument is decoded for a text-payload tool, the registry "
          "checks it against the tool",
          "[frames]") {
    frame_decoder d;
    std::string buf;
    auto f = decode(
        d, buf, R"({"type":"tool_call","requestId":"s","toolName":"patch","arguments":"x\ny"})");
    CHECK_FALSE(f.error);
    CHECK_FALSE(f.as<tool_call_frame>().call_error);
    REQUIRE(f.arguments.is_string());
    CHECK(std::string_view(f.arguments.get_string().value_unsafe()) == "x\ny");
}

TEST_CASE("frame_decoder: tool_call validation errors with a usable requestId", "[frames]") {
    frame_decoder d;
    std::string buf;
    const std::vector<std::string> bodies = {
        R"("arguments":{})",                                     // no toolName
        R"("toolName":"","arguments":{})",                       // empty toolName
        R"("toolName":5,"arguments":{})",                        // numeric toolName
        R"("toolName":null,"arguments":{})",                     // null toolName
        R"("toolName":"echo")",                                  // no arguments
        R"("toolName":"echo","arguments":[])",                   // array
        R"("toolName":"echo","arguments":null)",                 // null
        R"("toolName":"echo","arguments":3)",                    // number
        R"("toolName":"echo","arguments":{},"timeoutMs":0)",     // zero
        R"("toolName":"echo","arguments":{},"timeoutMs":-5)",    // negative
        R"("toolName":"echo","arguments":{},"timeoutMs":1.5)",   // fraction
        R"("toolName":"echo","arguments":{},"timeoutMs":"100")", // string
        R"("toolName":"echo","arguments":{},"timeoutMs":true)",  // bool
        R"("toolName":"echo","arguments":{},"timeoutMs":{})",    // object
    };
    for (const auto& body : bodies) {
        CAPTURE(body);
        auto f = decode(d, buf, R"({"type":"tool_call","requestId":"v1",)" + body + "}");
        CHECK_FALSE(f.error);
        CHECK(f.as<tool_call_frame>().call_error);
        CHECK(f.type == frame_type::tool_call);
        REQUIRE(f.request_id);
        CHECK(*f.request_id == "v1");

        // toolName (when a string) and arguments (any type) are kept for the audit line.
        std::string_view expected_name =
            body.find(R"("toolName":"echo")") != std::string::npos ? "echo" : "";
        CHECK(f.tool_name == expected_name);
        CHECK(f.has_arguments == (body.find("\"arguments\"") != std::string::npos));

        // Without a usable requestId, the same frame is a PROTOCOL_ERROR.
        auto g = decode(d, buf, R"({"type":"tool_call",)" + body + "}");
        CHECK(g.error);
        CHECK_FALSE(g.request_id);
    }
}

TEST_CASE("frame_decoder: refused tool_calls keep toolName and arguments", "[frames]") {
    frame_decoder d;
    std::string buf;
    auto f =
        decode(d, buf, R"({"type":"tool_call","requestId":"a","toolName":"t","arguments":[1]})");
    REQUIRE(f.as<tool_call_frame>().call_error);
    CHECK(f.tool_name == "t");
    REQUIRE(f.has_arguments);
    CHECK(simdjson::minify(f.arguments) == "[1]");

    // Even when the frame is refused with an error frame (bad protocol, no requestId).
    f = decode(
        d, buf,
        R"({"type":"tool_call","protocol":9,"requestId":"a","toolName":"t","arguments":{"k":2}})");
    REQUIRE(f.error);
    CHECK(f.tool_name == "t");
    REQUIRE(f.has_arguments);
    CHECK(simdjson::minify(f.arguments) == R"({"k":2})");

    f = decode(d, buf, R"({"type":"tool_call","toolName":"t"})");
    REQUIRE(f.error);
    CHECK(f.tool_name == "t");
    CHECK_FALSE(f.has_arguments);
}

TEST_CASE("utf8_length", "[frames]") {
    CHECK(utf8_length("") == 0);
    CHECK(utf8_length("abc") == 3);
    CHECK(utf8_length("\xC3\xA9") == 1);
    CHECK(utf8_length("a\xE2\x98\x83"
                      "b") == 3);
    CHECK(utf8_length("\xF0\x9F\x98\x80\xF0\x9F\x98\x80") == 2);
}

namespace {
/// The scanned values of `keys` in `text` fed `chunk` bytes at a time.
std::vector<top_level_scanner::value>
scan(std::string_view text, std::initializer_list<std::string_view> keys, std::size_t chunk = 7) {
    top_level_scanner s(keys);
    for (std::size_t at = 0; at < text.size(); at += chunk)
        s.feed(text.substr(at, chunk));
    std::vector<top_level_scanner::value> out;
    for (std::size_t i = 0; i < keys.size(); ++i)
        out.push_back(s.get(i));
    return out;
}
using kind = top_level_scanner::value::kind;
} // namespace

TEST_CASE("top_level_scanner: only the outermost object's members count", "[frames][scan]") {
    // The MCP SDKs write "id" after "result": a nested "id" is not the message's.
    auto v = scan(
        R"({"jsonrpc":"2.0","result":{"structuredContent":{"id":1},"a":["}",{"id":2}]},"id":3})",
        {"id", "jsonrpc"});
    CHECK(v[0].k == kind::number);
    CHECK(v[0].text == "3");
    CHECK(v[1].k == kind::string);
    CHECK(v[1].text == "2.0");
    // Strings hide braces, quotes and keys; the first occurrence wins.
    v = scan(R"( { "s" : "{\"id\":9}" , "id" : "12" , "id":"13"})", {"id"}, 1);
    CHECK(v[0].k == kind::string);
    CHECK(v[0].text == "12");
    {
        top_level_scanner last({"id"}, top_level_scanner::duplicates::last_wins);
        last.feed(R"({"id":"12","x":{"id":5},"id":"13"})");
        CHECK(last.get(0).text == "13");
    }
    // Other kinds, escapes and absence.
    const std::string mixed = R"({"a":null,"b":{"x":[1,2]},"c":"x\"y","d":-1.5e3,"e":true})";
    v = scan(mixed, {"a", "b", "c", "z"});
    CHECK(v[0].k == kind::other);
    CHECK(v[1].k == kind::other);
    CHECK(v[2].k == kind::other);
    CHECK(v[3].k == kind::absent);
    v = scan(mixed, {"d", "e"});
    CHECK(v[0].k == kind::number);
    CHECK(v[0].text == "-1.5e3");
    CHECK(v[1].k == kind::other);
    // Not an object, or a key spelled with an escape: nothing.
    CHECK(scan(R"(["id",1])", {"id"})[0].k == kind::absent);
    CHECK(scan(R"({"\u0069d":1})", {"id"})[0].k == kind::absent);
    // A value longer than the bound is `other`, not a cut string.
    CHECK(scan(R"({"id":")" + std::string(600, 'x') + "\"}", {"id"})[0].k == kind::other);
}

TEST_CASE("an oversized frame's requestId and type, scanned as it passes the framer",
          "[frames][scan]") {
    line_framer framer(64);
    framer.scan_oversized({"requestId", "type"});
    // The requestId after a long `arguments` that holds another one.
    const std::string frame = R"({"type":"tool_call","arguments":{"requestId":"victim","s":")" +
                              std::string(5000, 'x') + R"("},"requestId":"big-1"})";
    auto events = feed(framer, frame + "\n");
    REQUIRE(events.size() == 1);
    REQUIRE(events[0].status == line_framer::status::oversized);
    REQUIRE(framer.oversized_member(0).k == kind::string);
    CHECK(framer.oversized_member(0).text == "big-1");
    CHECK(framer.oversized_member(1).text == "tool_call");
    // The next oversized frame starts afresh.
    events = feed(framer, R"({"type":"list_tools","pad":")" + std::string(500, 'y') + "\"}\n");
    REQUIRE(events.size() == 1);
    CHECK(framer.oversized_member(0).k == kind::absent);
    CHECK(framer.oversized_member(1).text == "list_tools");

    CHECK(usable_request_id("big-1") == std::optional<std::string_view>("big-1"));
    // Empty, escaped, too long or not UTF-8: not usable.
    CHECK_FALSE(usable_request_id(""));
    CHECK_FALSE(usable_request_id(R"(a\"b)"));
    CHECK_FALSE(usable_request_id(std::string(129, 'x')));
    CHECK_FALSE(usable_request_id("\xFF\xFE"));
    CHECK(usable_request_id(std::string(128, 'x')));
}

TEST_CASE("frame_decoder: a frame the parser refuses still names its requestId and type",
          "[frames]") {
    // 1e400 is valid JSON but no double holds it: simdjson refuses the whole frame, and the
    // error frame went out without the requestId, so the client could not tell which failed.
    frame_decoder d;
    std::string buf;
    auto f = decode(
        d, buf,
        R"({"type":"tool_call","requestId":"r1","toolName":"echo","arguments":{"n":1e400}})");
    REQUIRE(f.error);
    REQUIRE(f.request_id);
    CHECK(*f.request_id == "r1");
    CHECK(f.type == frame_type::tool_call);
    std::string out;
    append_error_frame(out, f.request_id, *f.error);
    CHECK(nlohmann::json::parse(out)["requestId"] == "r1");
    // Not a usable id, or none at the top level: none recovered.
    f = decode(d, buf, R"({"type":"tool_call","arguments":{"requestId":"x","n":1e400}})");
    REQUIRE(f.error);
    CHECK_FALSE(f.request_id);
}

TEST_CASE("frame_decoder: malformed frames", "[frames]") {
    frame_decoder d;
    std::string buf;
    SECTION("not JSON") {
        for (const std::string line : {"not json", "{", "{\"type\":\"hello\"", "{\"a\":1}}",
                                       "{\"type\":\"hello\",}", "\x01"}) {
            CAPTURE(line);
            auto f = decode(d, buf, line);
            CHECK(f.error);
            CHECK_FALSE(f.request_id);
        }
    }
    SECTION("JSON but not an object") {
        for (const std::string line :
             {"[]", "[{\"type\":\"hello\"}]", "42", "\"hello\"", "null", "true"}) {
            CAPTURE(line);
            auto f = decode(d, buf, line);
            REQUIRE(f.error);
            CHECK(f.error->find("object") != std::string::npos);
        }
    }
    SECTION("no string type") {
        for (const std::string line :
             {R"({"requestId":"r9"})", R"({"type":1,"requestId":"r9"})",
              R"({"type":null,"requestId":"r9"})", R"({"type":["hello"],"requestId":"r9"})"}) {
            CAPTURE(line);
            auto f = decode(d, buf, line);
            REQUIRE(f.error);
            CHECK(f.error->find("type") != std::string::npos);
            // The id is still usable for the error frame.
            REQUIRE(f.request_id);
            CHECK(*f.request_id == "r9");
        }
    }
    SECTION("unknown type") {
        auto f = decode(d, buf, R"({"type":"tool_result","requestId":"u1"})");
        REQUIRE(f.error);
        CHECK(f.type == frame_type::other);
        CHECK(f.error->find("tool_result") != std::string::npos);
        REQUIRE(f.request_id);
        CHECK(*f.request_id == "u1");

        f = decode(d, buf, R"({"type":""})");
        CHECK(f.error);
        CHECK(f.type == frame_type::other);
    }
    SECTION("a decoder is reusable after an error") {
        auto f = decode(d, buf, "{{{");
        CHECK(f.error);
        f = decode(d, buf, R"({"type":"hello","requestId":"again"})");
        CHECK_FALSE(f.error);
        REQUIRE(f.request_id);
        CHECK(*f.request_id == "again");
    }
}

TEST_CASE("frame_decoder: strings with escapes and unicode decode correctly", "[frames]") {
    frame_decoder d;
    std::string buf;
    auto f =
        decode(d, buf,
               R"({"type":"tool_call","requestId":"r\u00e9q\ud83d\ude00",)"
               R"("toolName":"t\"o\\o\/l\n\t","arguments":{"k":"caf\u00e9 \u2603 \ud83d\ude00"},)"
               R"("clientInfo":{"caller":"\u0063li"}})");
    CHECK_FALSE(f.error);
    CHECK_FALSE(f.as<tool_call_frame>().call_error);
    REQUIRE(f.request_id);
    CHECK(*f.request_id == "r\xC3\xA9q\xF0\x9F\x98\x80");
    CHECK(f.tool_name == "t\"o\\o/l\n\t");
    REQUIRE(f.caller_claim);
    CHECK(*f.caller_claim == "cli");
    std::string_view k;
    REQUIRE(f.arguments["k"].get_string().get(k) == simdjson::SUCCESS);
    CHECK(k == "caf\xC3\xA9 \xE2\x98\x83 \xF0\x9F\x98\x80");

    // Raw (unescaped) UTF-8 is taken as is.
    f = decode(d, buf, "{\"type\":\"hello\",\"requestId\":\"\xC3\xA9\xE2\x98\x83\"}");
    CHECK_FALSE(f.error);
    REQUIRE(f.request_id);
    CHECK(*f.request_id == "\xC3\xA9\xE2\x98\x83");

    // Invalid UTF-8 in a frame is not valid JSON.
    f = decode(d, buf, "{\"type\":\"hello\",\"requestId\":\"\xC3\x28\"}");
    CHECK(f.error);
}

TEST_CASE("frame_decoder: later duplicate keys win", "[frames]") {
    frame_decoder d;
    std::string buf;
    auto f =
        decode(d, buf, R"({"type":"list_tools","type":"hello","requestId":"a","requestId":"b"})");
    CHECK_FALSE(f.error);
    CHECK(f.type == frame_type::hello);
    REQUIRE(f.request_id);
    CHECK(*f.request_id == "b");
}

TEST_CASE("frame_decoder: decodes lines taken straight from the framer", "[frames][framing]") {
    line_framer framer(4096);
    frame_decoder d;
    auto space = framer.prepare();
    const std::string data = "{\"type\":\"hello\",\"requestId\":\"h\"}\r\n"
                             "{\"type\":\"tool_call\",\"requestId\":\"c\",\"toolName\":\"echo\","
                             "\"arguments\":{\"a\":1}}\n";
    std::memcpy(space.data(), data.data(), data.size());
    framer.commit(data.size());
    REQUIRE(framer.next() == line_framer::status::frame);
    auto f = d.decode(framer.line());
    CHECK_FALSE(f.error);
    CHECK(f.type == frame_type::hello);
    REQUIRE(framer.next() == line_framer::status::frame);
    f = d.decode(framer.line());
    CHECK_FALSE(f.error);
    CHECK_FALSE(f.as<tool_call_frame>().call_error);
    CHECK(f.type == frame_type::tool_call);
    CHECK(simdjson::minify(f.arguments) == R"({"a":1})");
}

// ==== encoders =============================================================================

TEST_CASE("append_error_frame", "[encode]") {
    std::string out;
    append_error_frame(out, std::string_view("r\"1"), "bad \"frame\"\n");
    auto j = parse_line(out);
    CHECK(j == json{{"type", "error"},
                    {"protocol", 1},
                    {"requestId", "r\"1"},
                    {"code", "PROTOCOL_ERROR"},
                    {"message", "bad \"frame\"\n"}});

    out.clear();
    append_error_frame(out, std::nullopt, "oops");
    j = parse_line(out);
    CHECK(
        j ==
        json{{"type", "error"}, {"protocol", 1}, {"code", "PROTOCOL_ERROR"}, {"message", "oops"}});
    CHECK_FALSE(j.contains("requestId"));
}

TEST_CASE("append_hello_result", "[encode]") {
    std::string out;
    append_hello_result(out, std::string_view("h1"), "s_0123456789abcdef", "cli", "0.1.0");
    auto j = parse_line(out);
    CHECK(j == json::parse(R"({"type":"hello_result","protocol":1,"requestId":"h1",
        "sessionId":"s_0123456789abcdef","caller":"cli",
        "server":{"name":"meithd","version":"0.1.0"}})"));

    out.clear();
    append_hello_result(out, std::nullopt, "s_x", "plugin", "1.2.3");
    j = parse_line(out);
    CHECK_FALSE(j.contains("requestId"));
    CHECK(j["caller"] == "plugin");
    CHECK(j["protocol"] == 1);
}

TEST_CASE("append_tool_event", "[encode]") {
    std::string out;
    append_tool_event(out, "c1", R"({"type":"part","payload":{"n":1}})");
    auto j = parse_line(out);
    CHECK(j == json::parse(R"({"type":"tool_event","protocol":1,"requestId":"c1",
        "event":{"type":"part","payload":{"n":1}}})"));
}

TEST_CASE("append_tool_result_frame", "[encode]") {
    std::string out;
    append_tool_result_frame(out, "c2", tool_result::success(R"({"a":[1,2]})"));
    auto j = parse_line(out);
    CHECK(j == json::parse(R"({"type":"tool_result","protocol":1,"requestId":"c2",
        "result":{"ok":true,"content":{"a":[1,2]}}})"));

    out.clear();
    append_tool_result_frame(
        out, "c3", tool_result::failure(error_code::timeout, "too \"slow\"", R"({"ms":50})"));
    j = parse_line(out);
    CHECK(j == json::parse(R"({"type":"tool_result","protocol":1,"requestId":"c3",
        "result":{"ok":false,"error":{"code":"TIMEOUT","message":"too \"slow\"",
        "details":{"ms":50}}}})"));
}

TEST_CASE("append_tools_list_head", "[encode]") {
    std::string out;
    append_tools_list_head(out, std::string_view("l1"));
    out += R"({"name":"a"},{"name":"b"})";
    out += "]}\n";
    auto j = parse_line(out);
    CHECK(j == json::parse(R"({"type":"tools_list","protocol":1,"requestId":"l1",
        "tools":[{"name":"a"},{"name":"b"}]})"));

    out.clear();
    append_tools_list_head(out, std::nullopt);
    out += "]}\n";
    j = parse_line(out);
    CHECK(j == json::parse(R"({"type":"tools_list","protocol":1,"tools":[]})"));
}

TEST_CASE("encoders append to an existing buffer", "[encode]") {
    std::string out = "previous\n";
    append_error_frame(out, std::nullopt, "x");
    append_tool_event(out, "r", "{}");
    CHECK(out.rfind("previous\n", 0) == 0);
    CHECK(std::count(out.begin(), out.end(), '\n') == 3);
    CHECK(out.back() == '\n');
}

// ==== json_writer ==========================================================================

TEST_CASE("append_json_string: escaping", "[json]") {
    CHECK(json_string("") == "\"\"");
    CHECK(json_string("plain text") == "\"plain text\"");
    CHECK(json_string("a\"b") == R"("a\"b")");
    CHECK(json_string("a\\b") == R"("a\\b")");
    CHECK(json_string("l1\nl2\tx\ry\bz\f") == R"("l1\nl2\tx\ry\bz\f")");
    CHECK(json_string(std::string_view("\x01\x1f", 2)) == R"("\u0001\u001f")");
    CHECK(json_string(std::string_view("a\0b", 3)) == R"("a\u0000b")");
    CHECK(json_string("\x7f") == "\"\x7f\""); // DEL needs no escape
    CHECK(json_string("/") == "\"/\"");
}

TEST_CASE("append_json_string: a byte needing care at every offset of a long run", "[json]") {
    // The escaper skips 8 plain bytes at a time; whatever the offset of the one byte that
    // needs escaping, replacing or validating, the output equals the escaped pieces joined.
    const std::vector<std::pair<std::string, std::string>> specials = {
        {"\"", R"(\")"},          {"\\", R"(\\)"},
        {"\n", R"(\n)"},          {std::string(1, '\0'), R"(\u0000)"},
        {"\x1f", R"(\u001f)"},    {"\xFF", "\xEF\xBF\xBD"},
        {"\xC3\xA9", "\xC3\xA9"}, {"\xF0\x9F\x98\x80", "\xF0\x9F\x98\x80"},
        {"\xC3", "\xEF\xBF\xBD"}};
    for (const auto& [raw, escaped] : specials)
        for (std::size_t before = 0; before < 20; ++before)
            for (std::size_t after : {0, 1, 7, 8, 9, 17}) {
                const std::string in = std::string(before, 'a') + raw + std::string(after, 'b');
                CAPTURE(in, before, after);
                CHECK(json_string(in) ==
                      "\"" + std::string(before, 'a') + escaped + std::string(after, 'b') + "\"");
            }
    // Plain bytes next to the limits of the word test: ' ' (0x20), '!' (0x21), '#', '[', ']',
    // DEL (0x7f) pass unchanged.
    const std::string edges(64, ' ');
    CHECK(json_string(edges + "!#[]\x7f" + edges) == "\"" + edges + "!#[]\x7f" + edges + "\"");
}

TEST_CASE("append_json_string: UTF-8", "[json]") {
    // Valid multibyte sequences pass unchanged (2, 3 and 4 bytes; edge code points).
    for (const std::string s :
         {"\xC3\xA9", "\xE2\x98\x83", "\xF0\x9F\x98\x80", "\xC2\x80", "\xDF\xBF", "\xE0\xA0\x80",
          "\xED\x9F\xBF", "\xEE\x80\x80", "\xEF\xBF\xBF", "\xF0\x90\x80\x80", "\xF4\x8F\xBF\xBF",
          "mixed \xC3\xA9t\xC3\xA9 \xF0\x9F\x98\x80!"}) {
        CAPTURE(s);
        CHECK(json_string(s) == "\"" + s + "\"");
        CHECK(is_valid_utf8(s));
    }
    const std::string fffd = "\xEF\xBF\xBD";
    // Invalid bytes become U+FFFD, one per rejected byte.
    CHECK(json_string("\xFF") == "\"" + fffd + "\"");
    CHECK(json_string("a\x80z") == "\"a" + fffd + "z\"");
    CHECK(json_string("\xC3") == "\"" + fffd + "\"");            // truncated at end
    CHECK(json_string("\xC3(") == "\"" + fffd + "(\"");          // bad continuation
    CHECK(json_string("\xC0\xAF") == "\"" + fffd + fffd + "\""); // overlong '/'
    CHECK(json_string("\xC1\xBF") == "\"" + fffd + fffd + "\"");
    CHECK(json_string("\xE0\x80\xAF") == "\"" + fffd + fffd + fffd + "\""); // overlong 3-byte
    CHECK(json_string("\xF0\x80\x80\xAF") == "\"" + fffd + fffd + fffd + fffd + "\"");
    CHECK(json_string("\xED\xA0\x80") == "\"" + fffd + fffd + fffd + "\""); // surrogate D800
    CHECK(json_string("\xED\xBF\xBF") == "\"" + fffd + fffd + fffd + "\""); // surrogate DFFF
    CHECK(json_string("\xF4\x90\x80\x80") == "\"" + fffd + fffd + fffd + fffd + "\""); // >10FFFF
    CHECK(json_string("\xF5\x80\x80\x80") == "\"" + fffd + fffd + fffd + fffd + "\"");
    CHECK(json_string("\xE2\x98") == "\"" + fffd + fffd + "\""); // truncated 3-byte
    // Escapes and replacements mix with plain runs.
    CHECK(json_string("\"\xFF\n\xC3\xA9") == "\"\\\"" + fffd + "\\n\xC3\xA9\"");

    // Whatever goes in, the output is valid JSON and valid UTF-8.
    std::string all;
    for (int i = 0; i < 256; ++i)
        all.push_back(static_cast<char>(i));
    const auto out = json_string(all);
    CHECK(is_valid_utf8(out));
    CHECK_NOTHROW(json::parse(out));
}

TEST_CASE("is_valid_utf8", "[json]") {
    CHECK(is_valid_utf8(""));
    CHECK(is_valid_utf8("ascii only"));
    CHECK(is_valid_utf8(std::string_view("nul\0inside", 10)));
    CHECK(is_valid_utf8("\xC3\xA9\xE2\x98\x83\xF0\x9F\x98\x80"));
    CHECK_FALSE(is_valid_utf8("\x80"));
    CHECK_FALSE(is_valid_utf8("\xBF"));
    CHECK_FALSE(is_valid_utf8("\xC0\x80"));         // overlong NUL
    CHECK_FALSE(is_valid_utf8("\xC1\x81"));         // overlong 'A'
    CHECK_FALSE(is_valid_utf8("\xE0\x9F\xBF"));     // overlong 3-byte
    CHECK_FALSE(is_valid_utf8("\xF0\x8F\xBF\xBF")); // overlong 4-byte
    CHECK_FALSE(is_valid_utf8("\xED\xA0\x80"));     // surrogate
    CHECK_FALSE(is_valid_utf8("\xED\xB0\x80"));     // low surrogate
    CHECK_FALSE(is_valid_utf8("\xF4\x90\x80\x80")); // > U+10FFFF
    CHECK_FALSE(is_valid_utf8("\xF8\x88\x80\x80\x80"));
    CHECK_FALSE(is_valid_utf8("\xFE"));
    CHECK_FALSE(is_valid_utf8("\xFF"));
    CHECK_FALSE(is_valid_utf8("abc\xE2\x98"));  // truncated
    CHECK_FALSE(is_valid_utf8("\xE2\x28\xA1")); // bad continuation
    CHECK_FALSE(is_valid_utf8("\xF0\x9F\x98"));
}

TEST_CASE("append_uint and append_fixed3", "[json]") {
    std::string out;
    append_uint(out, 0);
    CHECK(out == "0");
    out.clear();
    append_uint(out, 1234567890);
    CHECK(out == "1234567890");
    out.clear();
    append_uint(out, UINT64_MAX);
    CHECK(out == "18446744073709551615");

    auto fixed3 = [](double v) {
        std::string s;
        append_fixed3(s, v);
        return s;
    };
    auto duration = [](std::int64_t ns) {
        std::string s;
        append_duration_ms(s, ns);
        return s;
    };
    CHECK(duration(0) == "0.000");
    CHECK(duration(499) == "0.000");
    CHECK(duration(500) == "0.001");
    CHECK(duration(1'234'000) == "1.234");
    CHECK(duration(1'234'567) == "1.235");
    CHECK(duration(42'000'000'000) == "42000.000");
    CHECK(duration(-5) == "0.000");
    CHECK(fixed3(0) == "0.000");
    CHECK(fixed3(1.234) == "1.234");
    CHECK(fixed3(1.2344) == "1.234");
    CHECK(fixed3(1.2346) == "1.235");
    CHECK(fixed3(42) == "42.000");
    CHECK(fixed3(123456.5) == "123456.500");
    CHECK(fixed3(-2.5) == "-2.500");
    CHECK(fixed3(std::numeric_limits<double>::infinity()) == "null");
    CHECK(fixed3(std::numeric_limits<double>::quiet_NaN()) == "null");
    // Huge values still produce valid JSON numbers.
    const auto big = fixed3(1e300);
    CHECK_NOTHROW(json::parse(big));
}

// ==== tool_result ==========================================================================

namespace {
json result_json(const tool_result& r) {
    std::string out;
    append_tool_result(out, r);
    return json::parse(out);
}
tool_result normalize(std::string_view raw) {
    simdjson::dom::parser parser;
    return normalize_json(parser, raw);
}
} // namespace

TEST_CASE("tool_result: success and failure encode", "[result]") {
    CHECK(result_json(tool_result::success(R"("hi")")) == json{{"ok", true}, {"content", "hi"}});
    CHECK(result_json(tool_result::success("")) == json{{"ok", true}});
    auto ok = tool_result::success("null");
    CHECK(ok.ok);
    CHECK_FALSE(ok.code());
    CHECK(result_json(ok) == json{{"ok", true}, {"content", nullptr}});

    auto fail = tool_result::failure(error_code::permission_denied, "no \"way\"");
    CHECK_FALSE(fail.ok);
    REQUIRE(fail.code());
    CHECK(*fail.code() == error_code::permission_denied);
    CHECK(result_json(fail) == json::parse(R"({"ok":false,
        "error":{"code":"PERMISSION_DENIED","message":"no \"way\""}})"));

    tool_result full;
    full.ok = true;
    full.content_json = "[1]";
    full.meta_json = R"({"m":1})";
    full.diagnostics_json = R"([{"level":"info","message":"x"}])";
    CHECK(result_json(full) == json::parse(R"({"ok":true,"content":[1],"meta":{"m":1},
        "diagnostics":[{"level":"info","message":"x"}]})"));
}

TEST_CASE("tool_result: error codes to and from strings", "[result]") {
    const std::vector<std::pair<error_code, std::string_view>> all = {
        {error_code::unknown_tool, "UNKNOWN_TOOL"},
        {error_code::validation_error, "VALIDATION_ERROR"},
        {error_code::permission_denied, "PERMISSION_DENIED"},
        {error_code::timeout, "TIMEOUT"},
        {error_code::tool_failed, "TOOL_FAILED"},
        {error_code::runtime_shutting_down, "RUNTIME_SHUTTING_DOWN"},
        {error_code::cancelled, "CANCELLED"},
        {error_code::protocol_error, "PROTOCOL_ERROR"},
    };
    for (const auto& [code, name] : all) {
        CAPTURE(name);
        CHECK(to_string(code) == name);
        auto back = error_code_from_string(name);
        REQUIRE(back);
        CHECK(*back == code);
    }
    CHECK_FALSE(error_code_from_string(""));
    CHECK_FALSE(error_code_from_string("timeout"));
    CHECK_FALSE(error_code_from_string("NOT_A_CODE"));
}

TEST_CASE("normalize_json: raw values become {ok:true, content}", "[result]") {
    for (const std::string raw : {"42", "\"text\"", "null", "true", "[1,2,3]", R"({"a":1})",
                                  R"({"ok":"yes"})", R"({"ok":1})", R"({"result":5})", "{}"}) {
        CAPTURE(raw);
        auto r = normalize(raw);
        CHECK(r.ok);
        CHECK_FALSE(r.error);
        CHECK(json::parse(r.content_json) == json::parse(raw));
        CHECK(r.meta_json.empty());
        CHECK(r.diagnostics_json.empty());
    }
    // Content is minified.
    CHECK(normalize("  { \"a\" : [ 1 , 2 ] }  ").content_json == R"({"a":[1,2]})");
}

TEST_CASE("normalize_json: a ToolResult passes through", "[result]") {
    auto r = normalize(R"({"ok":true,"content":{"x":[1]},"meta":{"took":3},)"
                       R"("diagnostics":[{"level":"warn","message":"careful"}]})");
    CHECK(r.ok);
    CHECK_FALSE(r.error);
    CHECK(json::parse(r.content_json) == json::parse(R"({"x":[1]})"));
    CHECK(json::parse(r.meta_json) == json{{"took", 3}});
    CHECK(json::parse(r.diagnostics_json) ==
          json::parse(R"([{"level":"warn","message":"careful"}])"));

    r = normalize(R"({"ok":true})");
    CHECK(r.ok);
    CHECK(r.content_json.empty());

    r = normalize(R"({"ok":false,"error":{"code":"PERMISSION_DENIED","message":"nope",)"
                  R"("details":{"why":1}}})");
    CHECK_FALSE(r.ok);
    REQUIRE(r.error);
    CHECK(r.error->code == error_code::permission_denied);
    CHECK(r.error->message == "nope");
    CHECK(json::parse(r.error->details_json) == json{{"why", 1}});

    // Round trip: encoding the normalized result gives back the same object.
    const std::string in = R"({"ok":false,"content":1,"error":{"code":"TIMEOUT","message":"m"}})";
    CHECK(result_json(normalize(in)) == json::parse(in));
}

TEST_CASE("normalize_json: ok plus an unrelated key is not a ToolResult", "[result]") {
    auto r = normalize(R"({"ok":true,"value":5})");
    CHECK(r.ok);
    CHECK(json::parse(r.content_json) == json{{"ok", true}, {"value", 5}});

    r = normalize(R"({"ok":false,"reason":"x"})");
    CHECK(r.ok);
    CHECK_FALSE(r.error);
    CHECK(json::parse(r.content_json) == json{{"ok", false}, {"reason", "x"}});

    // Only error/content/meta/diagnostics but no `ok`: plain content.
    r = normalize(R"({"content":1,"error":{"code":"TIMEOUT"}})");
    CHECK(r.ok);
    CHECK_FALSE(r.error);
}

TEST_CASE("normalize_json: ok:false without a usable error is TOOL_FAILED", "[result]") {
    for (const std::string raw : {R"({"ok":false})", R"({"ok":false,"error":"text"})",
                                  R"({"ok":false,"error":null})", R"({"ok":false,"error":{}})"}) {
        CAPTURE(raw);
        auto r = normalize(raw);
        CHECK_FALSE(r.ok);
        REQUIRE(r.error);
        CHECK(r.error->code == error_code::tool_failed);
        CHECK_FALSE(r.error->message.empty());
        // Always encodes to valid JSON.
        CHECK_NOTHROW(result_json(r));
    }
}

TEST_CASE("normalize_json: an unknown error code becomes TOOL_FAILED with the code in details",
          "[result]") {
    auto r = normalize(R"({"ok":false,"error":{"code":"ENOENT","message":"no such file"}})");
    CHECK_FALSE(r.ok);
    REQUIRE(r.error);
    CHECK(r.error->code == error_code::tool_failed);
    CHECK(r.error->message == "no such file");
    CHECK(json::parse(r.error->details_json) == json{{"toolCode", "ENOENT"}});
    CHECK(result_json(r)["error"]["details"]["toolCode"] == "ENOENT");

    // A code needing escaping stays valid JSON.
    r = normalize(R"({"ok":false,"error":{"code":"a\"b","message":"m"}})");
    REQUIRE(r.error);
    CHECK(json::parse(r.error->details_json) == json{{"toolCode", "a\"b"}});
}

TEST_CASE("normalize_json: invalid JSON is TOOL_FAILED", "[result]") {
    for (const std::string raw : {"", "{", "nope", "{\"ok\":true,}", "[1,2"}) {
        CAPTURE(raw);
        auto r = normalize(raw);
        CHECK_FALSE(r.ok);
        REQUIRE(r.error);
        CHECK(r.error->code == error_code::tool_failed);
    }
}

TEST_CASE("normalize_json: the parser is reusable across calls", "[result]") {
    simdjson::dom::parser parser;
    auto a = normalize_json(parser, R"({"ok":true,"content":"first"})");
    auto b = normalize_json(parser, "not json");
    auto c = normalize_json(parser, R"([3])");
    CHECK(a.content_json == R"("first")");
    CHECK_FALSE(b.ok);
    CHECK(c.content_json == "[3]");
}

TEST_CASE("line_framer: a long frame grows the buffer geometrically, not by a chunk per read",
          "[framing][hardening]") {
    // Issue 11, defect 6: growing by one read chunk per read copied the whole partial frame
    // each time (quadratic: an 8 MiB frame in 16 KiB reads copied ~2 GiB).
    const std::size_t chunk = 16 * 1024;
    line_framer f(32 * 1024 * 1024, chunk);
    const std::string frame = std::string(32 * 1024 * 1024 - 10, 'a') + "\n";
    auto events = feed(f, frame, chunk);
    REQUIRE(events.size() == 1);
    CHECK(events[0].status == line_framer::status::frame);
    CHECK(events[0].line.size() == frame.size() - 1);
    // 16 KiB -> 32 MiB by doubling is 11 steps; allow a few more, never one per read (2048).
    CHECK(f.growths() <= 16);
    CHECK(f.bytes_copied() <= 2 * frame.size());
}

TEST_CASE("suggest: edit distance and the closest names for did-you-mean", "[suggest]") {
    using meith::protocol::closest_names;
    using meith::protocol::edit_distance;
    CHECK(edit_distance("", "") == 0);
    CHECK(edit_distance("kitten", "sitting") == 3);
    CHECK(edit_distance("stauts", "status") == 2);
    CHECK(edit_distance("abc", "") == 3);
    const std::vector<std::string> names{"status", "sources", "stop", "read_file", "echo"};
    CHECK(closest_names("stauts", names) == std::vector<std::string>{"status"});
    CHECK(closest_names("file", names) == std::vector<std::string>{"read_file"}); // a part
    CHECK(closest_names("echo", names).empty());                                  // itself
    CHECK(closest_names("zzzzzzzz", names).empty());
    CHECK(closest_names("sto", names, 1) == std::vector<std::string>{"stop"});
}

TEST_CASE("json_members writes an object's members with commas, escapes and nesting") {
    using meith::protocol::json_members;
    std::string out = "{";
    json_members m(out);
    m.string("a", "x\"y").number("n", 42).boolean("t", true).null("z");
    m.string_or_null("s", std::nullopt).string_or_null("s2", std::string_view("v"));
    m.key("nested").push_back('{');
    m.raw("raw", "[1,2]").string("tab", "\t");
    out += "}}";
    CHECK(out == R"({"a":"x\"y","n":42,"t":true,"z":null,"s":null,"s2":"v",)"
                 R"("nested":{"raw":[1,2],"tab":"\t"}})");
    CHECK(nlohmann::json::parse(out)["nested"]["raw"].size() == 2);

    // Members appended to a string that already ends with a value get their comma.
    std::string fields = R"("sessionId":"s_1")";
    json_members(fields).number("offset", 5);
    CHECK(fields == R"("sessionId":"s_1","offset":5)");
    std::string empty;
    json_members(empty).string("only", "one");
    CHECK(empty == R"("only":"one")");
}

} // namespace unit_protocol_test
