// Unit tests: the pure side of the MCP source (sources/mcp_wire.hpp) — revision negotiation,
// annotations → capabilities, tools/list items → descriptors, tools/call results → ToolResults,
// progress events, roots (docs/protocol.md §7, MCP spec 2025-11-25).
#include "sources/mcp_wire.hpp"

#include "protocol/tool_result.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <string>

using json = nlohmann::json;
namespace mcp = meith::sources::mcp;
using meith::protocol::error_code;

namespace unit_mcp_test { // one namespace per file: the tests build as unity batches

namespace {

/// Parses `text` with a parser that lives as long as the returned element is used.
simdjson::dom::element parse(simdjson::dom::parser& p, const std::string& text) {
    return p.parse(text).value();
}

json result_json(const meith::protocol::tool_result& r) {
    std::string out;
    meith::protocol::append_tool_result(out, r);
    return json::parse(out);
}

std::vector<std::string> caps(std::optional<bool> ro, std::optional<bool> destructive,
                              std::optional<bool> open) {
    return mcp::capabilities_from_hints({ro, destructive, open});
}

using names = std::vector<std::string>;

} // namespace

TEST_CASE("mcp: initialize offers the newest revision and names meithd", "[mcp]") {
    const auto params = json::parse(mcp::initialize_params("1.2.3"));
    CHECK(params["protocolVersion"] == "2025-11-25");
    CHECK(params["clientInfo"] == json({{"name", "meithd"}, {"version", "1.2.3"}}));
    // meithd forwards roots, sampling and elicitation to its clients (docs/protocol.md §17).
    CHECK(params["capabilities"] == json::parse(R"({"sampling":{"context":{},"tools":{}},)"
                                                R"("elicitation":{"form":{},"url":{}}})"));
    CHECK(json::parse(mcp::initialize_params("1.2.3", true))["capabilities"]["roots"] ==
          json::object()); // no sampling, elicitation or roots offered
}

TEST_CASE("mcp: an answered revision of the list is accepted, any other names it", "[mcp]") {
    simdjson::dom::parser p;
    for (auto r : mcp::protocol_revisions) {
        const auto n = mcp::negotiate(parse(p, R"({"protocolVersion":")" + std::string(r) + "\"}"));
        CHECK(n.revision == r);
        CHECK(n.error.empty());
    }
    auto old = mcp::negotiate(parse(p, R"({"protocolVersion":"2024-10-07"})"));
    CHECK(old.revision.empty());
    CHECK_THAT(old.error, Catch::Contains(R"("2024-10-07")") &&
                              Catch::Contains("2025-11-25, 2025-06-18, 2025-03-26, 2024-11-05"));
    auto none = mcp::negotiate(parse(p, R"({"capabilities":{}})"));
    CHECK_THAT(none.error, Catch::Contains("no string protocolVersion"));
    auto number = mcp::negotiate(parse(p, R"({"protocolVersion":20251125})"));
    CHECK_FALSE(number.error.empty());
}

TEST_CASE("mcp: annotations map to capabilities with the spec's defaults", "[mcp]") {
    // No hints: readOnly false, destructive true, openWorld true.
    CHECK(caps({}, {}, {}) == names{"writes-files", "destructive", "accesses-network"});
    CHECK(caps(true, {}, {}) == names{"read-only", "accesses-network"});
    CHECK(caps(true, true, false) == names{"read-only"}); // destructive means nothing if read-only
    CHECK(caps(false, false, {}) == names{"writes-files", "accesses-network"});
    CHECK(caps(false, false, false) == names{"writes-files"});
    CHECK(caps(false, true, false) == names{"writes-files", "destructive"});
    CHECK(caps({}, false, true) == names{"writes-files", "accesses-network"});

    simdjson::dom::parser p;
    auto hints = mcp::hints_of(parse(
        p, R"({"annotations":{"readOnlyHint":"yes","destructiveHint":false,"openWorldHint":1}})"));
    CHECK_FALSE(hints.read_only); // not a boolean: not given
    CHECK(hints.destructive == false);
    CHECK_FALSE(hints.open_world);
    CHECK_FALSE(mcp::hints_of(parse(p, R"({"annotations":[true]})")).read_only);
}

