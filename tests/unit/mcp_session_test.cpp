// mcp_session's fast path (bridge/fast_path.cpp) against its general path: the same MCP
// messages in the plain shape and in shapes only the general path takes must give the same
// frames to meithd and the same answers to the client. A recording link stands in for both.
#include "../support/recording_link.hpp"
#include "bridge/mcp_session.hpp"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

using meith::bridge::json;
using meith::bridge::mcp_session;

namespace {

struct session {
    meith::test::recording_link link;
    mcp_session s{meith::bridge::settings{}, link};

    void client(const std::string& line) {
        const std::string text = line + "\n";
        auto buf = s.input_buffer();
        REQUIRE(buf.size() >= text.size());
        std::copy(text.begin(), text.end(), buf.begin());
        s.input_commit(text.size());
        s.pump();
    }
    /// The last frame sent, without its requestId (which differs from call to call).
    json last_frame() {
        REQUIRE(!link.frames.empty());
        json f = json::parse(link.frames.back());
        f.erase("requestId");
        return f;
    }
    std::string last_rid() {
        return json::parse(link.frames.back())["requestId"].get<std::string>();
    }
    json frame(std::size_t i) const { return json::parse(link.frames.at(i)); }
    json answer(std::size_t i) const {
        CHECK(link.not_one_line == 0);
        return json::parse(link.answers.at(i));
    }
    /// meithd's tool_result for the last call, with `result` (a ToolResult) as text; written
    /// with "result" before "requestId" it takes the general path.
    void result(const std::string& result_json, bool result_first = false) {
        const std::string rid = R"("requestId":)" + json(last_rid()).dump();
        const std::string res = R"("result":)" + result_json;
        s.on_daemon_frame(R"({"type":"tool_result",)" +
                          (result_first ? res + "," + rid : rid + "," + res) + "}");
    }
};

enum class path { fast, general };

/// The frame and the answer one client line and one ToolResult give, the call and its answer
/// each checked to take the path named.
std::pair<json, json> round_trip(const std::string& line, path call, const std::string& result_json,
                                 path answer) {
    session t;
    t.client(line);
    CHECK(t.s.fast_calls() == (call == path::fast ? 1u : 0u));
    json frame = t.last_frame();
    t.result(result_json, answer == path::general);
    CHECK(t.s.fast_answers() == (answer == path::fast ? 1u : 0u));
    REQUIRE(t.link.answers.size() == 1);
    return {frame, t.answer(0)};
}

} // namespace

TEST_CASE("mcp_session: a plain tools/call and its text answer, fast, are as the general path "
          "gives them",
          "[bridge][mcp]") {
    const std::string plain =
        R"({"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"s":"hi","n":[1,2.5,-3]}}})";
    // An extra member and a repeated one take the general path (which reads the last "id").
    const std::string general =
        R"({"jsonrpc":"2.0","id":1,"id":7,"method":"tools/call","params":{"name":"echo","arguments":{"s":"hi","n":[1,2.5,-3]}},"x":1})";
    const std::string text = R"({"ok":true,"content":"hello \"world\"\n"})";
    const auto [fast_frame, fast_answer] = round_trip(plain, path::fast, text, path::fast);
    const auto [general_frame, general_answer] =
        round_trip(general, path::general, text, path::general);
    CHECK(fast_frame == general_frame);
    CHECK(fast_frame["toolName"] == "echo");
    CHECK(fast_frame["arguments"] == json::parse(R"({"s":"hi","n":[1,2.5,-3]})"));
    CHECK(fast_answer == general_answer);
    CHECK(
        fast_answer ==
        json::parse(
            R"({"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"hello \"world\"\n"}]}})"));
}

TEST_CASE("mcp_session: an MCP server's CallToolResult passes through the fast path as meithd "
          "sent it",
          "[bridge][mcp]") {
    const std::string mcp =
        R"({"ok":true,"content":{"content":[{"type":"text","text":"x"}],"isError":false,"_meta":{"k":"é\u00e9"}}})";
    const auto [frame, answer] = round_trip(
        R"({"jsonrpc":"2.0","id":"a\"b","method":"tools/call","params":{"name":"ev_echo"}})",
        path::fast, mcp, path::fast);
    CHECK(frame["arguments"] == json::object());
    CHECK(answer["id"] == "a\"b");
    CHECK(answer["result"] ==
          json::parse(
              R"({"content":[{"type":"text","text":"x"}],"isError":false,"_meta":{"k":"éé"}})"));
    const auto [g_frame, g_answer] = round_trip(
        R"({"params":{"name":"ev_echo"},"method":"tools/call","id":"a\"b","jsonrpc":"2.0","z":0})",
        path::general, mcp, path::general);
    CHECK(g_frame == frame);
    CHECK(g_answer == answer);
}

