// `meith import` as a user meets it (docs/bring-your-servers.md): a Claude Code `.mcp.json`
// written as people write them — `npx` entries of popular servers from npm (memory,
// everything with an API key in its env, filesystem, sequential-thinking, postgres with a
// database URL and its password on its command line, against Debian's PostgreSQL, Playwright
// with Debian's chromium), a node fixture, a docker entry — imported with one command into a
// fresh home, with no hand edit of meithd.toml; then the official SDK client, through `meith
// mcp`, calls a tool of each server, each confined by its sandbox, and Playwright navigates to
// a page on 127.0.0.1 and reads its snapshot.
//
// The packages are the versions pinned in tests/mcp/package-lock.json; npm installs them from
// its registry (or its cache) into the test's own server store, as it would on a user's machine.
#include "e2e/daemon_fixture.hpp"
#include "e2e/postgres_server.hpp"
#include "test_skip.hpp"

#include <catch2/catch.hpp>

#include <fstream>
#include <memory>
#include <stdexcept>

using namespace meith::test;
using namespace std::chrono_literals;

namespace e2e_import_test { // one namespace per file: the tests build as unity batches

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

/// The version of @playwright/mcp that tests/mcp's lock file pins, as "@playwright/mcp@V".
std::string playwright_spec() {
    const json pkg = json::parse(
        slurp(fs::path(mcp_dir()) / "node_modules" / "@playwright" / "mcp" / "package.json"));
    return "@playwright/mcp@" + pkg["version"].get<std::string>();
}

/// A page served on 127.0.0.1 (python3's http.server) for Playwright to read.
struct served_page {
    temp_dir site;
    int port = free_tcp_port();
    std::unique_ptr<background_process> web;
    explicit served_page(const std::string& html) {
        std::ofstream(site.path / "index.html") << html;
        web = std::make_unique<background_process>(
            std::vector<std::string>{"python3", "-u", "-m", "http.server", std::to_string(port),
                                     "--bind", "127.0.0.1", "--directory", site.path.string()});
        if (!web->wait_for("Serving HTTP", 15s))
            throw std::runtime_error("python3 -m http.server did not start");
    }
    std::string url() const { return "http://127.0.0.1:" + std::to_string(port) + "/"; }
};

json run_bridge_calls(const fs::path& home, const json& calls) {
    const fs::path file = home / "calls.json";
    std::ofstream(file) << calls.dump();
    return run_json_command("MEITH_NO_AUTOSTART=1 CALLS_JSON=\"$(cat '" + file.string() +
                            "')\" node '" + mcp_dir() + "/bridge_client.mjs' calls '" + MEITH_CLI +
                            "' '" + home.string() + "'");
}

/// Playwright (tests/mcp's pinned @playwright/mcp) as source "pw" (prefix pw_) with Debian's
/// chromium, written as a person writes it by hand: the process's needs in `profile`, the
/// tools' in a glob; plugins may use controls-browser. `extra`: more keys of the entry.
std::string playwright_toml(const std::string& extra = "") {
    const std::string cli = mcp_dir() + "/node_modules/@playwright/mcp/cli.js";
    return "[[sources]]\nname = \"pw\"\nkind = \"mcp\"\ncommand = [\"node\", " + json(cli).dump() +
           ", \"--headless\", \"--executable-path\", \"/usr/bin/chromium\"]\n"
           "prefix = \"pw_\"\nprofile = \"browser\"\n"
           "capabilities = { \"browser_*\" = [\"controls-browser\"] }\n" +
           extra + "[permissions.callers.plugin]\nallow = [\"read-only\", \"controls-browser\"]\n";
}

} // namespace

