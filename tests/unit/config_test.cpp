// Unit tests for config/: the TOML contract of docs/configuration.md (values, defaults, located
// errors) and the path helpers of §1 (precedence, private folders).
#include "config/config.hpp"
#include "config/paths.hpp"

#include <catch2/catch.hpp>

#include "test_skip.hpp"

#include <cstdlib>
#include <fstream>
#include <regex>
#include <string>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <sys/stat.h>
#include <unistd.h>

namespace fs = std::filesystem;
using namespace meith::config;

namespace unit_config_test { // one namespace per file: the tests build as unity batches

namespace {

load_result parse(std::string_view text) {
    return parse_config(text, "test.toml", "/etc/meith");
}

config parse_ok(std::string_view text) {
    load_result r = parse(text);
    INFO((r.error ? r.error->to_string() : std::string("no error")));
    REQUIRE(r.value);
    REQUIRE_FALSE(r.error);
    return *r.value;
}

config_error parse_err(std::string_view text) {
    load_result r = parse(text);
    REQUIRE(r.error);
    REQUIRE_FALSE(r.value);
    return *r.error;
}

/// Sets (or with nullptr unsets) an environment variable for one scope.
class env_override {
  public:
    env_override(const char* name, const char* value) : name_(name) {
        if (const char* old = std::getenv(name)) old_ = old;
        if (value)
            ::setenv(name, value, 1);
        else
            ::unsetenv(name);
    }
    ~env_override() {
        if (old_)
            ::setenv(name_.c_str(), old_->c_str(), 1);
        else
            ::unsetenv(name_.c_str());
    }
    env_override(const env_override&) = delete;
    env_override& operator=(const env_override&) = delete;

  private:
    std::string name_;
    std::optional<std::string> old_;
};

/// A fresh folder under $TMPDIR, removed with everything in it at scope exit.
class temp_dir {
  public:
    temp_dir() {
        std::string tmpl = (fs::temp_directory_path() / "meith-config-test-XXXXXX").string();
        REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
        path_ = tmpl;
    }
    ~temp_dir() {
        std::error_code ec;
        fs::permissions(path_, fs::perms::owner_all, fs::perm_options::add, ec);
        fs::remove_all(path_, ec);
    }
    temp_dir(const temp_dir&) = delete;
    temp_dir& operator=(const temp_dir&) = delete;
    const fs::path& path() const { return path_; }

  private:
    fs::path path_;
};

unsigned mode_of(const fs::path& p) {
    struct stat st {};
    REQUIRE(::stat(p.c_str(), &st) == 0);
    return static_cast<unsigned>(st.st_mode & 07777);
}

constexpr const char* full_example = R"toml([socket]
path = "/run/user/1000/meith/meithd.sock"

[limits]
max_frame_bytes = 1048576
max_result_bytes = 2097152
max_timeout_ms = 300000
max_connections = 16
max_calls_in_flight_per_connection = 8
max_outbound_bytes = 4194304
idle_timeout_ms = 60000

[tools]
default_timeout_ms = 15000
shutdown_grace_ms = 3000
kill_grace_ms = 1000

[audit]
path = "~/.meith/audit.jsonl"
max_bytes = 1000000
keep = 3
fsync = "interval"
on_failure = "continue"

[permissions.callers.cli]
allow = ["read-only", "writes-files", "controls-browser", "starts-process", "accesses-network", "unknown"]
deny = ["destructive"]

[permissions.callers.plugin]
allow = ["read-only"]

[[permissions.rules]]
tool = "fs_*"
caller = "plugin"
decision = "allow"

[[permissions.rules]]
tool = "rm_rf"
decision = "deny"

[[sources]]
name = "node-tools"
kind = "host"
command = ["node", "examples/node-host/host.mjs"]
config = { root = "/tmp/sandbox", depth = 2, ratio = 0.5, on = true, tags = ["a", "b"], when = 1979-05-27T07:32:00Z }
capabilities = { read_file = ["read-only"], write_file = ["writes-files", "destructive"] }
timeout_ms = { slow_count = 120000 }
prefix = "fs_"
start_timeout_ms = 5000
env = { NODE_ENV = "production" }

[[sources]]
name = "weather"
kind = "exec"
mode = "server"
command = ["python3", "weather.py"]
cwd = "tools"
tool = { name = "weather", description = "Current weather", capabilities = ["accesses-network"], input_schema = { type = "object", properties = { city = { type = "string" } }, required = ["city"] }, timeout_ms = 9000 }

[[hooks]]
name = "policy"
kind = "filter"
mode = "server"
phase = "before_execution"
command = ["python3", "policy.py"]
tools = ["fs_*", "weather"]
timeout_ms = 1500

[[hooks]]
name = "watcher"
kind = "observe"
phase = "session_start"
command = ["./watch"]
)toml";

} // namespace

TEST_CASE("the full example parses to the expected values", "[config]") {
    env_override home("HOME", "/home/tester");
    const config cfg = parse_ok(full_example);

    CHECK_FALSE(cfg.source_file); // parse_config has no file
    REQUIRE(cfg.socket_path);
    CHECK(*cfg.socket_path == "/run/user/1000/meith/meithd.sock");

    CHECK(cfg.limits.max_frame_bytes == 1048576);
    CHECK(cfg.limits.max_result_bytes == 2097152);
    CHECK(cfg.limits.max_timeout_ms == 300000);
    CHECK(cfg.limits.max_connections == 16);
    CHECK(cfg.limits.max_calls_in_flight_per_connection == 8);
    CHECK(cfg.limits.max_outbound_bytes == 4194304);
    CHECK(cfg.limits.idle_timeout_ms == 60000);

    CHECK(cfg.tools.default_timeout_ms == 15000);
    CHECK(cfg.tools.shutdown_grace_ms == 3000);
    CHECK(cfg.tools.kill_grace_ms == 1000);

    REQUIRE(cfg.audit.path);
    CHECK(*cfg.audit.path == "/home/tester/.meith/audit.jsonl");
    CHECK(cfg.audit.max_bytes == 1000000);
    CHECK(cfg.audit.keep == 3);
    CHECK(cfg.audit.fsync == fsync_policy::interval);
    CHECK(cfg.audit.on_failure == audit_failure_policy::keep_going);

    REQUIRE(cfg.permissions.cli);
    CHECK(cfg.permissions.cli->allow ==
          std::vector<std::string>{"read-only", "writes-files", "controls-browser",
                                   "starts-process", "accesses-network", "unknown"});
    CHECK(cfg.permissions.cli->deny == std::vector<std::string>{"destructive"});
    REQUIRE(cfg.permissions.plugin);
    CHECK(cfg.permissions.plugin->allow == std::vector<std::string>{"read-only"});
    CHECK(cfg.permissions.plugin->deny.empty());
    REQUIRE(cfg.permissions.rules.size() == 2);
    CHECK(cfg.permissions.rules[0].tool == "fs_*");
    CHECK(cfg.permissions.rules[0].caller == std::optional<std::string>("plugin"));
    CHECK(cfg.permissions.rules[0].allow);
    CHECK(cfg.permissions.rules[1].tool == "rm_rf");
    CHECK_FALSE(cfg.permissions.rules[1].caller);
    CHECK_FALSE(cfg.permissions.rules[1].allow);

    REQUIRE(cfg.sources.size() == 2);
    const source_config& host = cfg.sources[0];
    CHECK(host.name == "node-tools");
    CHECK(host.kind == source_kind::host);
    CHECK(host.command == std::vector<std::string>{"node", "examples/node-host/host.mjs"});
    CHECK(host.cwd == "/etc/meith");
    CHECK(host.env == std::map<std::string, std::string>{{"NODE_ENV", "production"}});
    CHECK(nlohmann::json::parse(host.config_json) ==
          nlohmann::json{{"root", "/tmp/sandbox"},
                         {"depth", 2},
                         {"ratio", 0.5},
                         {"on", true},
                         {"tags", {"a", "b"}},
                         {"when", "1979-05-27T07:32:00Z"}});
    CHECK(host.capabilities ==
          std::map<std::string, std::vector<std::string>>{
              {"read_file", {"read-only"}}, {"write_file", {"writes-files", "destructive"}}});
    CHECK(host.timeout_ms == std::map<std::string, std::uint64_t>{{"slow_count", 120000}});
    CHECK(host.prefix == "fs_");
    CHECK(host.start_timeout_ms == 5000);
    CHECK_FALSE(host.tool);

    const source_config& exec = cfg.sources[1];
    CHECK(exec.name == "weather");
    CHECK(exec.kind == source_kind::exec);
    CHECK(exec.mode == exec_mode::server);
    CHECK(exec.command == std::vector<std::string>{"python3", "weather.py"});
    CHECK(exec.cwd == "/etc/meith/tools");
    CHECK(exec.config_json == "{}");
    CHECK(exec.start_timeout_ms == 10000);
    REQUIRE(exec.tool);
    CHECK(exec.tool->name == "weather");
    CHECK(exec.tool->description == "Current weather");
    CHECK(exec.tool->capabilities == std::vector<std::string>{"accesses-network"});
    CHECK(exec.tool->timeout_ms == std::optional<std::uint64_t>(9000));
    CHECK(nlohmann::json::parse(exec.tool->input_schema_json) ==
          nlohmann::json::parse(
              R"({"type":"object","properties":{"city":{"type":"string"}},"required":["city"]})"));
    CHECK(exec.tool->input_schema_json.find('\n') == std::string::npos); // compact text

    REQUIRE(cfg.hooks.size() == 2);
    const hook_config& filter = cfg.hooks[0];
    CHECK(filter.name == "policy");
    CHECK(filter.kind == hook_kind::filter);
    CHECK(filter.mode == exec_mode::server);
    CHECK(filter.phase == "before_execution");
    CHECK(filter.command == std::vector<std::string>{"python3", "policy.py"});
    CHECK(filter.cwd == "/etc/meith");
    CHECK(filter.tools == std::vector<std::string>{"fs_*", "weather"});
    CHECK(filter.timeout_ms == 1500);
    const hook_config& observe = cfg.hooks[1];
    CHECK(observe.kind == hook_kind::observe);
    CHECK(observe.mode == exec_mode::oneshot);
    CHECK(observe.phase == "session_start");
    CHECK(observe.tools == std::vector<std::string>{"*"});
    CHECK(observe.timeout_ms == 2000);
}