TEST_CASE("mcp_session: answers the fast path does not take are the general path's",
          "[bridge][mcp]") {
    const std::string call =
        R"({"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"t","arguments":{}}})";
    SECTION("an object that is no CallToolResult: text and structuredContent, either path") {
        const std::string object = R"({"ok":true,"content":{"a":1,"b":["x\"y",null,true]}})";
        const auto [frame, answer] = round_trip(call, path::fast, object, path::fast);
        const auto [g_frame, g_answer] = round_trip(call, path::fast, object, path::general);
        CHECK(answer == g_answer);
        CHECK(answer["result"] ==
              json::parse(
                  R"({"content":[{"type":"text","text":"{\"a\":1,\"b\":[\"x\\\"y\",null,true]}"}],
                              "structuredContent":{"a":1,"b":["x\"y",null,true]}})"));
    }
    SECTION("a failure: an isError result naming the code") {
        const auto [frame, answer] = round_trip(
            call, path::fast, R"({"ok":false,"error":{"code":"TOOL_FAILED","message":"it broke"}})",
            path::general);
        CHECK(answer["result"]["isError"] == true);
        CHECK(answer["result"]["content"][0]["text"] == "TOOL_FAILED: it broke");
    }
    SECTION("a number") {
        const auto [frame, answer] =
            round_trip(call, path::fast, R"({"ok":true,"content":42})", path::general);
        CHECK(answer["result"]["content"][0]["text"] == "42");
    }
}

TEST_CASE("mcp_session: a call the fast path sent can be cancelled, and its id reused after its "
          "answer",
          "[bridge][mcp]") {
    session t;
    t.client(R"({"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"slow"}})");
    const std::string rid = t.last_rid();
    // The same id again while it is in flight: refused by the general path.
    t.client(R"({"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"slow"}})");
    REQUIRE(t.link.answers.size() == 1);
    CHECK(t.answer(0)["error"]["code"] == -32600);
    t.client(R"({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":9}})");
    REQUIRE(t.link.frames.size() == 2);
    CHECK(t.frame(1)["type"] == "cancel_tool_call");
    CHECK(t.frame(1)["requestId"] == rid);
    // The cancelled call's answer is not sent (MCP: cancelled requests get no response).
    t.s.on_daemon_frame(R"({"type":"tool_result","requestId":")" + rid +
                        R"(","result":{"ok":true,"content":"late"}})");
    CHECK(t.link.answers.size() == 1);
    // Id 9 is free again.
    t.client(R"({"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"slow"}})");
    CHECK(t.link.frames.size() == 3);
    t.result(R"({"ok":true,"content":"done"})");
    REQUIRE(t.link.answers.size() == 2);
    CHECK(t.answer(1)["result"]["content"][0]["text"] == "done");
}

TEST_CASE("mcp_session: JSON with a member named twice takes the general path, which keeps the "
          "last",
          "[bridge][mcp]") {
    // Arguments: meithd, its hooks and the tool must not see a value the general path drops.
    const auto [frame, answer] = round_trip(
        R"({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{"a":[{"p":"/ok","p":"/etc/x"}]}}})",
        path::general, R"({"ok":true,"content":"x"})", path::fast);
    CHECK(frame["arguments"] == json::parse(R"({"a":[{"p":"/etc/x"}]})"));
    // A result whose `content` is named twice: its last decides what it is (here: no
    // CallToolResult, so text and structuredContent).
    const auto [f2, a2] = round_trip(
        R"({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"t"}})", path::fast,
        R"({"ok":true,"content":{"content":[],"content":"x"}})", path::general);
    CHECK(a2["result"]["structuredContent"] == json::parse(R"({"content":"x"})"));
}
