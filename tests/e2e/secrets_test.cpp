// End-to-end tests of secrets (docs/security.md "Secrets"): `meith secret set` stores a value
// piped in (the terminal prompt is tests/cli/secret_tmux_test.sh), encrypted under a key kept
// apart; a source's env names it as ${secret:NAME} and gets it at each start; the value is
// redacted from the tool's echoed output, the audit log and meithd's log; a secret not set
// fails the source saying which command sets it; a confined tool reads neither file.
#include "daemon_fixture.hpp"

#include <catch2/catch.hpp>

#include <fstream>

#include <sys/stat.h>

using namespace meith::test;

namespace e2e_secrets_test { // one namespace per file: the tests build as unity batches

namespace {

cli_result secret_set(const fs::path& home, const std::string& name, const std::string& value) {
    return run_program({"/bin/sh"}, {"-c", "printf %s \"$VALUE\" | \"$MEITH\" secret set " + name},
                       {{"MEITH", MEITH_CLI}, {"MEITH_HOME", home.string()}, {"VALUE", value}});
}

int mode_of(const fs::path& p) {
    struct stat st {};
    REQUIRE(::stat(p.c_str(), &st) == 0);
    return static_cast<int>(st.st_mode & 0777);
}

/// An exec tool that prints its API_TOKEN whole and without its first four characters: the
/// second proves the value reached it, the first must come back redacted.
std::string token_tool(const fs::path& dir) {
    const fs::path script = dir / "token.sh";
    std::ofstream(script) << "read -r _\nprintf '{\"result\":{\"token\":\"%s\",\"tail\":\"%s\"}}' "
                             "\"$API_TOKEN\" \"${API_TOKEN#tok-}\"\n";
    return "[[sources]]\nname = \"tok\"\nkind = \"exec\"\ncommand = [\"sh\", " +
           json(script.string()).dump() +
           "]\nenv = { API_TOKEN = \"${secret:API_TOKEN}\" }\n"
           "tool = { name = \"show_token\", description = \"prints its token\", "
           "capabilities = [\"read-only\"] }\n";
}

} // namespace

TEST_CASE("secrets: meith secret set seals a value apart from its key, a source's env gets it "
          "at each run, and it is redacted from the result, the audit log and the log",
          "[e2e][secrets]") {
    temp_dir keys, tools;
    env_override key("MEITH_SECRETS_KEY", (keys.path / "k" / "secrets.key").string());
    env_override own("MEITH_SECRET_SERVICE", "off"); // meith's own store, whatever desktop runs
    const std::string first = "tok-first-0123456789abcdef";
    const std::string second = "tok-second-9876543210fedcba";
    daemon_process d(token_tool(tools.path));

    // Stored: the store 0600 in the home, without the value in the clear; the key 0600 in a
    // 0700 folder outside the home.
    const auto set = secret_set(d.home(), "API_TOKEN", first);
    INFO(set.out << set.err);
    REQUIRE(set.status == 0);
    CHECK_THAT(set.out, Catch::Contains("secret 'API_TOKEN' saved in"));
    CHECK_THAT(set.out + set.err, !Catch::Contains(first));
    const fs::path store = d.home() / "secrets.enc";
    CHECK(mode_of(store) == 0600);
    CHECK(mode_of(keys.path / "k" / "secrets.key") == 0600);
    CHECK(mode_of(keys.path / "k") == 0700);
    CHECK(slurp(store).find("first-0123") == std::string::npos);
    CHECK(slurp(store).rfind("meith-secrets 1\n", 0) == 0);
    const auto list = run_cli({"secret", "list"}, d.home());
    CHECK(list.status == 0);
    CHECK(list.out == "API_TOKEN\n");

    // Each run of the one-shot tool fills it in; what the tool echoes of it comes back
    // redacted, the rest of it whole.
    client c(d.socket());
    const json r = c.call("show_token", json::object());
    INFO(r.dump());
    REQUIRE(r["result"]["ok"] == true);
    CHECK(r["result"]["content"]["tail"] == "first-0123456789abcdef");
    CHECK(r["result"]["content"]["token"] == "[REDACTED]");

    // A new value is used at the next run, and is redacted too.
    REQUIRE(secret_set(d.home(), "API_TOKEN", second).status == 0);
    const json r2 = c.call("show_token", json::object());
    CHECK(r2["result"]["content"]["tail"] == "second-9876543210fedcba");
    CHECK(r2["result"]["content"]["token"] == "[REDACTED]");

    // Neither value in the audit log or meithd's log.
    d.wait_audit([&](const json& l) {
        return l["event"] == "tool_call" && l["requestId"] == r2["requestId"];
    });
    const std::string everything = slurp(d.home() / "audit.jsonl") + d.log();
    CHECK(everything.find(first) == std::string::npos);
    CHECK(everything.find(second) == std::string::npos);

    // The value never on the command line: `set` takes none, and says how to give it.
    const auto argv = run_cli({"secret", "set", "API_TOKEN", second}, d.home());
    CHECK(argv.status == 2);
    const auto empty = run_program({"/bin/sh"}, {"-c", "\"$MEITH\" secret set X </dev/null"},
                                   {{"MEITH", MEITH_CLI}, {"MEITH_HOME", d.home().string()}});
    CHECK(empty.status == 2);
    CHECK_THAT(empty.err, Catch::Contains("standard input held no value: nothing saved"));

    // Removed: the next run fails, naming the command that sets it.
    REQUIRE(run_cli({"secret", "rm", "API_TOKEN"}, d.home()).status == 0);
    const json r3 = c.call("show_token", json::object());
    CHECK(r3["result"]["ok"] == false);
    CHECK_THAT(r3["result"]["error"]["message"].get<std::string>(),
               Catch::Contains("the secret 'API_TOKEN' is not set: run `meith secret set "
                               "API_TOKEN` in a terminal"));
}

TEST_CASE("secrets: ${secret:NAME} in a command's argument is filled in at each run and "
          "redacted, and never stands for the program",
          "[e2e][secrets]") {
    // A database URL with its password, as server-postgres takes it on its command line.
    temp_dir keys, tools;
    env_override key("MEITH_SECRETS_KEY", (keys.path / "k" / "secrets.key").string());
    env_override own("MEITH_SECRET_SERVICE", "off");
    const fs::path script = tools.path / "arg.sh";
    std::ofstream(script) << "read -r _\nprintf '{\"result\":{\"url\":\"%s\",\"tail\":\"%s\"}}' "
                             "\"$1\" \"${1#postgresql://app:}\"\n";
    const std::string url = "postgresql://app:s3cret-pa55word@127.0.0.1/db";
    daemon_process d("[[sources]]\nname = \"db\"\nkind = \"exec\"\ncommand = [\"sh\", " +
                     json(script.string()).dump() +
                     ", \"${secret:DB_URL}\"]\n"
                     "tool = { name = \"show_url\", description = \"prints its argument\", "
                     "capabilities = [\"read-only\"] }\n");
    REQUIRE(secret_set(d.home(), "DB_URL", url).status == 0);
    client c(d.socket());
    const json r = c.call("show_url", json::object());
    INFO(r.dump());
    REQUIRE(r["result"]["ok"] == true);
    CHECK(r["result"]["content"]["tail"] == "s3cret-pa55word@127.0.0.1/db"); // it got the value
    CHECK(r["result"]["content"]["url"] == "[REDACTED]");
    d.wait_audit([&](const json& l) {
        return l["event"] == "tool_call" && l["requestId"] == r["requestId"];
    });
    const std::string everything = slurp(d.home() / "audit.jsonl") + d.log();
    CHECK(everything.find(url) == std::string::npos);
    // `meith sources` shows the reference, not the value.
    const auto sources = run_cli({"sources", "db", "--json"}, d.home());
    CHECK(sources.out.find("s3cret") == std::string::npos);

    // The program itself is never a secret: the config says so.
    temp_dir home;
    const fs::path toml = home.path / "meithd.toml";
    std::ofstream(toml) << "[[sources]]\nname = \"x\"\nkind = \"exec\"\n"
                           "command = [\"${secret:PROG}\"]\n"
                           "tool = { name = \"x\", description = \"x\" }\n";
    const auto refused = run_program(
        {MEITH_MEITHD}, {"--home", (home.path / "h").string(), "--config", toml.string()}, {});
    CHECK(refused.status == 1);
    CHECK_THAT(refused.err, Catch::Contains("names a secret: a secret may stand for an argument"));
}

TEST_CASE("secrets: meith secret set before meithd ever ran makes the home (0700) first",
          "[e2e][secrets]") {
    temp_dir tmp;
    env_override key("MEITH_SECRETS_KEY", (tmp.path / "k" / "secrets.key").string());
    env_override own("MEITH_SECRET_SERVICE", "off");
    const fs::path home = tmp.path / "no-home-yet" / ".meith";
    const auto set = secret_set(home, "API_TOKEN", "tok-before-meithd-0123456789");
    INFO(set.out << set.err);
    REQUIRE(set.status == 0);
    CHECK(mode_of(home) == 0700);
    CHECK(mode_of(home / "secrets.enc") == 0600);
    const auto list = run_cli({"secret", "list"}, home);
    CHECK(list.status == 0);
    CHECK(list.out == "API_TOKEN\n");
}

TEST_CASE("secrets: a long-running source whose secret is not set fails saying which command "
          "sets it, and starts once it is set",
          "[e2e][secrets]") {
    temp_dir keys;
    env_override key("MEITH_SECRETS_KEY", (keys.path / "secrets.key").string());
    env_override own("MEITH_SECRET_SERVICE", "off");
    daemon_process d(exec_source_toml("srv", "server", "server.mjs", "srv_tool", {},
                                      "env = { SERVICE_KEY = \"${secret:SERVICE_KEY}\" }"));
    client c(d.socket());
    d.wait_audit([](const json& l) { return l["event"] == "source_failed"; });
    const json st = source_status(c, "srv");
    REQUIRE(st["state"] == "failed");
    CHECK_THAT(st["lastError"].get<std::string>(),
               Catch::Contains("its env SERVICE_KEY: the secret 'SERVICE_KEY' is not set: run "
                               "`meith secret set SERVICE_KEY` in a terminal"));
    REQUIRE(secret_set(d.home(), "SERVICE_KEY", "svc-key-0123456789").status == 0);
    const auto restart = run_cli({"sources", "restart", "srv"}, d.home());
    INFO(restart.out << restart.err);
    CHECK(restart.status == 0);
    CHECK(c.call("srv_tool", {{"mode", "echo"}})["result"]["ok"] == true);
}

TEST_CASE("secrets: a confined tool reads neither the store nor its key", "[e2e][secrets]") {
    REQUIRE_KERNEL_SANDBOX(true);
    temp_dir keys, tools;
    env_override key("MEITH_SECRETS_KEY", (keys.path / "secrets.key").string());
    env_override own("MEITH_SECRET_SERVICE", "off");
    const fs::path script = tools.path / "peek.sh";
    std::ofstream(script) << "read -r _\n"
                             "k=; s=\n"
                             "read -r k < \"$KEY\" 2>/dev/null\n"
                             "read -r s < \"$STORE\" 2>/dev/null\n"
                             "printf '{\"result\":{\"key\":\"%s\",\"store\":\"%s\"}}' \"$k\" "
                             "\"$s\"\n";
    const auto source = [&](const std::string& name, const std::string& sandbox) {
        return "[[sources]]\nname = \"" + name + "\"\nkind = \"exec\"\ncommand = [\"sh\", " +
               json(script.string()).dump() + "]\nsandbox = \"" + sandbox +
               "\"\ntool = { name = \"" + name +
               "\", description = \"reads files\", capabilities = [\"read-only\"] }\n" +
               "env = { KEY = " + json((keys.path / "secrets.key").string()).dump() +
               ", STORE = \"@STORE@\" }\n";
    };
    // The store's path is known once the home is: filled in before meithd starts.
    daemon_process d(
        source("peek", "require") + source("peek_open", "off"), {}, [](const fs::path& home) {
            std::string text = slurp(home / "meithd.toml");
            for (auto at = text.find("@STORE@"); at != std::string::npos; at = text.find("@STORE@"))
                text.replace(at, 7, (home / "secrets.enc").string());
            std::ofstream(home / "meithd.toml") << text;
        });
    REQUIRE(secret_set(d.home(), "X", "x-0123456789abcdef").status == 0);
    client c(d.socket());
    // Unconfined, the same script reads both: the probe works.
    const json open = c.call("peek_open", json::object());
    INFO(open.dump());
    CHECK(open["result"]["content"]["key"].get<std::string>().size() == 64);
    CHECK(open["result"]["content"]["store"] == "meith-secrets 1");
    const json confined = c.call("peek", json::object());
    INFO(confined.dump());
    CHECK(confined["result"]["content"]["key"] == "");
    CHECK(confined["result"]["content"]["store"] == "");
}

} // namespace e2e_secrets_test
