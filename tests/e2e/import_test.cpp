// `meith import` as a user meets it (docs/bring-your-servers.md): a Claude Code `.mcp.json`
// written as people write them — `npx -y` entries of the reference servers from npm, one with
// an API key in its env, one with a database URL (a password) on its command line, a docker
// entry — imported with one command into a fresh home, with no hand edit of meithd.toml; then
// the official SDK client, through `meith mcp`, calls a tool of each server.
//
// The packages are the versions pinned in tests/mcp/package-lock.json; npm installs them from
// its registry (or its cache) into the test's own server store, as it would on a user's machine.
#include "e2e/daemon_fixture.hpp"

#include <catch2/catch.hpp>

#include <fstream>

using namespace meith::test;
using namespace std::chrono_literals;

namespace {

std::string mcp_dir() {
    return std::string(MEITH_SOURCE_DIR) + "/tests/mcp";
}

/// The version of @modelcontextprotocol/NAME that tests/mcp's lock file pins.
std::string pinned(const std::string& name) {
    const json pkg = json::parse(slurp(fs::path(mcp_dir()) / "node_modules" /
                                       "@modelcontextprotocol" / name / "package.json"));
    return "@modelcontextprotocol/" + name + "@" + pkg["version"].get<std::string>();
}

json run_bridge_calls(const fs::path& home, const json& calls) {
    const fs::path file = home / "calls.json";
    std::ofstream(file) << calls.dump();
    return run_json_command("MEITH_NO_AUTOSTART=1 CALLS_JSON=\"$(cat '" + file.string() +
                            "')\" node '" + mcp_dir() + "/bridge_client.mjs' calls '" + MEITH_CLI +
                            "' '" + home.string() + "'");
}

} // namespace

TEST_CASE("import: a .mcp.json of npx servers comes in with one command, its secrets kept "
          "apart, and the SDK client calls each server through meith mcp",
          "[e2e][import][slow]") {
    temp_dir work, keys;
    env_override key("MEITH_SECRETS_KEY", (keys.path / "secrets.key").string());
    env_override own("MEITH_SECRET_SERVICE", "off");
    env_override data("XDG_DATA_HOME", (work.path / "data").string());
    env_override state("XDG_STATE_HOME", (work.path / "state").string());
    const fs::path files = work.path / "files";
    fs::create_directories(files);
    std::ofstream(files / "hello.txt") << "hello\n";
    const std::string api_key = "sk-test-4f9a0c2e7b1d8e6f3a5c9b0d";
    const std::string db_url = "postgresql://app:pa55-w0rd-import@127.0.0.1:5432/app";
    const json mcp = {
        {"mcpServers",
         {{"memory",
           {{"command", "npx"},
            {"args", {"-y", pinned("server-memory")}},
            {"env", {{"MEMORY_FILE_PATH", (work.path / "memory.jsonl").string()}}}}},
          {"everything",
           {{"command", "npx"},
            {"args", {"-y", pinned("server-everything"), "stdio"}},
            {"env", {{"EVERYTHING_API_KEY", api_key}}}}},
          {"filesystem",
           {{"command", "npx"}, {"args", {"-y", pinned("server-filesystem"), files.string()}}}},
          {"shots",
           {{"command", "node"}, {"args", {mcp_dir() + "/fake_server.mjs", "--shot", db_url}}}},
          {"fetch", {{"command", "docker"}, {"args", {"run", "-i", "--rm", "mcp/fetch"}}}}}}};
    const fs::path config = work.path / ".mcp.json";
    std::ofstream(config) << mcp.dump(2);

    std::string imported;
    daemon_process d(
        "", {},
        [&](const fs::path& home) {
            // What it would write, first: nothing is written.
            const auto dry = run_cli({"import", config.string(), "--dry-run"}, home, 120s);
            INFO(dry.out << dry.err);
            REQUIRE(dry.status == 0);
            CHECK_THAT(dry.out, Catch::Contains("+name = \"memory\""));
            CHECK_THAT(dry.out, Catch::Contains("go to the secret store"));
            CHECK_FALSE(fs::exists(home / "meithd.toml"));
            CHECK_FALSE(fs::exists(work.path / "data" / "meith"));
            // Not a terminal, no flag: refused, saying which flag to give.
            const auto asked = run_cli({"import", config.string()}, home);
            CHECK(asked.status == 2);
            CHECK_THAT(asked.err, Catch::Contains("--yes"));

            const auto r = run_cli({"import", config.string(), "--yes"}, home, 240s);
            INFO(r.out << r.err);
            REQUIRE(r.status == 0);
            CHECK_THAT(r.out, Catch::Contains("4 sources imported, 1 written switched off"));
            imported = slurp(home / "meithd.toml");
            // Importing again is no change, byte for byte.
            const auto again = run_cli({"import", config.string(), "--yes"}, home, 120s);
            CHECK(again.status == 0);
            CHECK_THAT(again.out, Catch::Contains("nothing to change"));
            CHECK(slurp(home / "meithd.toml") == imported);
        },
        std::chrono::seconds(120));

    INFO(imported);
    // The key and the password are in the secret store, not in the config.
    CHECK(imported.find(api_key) == std::string::npos);
    CHECK(imported.find("pa55-w0rd") == std::string::npos);
    CHECK_THAT(imported, Catch::Contains("\"${secret:everything.EVERYTHING_API_KEY}\""));
    CHECK_THAT(imported, Catch::Contains("\"${secret:shots.arg3}\""));
    const auto secrets = run_cli({"secret", "list"}, d.home());
    CHECK(secrets.out == "everything.EVERYTHING_API_KEY\nshots.arg3\n");
    // npx is gone from the commands: each package pinned in the store, run with node.
    CHECK(imported.find("\"npx\"") == std::string::npos);
    CHECK_THAT(imported, Catch::Contains("# Pinned: " + pinned("server-memory")));
    CHECK(fs::exists(work.path / "data" / "meith" / "servers" / "memory" / "package-lock.json"));
    // The docker entry is there, switched off, with its reason.
    CHECK_THAT(imported, Catch::Contains("# Not imported to run: it runs in a container"));

    const json out = run_bridge_calls(
        d.home(), json::array({{{"name", "memory_read_graph"}, {"arguments", json::object()}},
                               {{"name", "everything_echo"}, {"arguments", {{"message", "hi"}}}},
                               {{"name", "filesystem_list_directory"},
                                {"arguments", {{"path", files.string()}}}},
                               {{"name", "shots_shot"}, {"arguments", {{"name", "page"}}}}}));
    INFO(out.dump(2) << "\n" << d.log());
    REQUIRE(out["calls"].size() == 4);
    for (const auto& c : out["calls"]) {
        CAPTURE(c);
        CHECK(c["isError"] == false);
    }
    CHECK_THAT(out["calls"][1]["text"].get<std::string>(), Catch::Contains("hi"));
    CHECK_THAT(out["calls"][2]["text"].get<std::string>(), Catch::Contains("hello.txt"));
    CHECK(out["calls"][3]["text"] == "page.png");

    // Neither value in the audit log or meithd's log.
    const std::string everything = slurp(d.home() / "audit.jsonl") + d.log();
    CHECK(everything.find(api_key) == std::string::npos);
    CHECK(everything.find("pa55-w0rd") == std::string::npos);
}
