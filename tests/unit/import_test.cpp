// config/import: other clients' MCP configs read, credentials found, names made, npx launches
// recognised, and entries written and replaced in a meithd.toml (docs/bring-your-servers.md).
#include "config/config.hpp"
#include "config/import.hpp"

#include <catch2/catch.hpp>

using namespace meith::config::import;

namespace unit_import_test { // one namespace per file: the tests build as unity batches

TEST_CASE("import: Claude's mcpServers, VS Code's servers and Codex's TOML are read",
          "[config][import]") {
    std::string why;
    const auto claude = read_client_config(R"({"mcpServers":{
        "memory":{"command":"npx","args":["-y","@modelcontextprotocol/server-memory"],
                  "env":{"MEMORY_FILE_PATH":"/tmp/m.json"}},
        "remote":{"type":"http","url":"https://mcp.example.com/mcp",
                  "headers":{"Authorization":"Bearer abc"}},
        "spaced":{"command":"npx -y some-server --flag"},
        "boxed":{"command":"docker","args":["run","-i","--rm","mcp/fetch"]},
        "off":{"command":"node","args":["x.js"],"disabled":true}}})",
                                           false, why);
    REQUIRE(claude.size() == 5);
    CHECK(claude[0].name == "memory");
    CHECK(claude[0].command ==
          std::vector<std::string>{"npx", "-y", "@modelcontextprotocol/server-memory"});
    CHECK(claude[0].env.at("MEMORY_FILE_PATH") == "/tmp/m.json");
    CHECK(claude[0].off_reason.empty());
    CHECK(claude[1].url == "https://mcp.example.com/mcp");
    CHECK(claude[1].headers.at("Authorization") == "Bearer abc");
    CHECK(claude[2].command == std::vector<std::string>{"npx", "-y", "some-server", "--flag"});
    CHECK_THAT(claude[3].off_reason, Catch::Contains("container"));
    CHECK_THAT(claude[4].off_reason, Catch::Contains("switched off"));

    // VS Code: `servers`, with comments (JSONC) and `type`.
    const auto vscode = read_client_config(R"({
        // the user's servers
        "servers":{"fs":{"type":"stdio","command":"npx","args":["-y","@modelcontextprotocol/server-filesystem","/srv"]},
                   "old":{"type":"sse","url":"https://x.example/sse"}}})",
                                           false, why);
    REQUIRE(vscode.size() == 2);
    CHECK(vscode[0].command.back() == "/srv");
    CHECK_THAT(vscode[1].off_reason, Catch::Contains("HTTP+SSE"));

    // Claude Code's ~/.claude.json: the projects' servers too, the same one once.
    const auto projects = read_client_config(R"({"projects":{
        "/a":{"mcpServers":{"m":{"command":"node","args":["m.js"]}}},
        "/b":{"mcpServers":{"m":{"command":"node","args":["m.js"]},"n":{"command":"n"}}}}})",
                                             false, why);
    REQUIRE(projects.size() == 2);
    CHECK(projects[1].name == "n");

    const auto codex = read_client_config(R"([mcp_servers.docs]
command = "npx"
args = ["-y", "@upstash/context7-mcp"]
env = { CONTEXT7_API_KEY = "ctx7sk-0123456789abcdef0123" }

[mcp_servers.web]
url = "https://mcp.example.com/mcp"
http_headers = { "X-Team" = "blue" }
)",
                                          true, why);
    REQUIRE(codex.size() == 2);
    CHECK(codex[0].command.size() == 3);
    CHECK(codex[0].env.at("CONTEXT7_API_KEY").starts_with("ctx7sk-"));
    CHECK(codex[1].headers.at("X-Team") == "blue");

    // Not a client config: said so.
    CHECK(read_client_config(R"({"foo":1})", false, why).empty());
    CHECK_THAT(why, Catch::Contains("mcpServers"));
    CHECK(read_client_config("not json", false, why).empty());
}

TEST_CASE("import: credentials are found by name and by shape, and nothing else",
          "[config][import]") {
    CHECK(holds_credential("GITHUB_PERSONAL_ACCESS_TOKEN", "x"));
    CHECK(holds_credential("BRAVE_API_KEY", "x"));
    CHECK(holds_credential("DB_PASSWORD", "x"));
    CHECK(holds_credential("Authorization", "Bearer abc"));
    CHECK(holds_credential("CLIENT_SECRET_VALUE", "x"));
    CHECK(holds_credential("ANYTHING", "ghp_0123456789abcdefghijklmnop"));
    CHECK(holds_credential("URL", "postgresql://app:pw@127.0.0.1/db"));
    CHECK(holds_credential("SOMETHING", "a1b2c3d4e5f6g7h8i9j0k1l2m3"));
    CHECK_FALSE(holds_credential("MEMORY_FILE_PATH", "/home/u/.cache/memory.json"));
    CHECK_FALSE(holds_credential("LOG_LEVEL", "debug"));
    CHECK_FALSE(holds_credential("URL", "https://example.com/a/b"));
    CHECK_FALSE(holds_credential("GITHUB_TOKEN", "${GITHUB_TOKEN}")); // a reference, not a value
    CHECK_FALSE(holds_credential("GITHUB_TOKEN", ""));
    CHECK(argument_holds_credential("postgresql://user:secret@localhost/db"));
    CHECK_FALSE(argument_holds_credential("postgresql://localhost/db"));
    CHECK_FALSE(argument_holds_credential("--port=8080"));
}