TEST_CASE("an empty file gives the built-in defaults", "[config]") {
    const config cfg = parse_ok("# nothing configured\n");
    const config defaults;
    CHECK_FALSE(cfg.socket_path);
    CHECK(cfg.limits.max_frame_bytes == 8 * 1024 * 1024);
    CHECK(cfg.limits.max_result_bytes == 8 * 1024 * 1024);
    CHECK(cfg.limits.max_timeout_ms == 600000);
    CHECK(cfg.limits.max_connections == 1024);
    CHECK(cfg.limits.max_calls_in_flight_per_connection == 64);
    CHECK(cfg.limits.max_outbound_bytes == 16 * 1024 * 1024);
    CHECK(cfg.limits.idle_timeout_ms == 0);
    CHECK(cfg.tools.default_timeout_ms == 30000);
    CHECK(cfg.tools.shutdown_grace_ms == 5000);
    CHECK(cfg.tools.kill_grace_ms == 2000);
    CHECK_FALSE(cfg.audit.path);
    CHECK(cfg.audit.max_bytes == defaults.audit.max_bytes);
    CHECK(cfg.audit.keep == 5);
    CHECK(cfg.audit.fsync == fsync_policy::never);
    CHECK(cfg.audit.on_failure == audit_failure_policy::fail_closed);
    CHECK_FALSE(cfg.permissions.cli);
    CHECK_FALSE(cfg.permissions.plugin);
    CHECK(cfg.permissions.rules.empty());
    CHECK(cfg.sources.empty());
    CHECK(cfg.hooks.empty());
}

TEST_CASE("an absent list in a present callers table takes the caller default", "[config]") {
    const config cfg = parse_ok("[permissions.callers.plugin]\ndeny = [\"destructive\"]\n");
    REQUIRE(cfg.permissions.plugin);
    CHECK(cfg.permissions.plugin->allow ==
          std::vector<std::string>{"read-only", "accesses-network"});
    CHECK(cfg.permissions.plugin->deny == std::vector<std::string>{"destructive"});
    CHECK_FALSE(cfg.permissions.cli);

    const config empty = parse_ok("[permissions.callers.cli]\n");
    REQUIRE(empty.permissions.cli);
    CHECK(empty.permissions.cli->allow ==
          std::vector<std::string>{"read-only", "accesses-network"});
    CHECK(empty.permissions.cli->deny.empty());
}

TEST_CASE("ask lists, ask rules and persist_grants (PROTOCOL.md §12)", "[config][grants]") {
    const config cfg = parse_ok("[permissions]\npersist_grants = true\n"
                                "[permissions.callers.plugin]\nask = [\"writes-files\"]\n"
                                "[[permissions.rules]]\ntool = \"rm\"\ndecision = \"ask\"\n");
    CHECK(cfg.permissions.persist_grants);
    REQUIRE(cfg.permissions.plugin);
    CHECK(cfg.permissions.plugin->ask == std::vector<std::string>{"writes-files"});
    CHECK(cfg.permissions.plugin->allow ==
          std::vector<std::string>{"read-only", "accesses-network"});
    REQUIRE(cfg.permissions.rules.size() == 1);
    CHECK(cfg.permissions.rules[0].ask);
    CHECK_FALSE(cfg.permissions.rules[0].allow);
    CHECK_FALSE(parse_ok("").permissions.persist_grants);

    const config_error bad_cap = parse_err("[permissions.callers.cli]\nask = [\"writes\"]\n");
    CHECK_THAT(bad_cap.to_string(), Catch::Contains("writes"));
    const config_error bad_decision =
        parse_err("[[permissions.rules]]\ntool = \"x\"\ndecision = \"maybe\"\n");
    CHECK_THAT(bad_decision.to_string(), Catch::Contains("\"ask\""));
    const config_error bad_bool = parse_err("[permissions]\npersist_grants = \"yes\"\n");
    CHECK_THAT(bad_bool.to_string(), Catch::Contains("persist_grants"));
}

TEST_CASE("sandbox and sandbox_paths on sources and hooks (PROTOCOL.md §13)", "[config][sandbox]") {
    const config cfg =
        parse_ok("[[sources]]\nname = \"s\"\nkind = \"host\"\ncommand = [\"node\"]\n"
                 "sandbox = \"require\"\nsandbox_paths = { write = [\"out\", \"/var/x\"], exec = "
                 "[\"~/bin/helper\"] }\n"
                 "[[hooks]]\nname = \"h\"\nphase = \"before_execution\"\ncommand = [\"x\"]\n"
                 "capabilities = [\"read-only\"]\nsandbox = \"off\"\n");
    REQUIRE(cfg.sources.size() == 1);
    CHECK(cfg.sources[0].sandbox == sandbox_mode::require);
    CHECK(cfg.sources[0].sandbox_paths.write == std::vector<fs::path>{"/etc/meith/out", "/var/x"});
    REQUIRE(cfg.sources[0].sandbox_paths.exec.size() == 1);
    CHECK(cfg.sources[0].sandbox_paths.exec[0].is_absolute());
    REQUIRE(cfg.hooks.size() == 1);
    CHECK(cfg.hooks[0].capabilities == std::vector<std::string>{"read-only"});
    CHECK(cfg.hooks[0].sandbox == sandbox_mode::off);
    // The default: enforce, nothing extra; a hook without capabilities declares none.
    const config plain = parse_ok("[[sources]]\nname = \"p\"\nkind = \"host\"\ncommand = "
                                  "[\"node\"]\n[[hooks]]\nname = \"h\"\nphase = "
                                  "\"before_execution\"\ncommand = [\"x\"]\n");
    CHECK(plain.sources[0].sandbox == sandbox_mode::enforce);
    // Nothing extra but the source's own state folder, which every profile may write.
    sandbox_paths_config nothing;
    nothing.state_dir = source_state_dir("p");
    CHECK(plain.sources[0].sandbox_paths == nothing);
    CHECK(plain.hooks[0].sandbox_paths.state_dir.empty());
    CHECK_FALSE(plain.hooks[0].capabilities);

    CHECK_THAT(parse_err("[[sources]]\nname = \"s\"\nkind = \"host\"\ncommand = [\"n\"]\n"
                         "sandbox = \"maybe\"\n")
                   .to_string(),
               Catch::Contains("require"));
    CHECK_THAT(parse_err("[[sources]]\nname = \"s\"\nkind = \"host\"\ncommand = [\"n\"]\n"
                         "sandbox_paths = { writ = [\"x\"] }\n")
                   .to_string(),
               Catch::Contains("writ"));
}