TEST_CASE("mcp: capabilities come from the table, then trusted annotations, else unknown",
          "[mcp]") {
    simdjson::dom::parser p;
    const auto tool = parse(p, R"({"name":"rm","annotations":{"readOnlyHint":true}})");
    meith::config::source_config cfg;
    CHECK(mcp::tool_capabilities(cfg, "rm", tool) == names{"unknown"}); // untrusted by default
    cfg.trust_annotations = true;
    CHECK(mcp::tool_capabilities(cfg, "rm", tool) == names{"read-only", "accesses-network"});
    cfg.capabilities["rm"] = {"destructive"};
    CHECK(mcp::tool_capabilities(cfg, "rm", tool) == names{"destructive"});
    cfg.trust_annotations = false;
    CHECK(mcp::tool_capabilities(cfg, "rm", tool) == names{"destructive"});
    CHECK(mcp::tool_capabilities(cfg, "other", tool) == names{"unknown"});
}

TEST_CASE("mcp: a capabilities key may be a glob: the tool's own name wins, then the longest "
          "glob that matches",
          "[mcp]") {
    simdjson::dom::parser p;
    const auto tool = parse(p, R"({"name":"browser_navigate"})");
    meith::config::source_config cfg;
    cfg.capabilities["browser_*"] = {"controls-browser"};
    cfg.capabilities["*"] = {"read-only"};
    CHECK(mcp::tool_capabilities(cfg, "browser_navigate", tool) == names{"controls-browser"});
    CHECK(mcp::tool_capabilities(cfg, "install", tool) == names{"read-only"});
    cfg.capabilities["browser_navigate"] = {"accesses-network"};
    CHECK(mcp::tool_capabilities(cfg, "browser_navigate", tool) == names{"accesses-network"});
    cfg.capabilities.erase("*");
    CHECK(mcp::tool_capabilities(cfg, "install", tool) == names{"unknown"});
}

TEST_CASE("mcp: a tools/list item becomes a definition with title, annotations, outputSchema",
          "[mcp]") {
    simdjson::dom::parser p;
    meith::config::source_config cfg;
    cfg.timeout_ms["read"] = 1234;
    std::string why;
    auto d = mcp::definition_of(
        parse(
            p,
            R"({"name":"read","title":"Read","description":"reads","inputSchema":{"type":"object","properties":{"p":{"type":"string"}}},
                     "outputSchema":{"type":"object"},"annotations":{"readOnlyHint":true},"icons":[],"execution":{}})"),
        cfg, why);
    REQUIRE(d);
    CHECK(d->name == "read");
    CHECK(d->description == "reads");
    CHECK(json::parse(d->input_schema_json)["properties"]["p"]["type"] == "string");
    CHECK(d->timeout_ms == 1234u);
    CHECK(d->capabilities == names{"unknown"});
    const auto extra = json::parse("{" + d->extra_descriptor_json + "}");
    CHECK(extra == json::parse(R"({"title":"Read","annotations":{"readOnlyHint":true},
                                   "outputSchema":{"type":"object"},"icons":[],"execution":{}})"));

    auto bare = mcp::definition_of(parse(p, R"({"name":"x","title":5})"), cfg, why);
    REQUIRE(bare);
    CHECK(bare->input_schema_json == R"({"type":"object"})");
    CHECK(bare->description.empty());
    CHECK(bare->extra_descriptor_json.empty()); // a title that is not a string is left out

    CHECK_FALSE(mcp::definition_of(parse(p, R"({"name":""})"), cfg, why));
    CHECK_FALSE(mcp::definition_of(parse(p, R"({"description":"no name"})"), cfg, why));
    CHECK_THAT(why, Catch::Contains("name"));
}

