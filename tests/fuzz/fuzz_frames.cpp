// fuzz_frames: client frame decoding and server frame encoding (protocol/frames.hpp,
// protocol/json_writer.hpp).
//
// The input is decoded as one client frame (padded as the framer pads it) and scanned as the
// prefix of an oversized frame; then the same bytes, cut into strings, go through every
// encoder. Invariants: the decoder's promises (usable requestId, tool_call fields) hold; every
// encoded frame is one line of valid JSON; JSON strings round-trip; is_valid_utf8 agrees with
// simdjson's validator.
#include "fuzz_common.hpp"

#include "protocol/frames.hpp"
#include "protocol/framing.hpp"
#include "protocol/json_writer.hpp"
#include "protocol/server_frames.hpp"
#include "protocol/tool_result.hpp"

#include <fuzzer/FuzzedDataProvider.h>

#include <optional>
#include <string>

using meith::fuzz::check;
using meith::fuzz::must_be_frame;
using meith::fuzz::must_parse;
namespace proto = meith::protocol;

namespace {

/// `text` as minified JSON when it is valid JSON, else `fallback`.
std::string json_or(std::string_view text, std::string_view fallback) {
    static simdjson::dom::parser parser;
    simdjson::dom::element el;
    if (parser.parse(text.data(), text.size()).get(el) != simdjson::SUCCESS)
        return std::string(fallback);
    return simdjson::minify(el);
}

/// The members of a JSON object (`"a":1,"b":2`) from `text`, or `"ok":true`.
std::string members_or_default(std::string_view text) {
    std::string obj = json_or(text, "{}");
    if (obj.size() < 3 || obj.front() != '{') return R"("ok":true)";
    return obj.substr(1, obj.size() - 2);
}

void check_json_string(std::string_view s) {
    std::string out;
    proto::append_json_string(out, s);
    const auto root = must_parse(out, "append_json_string wrote invalid JSON");
    std::string_view back;
    check(root.get_string().get(back) == simdjson::SUCCESS, "append_json_string: not a string",
          out);
    // Valid UTF-8 comes back unchanged; invalid bytes become U+FFFD.
    if (proto::is_valid_utf8(s)) check(back == s, "append_json_string does not round-trip", s);
}

void check_decoded(const proto::client_frame& f, std::string_view line) {
    if (f.request_id) {
        check(!f.request_id->empty(), "decoded an empty requestId", line);
        check(proto::utf8_length(*f.request_id) <= proto::max_request_id_chars,
              "decoded a requestId over 128 characters", line);
    }
    if (f.error) check(!f.error->empty(), "empty PROTOCOL_ERROR message", line);
    if (!f.error && f.type == proto::frame_type::tool_call) {
        check(f.request_id.has_value(), "tool_call accepted without requestId", line);
        check(std::holds_alternative<proto::tool_call_frame>(f.body),
              "tool_call accepted without its members", line);
        if (!f.as<proto::tool_call_frame>().call_error) {
            check(!f.tool_name.empty(), "tool_call accepted without toolName", line);
            // An object, or a string for a text-payload tool (docs/protocol.md §13).
            check(f.has_arguments && (f.arguments.is_object() || f.arguments.is_string()),
                  "tool_call accepted without an arguments object or string", line);
            if (f.as<proto::tool_call_frame>().timeout_ms)
                check(*f.as<proto::tool_call_frame>().timeout_ms > 0,
                      "tool_call accepted timeoutMs 0", line);
        }
    }
    if (!f.error && f.type == proto::frame_type::restart_source) {
        const auto* restart = std::get_if<proto::restart_source_frame>(&f.body);
        check(restart && !restart->source_name.empty(), "restart_source accepted without a name",
              line);
    }
    if (!f.error && f.type == proto::frame_type::check_policy)
        check(!f.tool_name.empty(), "check_policy accepted without toolName", line);
}

/// Replies built from what the decoder returned, as the connection builds them.
void encode_replies(const proto::client_frame& f) {
    std::string out;
    if (f.error) {
        proto::append_error_frame(out, f.request_id, *f.error);
        must_be_frame(out, "error frame for a decoded frame");
    }
    const auto* call = std::get_if<proto::tool_call_frame>(&f.body);
    if (call && call->call_error && f.request_id) {
        out.clear();
        proto::append_tool_result_frame(
            out, *f.request_id,
            proto::tool_result::failure(proto::error_code::validation_error, *call->call_error));
        must_be_frame(out, "VALIDATION_ERROR tool_result for a decoded frame");
    }
    if (f.has_arguments && f.request_id) {
        // echo: the arguments come back as the content, and as an event.
        out.clear();
        const std::string args = simdjson::minify(f.arguments);
        proto::append_tool_result_frame(out, *f.request_id, proto::tool_result::success(args));
        must_be_frame(out, "echo tool_result for a decoded frame");
        out.clear();
        proto::append_tool_event(out, *f.request_id, args);
        must_be_frame(out, "tool_event for a decoded frame");
    }
    if (f.caller_claim) {
        out.clear();
        proto::append_hello_result(out, f.request_id, "s_0123", *f.caller_claim, "0.1.0");
        must_be_frame(out, "hello_result for a decoded frame");
    }
    const auto* restart = std::get_if<proto::restart_source_frame>(&f.body);
    if (restart && !restart->source_name.empty()) {
        out.clear();
        proto::append_source_restarted(out, f.request_id, restart->source_name);
        must_be_frame(out, "source_restarted for a decoded frame");
    }
}

/// Every encoder with strings cut from the input (any bytes, including invalid UTF-8).
void encode_fuzzed(const std::uint8_t* data, std::size_t size) {
    FuzzedDataProvider in(data, size);
    const bool has_id = in.ConsumeBool();
    const std::string id = in.ConsumeRandomLengthString(300);
    const std::optional<std::string_view> opt_id =
        has_id ? std::optional<std::string_view>(id) : std::nullopt;
    const std::string a = in.ConsumeRandomLengthString(2000);
    const std::string b = in.ConsumeRandomLengthString(2000);
    const std::string c = in.ConsumeRandomLengthString(2000);
    const auto code = static_cast<proto::error_code>(in.ConsumeIntegralInRange<int>(0, 7));
    const std::uint64_t n = in.ConsumeIntegral<std::uint64_t>();
    const double d = in.ConsumeFloatingPoint<double>();
    const std::int64_t ns = in.ConsumeIntegral<std::int64_t>();
    const std::string rest = in.ConsumeRemainingBytesAsString();

    for (std::string_view s : {std::string_view(id), std::string_view(a), std::string_view(b),
                               std::string_view(c), std::string_view(rest)}) {
        check_json_string(s);
        check(proto::is_valid_utf8(s) == simdjson::validate_utf8(s.data(), s.size()),
              "is_valid_utf8 disagrees with simdjson::validate_utf8", s);
        check(proto::utf8_length(s) <= s.size(), "utf8_length over the byte count", s);
    }

    std::string out;
    proto::append_error_frame(out, opt_id, a);
    must_be_frame(out, "append_error_frame");
    out.clear();
    proto::append_hello_result(out, opt_id, a, b, c);
    must_be_frame(out, "append_hello_result");
    out.clear();
    proto::append_source_restarted(out, opt_id, a);
    must_be_frame(out, "append_source_restarted");
    out.clear();
    proto::append_tool_event(out, id, json_or(a, R"({"type":"part","payload":null})"));
    must_be_frame(out, "append_tool_event");
    out.clear();
    proto::append_sources_list(out, opt_id, json_or(b, "[]"));
    must_be_frame(out, "append_sources_list");
    out.clear();
    proto::append_config_reloaded(out, opt_id, members_or_default(c));
    must_be_frame(out, "append_config_reloaded");
    out.clear();
    proto::append_policy_decision(out, opt_id, members_or_default(a));
    must_be_frame(out, "append_policy_decision");
    out.clear();
    proto::append_tools_list_head(out, opt_id);
    out += json_or(b, R"({"name":"echo"})");
    out += "]}\n";
    must_be_frame(out, "append_tools_list_head + one descriptor");

    proto::tool_result r;
    r.ok = (n & 1) != 0;
    r.content_json = (n & 2) ? json_or(a, "null") : std::string();
    r.meta_json = (n & 4) ? json_or(b, "{}") : std::string();
    r.diagnostics_json = (n & 8) ? json_or(c, "[]") : std::string();
    if (!r.ok || (n & 16))
        r.error = proto::tool_error{code, rest, (n & 32) ? json_or(c, "{}") : std::string()};
    out.clear();
    proto::append_tool_result_frame(out, id, r);
    const auto frame = must_be_frame(out, "append_tool_result_frame");
    simdjson::dom::object result;
    check(frame["result"].get_object().get(result) == simdjson::SUCCESS,
          "tool_result frame without a result object", out);
    bool ok = false;
    check(result["ok"].get_bool().get(ok) == simdjson::SUCCESS && ok == r.ok,
          "tool_result frame: wrong ok", out);
    std::string_view code_name;
    if (r.error)
        check(result["error"]["code"].get_string().get(code_name) == simdjson::SUCCESS &&
                  code_name == proto::to_string(code),
              "tool_result frame: wrong error code", out);

    // Numbers.
    out.clear();
    proto::append_uint(out, n);
    std::uint64_t back = 0;
    check(must_parse(out, "append_uint").get_uint64().get(back) == simdjson::SUCCESS && back == n,
          "append_uint does not round-trip", out);
    out.clear();
    proto::append_fixed3(out, d);
    must_parse(out, "append_fixed3 wrote invalid JSON");
    out.clear();
    proto::append_duration_ms(out, ns);
    must_parse(out, "append_duration_ms wrote invalid JSON");
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    // Decoding: the line as the framer hands it over (frame_padding readable bytes after it).
    const meith::fuzz::padded_copy line(data, size, proto::frame_padding);
    proto::frame_decoder decoder;
    const proto::client_frame f = decoder.decode(line.view());
    check_decoded(f, line.view());
    // Copied: the view points into the decoder's parser, which shrink_if_large may replace.
    const std::optional<std::string> decoded_id =
        f.request_id ? std::optional<std::string>(*f.request_id) : std::nullopt;
    encode_replies(f);
    proto::frame_decoder::shrink_if_large(1 << 20);

    // A frame too large to parse: its top-level requestId and type are scanned as it passes,
    // in two pieces split anywhere. Where the decoder read a requestId from a frame without
    // escapes, the scan finds the same one (both take the last of duplicate keys).
    proto::top_level_scanner scan({"requestId", "type"},
                                  proto::top_level_scanner::duplicates::last_wins);
    const std::size_t split = size == 0 ? 0 : data[0] % (size + 1);
    scan.feed(line.view().substr(0, split));
    scan.feed(line.view().substr(split));
    const auto& rid = scan.get(0);
    using kind = proto::top_level_scanner::value::kind;
    check(rid.text.size() <= proto::top_level_scanner::max_value_bytes,
          "the scanner captured more than its bound", line.view());
    const auto id = rid.k == kind::string ? proto::usable_request_id(rid.text) : std::nullopt;
    if (id) {
        check(id->find('\\') == std::string_view::npos && id->find('"') == std::string_view::npos,
              "usable_request_id returned an id with an escape or quote", line.view());
        check(proto::is_valid_utf8(*id) && proto::utf8_length(*id) <= proto::max_request_id_chars,
              "usable_request_id returned an unusable id", line.view());
        std::string out;
        proto::append_error_frame(out, *id, "frame too large");
        must_be_frame(out, "error frame for an oversized frame");
    }
    if (decoded_id && line.view().find('\\') == std::string_view::npos)
        check(id && *id == *decoded_id, "the scanner missed the requestId the decoder read",
              line.view());

    encode_fuzzed(data, size);
    return 0;
}
