// End-to-end tests of tool search (docs/protocol.md §20): the example config (`meith init`)
// plus 10,000 synthetic tools (bench/many_tools_host.mjs --varied) on the real meithd, list_tools
// with `query` on fixed queries with their expected first results, the caller's permission
// applied; `meith tools --search`; and `meith mcp --search` driven by the official SDK's
// Client (tests/mcp/bridge_client.mjs search); pages of the plain listing (docs/protocol.md §5),
// on the socket and through `meith mcp`.
#include "daemon_fixture.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <fstream>

using namespace meith::test;

namespace e2e_search_test { // one namespace per file: the tests build as unity batches

namespace {

/// The example config as `meith init` writes it (tools by absolute path, confined to
/// `project`), plus 10,000 varied synthetic tools. Its policy: cli may read, write and reach
/// the network, never destroy; plugin the same, asking a person before a write.
std::string example_config_with_many(const fs::path& home, const fs::path& project) {
    return example_config(home, project) +
           "\n[[sources]]\nname = \"synthetic\"\nkind = \"host\"\ncommand = [\"node\", \"" +
           std::string(MEITH_SOURCE_DIR) +
           "/bench/many_tools_host.mjs\", \"--count=10000\", \"--varied\"]\n"
           "start_timeout_ms = 120000\n";
}

std::vector<std::string> search(client& c, const std::string& query, const std::string& caller,
                                int limit = 5) {
    c.send({{"type", "list_tools"},
            {"requestId", "q"},
            {"query", query},
            {"limit", limit},
            {"clientInfo", {{"caller", caller}}}});
    const json r = c.read(30s);
    INFO(r.dump().substr(0, 500));
    REQUIRE(r["type"] == "tools_list");
    std::vector<std::string> names;
    for (const auto& t : r["tools"])
        names.push_back(t["name"].get<std::string>());
    return names;
}

} // namespace

TEST_CASE("tool search: fixed queries over the example tools and 10,000 more find their tool "
          "first, and only tools the caller may use",
          "[e2e][search]") {
    temp_dir home_src, project;
    const std::string config = example_config_with_many(home_src.path, project.path);
    daemon_process d(config, {}, {}, 120s); // 10,000 tools: slower under the sanitizers
    client c(d.socket());
    REQUIRE(wait_sources_settled(c, 120s)); // the MCP server's tools are searched for too
    REQUIRE(c.call("echo", {{"x", 1}})["result"]["ok"] == true);
    const std::pair<const char*, const char*> expected[] = {
        {"create a calendar event", "calendar_create_event"},
        {"Creating calendar events", "calendar_create_event"}, // case, plural, -ing
        {"summarize the grafana dashboard", "grafana_summarize_dashboard"},
        {"delete an invoice in billing", "billing_delete_invoice"},
        {"count the words of a text", "word_count"},
        {"key value store", "kv"},
        {"directory tree", "mcp_directory_tree"},
        {"apply a unified diff", "apply_patch"},
    };
    for (const auto& [query, first] : expected) {
        const auto found = search(c, query, "cli");
        INFO(query);
        REQUIRE_FALSE(found.empty());
        CHECK(found.front() == first);
    }
    // At most `limit`; only tools the caller may call or ask for: delete_file (destructive)
    // is denied to both callers, write_file allowed to cli and asked for plugin.
    CHECK(search(c, "create a calendar event", "cli", 3).size() == 3);
    for (const std::string caller : {"cli", "plugin"}) {
        const auto found = search(c, "delete a file", caller, 50);
        INFO(caller);
        CHECK(std::find(found.begin(), found.end(), "delete_file") == found.end());
        const auto writes = search(c, "write text to a file", caller, 10);
        CHECK(std::find(writes.begin(), writes.end(), "write_file") != writes.end());
    }
    c.send({{"type", "list_tools"}, {"requestId", "all"}});
    const json all = c.read(30s);
    bool listed = false;
    for (const auto& t : all["tools"])
        listed = listed || t["name"] == "delete_file";
    CHECK(listed); // the plain list shows it, with its permission "deny"
    // A bad query is refused, saying what a query is.
    c.send({{"type", "list_tools"}, {"requestId", "bad"}, {"query", 3}});
    const json bad = c.read();
    CHECK(bad["type"] == "error");
    CHECK_THAT(bad["message"].get<std::string>(),
               Catch::Contains("query must be a non-empty string"));
    // The audit line says what was searched and how much came back.
    const auto line = d.wait_audit([](const json& l) {
        return l.value("event", "") == "list_tools" && l.contains("query") &&
               l["query"] == "directory tree";
    });
    CHECK(line["matches"].get<int>() >= 1);

    // `meith tools --search` as a person types it.
    const auto cli = run_cli({"tools", "--search", "create a calendar event"}, d.home());
    CHECK(cli.status == 0);
    const auto row = cli.out.find("\n1 ");
    REQUIRE(row != std::string::npos);
    CHECK(cli.out.substr(row, 60).find("calendar_create_event") != std::string::npos);
    const auto none = run_cli({"tools", "--search", "zebra crossing"}, d.home());
    CHECK(none.status == 0);
    CHECK_THAT(none.out, Catch::Contains("no tool you may use matches 'zebra crossing'"));
}

TEST_CASE("meith mcp --search: the SDK client lists two meta-tools, finds tools by words and "
          "calls one through call_tool, a tool the caller may not use stays out of reach",
          "[e2e][search][mcp]") {
    temp_dir home_src, project;
    const std::string config = example_config_with_many(home_src.path, project.path);
    daemon_process d(config, {}, {}, 120s); // 10,000 tools: slower under the sanitizers
    const json out =
        run_json_command("MEITH_NO_AUTOSTART=1 node '" + std::string(MEITH_SOURCE_DIR) +
                         "/tests/mcp/bridge_client.mjs' search '" + std::string(MEITH_CLI) + "' '" +
                         d.home().string() + "'");
    INFO(out.dump().substr(0, 2000));
    CHECK(out["listed"] == json::array({"search_tools", "call_tool"}));
    CHECK(out["calendar"].size() == 3);
    CHECK(out["calendar"][0] == "calendar_create_event");
    CHECK(out["words"][0] == "word_count");
    for (const auto& name : out["denied"])
        CHECK(name != "delete_file"); // destructive: denied to plugin, meith mcp's caller
    CHECK(out["firstSchema"]["type"] == "object");
    CHECK(out["called"].value("isError", false) == false);
    CHECK_THAT(out["called"].dump(), Catch::Contains("\\\"words\\\":3"));
    CHECK(out["deniedCall"]["isError"] == true);
    CHECK_THAT(out["deniedCall"].dump(), Catch::Contains("PERMISSION_DENIED"));
    CHECK(out["bad"]["code"] == -32602);
}

namespace {

json list_page(client& c, const json& extra) {
    json frame{{"type", "list_tools"}, {"requestId", "p"}, {"clientInfo", {{"caller", "plugin"}}}};
    frame.update(extra);
    c.send(frame);
    const json r = c.read(30s);
    INFO(r.dump().substr(0, 500));
    return r;
}

std::vector<std::string> names_in(const json& tools) {
    std::vector<std::string> names;
    for (const auto& t : tools)
        names.push_back(t["name"].get<std::string>());
    return names;
}

} // namespace

TEST_CASE("list_tools pages: offset, limit and permitted cut the listing in meithd, and meith mcp "
          "hands the SDK client every tool it may use, 500 a page",
          "[e2e][search][mcp]") {
    temp_dir home_src, project;
    daemon_process d(example_config_with_many(home_src.path, project.path), {}, {}, 120s);
    client c(d.socket());
    // Under load a source's first start can time out and its tools come with the restart:
    // the listing every page is checked against is taken once they have all come.
    REQUIRE(wait_sources_settled(c, 120s));

    // The whole listing, as before: what every page is checked against.
    const json all = list_page(c, json::object());
    REQUIRE(all["type"] == "tools_list");
    CHECK(!all.contains("total"));
    std::vector<std::string> every = names_in(all["tools"]), permitted;
    for (const auto& t : all["tools"])
        if (t["permission"] == "allow" || t["permission"] == "ask")
            permitted.push_back(t["name"].get<std::string>());
    REQUIRE(every.size() > 10000);
    REQUIRE(permitted.size() < every.size()); // plugin may not destroy: delete_file is out
    CHECK(std::find(permitted.begin(), permitted.end(), "delete_file") == permitted.end());

    const json first = list_page(c, {{"offset", 0}, {"limit", 3}, {"permitted", true}});
    CHECK(first["total"] == permitted.size());
    CHECK(names_in(first["tools"]) ==
          std::vector<std::string>(permitted.begin(), permitted.begin() + 3));
    const json middle = list_page(c, {{"offset", 5000}, {"limit", 500}, {"permitted", true}});
    CHECK(names_in(middle["tools"]) ==
          std::vector<std::string>(permitted.begin() + 5000, permitted.begin() + 5500));
    const json tail =
        list_page(c, {{"offset", permitted.size() - 2}, {"limit", 500}, {"permitted", true}});
    CHECK(names_in(tail["tools"]) ==
          std::vector<std::string>(permitted.end() - 2, permitted.end()));
    const json past = list_page(c, {{"offset", every.size() + 5}, {"permitted", false}});
    CHECK(past["tools"].empty());
    CHECK(past["total"] == every.size());
    // Refused: a page of a search, a limit out of range, an offset that is not a count.
    CHECK(list_page(c, {{"query", "calendar"}, {"offset", 1}})["type"] == "error");
    CHECK(list_page(c, {{"offset", 0}, {"limit", 0}})["type"] == "error");
    const json bad = list_page(c, {{"offset", -1}});
    CHECK(bad["type"] == "error");
    CHECK_THAT(bad["message"].get<std::string>(), Catch::Contains("offset must be an integer"));

    // Through meith mcp (caller plugin): every permitted tool once, in order, 500 a page.
    const fs::path names_file = home_src.path / "names.txt";
    std::vector<std::string> names;
    const auto through = [&](const std::string& extra) {
        const json out = run_json_command(
            "MEITH_NO_AUTOSTART=1 NAMES_FILE='" + names_file.string() + "' node '" +
            std::string(MEITH_SOURCE_DIR) + "/tests/mcp/bridge_client.mjs' pages '" +
            std::string(MEITH_CLI) + "' '" + d.home().string() + "'" + extra);
        names.clear();
        std::ifstream in(names_file);
        for (std::string line; std::getline(in, line);)
            names.push_back(line);
        return out;
    };
    const json paged = through("");
    CHECK(names == permitted);
    const auto sizes = paged["sizes"].get<std::vector<std::size_t>>();
    REQUIRE(sizes.size() == (permitted.size() + 499) / 500);
    CHECK(sizes.front() == 500);
    CHECK(sizes.back() == permitted.size() - 500 * (sizes.size() - 1));
    // --all: every tool, the denied ones too.
    through(" --all");
    CHECK(names == every);
}

} // namespace e2e_search_test
