// Unit tests for tools/tool_search: the words the index keeps, and BM25 ranking over the
// tools' weighted fields (docs/protocol.md §20).
#include "tools/tool_search.hpp"
#include "tools/tool_source.hpp"

#include <catch2/catch.hpp>

#include <memory>
#include <string>
#include <vector>

using namespace meith::tools;

namespace unit_tool_search_test { // one namespace per file: the tests build as unity batches

namespace {

std::shared_ptr<tool> make_tool(std::string name, std::string description, std::string schema = "",
                                std::string extra = "") {
    auto t = std::make_shared<tool>();
    t->name = std::move(name);
    t->description = std::move(description);
    t->input_schema_json = std::move(schema);
    t->extra_descriptor_json = std::move(extra);
    return t;
}

std::vector<std::string> names(const std::vector<tool_index::hit>& hits) {
    std::vector<std::string> out;
    for (const auto& h : hits)
        out.push_back(h.t->name);
    return out;
}

const auto everyone = [](const tool&) { return true; };

} // namespace

TEST_CASE("search terms: words split at punctuation and camelCase humps, stemmed, stop words out") {
    CHECK(search_terms("readFile") == std::vector<std::string>{"read", "fil"});
    CHECK(search_terms("HTTPServer_start") == std::vector<std::string>{"http", "server", "start"});
    CHECK(search_terms("Read the FILES of a folder") ==
          std::vector<std::string>{"read", "fil", "folder"});
    // Plurals, -ing, -ed and a final e meet.
    CHECK(search_terms("create creates created creating") ==
          std::vector<std::string>{"creat", "creat", "creat", "creat"});
    CHECK(search_terms("queries query") == std::vector<std::string>{"query", "query"});
    CHECK(search_terms("s3 v2 x") == std::vector<std::string>{"s3", "v2", "x"});
    CHECK(search_terms("  ,;:  the of a ").empty());
}

TEST_CASE("tool search: a name beats a description, rarer words weigh more, limit and keep apply") {
    std::vector<std::shared_ptr<tool>> owned{
        make_tool("read_file", "Returns a file's text."),
        make_tool("write_file", "Writes text to a file; the old contents are replaced."),
        make_tool("list_dir", "Lists a folder; read-only."),
        make_tool("fetch_url", "Fetches a URL", R"({"type":"object","properties":{"url":{}}})"),
        make_tool("calendar_create_event", "Creates an event in calendar."),
        make_tool("notes_create_note", "Creates a note in notes."),
        make_tool("get_weather", "Forecast", "", R"("title":"Weather for a city")")};
    std::vector<const tool*> tools;
    for (const auto& t : owned)
        tools.push_back(t.get());
    tool_index index;
    CHECK_FALSE(index.built());
    index.build(tools);
    REQUIRE(index.built());

    // "read" is in read_file's name and in list_dir's description: the name wins.
    CHECK(names(index.search("read a file", 10, everyone)).front() == "read_file");
    // Stemmed: "creating events" finds create_event before create_note (event is rarer).
    CHECK(names(index.search("creating calendar events", 10, everyone)) ==
          std::vector<std::string>{"calendar_create_event", "notes_create_note"});
    // A parameter name and a title count.
    CHECK(names(index.search("url", 10, everyone)) == std::vector<std::string>{"fetch_url"});
    CHECK(names(index.search("city weather", 10, everyone)) ==
          std::vector<std::string>{"get_weather"});
    // At most `limit`, best first.
    CHECK(index.search("file", 1, everyone).size() == 1);
    CHECK(index.search("file", 10, everyone).size() == 2);
    // Only what `keep` lets through (the caller's permission).
    const auto hidden =
        index.search("file", 10, [](const tool& t) { return t.name != "write_file"; });
    CHECK(names(hidden) == std::vector<std::string>{"read_file"});
    // Nothing to go on: no results, not everything.
    CHECK(index.search("the of", 10, everyone).empty());
    CHECK(index.search("zebra", 10, everyone).empty());
    // Scores fall and are reset between queries (the same query twice ranks the same).
    const auto once = index.search("create", 10, everyone);
    const auto twice = index.search("create", 10, everyone);
    REQUIRE(once.size() == 2);
    CHECK(once[0].score == twice[0].score);
    CHECK(once[0].score >= once[1].score);
    index.clear();
    CHECK_FALSE(index.built());
}

} // namespace unit_tool_search_test