TEST_CASE("mcp: a tools/call result keeps everything but isError as content", "[mcp]") {
    simdjson::dom::parser p;
    auto r = result_json(mcp::call_result(parse(
        p,
        R"({"content":[{"type":"text","text":"hi"}],"structuredContent":{"n":1},"isError":false,"_meta":{"m":1}})")));
    CHECK(r["ok"] == true);
    CHECK(r["content"] == json::parse(R"({"content":[{"type":"text","text":"hi"}],
                                         "structuredContent":{"n":1},"_meta":{"m":1}})"));

    auto plain = result_json(mcp::call_result(parse(p, R"({"content":[]})")));
    CHECK(plain["content"] == json::parse(R"({"content":[]})"));

    auto odd = result_json(mcp::call_result(parse(p, R"([1,2])")));
    CHECK(odd["ok"] == false);
    CHECK(odd["error"]["code"] == "TOOL_FAILED");
}

TEST_CASE("mcp: isError becomes TOOL_FAILED with the text blocks joined, cut to 1 KiB", "[mcp]") {
    simdjson::dom::parser p;
    const std::string raw =
        R"({"content":[{"type":"text","text":"one"},{"type":"image","data":"","mimeType":"image/png"},{"type":"text","text":"two"}],"isError":true})";
    auto r = result_json(mcp::call_result(parse(p, raw)));
    CHECK(r["ok"] == false);
    CHECK(r["error"]["code"] == "TOOL_FAILED");
    CHECK(r["error"]["message"] == "one\ntwo");
    CHECK(r["error"]["details"] == json::parse(raw));

    // 1023 ASCII bytes then a 3-byte character: the cut never splits it.
    const std::string long_text = std::string(1023, 'a') + "\xE2\x82\xAC" + std::string(500, 'b');
    json big = {{"content", {{{"type", "text"}, {"text", long_text}}}}, {"isError", true}};
    auto cut = result_json(mcp::call_result(parse(p, big.dump())));
    CHECK(cut["error"]["message"] == std::string(1023, 'a'));

    auto empty = result_json(mcp::call_result(parse(p, R"({"content":[],"isError":true})")));
    CHECK_THAT(empty["error"]["message"].get<std::string>(), Catch::Contains("isError"));
}

TEST_CASE("mcp: a JSON-RPC error answer becomes TOOL_FAILED with code, message, data", "[mcp]") {
    simdjson::dom::parser p;
    auto r = result_json(
        mcp::error_answer(parse(p, R"({"code":-32602,"message":"bad args","data":{"x":1}})")));
    CHECK(r["error"]["code"] == "TOOL_FAILED");
    CHECK(r["error"]["message"] == "bad args");
    CHECK(r["error"]["details"] ==
          json::parse(R"({"code":-32602,"message":"bad args","data":{"x":1}})"));
    auto bare = result_json(mcp::error_answer(parse(p, R"({"code":1})")));
    CHECK(bare["error"]["details"] == json::parse(R"({"code":1,"message":null})"));
    CHECK_FALSE(bare["error"]["message"].get<std::string>().empty());
}

TEST_CASE("mcp: progress notifications become progress events", "[mcp]") {
    simdjson::dom::parser p;
    auto obj = [&](const std::string& text) { return parse(p, text).get_object().value(); };
    CHECK(
        json::parse(mcp::progress_event(
            obj(R"({"progressToken":3,"progress":1,"total":4,"message":"m"})"))) ==
        json::parse(R"({"type":"progress","progress":1,"total":4,"fraction":0.25,"message":"m"})"));
    CHECK(json::parse(mcp::progress_event(obj(R"({"progressToken":3,"progress":2.5})"))) ==
          json::parse(R"({"type":"progress","progress":2.5})"));
    CHECK(json::parse(mcp::progress_event(obj(R"({"progress":1,"total":0})"))) ==
          json::parse(R"({"type":"progress","progress":1,"total":0})"));
    CHECK(mcp::progress_event(obj(R"({"progress":"1"})")).empty());
    CHECK(mcp::progress_token(obj(R"({"progressToken":7,"progress":1})")) == 7u);
    CHECK_FALSE(mcp::progress_token(obj(R"({"progressToken":"7","progress":1})")));
}

