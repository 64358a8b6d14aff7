// fuzz_mcp_wire: what an MCP server sends meithd (sources/mcp_wire.hpp): the `initialize`
// result, `tools/list` items, `tools/call` results and JSON-RPC errors, and progress
// notifications. The input is one JSON document from the server (any shape).
// Invariants: nothing throws or crashes; every ToolResult made from it encodes as valid JSON;
// a tool definition's inputSchema is valid JSON and its extra members make a valid object; a
// progress event, when made, is a valid JSON object; a negotiated revision is one meithd speaks;
// the 2026-07-28 envelope added to (and a listen's id taken from) any params leaves valid JSON;
// matching a URI to a template (gateway/mcp_gateway.hpp) ends on any pair of strings.
#include "fuzz_common.hpp"

#include "config/config.hpp"
#include "gateway/mcp_gateway.hpp"
#include "protocol/tool_result.hpp"
#include "sources/mcp_wire.hpp"

#include <algorithm>
#include <string>

using meith::fuzz::check;
using meith::fuzz::must_parse;
namespace mcp = meith::sources::mcp;

namespace {

void check_result(const meith::protocol::tool_result& r, const char* what) {
    std::string out;
    meith::protocol::append_tool_result(out, r);
    must_parse(out, what);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const meith::fuzz::padded_copy padded(data, size);
    static simdjson::dom::parser parser;
    simdjson::dom::element root;
    if (parser.parse(padded.view().data(), padded.view().size(), false).get(root) !=
        simdjson::SUCCESS)
        return 0;

    const auto n = mcp::negotiate(root);
    check(n.revision.empty() != n.error.empty(), "negotiate gives a revision or an error");
    if (!n.revision.empty())
        check(std::find(mcp::protocol_revisions.begin(), mcp::protocol_revisions.end(),
                        n.revision) != mcp::protocol_revisions.end(),
              "a negotiated revision is one meithd speaks", n.revision);

    for (const bool trusted : {false, true}) {
        meith::config::source_config cfg;
        cfg.name = "fuzz";
        cfg.trust_annotations = trusted;
        std::string why;
        if (auto def = mcp::definition_of(root, cfg, why)) {
            check(!def->name.empty(), "a definition has a name");
            must_parse(def->input_schema_json, "inputSchema is JSON");
            must_parse("{" + def->extra_descriptor_json + "}", "extra members make an object");
        }
        simdjson::dom::array items;
        if (root["tools"].get_array().get(items) == simdjson::SUCCESS)
            for (auto item : items)
                if (auto def = mcp::definition_of(item, cfg, why))
                    must_parse(def->input_schema_json, "inputSchema is JSON");
    }

    const std::string text = simdjson::minify(root);
    must_parse(mcp::with_envelope(text, mcp::envelope_members("0", true)),
               "params with the envelope are JSON");
    must_parse(mcp::without_meta_key(text, mcp::subscription_id_key),
               "params without the listen's id are JSON");
    (void)mcp::offers_modern(root);
    simdjson::dom::array pair;
    std::string_view tmpl, uri;
    if (root.get_array().get(pair) == simdjson::SUCCESS && pair.size() == 2 &&
        pair.at(0).get_string().get(tmpl) == simdjson::SUCCESS &&
        pair.at(1).get_string().get(uri) == simdjson::SUCCESS)
        (void)meith::gateway::uri_template_matches(tmpl, uri);

    check_result(mcp::call_result(root), "call_result encodes as JSON");
    check_result(mcp::error_answer(root), "error_answer encodes as JSON");

    simdjson::dom::object params;
    if (root.get_object().get(params) == simdjson::SUCCESS) {
        const std::string event = mcp::progress_event(params);
        if (!event.empty()) must_parse(event, "a progress event is JSON");
        (void)mcp::progress_token(params);
    }
    return 0;
}