TEST_CASE("import: a .mcp.json of npx servers comes in with one command, its secrets kept "
          "apart, and the SDK client calls each server through meith mcp",
          "[e2e][import][slow]") {
    if (const auto why = postgres_server::missing(); !why.empty()) SKIP_TEST(why);
    const std::string db_password = "pg-s3cret-9f1d7c";
    postgres_server db("app", db_password);
    if (!fs::exists("/usr/bin/chromium"))
        SKIP_TEST("Debian's chromium is not installed (scripts/install-deps installs it)");
    temp_dir work, keys;
    const served_page page("<html><head><title>Meith test page</title></head><body><h1>Hello "
                           "from loopback</h1><p>served for the import test</p></body></html>\n");
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
          {"thinking",
           {{"command", "npx"}, {"args", {"-y", pinned("server-sequential-thinking")}}}},
          {"postgres", {{"command", "npx"}, {"args", {"-y", pinned("server-postgres"), db.url()}}}},
          {"playwright",
           {{"command", "npx"},
            {"args", {playwright_spec(), "--headless", "--executable-path", "/usr/bin/chromium"}}}},
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
            CHECK_THAT(r.out, Catch::Contains("7 sources imported, 1 written switched off"));
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
    // Nor in the comment that says what the command was before it was pinned.
    CHECK(imported.find(db_password) == std::string::npos);
    CHECK_THAT(imported, Catch::Contains("(was: npx -y " + pinned("server-postgres") +
                                         " ${secret:postgres.arg2})"));
    CHECK_THAT(imported, Catch::Contains("\"${secret:everything.EVERYTHING_API_KEY}\""));
    CHECK_THAT(imported, Catch::Contains("\"${secret:shots.arg3}\""));
    const auto secrets = run_cli({"secret", "list"}, d.home());
    CHECK(secrets.out == "everything.EVERYTHING_API_KEY\npostgres.arg2\nshots.arg3\n");
    // npx is gone from the commands: each package pinned in the store, run with node.
    CHECK(imported.find("\"npx\"") == std::string::npos);
    CHECK_THAT(imported, Catch::Contains("# Pinned: " + pinned("server-memory")));
    CHECK(fs::exists(work.path / "data" / "meith" / "servers" / "memory" / "package-lock.json"));
    // The docker entry is there, switched off, with its reason.
    CHECK_THAT(imported, Catch::Contains("# Not imported to run: it runs in a container"));

    // Every source runs confined: none of them says "unconfined".
    const auto sources = run_cli({"sources"}, d.home());
    INFO(sources.out);
    for (const char* name : {"memory", "everything", "filesystem", "thinking", "postgres", "shots"})
        CHECK_THAT(sources.out, Catch::Matches("(.|\n)*\n" + std::string(name) +
                                               " +mcp +ready .* confined(.|\n)*"));
    // Playwright runs a browser per agent (`instances = "per-session"`): none before a call.
    CHECK_THAT(sources.out, Catch::Matches("(.|\n)*\nplaywright +mcp +idle .* confined(.|\n)*"));
    CHECK_THAT(imported, Catch::Contains("instances = \"per-session\""));
    // Playwright's process runs Chromium: the import named the profile that lets it.
    CHECK_THAT(imported, Catch::Contains("profile = [\"browser\"]"));
    const auto detail = run_cli({"sources", "playwright"}, d.home());
    CHECK_THAT(detail.out, Catch::Contains("confined: runs programs, network (profile browser)"));
    // server-postgres declares nothing, so its `query` has MCP's default annotations (it may
    // write, destructively): the default policy denies it to an agent until a person at a
    // terminal grants it, as `meith grant` does.
    auto person = connect_approver(d);
    person->send({{"type", "grant"},
                  {"protocol", 1},
                  {"requestId", "g1"},
                  {"grant",
                   {{"tool", "postgres_query"},
                    {"caller", "plugin"},
                    {"capabilities", {"writes-files", "accesses-network", "destructive"}}}}});
    const json granted = person->read();
    CHECK(granted["type"] == "grant_result");
    // Likewise Playwright's navigation (annotated destructive).
    person->send({{"type", "grant"},
                  {"protocol", 1},
                  {"requestId", "g2"},
                  {"grant",
                   {{"tool", "playwright_browser_navigate"},
                    {"caller", "plugin"},
                    {"capabilities", {"writes-files", "accesses-network", "destructive"}}}}});
    CHECK(person->read()["type"] == "grant_result");

    const json out = run_bridge_calls(
        d.home(),
        json::array(
            {{{"name", "memory_read_graph"}, {"arguments", json::object()}},
             {{"name", "everything_echo"}, {"arguments", {{"message", "hi"}}}},
             {{"name", "filesystem_list_directory"}, {"arguments", {{"path", files.string()}}}},
             {{"name", "shots_shot"}, {"arguments", {{"name", "page"}}}},
             {{"name", "thinking_sequentialthinking"},
              {"arguments",
               {{"thought", "one step"},
                {"nextThoughtNeeded", false},
                {"thoughtNumber", 1},
                {"totalThoughts", 1}}}},
             {{"name", "postgres_query"}, {"arguments", {{"sql", "SELECT 20 + 22 AS answer"}}}},
             {{"name", "playwright_browser_navigate"}, {"arguments", {{"url", page.url()}}}},
             {{"name", "playwright_browser_snapshot"}, {"arguments", json::object()}}}));
    INFO(out.dump(2) << "\n" << d.log());
    REQUIRE(out["calls"].size() == 8);
    for (const auto& c : out["calls"]) {
        CAPTURE(c);
        CHECK(c["isError"] == false);
    }
    CHECK_THAT(out["calls"][1]["text"].get<std::string>(), Catch::Contains("hi"));
    CHECK_THAT(out["calls"][2]["text"].get<std::string>(), Catch::Contains("hello.txt"));
    CHECK(out["calls"][3]["text"] == "page.png");
    CHECK_THAT(out["calls"][4]["text"].get<std::string>(), Catch::Contains("\"thoughtNumber\": 1"));
    CHECK_THAT(out["calls"][5]["text"].get<std::string>(), Catch::Contains("\"answer\": 42"));
    CHECK_THAT(out["calls"][6]["text"].get<std::string>(), Catch::Contains("Meith test page"));
    CHECK_THAT(out["calls"][7]["text"].get<std::string>(), Catch::Contains("Hello from loopback"));

    // Neither value in the audit log or meithd's log.
    const std::string everything = slurp(d.home() / "audit.jsonl") + d.log();
    CHECK(everything.find(api_key) == std::string::npos);
    CHECK(everything.find("pa55-w0rd") == std::string::npos);
    CHECK(everything.find(db_password) == std::string::npos);
}

