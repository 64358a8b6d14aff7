// Unit tests of the meith_cli library: the command line (options), the command table and the
// per-command option checks, did-you-mean, table cells, and the audit view's pieces — reached
// here without a daemon (the e2e tests drive the same code through the real binary).
#include "cli/audit_view.hpp"
#include "cli/errors.hpp"
#include "cli/help.hpp"
#include "cli/options.hpp"
#include "cli/table.hpp"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

using namespace meith::cli;

namespace {
options parse(std::vector<std::string> args) {
    return parse_options(args);
}
const command& find(std::vector<std::string> words) {
    const command* c = find_command(words);
    REQUIRE(c != nullptr);
    return *c;
}
std::string usage_message(const std::vector<std::string>& args) {
    try {
        const options o = parse(args);
        check_options(find(o.words), o);
    } catch (const usage_error& e) {
        return e.what();
    }
    return "";
}
} // namespace

TEST_CASE("cli options: both spellings, anywhere on the line, -- ends options", "[cli]") {
    const auto o = parse({"--home", "/h", "call", "echo", "--timeout-ms=300", "{}", "--raw"});
    CHECK(o.home == std::filesystem::path("/h"));
    CHECK(o.words == std::vector<std::string>{"call", "echo", "{}"});
    CHECK(o.timeout_ms == 300u);
    CHECK(o.raw);
    CHECK(parse({"call", "--", "--raw"}).words == std::vector<std::string>{"call", "--raw"});
    CHECK_THROWS_AS(parse({"--nope"}), usage_error);
    CHECK_THROWS_AS(parse({"call", "--timeout-ms", "soon"}), usage_error);
}

TEST_CASE("cli command table: subcommands first, then the plain name", "[cli]") {
    CHECK(find({"sources", "restart", "x"}).sub == "restart");
    CHECK(find({"sources"}).sub.empty());
    CHECK(find_command({"nope"}) == nullptr);
    CHECK(head_of(find({"sources", "restart"})) == "sources restart NAME [--timeout-ms N]");
    for (const command& c : commands()) {
        INFO(c.name << " " << c.sub);
        CHECK(c.run != nullptr);
        CHECK(c.min_args <= c.max_args);
        CHECK_FALSE(c.summary.empty());
    }
}

TEST_CASE("cli check_options: each command takes only its own options, from its table row",
          "[cli]") {
    CHECK(usage_message({"call", "echo", "--raw", "--model", "--json", "--timeout-ms", "5"}) == "");
    CHECK(usage_message({"tools", "--tag", "a", "--format", "openai", "--json"}) == "");
    CHECK(usage_message({"grant", "writes-files", "--tool", "t", "--uses", "3"}) == "");
    CHECK(usage_message({"audit", "--tool", "t", "--since", "10m", "--follow"}) == "");
    CHECK(usage_message({"mcp", "--all"}) == "");
    CHECK(usage_message({"status", "--raw"}) == "'status' does not take --raw");
    CHECK(usage_message({"sources", "restart", "x", "--json"}) ==
          "'sources restart' does not take --json");
    CHECK(usage_message({"grant", "writes-files", "--since", "1h"}) ==
          "'grant' does not take --since, --denied, --event, --limit, --file or --follow");
    CHECK(usage_message({"tools", "--tool", "t"}) == "'tools' does not take --tool");
    CHECK(usage_message({"call", "echo", "--dry-run"}) == "'call' does not take --dry-run");
    CHECK(usage_message({"call", "echo", "--manager", "systemd"}) ==
          "'call' does not take --socket-activated or --manager");
    CHECK(usage_message({"status", "--yes"}) == "'status' does not take --yes");
    CHECK(usage_message({"init", "--all"}) == "'init' does not take --all");
    // Global options go with every command.
    CHECK(usage_message({"status", "--home", "/h", "--caller", "plugin", "--no-autostart"}) == "");
}

TEST_CASE("cli did_you_mean and table cells", "[cli]") {
    CHECK(did_you_mean({}).empty());
    CHECK(did_you_mean({"call"}) == "; did you mean 'call'?");
    CHECK(did_you_mean({"a", "b", "c"}) == "; did you mean 'a', 'b' or 'c'?");
    CHECK(columns("h\xC3\xA9llo") == 5);
    CHECK(meith::cli::truncate(std::string("abcdef"), 4) == "abc\xE2\x80\xA6");
    CHECK(meith::cli::truncate(std::string("h\xC3\xA9llo"), 2) == "h\xE2\x80\xA6"); // whole é
    CHECK(pad("ab", 4) == "ab  ");
}

