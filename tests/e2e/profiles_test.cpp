// End-to-end tests of client profiles (docs/protocol.md §23) on the real meithd with the example
// config (`meith init`): a profile hides and refuses a tool in list, search, call, preview,
// check_policy and approval, renames and rewords one, maps the caller, is chosen by
// `meith mcp --client` or by the MCP client's name, and gives search mode with a pinned tool;
// the official SDK's Client drives `meith mcp` (tests/mcp/bridge_client.mjs profile).
#include "daemon_fixture.hpp"

#include <catch2/catch.hpp>

#include <fstream>

using namespace meith::test;

namespace e2e_profiles_test { // one namespace per file: the tests build as unity batches

namespace {

/// The example config as `meith init` writes it, plus two client profiles: `reviewer` reads
/// the project through the MCP filesystem server, counts words under another name, may ask to
/// write (plugin's `ask`), and is what the MCP client "review-agent" gets; `finder` is in
/// search mode with `echo` pinned.
std::string config_with_profiles(const fs::path& home, const fs::path& project) {
    return example_config(home, project) + R"(
[clients.reviewer]
tools = ["mcp_*", "word_count", "write_file", "!mcp_write*", "!mcp_edit*", "!mcp_move*",
         "!mcp_create*"]
caller = "plugin"
agents = ["review-agent"]
[clients.reviewer.overrides.word_count]
name = "count_words"
description = "Counts the words of a review comment"

[clients.finder]
tools = ["word_count", "echo", "kv"]
search = true
pinned = ["echo"]
)";
}

json hello(client& c, const json& client_info) {
    c.send({{"type", "hello"}, {"requestId", "h"}, {"clientInfo", client_info}});
    return c.read();
}

std::vector<std::string> names_of(const json& tools_list) {
    std::vector<std::string> names;
    for (const auto& t : tools_list["tools"])
        names.push_back(t["name"].get<std::string>());
    return names;
}

bool has(const std::vector<std::string>& v, const std::string& name) {
    return std::find(v.begin(), v.end(), name) != v.end();
}

} // namespace

