// fuzz_mcp_session: what an MCP client sends `meith mcp` (bridge/mcp_session.hpp), and the
// answers meithd gives it, through two sessions side by side — one with the fast path of
// tools/call (bridge/fast_path.cpp), one with the general path only.
//
// The input is a client line and a ToolResult, split at the first NUL byte. The line goes to
// both sessions; every tool_call frame they send is answered with the ToolResult as meithd
// writes it (compact: simdjson's minify of it; a ToolResult that is no JSON is not sent).
// Invariants: neither session crashes or throws; both send the same frames (but for the
// requestId, which is each session's own) and write the same answers to the client, each one
// line of valid JSON — a result's text that is JSON compared as the value it reads.
#include "fuzz_common.hpp"

#include "../support/recording_link.hpp"
#include "bridge/mcp_session.hpp"

#include <algorithm>
#include <string>
#include <vector>

using meith::bridge::json;
using meith::fuzz::check;

namespace {

struct side {
    explicit side(bool fast) : s(settings(fast), link) {}
    static meith::bridge::settings settings(bool fast) {
        meith::bridge::settings st;
        st.fast_path = fast;
        return st;
    }
    void client(std::string_view line) {
        const std::string text = std::string(line) + "\n";
        std::size_t at = 0;
        while (at < text.size()) {
            auto buf = s.input_buffer();
            const std::size_t n = std::min(buf.size(), text.size() - at);
            std::copy_n(text.data() + at, n, buf.data());
            s.input_commit(n);
            at += n;
            s.pump();
        }
    }
    meith::test::recording_link link;
    meith::bridge::mcp_session s;
};

/// Members of every object in `e`, counted by simdjson (which keeps a member named twice).
std::size_t members(simdjson::dom::element e) {
    std::size_t n = 0;
    if (e.is_array()) {
        const simdjson::dom::array items = e.get_array().value_unsafe();
        for (simdjson::dom::element item : items)
            n += members(item);
    } else if (e.is_object()) {
        const simdjson::dom::object obj = e.get_object().value_unsafe();
        for (auto [key, value] : obj)
            n += 1 + members(value);
    }
    return n;
}

/// The same counted by nlohmann (which keeps one of them).
std::size_t members(const json& j) {
    std::size_t n = 0;
    if (j.is_array() || j.is_object())
        for (const auto& item : j)
            n += (j.is_object() ? 1 : 0) + members(item);
    return n;
}

/// Checks that `text` repeats no member anywhere: the general path's frames and answers never
/// do (nlohmann keeps one of each), so neither may the fast path's.
void check_no_repeats(const std::string& text, const char* what) {
    simdjson::dom::parser parser;
    simdjson::dom::element e;
    check(parser.parse(text).get(e) == simdjson::SUCCESS, "not JSON for simdjson", text);
    const json j = json::parse(text, nullptr, false);
    check(!j.is_discarded(), "not JSON for nlohmann", text);
    check(members(e) == members(j), what, text);
}

json parse(std::string_view text, const char* what) {
    json j = json::parse(text, nullptr, false);
    check(!j.is_discarded(), what, text);
    return j;
}

/// A frame without its requestId.
json frame_shape(const std::string& frame) {
    json f = parse(frame, "a frame is not JSON");
    if (f.is_object()) f.erase("requestId");
    return f;
}

/// An answer with a JSON text content read as its value.
json answer_value(const std::string& answer) {
    json a = parse(answer, "an answer is not JSON");
    if (!a.is_object() || !a.contains("result") || !a["result"].is_object()) return a;
    json& r = a["result"];
    if (r.contains("structuredContent") && r.contains("content") && r["content"].is_array() &&
        !r["content"].empty() && r["content"][0].contains("text") &&
        r["content"][0]["text"].is_string())
        r["content"][0]["text"] = parse(r["content"][0]["text"].get<std::string>(),
                                        "a structured result's text is not JSON");
    return a;
}

void compare(const side& fast, const side& general) {
    for (const auto& f : fast.link.frames)
        check_no_repeats(f, "a frame repeats a member");
    for (const auto& a : fast.link.answers)
        check_no_repeats(a, "an answer repeats a member");
    check(fast.link.not_one_line == 0 && general.link.not_one_line == 0,
          "an answer is not one line");
    check(fast.link.frames.size() == general.link.frames.size(), "frame counts differ");
    for (std::size_t i = 0; i < fast.link.frames.size(); ++i)
        check(frame_shape(fast.link.frames[i]) == frame_shape(general.link.frames[i]),
              "frames differ", fast.link.frames[i]);
    check(fast.link.answers.size() == general.link.answers.size(), "answer counts differ");
    for (std::size_t i = 0; i < fast.link.answers.size(); ++i)
        check(answer_value(fast.link.answers[i]) == answer_value(general.link.answers[i]),
              "answers differ", fast.link.answers[i]);
}

/// Answers every tool_call frame sent since `from` with `result` (ToolResult JSON text).
void answer_calls(side& s, std::size_t from, std::string_view result) {
    const std::size_t n = s.link.frames.size();
    for (std::size_t i = from; i < n; ++i) {
        const json f = json::parse(s.link.frames[i], nullptr, false);
        if (!f.is_object() || f.value("type", "") != "tool_call") continue;
        s.s.on_daemon_frame(R"({"type":"tool_result","requestId":)" + f["requestId"].dump() +
                            R"(,"result":)" + std::string(result) + "}");
    }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view input(reinterpret_cast<const char*>(data), size);
    const auto nul = input.find('\0');
    std::string_view line = input.substr(0, nul);
    const std::string_view result = nul == std::string_view::npos ? "" : input.substr(nul + 1);
    if (line.find('\n') != std::string_view::npos) line = line.substr(0, line.find('\n'));
    // meithd's ToolResult is compact JSON (simdjson's minify); inputs it cannot be are skipped.
    std::string compact;
    {
        simdjson::dom::parser parser;
        simdjson::dom::element e;
        if (parser.parse(result.data(), result.size()).get(e) == simdjson::SUCCESS)
            compact = simdjson::minify(e);
    }
    side fast(true), general(false);
    fast.client(line);
    general.client(line);
    compare(fast, general);
    if (!compact.empty()) {
        answer_calls(fast, 0, compact);
        answer_calls(general, 0, compact);
        compare(fast, general);
    }
    return 0;
}
