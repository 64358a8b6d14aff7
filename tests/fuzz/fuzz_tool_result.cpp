// fuzz_tool_result: ToolResult normalisation (protocol/tool_result.hpp).
//
// The input is a tool's raw answer: normalize_json (which must refuse invalid JSON with
// TOOL_FAILED and never throw), normalize_value on the parsed value, then append_tool_result
// and the tool_result frame, both re-parsed: valid JSON, the same ok, an error code of the
// eight and a message exactly when ok is false, and a ToolResult-shaped value passes through.
#include "fuzz_common.hpp"

#include "protocol/frames.hpp"
#include "protocol/server_frames.hpp"
#include "protocol/tool_result.hpp"

#include <string>

using meith::fuzz::check;
using meith::fuzz::must_be_frame;
using meith::fuzz::must_parse;
namespace proto = meith::protocol;

namespace {

void check_result(const proto::tool_result& r, std::string_view raw) {
    check(r.ok == !r.error.has_value(), "ok and error disagree", raw);
    std::string out;
    proto::append_tool_result(out, r);
    const auto root = must_parse(out, "append_tool_result wrote invalid JSON");
    simdjson::dom::object obj;
    check(root.get_object().get(obj) == simdjson::SUCCESS, "ToolResult is not an object", out);
    bool ok = false;
    check(obj["ok"].get_bool().get(ok) == simdjson::SUCCESS && ok == r.ok, "wrong ok", out);
    if (!r.ok) {
        std::string_view code, message;
        check(obj["error"]["code"].get_string().get(code) == simdjson::SUCCESS &&
                  proto::error_code_from_string(code).has_value(),
              "ok:false without one of the eight error codes", out);
        check(obj["error"]["message"].get_string().get(message) == simdjson::SUCCESS,
              "ok:false without an error message", out);
    }
    // Normalising a ToolResult again gives it back unchanged (its content may be one level
    // deeper than simdjson's default 1024 allow).
    static simdjson::dom::parser again = [] {
        simdjson::dom::parser q;
        if (q.allocate(1 << 16, 2048) != simdjson::SUCCESS) std::abort();
        return q;
    }();
    const proto::tool_result r2 = proto::normalize_json(again, out);
    std::string out2;
    proto::append_tool_result(out2, r2);
    check(out2 == out, "a normalised ToolResult does not pass through unchanged", out);

    out.clear();
    proto::append_tool_result_frame(out, "c1", r);
    must_be_frame(out, "tool_result frame");
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view raw(reinterpret_cast<const char*>(data), size);
    simdjson::dom::parser parser;
    const proto::tool_result r = proto::normalize_json(parser, raw);
    check_result(r, raw);

    simdjson::dom::element value;
    if (parser.parse(raw.data(), raw.size()).get(value) == simdjson::SUCCESS) {
        const proto::tool_result v = proto::normalize_value(value);
        std::string a, b;
        proto::append_tool_result(a, r);
        proto::append_tool_result(b, v);
        check(a == b, "normalize_json and normalize_value differ", raw);
    } else {
        check(!r.ok && r.code() == proto::error_code::tool_failed,
              "invalid JSON did not give TOOL_FAILED", raw);
    }
    return 0;
}