TEST_CASE("client profile: a hidden tool is out of the list and the search, and refused on "
          "call, preview, check_policy and approval, by its name or another's",
          "[e2e][profiles]") {
    temp_dir home_src, project;
    daemon_process d(config_with_profiles(home_src.path, project.path));
    client c(d.socket());
    // The profile maps the caller: a claim of cli becomes plugin.
    const json h = hello(c, {{"client", "reviewer"}, {"caller", "cli"}});
    REQUIRE(h["type"] == "hello_result");
    CHECK(h["caller"] == "plugin");
    CHECK(h["client"]["name"] == "reviewer");
    CHECK(h["client"]["search"] == false);

    // list_tools: only the profile's tools, word_count under its new name and description.
    c.send({{"type", "list_tools"}, {"requestId", "l"}});
    const json list = c.read();
    const auto names = names_of(list);
    CHECK(list["client"] == "reviewer");
    CHECK(list["hidden"].get<std::size_t>() + list["tools"].size() == 24);
    CHECK(has(names, "mcp_read_text_file"));
    CHECK(has(names, "count_words"));
    CHECK(has(names, "write_file"));
    for (const char* hidden : {"word_count", "echo", "mcp_write_file", "delete_file", "kv"})
        CHECK_FALSE(has(names, hidden));
    for (const auto& t : list["tools"])
        if (t["name"] == "count_words") {
            CHECK(t["originalName"] == "word_count");
            CHECK(t["description"] == "Counts the words of a review comment");
            CHECK(t["capabilities"] == json::array({"read-only"})); // the tool's own
        }

    // list_tools with a query: the same view.
    c.send({{"type", "list_tools"}, {"requestId", "q"}, {"query", "write a file"}, {"limit", 50}});
    const auto found = names_of(c.read());
    CHECK(has(found, "write_file"));
    CHECK_FALSE(has(found, "mcp_write_file"));
    c.send({{"type", "list_tools"}, {"requestId", "q2"}, {"query", "count words"}});
    const auto counted = names_of(c.read());
    REQUIRE_FALSE(counted.empty());
    CHECK(counted.front() == "count_words");
    // A search ranks what the profile shows: the override's words find the tool, and words
    // only its own description has ("characters", "lines") do not.
    c.send({{"type", "list_tools"}, {"requestId", "q3"}, {"query", "review comment"}});
    const auto reviewed = names_of(c.read());
    REQUIRE_FALSE(reviewed.empty());
    CHECK(reviewed.front() == "count_words");
    c.send({{"type", "list_tools"}, {"requestId", "q4"}, {"query", "characters lines"}});
    CHECK_FALSE(has(names_of(c.read()), "count_words"));

    // Calls: by the shown name it runs, audited as the real tool with the profile. (The
    // renamed tool's own name reaches it too: its glob is in the profile.)
    const json counted_call = c.call("count_words", {{"text", "one two three"}});
    CHECK(counted_call["result"]["ok"] == true);
    const json line = d.wait_audit([&](const json& l) {
        return l["event"] == "tool_call" && l["requestId"] == counted_call["requestId"];
    });
    CHECK(line["toolName"] == "word_count");
    CHECK(line["client"] == "reviewer");
    CHECK(line["caller"] == "plugin");
    CHECK(c.call("word_count", {{"text", "one"}})["result"]["ok"] == true);

    for (const char* tool : {"mcp_write_file", "echo", "delete_file"}) {
        INFO(tool);
        const json r = c.call(tool, {{"path", "x"}, {"content", "y"}});
        CHECK(r["result"]["ok"] == false);
        CHECK(r["result"]["error"]["code"] == "PERMISSION_DENIED");
        const std::string message = r["result"]["error"]["message"];
        CHECK_THAT(message, Catch::Contains("is hidden: client profile 'reviewer'"));
        CHECK_THAT(message, !Catch::Contains("meith grant")); // no grant lifts it
        const json l = d.wait_audit([&](const json& a) {
            return a["event"] == "tool_call" && a["requestId"] == r["requestId"];
        });
        CHECK(l["decision"] == "deny");
        CHECK(l["client"] == "reviewer");
    }

    // preview_tool_call of a hidden tool: refused, saying why.
    c.send({{"type", "preview_tool_call"},
            {"requestId", "p"},
            {"toolName", "mcp_write_file"},
            {"arguments", json::object()}});
    const json preview = c.read();
    CHECK(preview["type"] == "error");
    CHECK(preview["code"] == "NOT_ALLOWED");
    CHECK_THAT(preview["message"].get<std::string>(),
               Catch::Contains("leaves it out ('!mcp_write*' in [clients.reviewer] tools)"));

    // check_policy, and `meith policy check --client`, explain the hidden tool.
    c.send({{"type", "check_policy"}, {"requestId", "c"}, {"toolName", "echo"}});
    const json policy = c.read();
    CHECK(policy["decision"] == "deny");
    CHECK(policy["hidden"] == true);
    CHECK(policy["client"] == "reviewer");
    const auto check =
        run_cli({"policy", "check", "mcp_write_file", "--client", "reviewer"}, d.home());
    CHECK(check.status == 1);
    CHECK_THAT(check.out, Catch::Contains("through client profile reviewer: deny"));
    CHECK_THAT(check.out, Catch::Contains("leaves it out ('!mcp_write*'"));
    const auto renamed =
        run_cli({"policy", "check", "count_words", "--client", "reviewer"}, d.home());
    CHECK(renamed.status == 0);
    CHECK_THAT(renamed.out, Catch::Contains("word_count"));

    // `meith tools --client` shows the profile's view.
    const auto tools = run_cli({"tools", "--client", "reviewer"}, d.home());
    CHECK(tools.status == 0);
    CHECK_THAT(tools.out, Catch::Contains("count_words"));
    CHECK_THAT(tools.out, !Catch::Contains("mcp_write_file"));
    // 24 tools, 12 in the profile (10 mcp_ read tools, count_words, write_file).
    CHECK_THAT(tools.out, Catch::Contains("12 more tools are hidden by client profile reviewer; "
                                          "`meith policy check TOOL --client reviewer` says why"));

    // Approval: a write the profile includes is held for a person, who sees the profile; a
    // hidden write never reaches the approver.
    auto approver = connect_approver(d);
    c.send({{"type", "tool_call"},
            {"requestId", "w"},
            {"toolName", "mcp_create_directory"},
            {"arguments", {{"path", "x"}}}});
    const json hidden_write = c.wait_result("w");
    CHECK_THAT(hidden_write["result"]["error"]["message"].get<std::string>(),
               Catch::Contains("is hidden"));
    c.send({{"type", "tool_call"},
            {"requestId", "w2"},
            {"toolName", "write_file"},
            {"arguments", {{"path", "notes.txt"}, {"content", "hi"}}}});
    json req;
    do
        req = approver->read();
    while (req["type"] != "approval_request");
    CHECK(req["requestId"] == "w2");
    CHECK(req["client"] == "reviewer");
    CHECK(req["caller"] == "plugin");
}