TEST_CASE("import: names, launchers and package specs", "[config][import]") {
    CHECK(source_name("Sequential Thinking") == "sequential-thinking");
    CHECK(source_name("@scope/pkg") == "scope-pkg");
    CHECK(source_name("GitHub_MCP") == "github_mcp");
    CHECK(source_name("***") == "server");

    auto r = launcher_of({"npx", "-y", "@playwright/mcp@0.0.41", "--browser", "chromium"});
    REQUIRE(r);
    CHECK(r->package == "@playwright/mcp@0.0.41");
    CHECK(r->args == std::vector<std::string>{"--browser", "chromium"});
    CHECK(package_name(r->package) == "@playwright/mcp");
    CHECK(package_name("left-pad@1.3.0") == "left-pad");
    CHECK(package_name("left-pad") == "left-pad");
    r = launcher_of({"npm", "exec", "--yes", "server-x", "--", "a"});
    REQUIRE(r);
    CHECK(r->package == "server-x");
    CHECK(launcher_of({"pnpm", "dlx", "pkg"})->package == "pkg");
    CHECK(launcher_of({"bunx", "pkg", "x"})->args == std::vector<std::string>{"x"});
    CHECK_FALSE(launcher_of({"node", "server.js"}));
    CHECK_FALSE(launcher_of({"npx", "--registry", "https://r", "pkg"})); // an option not known
}

TEST_CASE("import: an entry is written as TOML meith reads, and replaced in place",
          "[config][import]") {
    source_plan p;
    p.name = "memory";
    p.command = {"node", "/s/node_modules/x/dist/index.js", "a \"quoted\" arg"};
    p.env = {{"API_KEY", "${secret:memory.API_KEY}"}, {"PLAIN", "v"}};
    p.cwd = "/state/memory";
    p.prefix = "memory_";
    p.comments = {"Imported from .mcp.json."};
    const std::string entry = source_toml(p);
    CHECK(entry.starts_with("# Imported from .mcp.json.\n[[sources]]\nname = \"memory\"\n"));
    const auto loaded = meith::config::parse_config(entry, "meithd.toml", "/etc");
    INFO(entry << (loaded.error ? loaded.error->to_string() : ""));
    REQUIRE(loaded.value);
    const auto& src = loaded.value->sources.at(0);
    CHECK(src.command.at(2) == "a \"quoted\" arg");
    CHECK(src.env.at("API_KEY") == "${secret:memory.API_KEY}");
    CHECK(src.prefix == "memory_");
    CHECK(src.trust_annotations);
    CHECK(src.instances == meith::config::instance_mode::shared);
    // A browser server's entry: one instance per session, as each client ran its own.
    source_plan browser = p;
    browser.profile = {"browser"};
    browser.per_session = true;
    const std::string browser_entry = source_toml(browser);
    CHECK_THAT(browser_entry,
               Catch::Contains("profile = [\"browser\"]\ninstances = \"per-session\"\n"));
    const auto browser_loaded = meith::config::parse_config(browser_entry, "meithd.toml", "/etc");
    REQUIRE(browser_loaded.value);
    CHECK(browser_loaded.value->sources.at(0).instances ==
          meith::config::instance_mode::per_session);

    // Written into a file that has other entries: appended, then replaced in place, the other
    // entries and comments kept byte for byte.
    const std::string file = "# my config\n[limits]\nmax_connections = 8\n\n[[sources]]\n"
                             "name = \"echo\"\nkind = \"exec\"\ncommand = [\"e\"]\n"
                             "tool = { name = \"e\", description = \"e\" }\n";
    bool replaced = true;
    const std::string once = with_source_entry(file, "memory", entry, replaced);
    CHECK_FALSE(replaced);
    CHECK(once.starts_with(file));
    CHECK(source_entry_text(once, "memory") == entry);
    p.env["PLAIN"] = "w";
    const std::string changed = source_toml(p);
    const std::string twice = with_source_entry(once, "memory", changed, replaced);
    CHECK(replaced);
    CHECK(twice == file + "\n" + changed);
    CHECK(source_entry_text(twice, "echo").has_value());

    // Switched off: commented out with the reason, and meith reads no source from it.
    p.off_reason = "it runs in a container";
    const std::string off = source_toml(p);
    CHECK_THAT(off, Catch::Contains("# Not imported to run: it runs in a container"));
    CHECK_THAT(off, Catch::Contains("# [[sources]]"));
    const auto none = meith::config::parse_config(off, "meithd.toml", "/etc");
    REQUIRE(none.value);
    CHECK(none.value->sources.empty());
}

TEST_CASE("import: a package that drives a browser gets the browser profile, and "
          "chrome-devtools-mcp the flag that starts Chromium without its own sandbox",
          "[config][import]") {
    using namespace meith::config::import;
    CHECK(profile_for_package("@playwright/mcp") == std::vector<std::string>{"browser"});
    CHECK(profile_for_package("chrome-devtools-mcp") == std::vector<std::string>{"browser"});
    CHECK(profile_for_package("@modelcontextprotocol/server-memory").empty());
    CHECK(browser_args_for_package("chrome-devtools-mcp") ==
          std::vector<std::string>{"--chrome-arg=--no-sandbox"});
    CHECK(browser_args_for_package("@playwright/mcp").empty());
}

} // namespace unit_import_test