TEST_CASE("cli audit view: timestamps, call reasons and event summaries", "[cli][audit]") {
    CHECK(parse_audit_ts("2026-11-21T10:00:00.123Z"));
    CHECK(parse_audit_ts("2026-11-21T10:00:00+02:00"));
    CHECK_FALSE(parse_audit_ts("yesterday"));
    CHECK(is_call_event("tool_call"));
    CHECK(is_call_event("tool_call_rejected"));
    CHECK_FALSE(is_call_event("source_exit"));
    const auto denied =
        json::parse(R"({"event":"tool_call","decision":"deny","reason":"plugin may not write"})");
    CHECK(call_reason(denied) == "plugin may not write");
    CHECK(call_reason(json::parse(R"({"event":"tool_call","decision":"allow","ok":true})")) == "");
    const auto exited = json::parse(R"({"event":"source_exit","source":"fs","pid":7})");
    CHECK(summarize_event(exited).subject == "fs");
}

// ==== meith connect: a client's config pointed at `meith mcp` ================================

#include "cli/commands/connect_edit.hpp"

TEST_CASE("connect: each client's servers become one entry running meith mcp", "[cli][connect]") {
    using namespace meith::cli;
    std::string why;
    const std::vector<std::string> cmd{"/usr/bin/meith", "mcp", "--client", "cursor"};

    // Claude Code's ~/.claude.json: everything else in the file kept, servers replaced.
    const std::string claude = R"({"numStartups":3,"mcpServers":{"memory":{"command":"npx",)"
                               R"("args":["-y","@modelcontextprotocol/server-memory"]}},"x":[1]})";
    CHECK(server_names(claude, client_format::mcp_servers) == std::vector<std::string>{"memory"});
    CHECK_FALSE(is_connected(claude, client_format::mcp_servers));
    const auto connected = connected_config(claude, client_format::mcp_servers, true, cmd, why);
    REQUIRE(connected);
    const auto j = nlohmann::ordered_json::parse(*connected);
    CHECK(j["numStartups"] == 3);
    CHECK(j["x"] == nlohmann::ordered_json::array({1}));
    CHECK(j["mcpServers"].size() == 1);
    CHECK(j["mcpServers"]["meith"]["type"] == "stdio");
    CHECK(j["mcpServers"]["meith"]["command"] == "/usr/bin/meith");
    CHECK(j["mcpServers"]["meith"]["args"] ==
          nlohmann::ordered_json::array({"mcp", "--client", "cursor"}));
    CHECK(is_connected(*connected, client_format::mcp_servers));

    // No file yet: one is made.
    const auto fresh = connected_config("", client_format::mcp_servers, false, cmd, why);
    REQUIRE(fresh);
    CHECK_FALSE(nlohmann::ordered_json::parse(*fresh)["mcpServers"]["meith"].contains("type"));

    // VS Code: `servers`, comments allowed in what is read.
    const auto vscode = connected_config("// mine\n{\"servers\":{\"a\":{\"type\":\"stdio\","
                                         "\"command\":\"a\"}},\"inputs\":[]}",
                                         client_format::vscode, true, cmd, why);
    REQUIRE(vscode);
    CHECK(nlohmann::ordered_json::parse(*vscode)["servers"].size() == 1);
    CHECK(nlohmann::ordered_json::parse(*vscode).contains("inputs"));

    // Codex: only the [mcp_servers.*] tables change, the rest of the file byte for byte.
    const std::string codex = "model = \"o3\"\n# my servers\n[mcp_servers.docs]\ncommand = "
                              "\"npx\"\nargs = [\"-y\", \"ctx\"]\n\n[mcp_servers.docs.env]\nK = "
                              "\"v\"\n\n[profiles.fast]\nmodel = \"o4\"\n";
    CHECK(server_names(codex, client_format::codex) == std::vector<std::string>{"docs"});
    const auto toml = connected_config(codex, client_format::codex, false, cmd, why);
    REQUIRE(toml);
    CHECK(*toml == "model = \"o3\"\n# my servers\n[profiles.fast]\nmodel = \"o4\"\n\n"
                   "[mcp_servers.meith]\ncommand = \"/usr/bin/meith\"\n"
                   "args = [\"mcp\", \"--client\", \"cursor\"]\n");
    CHECK(is_connected(*toml, client_format::codex));

    // Not a config: refused, saying so.
    CHECK_FALSE(connected_config("[1,2]", client_format::mcp_servers, false, cmd, why));
    CHECK_THAT(why, Catch::Contains("not a JSON object"));
}