TEST_CASE("sources update: a source pinned to an older version moves to the newest one, shown "
          "first, and its tools' definitions are checked when meithd lists them",
          "[e2e][import][slow]") {
    temp_dir work, keys;
    env_override key("MEITH_SECRETS_KEY", (keys.path / "secrets.key").string());
    env_override own("MEITH_SECRET_SERVICE", "off");
    env_override data("XDG_DATA_HOME", (work.path / "data").string());
    env_override state("XDG_STATE_HOME", (work.path / "state").string());
    const std::string older = "2026.1.26";
    const json mcp = {{"mcpServers",
                       {{"memory",
                         {{"command", "npx"},
                          {"args", {"-y", "@modelcontextprotocol/server-memory@" + older}}}}}}};
    const fs::path config = work.path / ".mcp.json";
    std::ofstream(config) << mcp.dump(2);
    // The newest version, as npm says now (what the update must move to).
    const auto newest = run_program(
        {"/bin/sh"}, {"-c", "npm view @modelcontextprotocol/server-memory version"}, {}, 60s);
    REQUIRE(newest.status == 0);
    const std::string version = newest.out.substr(0, newest.out.find('\n'));
    REQUIRE(version != older);

    daemon_process d(
        "", {},
        [&](const fs::path& home) {
            REQUIRE(run_cli({"import", config.string(), "--yes"}, home, 240s).status == 0);
            const std::string before = slurp(home / "meithd.toml");
            CHECK_THAT(before,
                       Catch::Contains("Pinned: @modelcontextprotocol/server-memory@" + older));

            const auto dry = run_cli({"sources", "update", "memory", "--dry-run"}, home, 120s);
            INFO(dry.out << dry.err);
            REQUIRE(dry.status == 0);
            CHECK_THAT(dry.out, Catch::Contains("memory: @modelcontextprotocol/server-memory " +
                                                older + " -> " + version));
            CHECK_THAT(dry.out, Catch::Contains("+# Pinned: @modelcontextprotocol/server-memory@" +
                                                version));
            CHECK(slurp(home / "meithd.toml") == before);
            // Not a terminal, no --yes: refused, saying which flag to give.
            CHECK(run_cli({"sources", "update", "memory"}, home, 120s).status == 2);

            const auto r = run_cli({"sources", "update", "memory", "--yes"}, home, 240s);
            INFO(r.out << r.err);
            REQUIRE(r.status == 0);
            CHECK_THAT(slurp(home / "meithd.toml"),
                       Catch::Contains("Pinned: @modelcontextprotocol/server-memory@" + version));
            const json lock = json::parse(
                slurp(work.path / "data" / "meith" / "servers" / "memory" / "package-lock.json"));
            CHECK(lock["packages"]["node_modules/@modelcontextprotocol/server-memory"]["version"] ==
                  version);
            // At the newest version already: nothing to change.
            const auto again = run_cli({"sources", "update", "memory", "--yes"}, home, 120s);
            CHECK(again.status == 0);
            CHECK_THAT(again.out, Catch::Contains("is at its newest version"));
            // A source import did not pin: said so.
            const auto unpinned = run_cli({"sources", "update", "nosuch"}, home, 60s);
            CHECK(unpinned.status != 0);
            CHECK_THAT(unpinned.err, Catch::Contains("no source named 'nosuch'"));
        },
        std::chrono::seconds(120));
    // The updated server runs: meithd lists its tools.
    const json out = run_bridge_calls(
        d.home(), json::array({{{"name", "memory_read_graph"}, {"arguments", json::object()}}}));
    INFO(out.dump(2) << "\n" << d.log());
    REQUIRE(out["calls"].size() == 1);
    CHECK(out["calls"][0]["isError"] == false);
}