TEST_CASE("mcp: calls carry a progress token, cancellations name the request", "[mcp]") {
    CHECK(json::parse(mcp::call_params("read", R"({"p":"x"})", 12)) ==
          json::parse(R"({"name":"read","arguments":{"p":"x"},"_meta":{"progressToken":12}})"));
    CHECK(json::parse(mcp::cancelled_params(5, "timeout")) ==
          json::parse(R"({"requestId":5,"reason":"timeout"})"));
}

TEST_CASE("mcp: roots/list answers the working directory as one file:// root", "[mcp]") {
    CHECK(mcp::file_uri("/tmp/a b/ü") == "file:///tmp/a%20b/%C3%BC");
    CHECK(json::parse(mcp::roots_result("/srv/work")) ==
          json::parse(R"({"roots":[{"uri":"file:///srv/work","name":"work"}]})"));
    CHECK(json::parse(mcp::roots_result("/srv/work/"))["roots"][0]["name"] == "work");
}

// ---- 2026-07-28 and routing (docs/protocol.md §17) ----------------------------------------

TEST_CASE("mcp: the 2026-07-28 envelope joins a request's _meta, and a listen's id leaves it",
          "[mcp]") {
    const std::string env = mcp::envelope_members("1.2.3", false);
    const auto with = json::parse(mcp::with_envelope(R"({"uri":"x","_meta":{"k":1}})", env));
    CHECK(with["uri"] == "x");
    CHECK(with["_meta"]["k"] == 1);
    CHECK(with["_meta"]["io.modelcontextprotocol/protocolVersion"] == "2026-07-28");
    CHECK(with["_meta"]["io.modelcontextprotocol/clientInfo"]["name"] == "meithd");
    CHECK_FALSE(with["_meta"]["io.modelcontextprotocol/clientCapabilities"].contains("roots"));
    CHECK(json::parse(mcp::with_envelope("{}", env))["_meta"].size() == 3);
    CHECK(mcp::with_envelope("[1]", env) == "[1]"); // not an object: unchanged

    const auto params = json::parse(mcp::without_meta_key(
        R"({"uri":"a","_meta":{"io.modelcontextprotocol/subscriptionId":"l1"}})",
        mcp::subscription_id_key));
    CHECK(params == json::parse(R"({"uri":"a"})"));
    const auto kept = json::parse(
        mcp::without_meta_key(R"({"_meta":{"io.modelcontextprotocol/subscriptionId":"l1","x":2}})",
                              mcp::subscription_id_key));
    CHECK(kept == json::parse(R"({"_meta":{"x":2}})"));
}

TEST_CASE("mcp: server/discover offers 2026-07-28 only when supportedVersions lists it", "[mcp]") {
    simdjson::dom::parser p;
    CHECK(mcp::offers_modern(parse(p, R"({"supportedVersions":["2026-07-28"]})")));
    CHECK_FALSE(mcp::offers_modern(parse(p, R"({"supportedVersions":["2099-01-01"]})")));
    CHECK_FALSE(mcp::offers_modern(parse(p, R"({"capabilities":{}})")));
}

TEST_CASE("mcp: a tools/list item with execution.taskSupport required is called as a task",
          "[mcp]") {
    simdjson::dom::parser p;
    meith::config::source_config cfg;
    std::string why;
    auto task = mcp::definition_of(
        parse(p, R"({"name":"t","execution":{"taskSupport":"required"}})"), cfg, why);
    REQUIRE(task);
    CHECK(task->task_required);
    auto plain = mcp::definition_of(
        parse(p, R"({"name":"u","execution":{"taskSupport":"optional"}})"), cfg, why);
    REQUIRE(plain);
    CHECK_FALSE(plain->task_required);
}

} // namespace unit_mcp_test
