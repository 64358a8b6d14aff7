// End-to-end tests of the paths the sandbox keeps read-only inside writable roots, and of a
// cwd that holds meithd's home (docs/protocol.md §15, "Protected paths"): a real confined exec
// tool (tests/exec/sandbox_probe.mjs) writing and renaming in a temporary project.
#include "daemon_fixture.hpp"

#include <catch2/catch.hpp>

#include <fstream>

using namespace meith::test;

namespace e2e_protected_paths_test { // one namespace per file: the tests build as unity batches

namespace {

std::string probe_source(const std::string& name, const fs::path& cwd,
                         const std::string& extra = "") {
    return "[[sources]]\nname = \"" + name + "\"\nkind = \"exec\"\ncommand = [\"node\", \"" +
           std::string(MEITH_SOURCE_DIR) +
           "/tests/exec/sandbox_probe.mjs\"]\ncwd = " + json(cwd.string()).dump() +
           "\ntool = { name = \"" + name +
           "\", description = \"sandbox probe\", capabilities = [\"writes-files\"] }\n" + extra +
           "\n";
}

const std::string cli_writes = "[permissions.callers.plugin]\nallow = [\"read-only\", "
                               "\"writes-files\"]\n\n";

/// What the probe reported: "ok", or the error code of the refused operation.
std::string outcome(client& c, const std::string& tool, const json& args) {
    const json r = c.call(tool, args);
    REQUIRE(r["result"]["ok"] == true);
    const json& v = r["result"]["content"];
    return v.value("done", false) ? "ok" : v.value("code", "?");
}

void write_file(const fs::path& p, const std::string& text) {
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
}

} // namespace

TEST_CASE("protected paths: .git/hooks, .git/config, .mcp.json and .vscode stay read-only inside "
          "a writable root, writes beside them work, sandbox_paths.write lifts one by name",
          "[e2e][sandbox][protected]") {
    REQUIRE_KERNEL_SANDBOX(true);
    temp_dir work;
    const fs::path w = work.path;
    write_file(w / ".git/hooks/pre-commit.sample", "#!/bin/sh\n");
    write_file(w / ".git/config", "[core]\n");
    write_file(w / ".git/HEAD", "ref: refs/heads/main\n");
    write_file(w / ".mcp.json", "{}\n");
    write_file(w / ".vscode/settings.json", "{}\n");
    daemon_process d(cli_writes + probe_source("w", w) +
                     probe_source("lift", w,
                                  "sandbox_paths = { write = [" +
                                      json((w / ".git/hooks").string()).dump() + "] }"));
    client c(d.socket());
    const auto write = [&](const std::string& tool, const fs::path& p) {
        return outcome(c, tool, {{"action", "write"}, {"path", p.string()}});
    };
    CHECK(write("w", w / ".git/hooks/pre-commit") == "EROFS");
    CHECK(write("w", w / ".git/config") == "EROFS");
    CHECK(write("w", w / ".mcp.json") == "EROFS");
    CHECK(write("w", w / ".vscode/settings.json") == "EROFS");
    CHECK(write("w", w / ".vscode/tasks.json") == "EROFS");
    // Beside them: the project, and the rest of .git (a commit still works).
    CHECK(write("w", w / "README.md") == "ok");
    CHECK(write("w", w / ".git/HEAD") == "ok");
    // Renaming .git (or .vscode) away to plant a fresh one: its folder is pinned.
    CHECK(outcome(c, "w",
                  {{"action", "rename"},
                   {"path", (w / ".git").string()},
                   {"to", (w / "git-moved").string()}}) == "EBUSY");
    CHECK(outcome(c, "w",
                  {{"action", "rename"},
                   {"path", (w / ".vscode").string()},
                   {"to", (w / "vscode-moved").string()}}) == "EBUSY");
    CHECK(slurp(w / ".git/config") == "[core]\n");
    CHECK(slurp(w / ".mcp.json") == "{}\n");
    CHECK(!fs::exists(w / ".git/hooks/pre-commit"));

    // The source's status names what it protects.
    const json st = source_status(c, "w")["sandbox"];
    const auto protected_list = st["protected"].dump();
    CHECK(protected_list.find(".git/hooks") != std::string::npos);
    CHECK(protected_list.find(".mcp.json") != std::string::npos);
    const auto shown = run_cli({"sources", "w"}, d.home());
    CHECK(shown.out.find("read-only:   " + (w / ".git/config").string()) != std::string::npos);

    // Named in sandbox_paths.write: .git/hooks is writable for that source; the rest stays.
    CHECK(write("lift", w / ".git/hooks/pre-commit") == "ok");
    CHECK(write("lift", w / ".git/config") == "EROFS");
}

TEST_CASE("protected paths: a repository without .git/hooks gets an empty one, read-only, and "
          "the folder core.hooksPath names is protected too, so no tool plants a hook",
          "[e2e][sandbox][protected]") {
    // A repository whose hooks folder is gone (deleted, or made by a tool that does not
    // create one): the tool could make .git/hooks/pre-commit, run by the next commit. And one
    // whose hooks live in the work tree (husky, a .githooks folder) by core.hooksPath.
    REQUIRE_KERNEL_SANDBOX(true);
    temp_dir work;
    const fs::path w = work.path;
    write_file(w / ".git/config", "[core]\n\tbare = false\n[Core]\n\thooksPath = \".githooks\"\n");
    write_file(w / ".githooks/README", "hooks\n");
    write_file(w / ".git/HEAD", "ref: refs/heads/main\n");
    daemon_process d(cli_writes + probe_source("w", w));
    client c(d.socket());
    CHECK(outcome(c, "w",
                  {{"action", "write"},
                   {"path", (w / ".git/hooks/pre-commit").string()},
                   {"parents", true}}) == "EROFS");
    CHECK(!fs::exists(w / ".git/hooks/pre-commit"));
    CHECK(outcome(c, "w", {{"action", "write"}, {"path", (w / ".githooks/pre-commit").string()}}) ==
          "EROFS");
    CHECK(!fs::exists(w / ".githooks/pre-commit"));
    CHECK(source_status(c, "w")["sandbox"]["protected"].dump().find(".githooks") !=
          std::string::npos);
    // The folder git itself makes, empty; nothing else is created in the project.
    CHECK(fs::is_directory(w / ".git/hooks"));
    CHECK(fs::is_empty(w / ".git/hooks"));
    CHECK(!fs::exists(w / ".mcp.json"));
    CHECK(!fs::exists(w / ".vscode"));
    CHECK(outcome(c, "w", {{"action", "write"}, {"path", (w / "notes.md").string()}}) == "ok");
}

TEST_CASE("a cwd that holds meithd's home: writes under it work, under the home they do not, "
          "and the home cannot be renamed away",
          "[e2e][sandbox][protected]") {
    REQUIRE_KERNEL_SANDBOX(true);
    // The fixture's home is /tmp/meith-e2e-XXXXXX: its folder holds it.
    daemon_process d(cli_writes + probe_source("up", fs::path("/tmp")));
    client c(d.socket());
    const json st = source_status(c, "up")["sandbox"];
    CHECK(!st.contains("writeWithheld"));
    const fs::path beside = fs::path("/tmp") / ("meith-protect-" + std::to_string(::getpid()));
    CHECK(outcome(c, "up", {{"action", "write"}, {"path", beside.string()}}) == "ok");
    CHECK(fs::exists(beside));
    fs::remove(beside);
    const std::string in_home =
        outcome(c, "up", {{"action", "write"}, {"path", (d.home() / "planted.txt").string()}});
    CHECK(in_home != "ok");
    CHECK(!fs::exists(d.home() / "planted.txt"));
    CHECK(outcome(c, "up",
                  {{"action", "rename"},
                   {"path", d.home().string()},
                   {"to", d.home().string() + "-moved"}}) == "EBUSY");
    CHECK(fs::exists(d.home() / "config.json"));
}

TEST_CASE("meithd's --config inside a tool's writable root stays read-only and its folder cannot "
          "be renamed away",
          "[e2e][sandbox][protected]") {
    REQUIRE_KERNEL_SANDBOX(true);
    temp_dir work;
    const fs::path w = work.path;
    const fs::path cfg = w / ".config/meith/meithd.toml";
    const std::string text = cli_writes + probe_source("w", w);
    write_file(cfg, text);
    daemon_process d("", {"--config", cfg.string()});
    client c(d.socket());
    CHECK(outcome(c, "w", {{"action", "write"}, {"path", cfg.string()}}) == "EROFS");
    CHECK(outcome(c, "w",
                  {{"action", "rename"},
                   {"path", (w / ".config/meith").string()},
                   {"to", (w / ".config/elsewhere").string()}}) == "EBUSY");
    CHECK(outcome(c, "w", {{"action", "write"}, {"path", (w / ".config/other.txt").string()}}) ==
          "ok");
    CHECK(slurp(cfg) == text);
}

} // namespace e2e_protected_paths_test