TEST_CASE("profiles: Playwright runs in the browser profile, its tools declared controls-browser "
          "by a glob, and an agent allowed controls-browser but not starts-process drives it",
          "[e2e][profiles][slow]") {
    if (!fs::exists("/usr/bin/chromium"))
        SKIP_TEST("Debian's chromium is not installed (scripts/install-deps installs it)");
    temp_dir state;
    env_override state_home("XDG_STATE_HOME", state.path.string());
    const served_page page(
        "<html><head><title>Profile page</title></head><body><button>Press me</button></body>"
        "</html>\n");
    daemon_process d(playwright_toml(), {}, {}, 60s);
    client c(d.socket());
    const json s = source_status(c, "pw");
    CHECK(s["sandbox"]["profile"] == "browser");
    CHECK(s["sandbox"]["capabilities"] == json::array({"starts-process", "accesses-network"}));
    // The policy sees the tools' capability, the sandbox the process's.
    const auto check =
        run_cli({"policy", "check", "pw_browser_navigate", "--caller", "plugin"}, d.home());
    CHECK(check.status == 0);
    CHECK_THAT(check.out, Catch::Contains("capabilities: controls-browser"));

    const json out = run_bridge_calls(
        d.home(),
        json::array({{{"name", "pw_browser_navigate"}, {"arguments", {{"url", page.url()}}}},
                     {{"name", "pw_browser_snapshot"}, {"arguments", json::object()}}}));
    INFO(out.dump(2) << "\n" << d.log());
    REQUIRE(out["calls"].size() == 2);
    CHECK(out["calls"][0]["isError"] == false);
    CHECK_THAT(out["calls"][0]["text"].get<std::string>(), Catch::Contains("Profile page"));
    CHECK(out["calls"][1]["isError"] == false);
    CHECK_THAT(out["calls"][1]["text"].get<std::string>(), Catch::Contains("Press me"));
    // Chromium kept its profile in the source's state folder, nowhere else it could write.
    CHECK(fs::exists(state.path / "meith" / "sources" / "pw" / "cache" / "ms-playwright-mcp"));
}

TEST_CASE("instances: Playwright per session gives two SDK clients a browser each, one's "
          "browser_close leaves the other's page, and a client's browser is gone after it leaves",
          "[e2e][instances][slow]") {
    if (!fs::exists("/usr/bin/chromium"))
        SKIP_TEST("Debian's chromium is not installed (scripts/install-deps installs it)");
    temp_dir state;
    env_override state_home("XDG_STATE_HOME", state.path.string());
    const served_page page_a("<html><head><title>Page of A</title></head><body><p>alpha "
                             "content</p></body></html>\n");
    const served_page page_b("<html><head><title>Page of B</title></head><body><p>bravo "
                             "content</p></body></html>\n");
    daemon_process d(playwright_toml("instances = \"per-session\"\ninstance_grace_ms = 1000\n"), {},
                     {}, 60s);
    const json out = run_json_command(
        "MEITH_NO_AUTOSTART=1 node '" + mcp_dir() + "/bridge_client.mjs' pair '" + MEITH_CLI +
        "' '" + d.home().string() + "' '" + page_a.url() + "' '" + page_b.url() + "'");
    INFO(out.dump(2) << "\n" << d.log());
    CHECK(out["navA"]["isError"] == false);
    CHECK(out["navB"]["isError"] == false);
    // Each client's snapshot shows its own page, though they navigated at the same time.
    CHECK_THAT(out["snapA"]["text"].get<std::string>(), Catch::Contains("alpha content"));
    CHECK_THAT(out["snapA"]["text"].get<std::string>(), !Catch::Contains("bravo"));
    CHECK_THAT(out["snapB"]["text"].get<std::string>(), Catch::Contains("bravo content"));
    CHECK_THAT(out["snapB"]["text"].get<std::string>(), !Catch::Contains("alpha"));
    // A's browser_close closed A's page only.
    CHECK(out["closeA"]["isError"] == false);
    CHECK_THAT(out["snapBAfterClose"]["text"].get<std::string>(), Catch::Contains("bravo content"));
    CHECK(out["navAAgain"]["isError"] == false);
    REQUIRE(out["instances"].size() == 2);
    // A disconnected: after the grace, nothing of its instance runs (the server and its
    // browser), while B's goes on.
    CHECK(out["processesUnderA"].get<int>() >= 3); // at least the server, chromium, a renderer
    CHECK(out["aliveUnderAAfterGrace"] == 0);
    CHECK(out["instancesAfter"] == json::array({"agent-b"}));
    CHECK_THAT(out["snapBLast"]["text"].get<std::string>(), Catch::Contains("bravo content"));
}