TEST_CASE("a source's sandbox profile: one name or several, each checked (docs/protocol.md "
          "§15 Profiles)",
          "[config][sandbox]") {
    const std::string head = "[[sources]]\nname = \"pw\"\nkind = \"mcp\"\ncommand = [\"node\"]\n";
    CHECK(parse_ok(head + "profile = \"browser\"\n").sources[0].sandbox_paths.profile ==
          std::vector<std::string>{"browser"});
    CHECK(parse_ok(head + "profile = [\"node\", \"browser\"]\n").sources[0].sandbox_paths.profile ==
          std::vector<std::string>{"node", "browser"});
    CHECK(parse_ok(head).sources[0].sandbox_paths.profile.empty());
    // The state folder: $XDG_STATE_HOME's, by the source's name.
    CHECK(source_state_dir("pw").filename() == "pw");
    CHECK(source_state_dir("pw").parent_path().filename() == "sources");

    const auto unknown = parse_err(head + "profile = \"chrome\"\n");
    CHECK(unknown.where == "test.toml:5:11");
    CHECK_THAT(unknown.to_string(),
               Catch::Contains("'profile' in source 'pw' names an unknown sandbox profile "
                               "\"chrome\"; known profiles: \"default\", \"node\", \"python\", "
                               "\"npx\", \"browser\""));
    CHECK_THAT(parse_err(head + "profile = 3\n").to_string(),
               Catch::Contains("must be a profile's name or an array of them"));
    CHECK_THAT(parse_err(head + "profile = []\n").to_string(), Catch::Contains("profile"));
}

TEST_CASE("a confined source's env may not set TMPDIR, which its sandbox gives it", "[config]") {
    const std::string head = "[[sources]]\nname = \"t\"\nkind = \"mcp\"\ncommand = [\"node\"]\n";
    const auto e = parse_err(head + "env = { TMPDIR = \"/var/cache/t\" }\n");
    CHECK(e.where == "test.toml:5:18");
    CHECK_THAT(e.to_string(), Catch::Contains("`TMPDIR` in the env of source 't' would be "
                                              "replaced") &&
                                  Catch::Contains("sandbox_paths.write"));
    // Unconfined, it is the source's to set.
    CHECK(parse_ok(head + "sandbox = \"off\"\nenv = { TMPDIR = \"/var/cache/t\" }\n")
              .sources[0]
              .env.at("TMPDIR") == "/var/cache/t");
}

TEST_CASE("unknown keys are errors naming the key and its place", "[config]") {
    SECTION("a required key misspelt: the misspelling at its line, not 'missing'") {
        // Before: "test.toml:1:1: missing required key 'command' in source 'x'", at the table.
        const auto e = parse_err("[[sources]]\nname = \"x\"\nkind = \"host\"\n"
                                 "comand = [\"node\", \"x.mjs\"]\n");
        CHECK(e.where == "test.toml:4:1");
        CHECK_THAT(e.message, Catch::Contains("unknown key 'comand'") &&
                                  Catch::Contains("did you mean 'command'"));
        CHECK_THAT(e.message, !Catch::Contains("missing required key"));
    }
    SECTION("top level") {
        const auto e = parse_err("# a comment\n\nsockets = 1\n");
        CHECK(e.where == "test.toml:3:1");
        CHECK_THAT(e.message, Catch::Contains("'sockets'"));
    }
    SECTION("nested, with a suggestion") {
        const auto e = parse_err("[limits]\nmax_frame_bytes = 2048\nmax_frams_bytes = 10\n");
        CHECK(e.where == "test.toml:3:1");
        CHECK_THAT(e.message, Catch::Contains("'max_frams_bytes'") && Catch::Contains("[limits]") &&
                                  Catch::Contains("did you mean 'max_frame_bytes'"));
        CHECK(e.to_string() == "test.toml:3:1: " + e.message);
    }
    SECTION("in a source") {
        const auto e = parse_err(R"([[sources]]
name = "a"
kind = "host"
command = ["x"]
  comand = ["y"]
)");
        CHECK(e.where == "test.toml:5:3");
        CHECK_THAT(e.message, Catch::Contains("'comand'") && Catch::Contains("source 'a'"));
    }
    SECTION("in an exec tool") {
        const auto e = parse_err(R"([[sources]]
name = "w"
kind = "exec"
command = ["w"]
tool = { name = "w", descr = "x" }
)");
        CHECK(e.where == "test.toml:5:22");
        CHECK_THAT(e.message, Catch::Contains("'descr'"));
    }
    SECTION("in a hook") {
        const auto e = parse_err(R"([[hooks]]
name = "h"
phase = "before_execution"
command = ["h"]
tool = ["*"]
)");
        CHECK(e.where == "test.toml:5:1");
        CHECK_THAT(e.message, Catch::Contains("'tool'") && Catch::Contains("did you mean 'tools'"));
    }
    SECTION("the first problem in the file is the one reported") {
        const auto e = parse_err("[tools]\nkill_grace_ms = \"x\"\n\n[audit]\nbogus = 1\n");
        CHECK(e.where == "test.toml:2:17");
        CHECK_THAT(e.message, Catch::Contains("kill_grace_ms"));
    }
}

TEST_CASE("TOML syntax errors carry file, line and column", "[config]") {
    const auto e = parse_err("[limits]\nmax_frame_bytes = 2048\nmax_connections = = 3\n");
    CHECK(std::regex_match(e.where, std::regex(R"(test\.toml:3:\d+)")));
    CHECK_FALSE(e.message.empty());

    const auto dup = parse_err("[tools]\nkill_grace_ms = 1\nkill_grace_ms = 2\n");
    CHECK(std::regex_match(dup.where, std::regex(R"(test\.toml:3:\d+)")));
}

TEST_CASE("wrong types, bad enum values and out-of-range numbers are located errors", "[config]") {
    SECTION("string where an integer is expected") {
        const auto e = parse_err("[limits]\nmax_connections = \"many\"\n");
        CHECK(e.where == "test.toml:2:19");
        CHECK_THAT(e.message, Catch::Contains("max_connections") && Catch::Contains("a string"));
    }
    SECTION("float where an integer is expected") {
        const auto e = parse_err("[tools]\ndefault_timeout_ms = 1.5\n");
        CHECK(e.where == "test.toml:2:22");
        CHECK_THAT(e.message, Catch::Contains("a float"));
    }
    SECTION("bad enum") {
        const auto e = parse_err("[audit]\nfsync = \"sometimes\"\n");
        CHECK(e.where == "test.toml:2:9");
        CHECK_THAT(e.message, Catch::Contains("\"sometimes\"") && Catch::Contains("\"never\"") &&
                                  Catch::Contains("\"interval\""));
    }
    SECTION("negative integer") {
        const auto e = parse_err("[audit]\nkeep = -1\n");
        CHECK(e.where == "test.toml:2:8");
        CHECK_THAT(e.message, Catch::Contains("keep") && Catch::Contains("non-negative"));
    }
    SECTION("minimums") {
        CHECK(parse_err("[limits]\nmax_frame_bytes = 1023\n").where == "test.toml:2:19");
        CHECK(parse_err("[limits]\nmax_connections = 0\n").where == "test.toml:2:19");
        CHECK_THAT(parse_err("[limits]\nmax_calls_in_flight_per_connection = 0\n").message,
                   Catch::Contains("positive"));
        CHECK(parse_ok("[limits]\nmax_frame_bytes = 1024\n").limits.max_frame_bytes == 1024);
    }
    SECTION("a table expected") {
        const auto e = parse_err("limits = 5\n");
        CHECK(e.where == "test.toml:1:10");
        CHECK_THAT(e.message, Catch::Contains("a table"));
    }
    SECTION("unknown capability name") {
        const auto e =
            parse_err("[permissions.callers.cli]\nallow = [\"read-only\", \"write-files\"]\n");
        CHECK(e.where == "test.toml:2:23");
        CHECK_THAT(e.message, Catch::Contains("\"write-files\""));
    }
    SECTION("rule without decision") {
        const auto e = parse_err("\n[[permissions.rules]]\ntool = \"x\"\n");
        CHECK(e.where == "test.toml:2:1");
        CHECK_THAT(e.message, Catch::Contains("'decision'"));
    }
    SECTION("rule with an unknown caller") {
        const auto e = parse_err("[[permissions.rules]]\ntool = \"x\"\ncaller = \"agent\"\n"
                                 "decision = \"deny\"\n");
        CHECK(e.where == "test.toml:3:10");
    }
}

