// Unit tests: how the gateway matches a URI to a resource template (registry/mcp_gateway.hpp,
// docs/protocol.md §17) and the bridge's task table (cli/commands/mcp_tasks.hpp).
#include "cli/commands/mcp_tasks.hpp"
#include "registry/mcp_gateway.hpp"

#include <catch2/catch.hpp>

using meith::registry::uri_template_matches;

TEST_CASE("mcp routing: RFC 6570 expressions stand for the URI's parts between literals", "[mcp]") {
    CHECK(uri_template_matches("demo://resource/dynamic/text/{id}",
                               "demo://resource/dynamic/text/12"));
    CHECK_FALSE(
        uri_template_matches("demo://resource/dynamic/text/{id}", "demo://resource/dynamic/text/"));
    CHECK_FALSE(uri_template_matches("demo://resource/dynamic/text/{id}",
                                     "demo://resource/dynamic/blob/1"));
    CHECK(uri_template_matches("file:///{path}.md", "file:///a/b.md"));
    CHECK_FALSE(uri_template_matches("file:///{path}.md", "file:///a/b.txt"));
    CHECK(uri_template_matches("repo://{owner}/{name}/issues", "repo://me/meith/issues"));
    CHECK_FALSE(uri_template_matches("repo://{owner}/{name}/issues", "repo://me/meith/pulls"));
    CHECK(uri_template_matches("search://q{?term}", "search://q")); // may be empty
    CHECK(uri_template_matches("static://a", "static://a"));
    CHECK_FALSE(uri_template_matches("static://a", "static://ab"));
}

TEST_CASE("mcp tasks: created working, ended with the answer, waiting results answered", "[mcp]") {
    meith::cli::task_table t;
    const auto created = t.create("rid-1", 1000);
    const std::string id = created["task"]["taskId"];
    CHECK(created["task"]["status"] == "working");
    CHECK(t.task_of("rid-1") == id);
    bool unknown = true;
    CHECK_FALSE(t.result_or_wait(id, 7, unknown));
    CHECK_FALSE(unknown);
    t.working(id, "halfway");
    CHECK((*t.get(id))["statusMessage"] == "halfway");
    const auto waiting = t.finish(id, {{"content", meith::cli::json::array()}}, false);
    REQUIRE(waiting.size() == 1);
    CHECK(waiting[0] == 7);
    CHECK((*t.get(id))["status"] == "completed");
    const auto answer = t.result_of(id);
    CHECK(answer["result"]["_meta"]["io.modelcontextprotocol/related-task"]["taskId"] == id);
    CHECK_FALSE(t.task_of("rid-1"));
    CHECK(t.list()["tasks"].size() == 1);
}

TEST_CASE("mcp tasks: a cancelled task stays cancelled when its call ends", "[mcp]") {
    meith::cli::task_table t;
    const std::string id = t.create("rid-2", 1000)["task"]["taskId"];
    CHECK(t.cancel(id) == "rid-2");
    CHECK_FALSE(t.cancel(id)); // once
    t.finish(id, {{"code", -32603}, {"message", "CANCELLED"}}, true);
    CHECK((*t.get(id))["status"] == "cancelled");
    CHECK(t.result_of(id)["error"]["message"] == "the task was cancelled");
    bool unknown = false;
    CHECK_FALSE(t.result_or_wait("nope", 1, unknown));
    CHECK(unknown);
}