TEST_CASE("profiles: chrome-devtools-mcp, named as its package, starts Debian's chromium in the "
          "browser profile on a runtime folder longer than /run/user/1000",
          "[e2e][profiles][slow]") {
    if (!fs::exists("/usr/bin/chromium"))
        SKIP_TEST("Debian's chromium is not installed (scripts/install-deps installs it)");
    temp_dir state, runtime;
    env_override state_home("XDG_STATE_HOME", state.path.string());
    fs::permissions(runtime.path, fs::perms::owner_all); // a runtime folder is the user's alone
    const served_page page(
        "<html><head><title>Devtools page</title></head><body><button>Hit me</button></body>"
        "</html>\n");
    // Its TMPDIR (Chromium's SingletonSocket goes there) under a runtime folder of 21
    // characters, longer than /run/user/1000; the Unix socket must still fit in sun_path.
    std::unique_ptr<daemon_process> d;
    {
        env_override xdg("XDG_RUNTIME_DIR", runtime.path.string());
        const std::string bin =
            mcp_dir() + "/node_modules/chrome-devtools-mcp/build/src/bin/chrome-devtools-mcp.js";
        d = std::make_unique<daemon_process>(
            "[[sources]]\nname = \"chrome-devtools-mcp\"\nkind = \"mcp\"\ncommand = [\"node\", " +
                json(bin).dump() +
                ", \"--headless\", \"--isolated\", \"--executablePath\", \"/usr/bin/chromium\", "
                "\"--chrome-arg=--no-sandbox\", \"--no-usage-statistics\"]\n"
                "prefix = \"cd_\"\nprofile = \"browser\"\n"
                "capabilities = { \"*\" = [\"controls-browser\"] }\n"
                "[permissions.callers.plugin]\nallow = [\"read-only\", \"controls-browser\"]\n",
            std::vector<std::string>{}, std::function<void(const fs::path&)>{}, 60s);
    }
    client c(d->socket());
    const json s = source_status(c, "chrome-devtools-mcp");
    CHECK(s["sandbox"]["profile"] == "browser");
    CHECK_FALSE(s["sandbox"].contains("unconfined"));
    const json out = run_bridge_calls(
        d->home(), json::array({{{"name", "cd_new_page"}, {"arguments", {{"url", page.url()}}}},
                                {{"name", "cd_take_snapshot"}, {"arguments", {{"pageId", 2}}}}}));
    INFO(out.dump(2) << "\n" << d->log());
    REQUIRE(out["calls"].size() == 2);
    CHECK(out["calls"][0]["isError"] == false);
    CHECK_THAT(out["calls"][0]["text"].get<std::string>(), Catch::Contains("Devtools page"));
    CHECK(out["calls"][1]["isError"] == false);
    CHECK_THAT(out["calls"][1]["text"].get<std::string>(), Catch::Contains("Hit me"));
}

TEST_CASE("profiles: a command that still says npx runs in the npx profile: the launcher fetches "
          "into the source's own folder, and the server answers",
          "[e2e][profiles][slow]") {
    temp_dir state;
    env_override state_home("XDG_STATE_HOME", state.path.string());
    // As a hand-written entry says it; npm's cache is the source's (cold): npx fetches.
    daemon_process d("[[sources]]\nname = \"mem\"\nkind = \"mcp\"\ncommand = [\"npx\", \"-y\", " +
                         json(pinned("server-memory")).dump() +
                         "]\nprefix = \"mem_\"\ntrust_annotations = true\nprofile = \"npx\"\n"
                         "start_timeout_ms = 180000\n",
                     {}, {}, 200s);
    client c(d.socket());
    CHECK(source_status(c, "mem")["sandbox"]["profile"] == "npx");
    const json out = run_bridge_calls(
        d.home(), json::array({{{"name", "mem_read_graph"}, {"arguments", json::object()}}}));
    INFO(out.dump(2) << "\n" << d.log());
    REQUIRE(out["calls"].size() == 1);
    CHECK(out["calls"][0]["isError"] == false);
    CHECK(fs::is_directory(state.path / "meith" / "sources" / "mem" / "npm-cache"));
}

} // namespace e2e_import_test