TEST_CASE("only cli and plugin callers can be configured", "[config]") {
    const auto e = parse_err("[permissions.callers.agent]\nallow = [\"read-only\"]\n");
    CHECK(std::regex_match(e.where, std::regex(R"(test\.toml:1:\d+)")));
    CHECK_THAT(e.message, Catch::Contains("agent") && Catch::Contains("\"cli\"") &&
                              Catch::Contains("\"plugin\""));
}

TEST_CASE("source checks", "[config]") {
    SECTION("duplicate names") {
        const auto e = parse_err(R"([[sources]]
name = "dup"
kind = "host"
command = ["a"]

[[sources]]
name = "dup"
kind = "host"
command = ["b"]
)");
        CHECK(e.where == "test.toml:7:8");
        CHECK_THAT(e.message, Catch::Contains("duplicate") && Catch::Contains("\"dup\"") &&
                                  Catch::Contains("test.toml:2:8"));
    }
    SECTION("exec source without tool") {
        const auto e =
            parse_err("\n\n[[sources]]\nname = \"w\"\nkind = \"exec\"\ncommand = [\"w\"]\n");
        CHECK(e.where == "test.toml:3:1");
        CHECK_THAT(e.message, Catch::Contains("'tool'"));
    }
    SECTION("mode on a host source") {
        const auto e = parse_err(
            "[[sources]]\nname = \"h\"\nkind = \"host\"\nmode = \"server\"\ncommand = [\"h\"]\n");
        CHECK(e.where == "test.toml:4:8");
        CHECK_THAT(e.message, Catch::Contains("mode") && Catch::Contains("exec"));
    }
    SECTION("tool on a host source") {
        const auto e = parse_err("[[sources]]\nname = \"h\"\nkind = \"host\"\ncommand = [\"h\"]\n"
                                 "tool = { name = \"t\" }\n");
        CHECK(e.where == "test.toml:5:8");
    }
    SECTION("missing and bad required keys") {
        CHECK_THAT(parse_err("[[sources]]\nkind = \"host\"\ncommand = [\"h\"]\n").message,
                   Catch::Contains("'name'"));
        CHECK_THAT(parse_err("[[sources]]\nname = \"h\"\ncommand = [\"h\"]\n").message,
                   Catch::Contains("'kind'"));
        CHECK_THAT(parse_err("[[sources]]\nname = \"h\"\nkind = \"host\"\n").message,
                   Catch::Contains("'command'"));
        CHECK(parse_err("[[sources]]\nname = \"h\"\nkind = \"host\"\ncommand = []\n").where ==
              "test.toml:4:11");
        CHECK(
            parse_err("[[sources]]\nname = \"h\"\nkind = \"host\"\ncommand = [\"a\", 1]\n").where ==
            "test.toml:4:17");
        CHECK(
            parse_err("[[sources]]\nname = \"a b\"\nkind = \"host\"\ncommand = [\"h\"]\n").where ==
            "test.toml:2:8");
        CHECK(parse_err("[[sources]]\nname = \"\"\nkind = \"host\"\ncommand = [\"h\"]\n").where ==
              "test.toml:2:8");
        CHECK(
            parse_err("[[sources]]\nname = \"h\"\nkind = \"plugin\"\ncommand = [\"h\"]\n").where ==
            "test.toml:3:8");
    }
    SECTION("per-tool tables are validated") {
        const auto caps =
            parse_err("[[sources]]\nname = \"h\"\nkind = \"host\"\ncommand = [\"h\"]\n"
                      "capabilities = { a = [\"read-only\", \"nope\"] }\n");
        CHECK(caps.where == "test.toml:5:36");
        const auto timeout = parse_err("[[sources]]\nname = \"h\"\nkind = \"host\"\n"
                                       "command = [\"h\"]\ntimeout_ms = { a = 0 }\n");
        CHECK(timeout.where == "test.toml:5:20");
        const auto env = parse_err("[[sources]]\nname = \"h\"\nkind = \"host\"\n"
                                   "command = [\"h\"]\nenv = { A = 1 }\n");
        CHECK(env.where == "test.toml:5:13");
    }
    SECTION("an exec source's capabilities and timeout_ms tables name the tool's keys") {
        // Issue 40: both were accepted and silently ignored; the tool ran as `unknown`.
        const std::string exec = "[[sources]]\nname = \"w\"\nkind = \"exec\"\ncommand = [\"w\"]\n"
                                 "tool = { name = \"w\" }\n";
        const auto caps = parse_err(exec + "capabilities = { w = [\"read-only\"] }\n");
        CHECK(caps.where == "test.toml:6:16");
        CHECK_THAT(caps.message, Catch::Contains("exec") &&
                                     Catch::Contains("tool = { capabilities = [...] }") &&
                                     Catch::Contains("tool.capabilities"));
        const auto timeout = parse_err(exec + "timeout_ms = { w = 5000 }\n");
        CHECK(timeout.where == "test.toml:6:14");
        CHECK_THAT(timeout.message, Catch::Contains("tool.timeout_ms"));
        // Written the right way, it is taken.
        const auto ok = parse_ok(exec.substr(0, exec.find("tool =")) +
                                 "tool = { name = \"w\", capabilities = [\"read-only\"] }\n");
        REQUIRE(ok.sources.size() == 1);
        CHECK(ok.sources[0].tool->capabilities == std::vector<std::string>{"read-only"});
    }
}

TEST_CASE("hook checks", "[config]") {
    SECTION("phase is required") {
        const auto e = parse_err("[[hooks]]\nname = \"h\"\ncommand = [\"h\"]\n");
        CHECK(e.where == "test.toml:1:1");
        CHECK_THAT(e.message, Catch::Contains("'phase'"));
    }
    SECTION("a filter hook cannot run at session_start") {
        const auto e =
            parse_err("[[hooks]]\nname = \"h\"\nphase = \"session_start\"\ncommand = [\"h\"]\n");
        CHECK(e.where == "test.toml:3:9");
        CHECK_THAT(e.message, Catch::Contains("observe"));
    }
    SECTION("duplicate names") {
        const auto e = parse_err(R"([[hooks]]
name = "h"
phase = "after_execution"
command = ["h"]
[[hooks]]
name = "h"
kind = "observe"
phase = "session_end"
command = ["h"]
)");
        CHECK(e.where == "test.toml:6:8");
        CHECK_THAT(e.message, Catch::Contains("duplicate"));
    }
    SECTION("zero timeout") {
        CHECK(parse_err("[[hooks]]\nname = \"h\"\nphase = \"after_execution\"\ncommand = [\"h\"]\n"
                        "timeout_ms = 0\n")
                  .where == "test.toml:5:14");
    }
}

TEST_CASE("max_outbound_bytes is raised to max_result_bytes", "[config]") {
    const config raised =
        parse_ok("[limits]\nmax_result_bytes = 33554432\nmax_outbound_bytes = 1048576\n");
    CHECK(raised.limits.max_outbound_bytes == 33554432);
    const config by_default = parse_ok("[limits]\nmax_result_bytes = 33554432\n");
    CHECK(by_default.limits.max_outbound_bytes == 33554432);
    const config kept = parse_ok("[limits]\nmax_result_bytes = 10\nmax_outbound_bytes = 20\n");
    CHECK(kept.limits.max_outbound_bytes == 20);
}

TEST_CASE("paths: ~ expands and relative paths resolve against the config folder", "[config]") {
    env_override home("HOME", "/home/tester");
    const config cfg = parse_ok(R"([socket]
path = "~/run/meithd.sock"
[audit]
path = "logs/../audit.jsonl"
[[sources]]
name = "a"
kind = "host"
command = ["a"]
cwd = "hosts/a"
[[sources]]
name = "b"
kind = "host"
command = ["b"]
cwd = "/opt/b"
[[sources]]
name = "c"
kind = "host"
command = ["c"]
cwd = "~"
[[hooks]]
name = "h"
phase = "before_execution"
command = ["h"]
cwd = "../hooks"
)");
    CHECK(*cfg.socket_path == "/home/tester/run/meithd.sock");
    CHECK(*cfg.audit.path == "/etc/meith/audit.jsonl");
    CHECK(cfg.sources[0].cwd == "/etc/meith/hosts/a");
    CHECK(cfg.sources[1].cwd == "/opt/b");
    CHECK(cfg.sources[2].cwd == "/home/tester");
    CHECK(cfg.hooks[0].cwd == "/etc/hooks");

    CHECK(expand_tilde("~") == "/home/tester");
    CHECK(expand_tilde("~/x/y") == "/home/tester/x/y");
    CHECK(expand_tilde("~other/x") == "~other/x");
    CHECK(expand_tilde("/a/~") == "/a/~");
    CHECK(expand_tilde("rel") == "rel");
}