TEST_CASE("client profile: chosen once per connection, an unknown one is refused, a reload "
          "that removes it hides every tool",
          "[e2e][profiles]") {
    temp_dir home_src, project;
    const std::string config = config_with_profiles(home_src.path, project.path);
    daemon_process d(config);
    {
        client c(d.socket());
        const json bad = hello(c, {{"client", "nobody"}});
        CHECK(bad["type"] == "error");
        CHECK_THAT(bad["message"].get<std::string>(),
                   Catch::Contains("no client profile named 'nobody' in meithd's config "
                                   "(profiles: finder, reviewer)"));
        const auto cli = run_cli({"tools", "--client", "nobody"}, d.home());
        CHECK(cli.status != 0);
        CHECK_THAT(cli.err, Catch::Contains("no client profile named 'nobody'"));
    }
    client c(d.socket());
    REQUIRE(hello(c, {{"client", "finder"}})["type"] == "hello_result");
    const json swap = hello(c, {{"client", "reviewer"}});
    CHECK(swap["type"] == "error");
    CHECK_THAT(swap["message"].get<std::string>(),
               Catch::Contains("keeps client profile 'finder'"));
    CHECK(c.call("echo", {{"x", 1}})["result"]["ok"] == true);

    // The profile leaves the config: this connection keeps its name and now reaches nothing.
    const std::string without = config.substr(0, config.find("\n[clients.reviewer]"));
    {
        std::ofstream out(d.home() / "meithd.toml");
        out << without;
    }
    REQUIRE(run_cli({"reload"}, d.home()).status == 0);
    const json after = c.call("echo", {{"x", 1}});
    CHECK(after["result"]["ok"] == false);
    CHECK_THAT(after["result"]["error"]["message"].get<std::string>(),
               Catch::Contains("client profile 'finder' is no longer in meithd's config"));
    c.send({{"type", "list_tools"}, {"requestId", "l"}});
    CHECK(c.read()["tools"].empty());
}

TEST_CASE("meith mcp --client and the MCP client's name: the SDK client sees the profile's "
          "tools under its names, a hidden tool is refused, search mode lists a pinned tool",
          "[e2e][profiles][mcp]") {
    temp_dir home_src, project;
    daemon_process d(config_with_profiles(home_src.path, project.path));
    const std::string driver = "MEITH_NO_AUTOSTART=1 node '" + std::string(MEITH_SOURCE_DIR) +
                               "/tests/mcp/bridge_client.mjs' profile '" + MEITH_CLI + "' '" +
                               d.home().string() + "' ";

    // Chosen by --client.
    const json by_flag = run_json_command("CALLS=count_words,word_count,echo,mcp_write_file " +
                                          driver + "some-agent --client reviewer");
    INFO(by_flag.dump().substr(0, 3000));
    const auto listed = by_flag["listed"].get<std::vector<std::string>>();
    CHECK(has(listed, "count_words"));
    CHECK_FALSE(has(listed, "word_count"));
    CHECK_FALSE(has(listed, "echo"));
    CHECK_FALSE(has(listed, "mcp_write_file"));
    CHECK(by_flag["descriptions"]["count_words"] == "Counts the words of a review comment");
    CHECK(by_flag["annotations"]["count_words"]["readOnlyHint"] == true);
    CHECK(by_flag["calls"]["count_words"]["isError"] == false);
    CHECK_THAT(by_flag["calls"]["count_words"]["text"].get<std::string>(),
               Catch::Contains("\"words\":2"));
    for (const char* hidden : {"echo", "mcp_write_file"}) {
        INFO(hidden);
        CHECK(by_flag["calls"][hidden]["isError"] == true);
        CHECK_THAT(by_flag["calls"][hidden]["text"].get<std::string>(),
                   Catch::Contains("hidden: client profile 'reviewer'"));
    }

    // Chosen by the MCP client's name (`agents`), no flag.
    const json by_name = run_json_command("CALLS=echo " + driver + "review-agent");
    CHECK(by_name["listed"] == by_flag["listed"]);
    CHECK(by_name["calls"]["echo"]["isError"] == true);
    // Another MCP client without a flag gets every tool it may use.
    const json other = run_json_command(driver + "another-agent");
    CHECK(has(other["listed"].get<std::vector<std::string>>(), "echo"));

    // finder: search mode from the profile, echo pinned beside the meta-tools; a search and
    // call_tool see only its tools.
    const json finder =
        run_json_command("QUERY='count the words of a file' VIA_CALL_TOOL=word_count,read_file " +
                         driver + "finder-agent --client finder");
    CHECK(finder["listed"] == json::array({"search_tools", "call_tool", "echo"}));
    const auto found = finder["found"].get<std::vector<std::string>>();
    REQUIRE_FALSE(found.empty());
    CHECK(found.front() == "word_count");
    CHECK_FALSE(has(found, "read_file")); // "file" matches it, the profile hides it
    CHECK_FALSE(has(found, "list_dir"));
    CHECK(finder["viaCallTool"]["word_count"]["isError"] == false);
    CHECK(finder["viaCallTool"]["read_file"]["isError"] == true);
    CHECK_THAT(finder["viaCallTool"]["read_file"]["text"].get<std::string>(),
               Catch::Contains("hidden: client profile 'finder'"));

    // The audit lines carry the profile.
    const json line = d.wait_audit([](const json& l) {
        return l["event"] == "tool_call" && l["toolName"] == "word_count" &&
               l.value("client", "") == "finder";
    });
    CHECK(line["agent"] == "finder-agent");
}

} // namespace e2e_profiles_test
