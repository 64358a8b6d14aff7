// fuzz_rpc_reply: lines from tool hosts, exec servers and server-mode hooks
// (process/rpc_peer.hpp, rpc_wire), in both dialects.
//
// The input is one line from the child, classified as rpc_peer does (parsed in place, padded)
// and scanned as a line too long to parse (its top level, in two pieces); then the input, cut into
// an id and a payload, is wrapped in the replies, events and requests a well-behaved child writes.
// Invariants: the class matches the message (garbage exactly when it is no JSON object; ids as
// id_of reads them; events and malformed lines only from tool hosts, incoming only in JSON-RPC),
// and a well-formed line is classified as what it is, and its id is recovered by the scan wherever
// it stands (also after a result holding "id" members of its own).
#include "fuzz_common.hpp"

#include "process/rpc_peer.hpp"
#include "protocol/json_writer.hpp"
#include "protocol/top_level_scan.hpp"

#include <fuzzer/FuzzedDataProvider.h>

#include <string>

using meith::fuzz::check;
using meith::process::rpc_dialect;
namespace wire = meith::process::rpc_wire;

namespace {

simdjson::dom::parser& line_parser() {
    static simdjson::dom::parser p;
    return p;
}

wire::parsed_line classify(rpc_dialect dialect, std::string_view line) {
    const meith::fuzz::padded_copy padded(reinterpret_cast<const std::uint8_t*>(line.data()),
                                          line.size());
    return wire::classify_line(line_parser(), dialect, padded.view());
}

void check_any_line(rpc_dialect dialect, std::string_view line) {
    const auto p = classify(dialect, line);
    simdjson::dom::parser reference;
    simdjson::dom::element root;
    const bool is_object =
        reference.parse(line.data(), line.size()).get(root) == simdjson::SUCCESS &&
        root.is_object();
    check(is_object == (p.kind != wire::line_kind::garbage), "garbage is not 'no JSON object'",
          line);
    if (p.kind == wire::line_kind::garbage) return;
    const bool host = dialect == rpc_dialect::tool_host;
    const auto id = wire::id_of(dialect, p.msg);
    switch (p.kind) {
    case wire::line_kind::incoming:
        check(!host && p.msg["method"].error() == simdjson::SUCCESS,
              "incoming without a method, or from a tool host", line);
        break;
    case wire::line_kind::no_id:
        check(!id, "no_id for a message with an id", line);
        break;
    case wire::line_kind::event:
        check(host && p.msg["event"].error() == simdjson::SUCCESS, "event without an event", line);
        check(id && *id == p.id, "event with another id", line);
        break;
    case wire::line_kind::malformed:
        check(host && p.msg["event"].error() != simdjson::SUCCESS && !p.msg["ok"].is_bool(),
              "malformed, but has event or ok", line);
        check(id && *id == p.id, "malformed with another id", line);
        break;
    case wire::line_kind::reply:
        check(id && *id == p.id, "reply with another id", line);
        if (host) check(p.msg["ok"].is_bool(), "a tool host reply without a boolean ok", line);
        break;
    case wire::line_kind::garbage:
        break;
    }
}

/// The id rpc_peer takes for `line` when it is too long to parse: its top-level "id", scanned
/// as the line passes in two pieces split at `split`.
std::optional<std::uint64_t> scanned_id(rpc_dialect dialect, std::string_view line,
                                        std::size_t split) {
    meith::protocol::top_level_scanner scan({"id"});
    split = std::min(split, line.size());
    scan.feed(line.substr(0, split));
    scan.feed(line.substr(split));
    return wire::id_of_scanned(dialect, scan.get(0));
}

/// Where the line parses, the scan agrees with the parser (without escapes, which the scan
/// does not decode in keys).
void check_scanned(rpc_dialect dialect, std::string_view line) {
    const auto scanned = scanned_id(dialect, line, line.size() / 2);
    const auto p = classify(dialect, line);
    if (p.kind == wire::line_kind::garbage || line.find('\\') != std::string_view::npos) return;
    const auto parsed = wire::id_of(dialect, p.msg);
    check(scanned == parsed, "the scanned id of a line is not the parsed one", line);
}

/// A line as a child writes it, and what rpc_peer must make of it.
void check_well_formed(rpc_dialect dialect, std::string_view line, wire::line_kind want,
                       std::uint64_t id) {
    const auto p = classify(dialect, line);
    check(p.kind == want, "a well-formed line classified as something else", line);
    if (want != wire::line_kind::incoming)
        check(p.id == id, "a well-formed line's id is not recovered", line);
    // Too long to parse: its top level is scanned as it passes.
    for (std::size_t split : {std::size_t{0}, line.size() / 3, std::size_t{256}}) {
        const auto scanned = scanned_id(dialect, line, split);
        check(scanned && *scanned == id, "the id of an oversized line is not recovered", line);
    }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view line(reinterpret_cast<const char*>(data), size);
    for (auto dialect : {rpc_dialect::jsonrpc, rpc_dialect::tool_host}) {
        check_any_line(dialect, line);
        check_scanned(dialect, line);
    }

    FuzzedDataProvider in(data, size);
    const auto id = in.ConsumeIntegral<std::uint64_t>();
    const std::string text = in.ConsumeRemainingBytesAsString();
    // The payload: the input's JSON value when it is one, else the input as a JSON string.
    // At most 1000 deep, so that the line around it stays within simdjson's 1024 levels.
    std::string payload;
    {
        static simdjson::dom::parser payload_parser = [] {
            simdjson::dom::parser q;
            if (q.allocate(1 << 16, 1000) != simdjson::SUCCESS) std::abort();
            return q;
        }();
        simdjson::dom::element el;
        if (payload_parser.parse(text.data(), text.size()).get(el) == simdjson::SUCCESS)
            payload = simdjson::minify(el);
        else
            meith::protocol::append_json_string(payload, text);
    }
    std::string n;
    meith::protocol::append_uint(n, id);

    // JSON-RPC: a result, an error, and the child's own request (exec servers, hooks); the
    // id also after the result, as the official MCP SDKs write it.
    check_well_formed(rpc_dialect::jsonrpc,
                      R"({"jsonrpc":"2.0","result":)" + payload + R"(,"id":)" + n + "}",
                      wire::line_kind::reply, id);
    check_well_formed(rpc_dialect::jsonrpc,
                      R"({"jsonrpc":"2.0","id":)" + n + R"(,"result":)" + payload + "}",
                      wire::line_kind::reply, id);
    check_well_formed(rpc_dialect::jsonrpc,
                      R"({"jsonrpc":"2.0","id":)" + n +
                          R"(,"error":{"code":-32602,"message":"bad","data":)" + payload + "}}",
                      wire::line_kind::reply, id);
    check_well_formed(rpc_dialect::jsonrpc,
                      R"({"jsonrpc":"2.0","id":)" + n + R"(,"method":"ping","params":)" + payload +
                          "}",
                      wire::line_kind::incoming, id);
    // Tool host: a final reply (ok true and false) and a streamed event.
    check_well_formed(rpc_dialect::tool_host,
                      R"({"v":1,"id":")" + n + R"(","ok":true,"result":{"value":)" + payload + "}}",
                      wire::line_kind::reply, id);
    check_well_formed(rpc_dialect::tool_host,
                      R"({"id":")" + n + R"(","ok":false,"error":{"type":"Error","detail":)" +
                          payload + "}}",
                      wire::line_kind::reply, id);
    check_well_formed(rpc_dialect::tool_host,
                      R"({"v":1,"id":")" + n + R"(","event":{"type":"part","payload":)" + payload +
                          "}}",
                      wire::line_kind::event, id);
    return 0;
}