TEST_CASE("load_config reads a file and names it in errors", "[config]") {
    temp_dir dir;
    SECTION("missing file") {
        const fs::path missing = dir.path() / "nope.toml";
        const load_result r = load_config(missing);
        REQUIRE(r.error);
        CHECK_FALSE(r.value);
        CHECK_THAT(r.error->to_string(), Catch::Contains("cannot read " + missing.string()) &&
                                             Catch::Contains("No such file or directory"));
    }
    SECTION("a good file") {
        const fs::path file = dir.path() / "meithd.toml";
        std::ofstream(file) << "[[sources]]\nname = \"a\"\nkind = \"host\"\ncommand = [\"a\"]\n";
        const load_result r = load_config(file);
        REQUIRE(r.value);
        CHECK(r.value->source_file == file);
        REQUIRE(r.value->sources.size() == 1);
        CHECK(r.value->sources[0].cwd == dir.path());
    }
    SECTION("a bad file: errors carry its name") {
        const fs::path file = dir.path() / "meithd.toml";
        std::ofstream(file) << "[limits]\nmax_connections = -5\n";
        const load_result r = load_config(file);
        REQUIRE(r.error);
        CHECK(r.error->where == file.string() + ":2:19");
    }
}

TEST_CASE("resolve_home: --home > MEITH_HOME > ~/.meith", "[paths]") {
    env_override home("HOME", "/home/tester");
    SECTION("flag wins") {
        env_override meith_home("MEITH_HOME", "/env/home");
        CHECK(resolve_home(fs::path("/flag/home")) == "/flag/home");
    }
    SECTION("then MEITH_HOME") {
        env_override meith_home("MEITH_HOME", "/env/home");
        CHECK(resolve_home(std::nullopt) == "/env/home");
    }
    SECTION("then $HOME/.meith; an empty MEITH_HOME counts as unset") {
        env_override meith_home("MEITH_HOME", "");
        CHECK(resolve_home(std::nullopt) == "/home/tester/.meith");
        env_override unset("MEITH_HOME", nullptr);
        CHECK(resolve_home(std::nullopt) == "/home/tester/.meith");
    }
}

TEST_CASE("resolve_socket_path: --socket > config > XDG_RUNTIME_DIR > home", "[paths]") {
    const fs::path home = "/h/.meith";
    env_override user("HOME", "/h");
    env_override xdg("XDG_RUNTIME_DIR", "/run/user/1000");
    CHECK(resolve_socket_path(fs::path("/flag.sock"), fs::path("/cfg.sock"), home) == "/flag.sock");
    CHECK(resolve_socket_path(std::nullopt, fs::path("/cfg.sock"), home) == "/cfg.sock");
    CHECK(resolve_socket_path(std::nullopt, std::nullopt, home) ==
          "/run/user/1000/meith/meithd.sock");
    {
        env_override empty("XDG_RUNTIME_DIR", "");
        CHECK(resolve_socket_path(std::nullopt, std::nullopt, home) == "/h/.meith/meithd.sock");
    }
    env_override unset("XDG_RUNTIME_DIR", nullptr);
    CHECK(resolve_socket_path(std::nullopt, std::nullopt, home) == "/h/.meith/meithd.sock");
}

TEST_CASE("resolve_socket_path: a home other than the default one listens in the home", "[paths]") {
    // Issue 40: `meith --home NEW` reached the default home's daemon through the runtime
    // folder's socket, which every home shared.
    env_override user("HOME", "/h");
    env_override xdg("XDG_RUNTIME_DIR", "/run/user/1000");
    CHECK(is_default_home("/h/.meith"));
    CHECK(is_default_home("/h/./.meith/"));
    CHECK_FALSE(is_default_home("/h/other"));
    CHECK(resolve_socket_path(std::nullopt, std::nullopt, "/h/other") == "/h/other/meithd.sock");
    CHECK(resolve_socket_path(std::nullopt, std::nullopt, "/h/.meith") ==
          "/run/user/1000/meith/meithd.sock");
    // --socket and [socket] path still win.
    CHECK(resolve_socket_path(std::nullopt, fs::path("/cfg.sock"), "/h/other") == "/cfg.sock");
    CHECK(resolve_socket_path(fs::path("/f.sock"), std::nullopt, "/h/other") == "/f.sock");
}

TEST_CASE("ensure_private_dir creates 0700 folders and refuses shared ones", "[paths]") {
    temp_dir dir;
    SECTION("creates missing folders and parents with 0700") {
        const mode_t old_umask = ::umask(022);
        const fs::path nested = dir.path() / "a" / "b" / "c";
        const auto err = ensure_private_dir(nested, false);
        ::umask(old_umask);
        CHECK_FALSE(err);
        CHECK(fs::is_directory(nested));
        CHECK(mode_of(dir.path() / "a") == 0700);
        CHECK(mode_of(dir.path() / "a" / "b") == 0700);
        CHECK(mode_of(nested) == 0700);
        CHECK_FALSE(ensure_private_dir(nested, false)); // existing and fine
    }
    SECTION("refuses a folder others can write, naming the chmod") {
        const fs::path shared = dir.path() / "shared";
        fs::create_directory(shared);
        REQUIRE(::chmod(shared.c_str(), 0777) == 0);
        const auto err = ensure_private_dir(shared, false);
        REQUIRE(err);
        CHECK_THAT(*err,
                   Catch::Contains("chmod 700 " + shared.string()) && Catch::Contains("0777"));
        REQUIRE(::chmod(shared.c_str(), 0720) == 0); // group-writable is refused too
        CHECK(ensure_private_dir(shared, true));
        REQUIRE(::chmod(shared.c_str(), 0755) == 0); // readable by others is fine
        CHECK_FALSE(ensure_private_dir(shared, false));
    }
    SECTION("a sticky world-writable folder only when allowed") {
        const fs::path sticky = dir.path() / "tmp";
        fs::create_directory(sticky);
        REQUIRE(::chmod(sticky.c_str(), 01777) == 0);
        CHECK_FALSE(ensure_private_dir(sticky, true));
        const auto err = ensure_private_dir(sticky, false);
        REQUIRE(err);
        CHECK_THAT(*err, Catch::Contains("chmod 700"));
    }
    SECTION("a file is not a folder") {
        const fs::path file = dir.path() / "file";
        std::ofstream(file) << "x";
        const auto err = ensure_private_dir(file, false);
        REQUIRE(err);
        CHECK_THAT(*err, Catch::Contains("not a directory"));
        CHECK(ensure_private_dir(file / "sub", false)); // cannot create below a file
    }
    SECTION("paths that need quoting are quoted in the command") {
        const fs::path odd = dir.path() / "it's here";
        fs::create_directory(odd);
        REQUIRE(::chmod(odd.c_str(), 0777) == 0);
        const auto err = ensure_private_dir(odd, false);
        REQUIRE(err);
        CHECK_THAT(*err, Catch::Contains("chmod 700 '" + dir.path().string() + "/it'\\''s here'"));
    }
}

TEST_CASE("ensure_private_dir: a folder owned by someone else names the chown", "[paths]") {
    if (::geteuid() != 0) SKIP_TEST("needs root to give a folder away");
    temp_dir dir;
    const fs::path theirs = dir.path() / "theirs";
    fs::create_directory(theirs);
    REQUIRE(::chown(theirs.c_str(), 4242, 4242) == 0);
    const auto err = ensure_private_dir(theirs, false);
    REQUIRE(err);
    CHECK_THAT(*err, Catch::Contains("owned by uid 4242") &&
                         Catch::Contains("chown 0 " + theirs.string()));
}

TEST_CASE("audit can be switched off and the child environment allow-list set", "[config]") {
    const config defaults = parse_ok("");
    CHECK(defaults.audit.enabled);
    CHECK(std::find(defaults.tools.env_allow.begin(), defaults.tools.env_allow.end(), "PATH") !=
          defaults.tools.env_allow.end());
    const config c =
        parse_ok("[audit]\nenabled = false\n[tools]\nenv_allow = [\"PATH\", \"LC_*\"]\n");
    CHECK_FALSE(c.audit.enabled);
    CHECK(c.tools.env_allow == std::vector<std::string>{"PATH", "LC_*"});
    const auto err = parse_err("[audit]\nenabled = \"no\"\n");
    CHECK_THAT(err.message, Catch::Contains("enabled"));
    CHECK_THAT(err.where, Catch::EndsWith(":2:11"));
    const auto bad_timeout = parse_err("[tools]\ndefault_timeout_ms = 0\n");
    CHECK_THAT(bad_timeout.message, Catch::Contains("default_timeout_ms"));
}

TEST_CASE("every duration has a maximum, and past it is an error naming key and maximum",
          "[config][hardening]") {
    // Issue 11, defect 12: 10^13 ms overflowed std::chrono's nanoseconds (an idle timeout that
    // closed every connection at once).
    const std::vector<std::pair<std::string, std::string>> keys{
        {"limits", "idle_timeout_ms"},  {"limits", "max_timeout_ms"},
        {"limits", "write_stall_ms"},   {"tools", "default_timeout_ms"},
        {"tools", "shutdown_grace_ms"}, {"tools", "kill_grace_ms"},
    };
    for (const auto& [table, key] : keys) {
        CAPTURE(table, key);
        const auto e = parse_err("[" + table + "]\n" + key + " = 10000000000000\n");
        CHECK(e.where == "test.toml:2:" + std::to_string(key.size() + 4));
        CHECK_THAT(e.message, Catch::Contains(key) && Catch::Contains("at most"));
    }
    const std::string source = "[[sources]]\nname = \"h\"\nkind = \"host\"\ncommand = [\"x\"]\n";
    CHECK_THAT(parse_err(source + "start_timeout_ms = 10000000000000\n").message,
               Catch::Contains("start_timeout_ms") && Catch::Contains("at most"));
    CHECK_THAT(parse_err(source + "timeout_ms = { t = 10000000000000 }\n").message,
               Catch::Contains("timeout_ms") && Catch::Contains("at most"));
    const std::string hook = "[[hooks]]\nname = \"k\"\nkind = \"filter\"\nmode = \"oneshot\"\n"
                             "phase = \"before_execution\"\ncommand = [\"x\"]\n";
    CHECK_THAT(parse_err(hook + "timeout_ms = 10000000000000\n").message,
               Catch::Contains("timeout_ms") && Catch::Contains("at most"));
    // The maximum itself is fine.
    CHECK(parse_ok("[limits]\nidle_timeout_ms = 604800000\n").limits.idle_timeout_ms == 604800000);
}

TEST_CASE("~ and $HOME are filled in in a command, as a shell would", "[config]") {
    const char* old = std::getenv("HOME");
    const std::string saved = old ? old : "";
    ::setenv("HOME", "/home/tester", 1);
    const config cfg = parse_ok(R"([[sources]]
name = "srv"
kind = "mcp"
command = ["~/bin/server", "--data=$HOME/data", "${HOME}/x", "$HOMEDIR", "~user", "a~/b", "$", "~"]
)");
    if (old)
        ::setenv("HOME", saved.c_str(), 1);
    else
        ::unsetenv("HOME");
    CHECK(cfg.sources.at(0).command ==
          std::vector<std::string>{"/home/tester/bin/server", "--data=/home/tester/data",
                                   "/home/tester/x", "$HOMEDIR", "~user", "a~/b", "$",
                                   "/home/tester"});
}

TEST_CASE("an MCP source takes trust_annotations and a capabilities table", "[config]") {
    const config cfg = parse_ok(R"([[sources]]
name = "fs"
kind = "mcp"
command = ["node", "/opt/mcp/server-filesystem/dist/index.js", "/tmp/sandbox"]
prefix = "fs_"
trust_annotations = true
capabilities = { read_file = ["read-only"] }
timeout_ms = { read_file = 5000 }
env = { MEMORY_FILE_PATH = "/tmp/m.jsonl" }

[[sources]]
name = "mem"
kind = "mcp"
command = ["node", "memory.js"]
)");
    REQUIRE(cfg.sources.size() == 2);
    const source_config& fs_src = cfg.sources[0];
    CHECK(fs_src.kind == source_kind::mcp);
    CHECK(to_string(fs_src.kind) == "mcp");
    CHECK(fs_src.trust_annotations);
    CHECK(fs_src.prefix == "fs_");
    CHECK(fs_src.capabilities ==
          std::map<std::string, std::vector<std::string>>{{"read_file", {"read-only"}}});
    CHECK(fs_src.timeout_ms == std::map<std::string, std::uint64_t>{{"read_file", 5000}});
    CHECK(fs_src.env.at("MEMORY_FILE_PATH") == "/tmp/m.jsonl");
    CHECK(fs_src.cwd == "/etc/meith");
    CHECK_FALSE(cfg.sources[1].trust_annotations); // default false
}

TEST_CASE("MCP source keys are checked with their location", "[config]") {
    SECTION("trust_annotations must be a boolean") {
        auto e = parse_err("[[sources]]\nname = \"m\"\nkind = \"mcp\"\ncommand = [\"x\"]\n"
                           "trust_annotations = \"yes\"\n");
        CHECK(e.where == "test.toml:5:21");
        CHECK(e.message == "'trust_annotations' in source 'm' must be true or false, not a string");
    }
    SECTION("trust_annotations is only for MCP sources") {
        auto e = parse_err("[[sources]]\nname = \"h\"\nkind = \"host\"\ncommand = [\"x\"]\n"
                           "trust_annotations = true\n");
        CHECK(e.where == "test.toml:5:21");
        CHECK_THAT(e.message, Catch::Contains("only for MCP sources"));
    }
    SECTION("an unknown capability in the table") {
        auto e = parse_err("[[sources]]\nname = \"m\"\nkind = \"mcp\"\ncommand = [\"x\"]\n"
                           "capabilities = { read_file = [\"read-only\", \"reads-minds\"] }\n");
        CHECK(e.where == "test.toml:5:44");
        CHECK_THAT(e.message, Catch::Contains("unknown capability \"reads-minds\"") &&
                                  Catch::Contains("tool 'read_file'"));
    }
    SECTION("mode, tool and config are not for MCP sources") {
        auto mode = parse_err("[[sources]]\nname = \"m\"\nkind = \"mcp\"\ncommand = [\"x\"]\n"
                              "mode = \"server\"\n");
        CHECK(mode.where == "test.toml:5:8");
        CHECK_THAT(mode.message, Catch::Contains("only for exec sources"));
        auto tool = parse_err("[[sources]]\nname = \"m\"\nkind = \"mcp\"\ncommand = [\"x\"]\n"
                              "tool = { name = \"t\" }\n");
        CHECK_THAT(tool.message, Catch::Contains("an MCP server lists its own tools"));
        auto init = parse_err("[[sources]]\nname = \"m\"\nkind = \"mcp\"\ncommand = [\"x\"]\n"
                              "config = { a = 1 }\n");
        CHECK(init.where == "test.toml:5:10");
        CHECK_THAT(init.message, Catch::Contains("only for tool hosts"));
    }
    SECTION("an unknown kind names the three") {
        auto e = parse_err("[[sources]]\nname = \"m\"\nkind = \"smtp\"\ncommand = [\"x\"]\n");
        CHECK_THAT(e.message, Catch::Contains(R"("host", "exec" or "mcp")"));
    }
    SECTION("a typo near trust_annotations is suggested") {
        auto e = parse_err("[[sources]]\nname = \"m\"\nkind = \"mcp\"\ncommand = [\"x\"]\n"
                           "trust_annotation = true\n");
        CHECK_THAT(e.message, Catch::Contains("did you mean 'trust_annotations'?"));
    }
}

TEST_CASE("a remote MCP source: url, headers, ca_file and oauth", "[config][remote]") {
    const config cfg = parse_ok(R"([[sources]]
name = "remote"
kind = "mcp"
url = "https://mcp.example.com/mcp"
headers = { Authorization = "Bearer ${secret:TOKEN}", X-Team = "core" }
ca_file = "certs/ca.pem"
oauth = { client_id = "meith-cli", scope = "files:read files:write" }
)");
    REQUIRE(cfg.sources.size() == 1);
    const source_config& src = cfg.sources[0];
    CHECK(src.kind == source_kind::mcp);
    CHECK(src.url == "https://mcp.example.com/mcp");
    CHECK(src.command.empty());
    CHECK(src.headers == std::map<std::string, std::string>{
                             {"Authorization", "Bearer ${secret:TOKEN}"}, {"X-Team", "core"}});
    CHECK(src.ca_file == "/etc/meith/certs/ca.pem");
    CHECK(src.oauth_client_id == "meith-cli");
    CHECK(src.oauth_scope == "files:read files:write");
    CHECK_FALSE(src.allow_private_network);

    // The least: a url alone.
    const config bare = parse_ok("[[sources]]\nname = \"r\"\nkind = \"mcp\"\n"
                                 "url = \"https://mcp.example.com\"\n");
    CHECK(bare.sources[0].url == "https://mcp.example.com");
    CHECK(bare.sources[0].headers.empty());
    CHECK(bare.sources[0].ca_file.empty());
    CHECK(bare.sources[0].oauth_client_id.empty());
}

TEST_CASE("a remote source's client secret, key and ID token are named, never written (issue 41)",
          "[config][remote]") {
    const std::string head = "[[sources]]\nname = \"r\"\nkind = \"mcp\"\n"
                             "url = \"https://mcp.example.com/mcp\"\n";
    const config cfg = parse_ok(head + "oauth = { client_id = \"c\", client_secret = "
                                       "\"${secret:CLIENT_SECRET}\", grant = "
                                       "\"client_credentials\" }\n");
    CHECK(cfg.sources[0].oauth_client_secret == "CLIENT_SECRET");
    CHECK(cfg.sources[0].oauth_grant == "client_credentials");
    const config key = parse_ok(head + "oauth = { client_id = \"c\", private_key = "
                                       "\"${secret:KEY}\" }\n");
    CHECK(key.sources[0].oauth_private_key == "KEY");
    CHECK(key.sources[0].oauth_grant.empty());
    const config xaa =
        parse_ok(head + "oauth = { client_id = \"c\", client_secret = "
                        "\"${secret:S}\", id_token = \"${secret:ID}\", "
                        "idp_token_endpoint = \"https://idp.example/token\", "
                        "idp_client_id = \"meith\", grant = \"cross_app_access\" }\n");
    CHECK(xaa.sources[0].oauth_id_token == "ID");
    CHECK(xaa.sources[0].oauth_idp_token_endpoint == "https://idp.example/token");

    SECTION("a value in the file is refused, saying where it belongs and not repeating it") {
        const auto e = parse_err(head + "oauth = { client_id = \"c\", client_secret = "
                                        "\"hunter2-the-value\" }\n");
        CHECK(e.where == "test.toml:5:44");
        CHECK_THAT(e.message, Catch::Contains("oauth.client_secret of source 'r' must name a "
                                              "secret, as \"${secret:NAME}\"") &&
                                  Catch::Contains("meith secret set NAME"));
        CHECK_THAT(e.message, !Catch::Contains("hunter2"));
        const auto partly = parse_err(head + "oauth = { private_key = \"x${secret:K}\" }\n");
        CHECK_THAT(partly.message, Catch::Contains("oauth.private_key"));
    }
    SECTION("both a secret and a key, an unknown grant, a grant without what it needs") {
        CHECK_THAT(parse_err(head + "oauth = { client_secret = \"${secret:A}\", private_key = "
                                    "\"${secret:B}\" }\n")
                       .message,
                   Catch::Contains("both a client_secret and a private_key"));
        CHECK_THAT(parse_err(head + "oauth = { grant = \"password\" }\n").message,
                   Catch::Contains("oauth.grant of source 'r' is \"password\""));
        CHECK_THAT(parse_err(head + "oauth = { grant = \"client_credentials\" }\n").message,
                   Catch::Contains("needs the client's client_secret or private_key"));
        CHECK_THAT(parse_err(head + "oauth = { grant = \"cross_app_access\" }\n").message,
                   Catch::Contains("needs id_token"));
    }
}

TEST_CASE("remote MCP source keys are checked with their location", "[config][remote]") {
    const std::string head = "[[sources]]\nname = \"r\"\nkind = \"mcp\"\n";
    SECTION("plain http:// is refused, naming allow_private_network") {
        const auto e = parse_err(head + "url = \"http://10.0.0.5:8080/mcp\"\n");
        CHECK(e.where == "test.toml:4:7");
        CHECK_THAT(e.message, Catch::Contains("http://") &&
                                  Catch::Contains("allow_private_network = true") &&
                                  Catch::Contains("source 'r'"));
    }
    SECTION("plain http:// is accepted with allow_private_network") {
        const config cfg = parse_ok(head + "url = \"http://10.0.0.5:8080/mcp\"\n"
                                           "allow_private_network = true\n");
        CHECK(cfg.sources[0].url == "http://10.0.0.5:8080/mcp");
        CHECK(cfg.sources[0].allow_private_network);
        // The flag's place in the table does not matter.
        const config before = parse_ok(head + "allow_private_network = true\n"
                                              "url = \"http://127.0.0.1:1/mcp\"\n");
        CHECK(before.sources[0].url == "http://127.0.0.1:1/mcp");
    }
    SECTION("another scheme is refused") {
        const auto e = parse_err(head + "url = \"ftp://mcp.example.com/mcp\"\n");
        CHECK(e.where == "test.toml:4:7");
        CHECK_THAT(e.message, Catch::Contains("must be an https:// URL"));
    }
    SECTION("keys only for a url are refused without one") {
        for (const char* line : {"headers = { A = \"b\" }\n", "allow_private_network = true\n",
                                 "ca_file = \"ca.pem\"\n", "oauth = { client_id = \"c\" }\n"}) {
            INFO(line);
            const auto e = parse_err(head + "command = [\"x\"]\n" + line);
            CHECK_THAT(e.where, Catch::StartsWith("test.toml:5:"));
            CHECK_THAT(e.message,
                       Catch::Contains("only for remote MCP sources") && Catch::Contains("`url`"));
        }
    }
    SECTION("env on a remote source is refused: there is no process to give it to") {
        const auto e =
            parse_err(head + "url = \"https://mcp.example.com/mcp\"\nenv = { TOKEN = \"x\" }\n");
        CHECK(e.where == "test.toml:5:7");
        CHECK_THAT(e.message, Catch::Contains("'env'") && Catch::Contains("headers") &&
                                  Catch::Contains("${secret:NAME}"));
    }
    SECTION("command together with url is refused") {
        const auto e =
            parse_err(head + "url = \"https://mcp.example.com/mcp\"\ncommand = [\"npx\", \"x\"]\n");
        CHECK(e.where == "test.toml:5:11");
        CHECK_THAT(e.message, Catch::Contains("has a `url`") && Catch::Contains("`command`"));
    }
    SECTION("url on a host source is refused") {
        const auto e = parse_err("[[sources]]\nname = \"h\"\nkind = \"host\"\ncommand = [\"h\"]\n"
                                 "url = \"https://mcp.example.com/mcp\"\n");
        CHECK(e.where == "test.toml:5:7");
        CHECK_THAT(e.message, Catch::Contains("only for MCP sources"));
    }
    SECTION("a header value with a line break is refused") {
        const auto e = parse_err(head + "url = \"https://mcp.example.com/mcp\"\n"
                                        "headers = { X-Evil = \"a\\r\\nHost: b\" }\n");
        CHECK(e.where == "test.toml:5:22");
        CHECK_THAT(e.message, Catch::Contains("header 'X-Evil'") && Catch::Contains("line break"));
        const auto lf = parse_err(head + "url = \"https://mcp.example.com/mcp\"\n"
                                         "headers = { X = \"a\\nb\" }\n");
        CHECK_THAT(lf.message, Catch::Contains("line break"));
    }
    SECTION("a header name that is not an HTTP field name is refused") {
        const auto e = parse_err(head + "url = \"https://mcp.example.com/mcp\"\n"
                                        "headers = { \"X Bad\" = \"v\" }\n");
        CHECK_THAT(e.message,
                   Catch::Contains("'X Bad'") && Catch::Contains("not a valid HTTP field name"));
    }
    SECTION("a header value must be a string") {
        const auto e = parse_err(head + "url = \"https://mcp.example.com/mcp\"\n"
                                        "headers = { X = 1 }\n");
        CHECK(e.where == "test.toml:5:17");
    }
    SECTION("the oauth table takes client_id and scope only") {
        const auto e = parse_err(head + "url = \"https://mcp.example.com/mcp\"\n"
                                        "oauth = { client_id = \"c\", secret = \"s\" }\n");
        CHECK(e.where == "test.toml:5:28");
        CHECK_THAT(e.message, Catch::Contains("'secret'"));
    }
}

TEST_CASE("a source's network table: rules checked where they are written", "[config][egress]") {
    const std::string head =
        "[[sources]]\nname = \"n\"\nkind = \"exec\"\ncommand = [\"x\"]\ntool = { name = \"t\" }\n";
    const config cfg = parse_ok(head + "network = { allow = [\"api.github.com:443\", "
                                       "\"*.npmjs.org\"], deny = [\"evil.npmjs.org\"], "
                                       "allow_private = true }\n");
    REQUIRE(cfg.sources[0].sandbox_paths.network);
    CHECK(cfg.sources[0].sandbox_paths.network->allow ==
          std::vector<std::string>{"api.github.com:443", "*.npmjs.org"});
    CHECK(cfg.sources[0].sandbox_paths.network->allow_private);
    CHECK_FALSE(parse_ok(head).sources[0].sandbox_paths.network);

    const auto bad = parse_err(head + "network = { allow = [\"api.github.com:0\"] }\n");
    CHECK(bad.where == "test.toml:6:21");
    CHECK_THAT(bad.message, Catch::Contains("api.github.com:0") && Catch::Contains("1-65535"));
    const auto key = parse_err(head + "network = { allowed = [\"x\"] }\n");
    CHECK_THAT(key.message, Catch::Contains("allowed"));
    const auto remote =
        parse_err("[[sources]]\nname = \"r\"\nkind = \"mcp\"\nurl = "
                  "\"https://mcp.example.com/mcp\"\nnetwork = { allow = [\"*\"] }\n");
    CHECK_THAT(remote.message, Catch::Contains("'network'") && Catch::Contains("remote"));
}

TEST_CASE("[clients.NAME]: globs, caller, search, pinned, agents and overrides (docs §23)",
          "[config][clients]") {
    const config cfg = parse_ok(R"(
[clients.claude]
tools = ["fs_*", "!fs_delete*"]
caller = "plugin"
search = true
pinned = ["fs_read"]
agents = ["claude-code"]
[clients.claude.overrides.fs_read]
name = "read"
description = "Read a file of the project"
[clients.bare]
)");
    REQUIRE(cfg.clients.size() == 2);
    const auto& c = cfg.clients[1].name == "claude" ? cfg.clients[1] : cfg.clients[0];
    CHECK(c.tools == std::vector<std::string>{"fs_*", "!fs_delete*"});
    CHECK(*c.caller == "plugin");
    CHECK(c.search);
    CHECK(c.pinned == std::vector<std::string>{"fs_read"});
    CHECK(c.agents == std::vector<std::string>{"claude-code"});
    CHECK(*c.overrides.at("fs_read").name == "read");
    CHECK(*c.overrides.at("fs_read").description == "Read a file of the project");
}

TEST_CASE("[clients.NAME] refusals say what to write instead", "[config][clients]") {
    CHECK_THAT(parse_err("[clients.a.overrides.t]\ncapabilities = [\"read-only\"]\n").message,
               Catch::Contains("'capabilities' in [clients.a] overrides.t cannot be overridden: "
                               "a profile may rename a tool and reword its description, never "
                               "make it look safer"));
    CHECK_THAT(parse_err("[clients.a.overrides.t]\nname = \"has space\"\n").message,
               Catch::Contains("an MCP tool name"));
    CHECK_THAT(parse_err("[clients.a.overrides.t]\nname = \"x\"\n[clients.a.overrides.u]\n"
                         "name = \"x\"\n")
                   .message,
               Catch::Contains("\"x\" is already the name given to 't'"));
    CHECK_THAT(parse_err("[clients.a]\nagents = [\"c\"]\n[clients.b]\nagents = [\"c\"]\n").message,
               Catch::Contains("\"c\" already selects [clients.a]"));
    CHECK_THAT(parse_err("[clients.a]\ntools = [\"!\"]\n").message,
               Catch::Contains("names no tool"));
    CHECK_THAT(parse_err("[clients.a]\nsources = [\"!\"]\n").message,
               Catch::Contains("'sources' in [clients.a]: \"!\" names no source"));
    const auto with_sources = parse_ok("[clients.a]\nsources = [\"notes\", \"!git*\"]\n");
    REQUIRE(with_sources.clients[0].sources);
    CHECK(*with_sources.clients[0].sources == std::vector<std::string>{"notes", "!git*"});
    CHECK_FALSE(parse_ok("[clients.a]\ntools = [\"x\"]\n").clients[0].sources);
    CHECK_THAT(parse_err("[clients.a]\ncaller = \"root\"\n").message,
               Catch::Contains("'caller' in [clients.a] must be"));
    CHECK_THAT(parse_err("[clients.a]\nserach = true\n").message,
               Catch::Contains("did you mean 'search'?"));
}

TEST_CASE("a source's `enabled` is a bool, true unless it says false", "[config]") {
    const std::string source = "[[sources]]\nname = \"h\"\nkind = \"host\"\ncommand = [\"x\"]\n";
    CHECK(parse_ok(source).sources.at(0).enabled);
    CHECK_FALSE(parse_ok(source + "enabled = false\n").sources.at(0).enabled);
    CHECK_THAT(parse_err(source + "enabled = \"no\"\n").message, Catch::Contains("enabled"));
}

TEST_CASE("a source's `start` is eager or on-demand, and `idle_stop_ms` belongs to on-demand",
          "[config]") {
    const std::string source = "[[sources]]\nname = \"h\"\nkind = \"host\"\ncommand = [\"x\"]\n";
    CHECK_FALSE(parse_ok(source).sources.at(0).on_demand);
    CHECK_FALSE(parse_ok(source + "start = \"eager\"\n").sources.at(0).on_demand);
    const auto c = parse_ok(source + "start = \"on-demand\"\nidle_stop_ms = 1500\n");
    CHECK(c.sources.at(0).on_demand);
    CHECK(c.sources.at(0).idle_stop_ms == 1500);
    CHECK(parse_ok(source + "start = \"on-demand\"\n").sources.at(0).idle_stop_ms == 300000);
    CHECK_THAT(parse_err(source + "start = \"lazy\"\n").message,
               Catch::Contains("'start'") && Catch::Contains("on-demand"));
    CHECK_THAT(parse_err(source + "idle_stop_ms = 1000\n").message,
               Catch::Contains("'idle_stop_ms' in source 'h' applies to sources that start on "
                               "demand; add start = \"on-demand\""));
    CHECK_THAT(parse_err(source + "start = \"on-demand\"\nidle_stop_ms = 0\n").message,
               Catch::Contains("idle_stop_ms"));
}

TEST_CASE("a source's `instances` is shared, per-client or per-session, for hosts and stdio MCP "
          "servers, with max_instances and instance_grace_ms beside it",
          "[config]") {
    const std::string host = "[[sources]]\nname = \"h\"\nkind = \"host\"\ncommand = [\"x\"]\n";
    CHECK(parse_ok(host).sources.at(0).instances == meith::config::instance_mode::shared);
    const auto c = parse_ok(host + "instances = \"per-session\"\nmax_instances = 3\n"
                                   "instance_grace_ms = 0\n");
    CHECK(c.sources.at(0).instances == meith::config::instance_mode::per_session);
    CHECK(c.sources.at(0).max_instances == 3);
    CHECK(c.sources.at(0).instance_grace_ms == 0);
    CHECK(parse_ok(host + "instances = \"per-client\"\n").sources.at(0).instances ==
          meith::config::instance_mode::per_client);
    CHECK_THAT(parse_err(host + "instances = \"per-agent\"\n").message,
               Catch::Contains("'instances'") && Catch::Contains("per-session"));
    CHECK_THAT(parse_err(host + "max_instances = 3\n").message,
               Catch::Contains("'max_instances' in source 'h' applies to instances = "
                               "\"per-client\" or \"per-session\""));
    CHECK_THAT(parse_err(host + "instances = \"per-session\"\nmax_instances = 0\n").message,
               Catch::Contains("max_instances"));
    const std::string exec = "[[sources]]\nname = \"e\"\nkind = \"exec\"\ncommand = [\"x\"]\n"
                             "tool = { name = \"t\" }\ninstances = \"per-session\"\n";
    CHECK_THAT(parse_err(exec).message,
               Catch::Contains("'instances' in source 'e' is for tool hosts and MCP servers over "
                               "stdio"));
}

} // namespace unit_config_test
