// Unit tests for permissions/: caller downgrade, capability sets, globbing and the policy
// decision of docs/protocol.md §5.
#include "permissions/grants.hpp"
#include "permissions/policy.hpp"

#include <catch2/catch.hpp>

#include <fnmatch.h>
#include <string>
#include <vector>

using namespace meith::permissions;
using meith::config::caller_policy_config;
using meith::config::permission_rule_config;
using meith::config::permissions_config;

namespace unit_permissions_test { // one namespace per file: the tests build as unity batches

namespace {

capability_set caps(std::vector<std::string> names) {
    return capability_set_from(names);
}

constexpr capability_set none = 0;

/// The [permissions.callers.*] tables of the docs/configuration.md example.
permissions_config example_config() {
    permissions_config cfg;
    cfg.cli = caller_policy_config{{"read-only", "writes-files", "controls-browser",
                                    "starts-process", "accesses-network", "unknown"},
                                   {"destructive"},
                                   {}};
    cfg.plugin = caller_policy_config{{"read-only"}, {}, {}};
    return cfg;
}

} // namespace

TEST_CASE("caller_from_claim keeps cli and plugin, downgrades the rest", "[permissions]") {
    CHECK(caller_from_claim("cli") == caller::cli);
    CHECK(caller_from_claim("plugin") == caller::plugin);
    for (const char* claim : {"renderer", "agent", "internal", "", "CLI", "cli ", " cli", "Plugin"})
        CHECK(caller_from_claim(claim) == caller::plugin);
    CHECK(to_string(caller::cli) == "cli");
    CHECK(to_string(caller::plugin) == "plugin");
}

TEST_CASE("capability names and sets", "[permissions]") {
    CHECK(capability_from_string("read-only") == capability::read_only);
    CHECK(capability_from_string("accesses-network") == capability::accesses_network);
    CHECK(capability_from_string("unknown") == capability::unknown);
    CHECK_FALSE(capability_from_string("read_only"));
    CHECK_FALSE(capability_from_string(""));
    for (std::size_t i = 0; i < capability_count; ++i) {
        const auto c = static_cast<capability>(i);
        CHECK(capability_from_string(to_string(c)) == c);
    }

    CHECK(caps({}) == caps({"unknown"}));
    CHECK(caps({"bogus"}) == caps({"unknown"}));
    CHECK(caps({"read-only", "bogus"}) == caps({"unknown", "read-only"}));
    CHECK(capability_names(caps({"destructive", "read-only", "read-only"})) ==
          std::vector<std::string_view>{"read-only", "destructive"});
    CHECK(capability_names(0).empty());
}

TEST_CASE("defaults: read-only and accesses-network only", "[permissions]") {
    const policy p;
    for (caller who : {caller::cli, caller::plugin}) {
        CAPTURE(to_string(who));
        CHECK(p.decide("t", caps({"read-only"}), who).allow);
        CHECK(p.decide("t", caps({"accesses-network"}), who).allow);
        CHECK(p.decide("t", caps({"read-only", "accesses-network"}), who).allow);
        for (const char* denied :
             {"writes-files", "controls-browser", "starts-process", "destructive", "unknown"}) {
            CAPTURE(denied);
            const decision d = p.decide("t", caps({"read-only", denied}), who);
            CHECK_FALSE(d.allow);
            CHECK(d.reason == "capability '" + std::string(denied) +
                                  "' is not allowed for caller '" + std::string(to_string(who)) +
                                  "'");
        }
    }
}

TEST_CASE("no declared capability counts as unknown", "[permissions]") {
    const policy p;
    const decision d = p.decide("mystery", none, caller::cli);
    CHECK_FALSE(d.allow);
    CHECK(d.reason == "capability 'unknown' is not allowed for caller 'cli'");

    const policy example(example_config());
    const decision ok = example.decide("mystery", none, caller::cli);
    CHECK(ok.allow);
    CHECK(ok.reason == "capabilities [unknown] allowed for caller 'cli'");
    CHECK_FALSE(example.decide("mystery", none, caller::plugin).allow);
}

TEST_CASE("configured caller tables replace the defaults", "[permissions]") {
    const policy p(example_config());

    const decision writes = p.decide("w", caps({"read-only", "writes-files"}), caller::cli);
    CHECK(writes.allow);
    CHECK(writes.reason == "capabilities [read-only, writes-files] allowed for caller 'cli'");
    CHECK(p.decide("b", caps({"controls-browser"}), caller::cli).allow);
    CHECK(p.decide("s", caps({"starts-process"}), caller::cli).allow);

    const decision destroy = p.decide("d", caps({"writes-files", "destructive"}), caller::cli);
    CHECK_FALSE(destroy.allow);
    CHECK(destroy.reason == "capability 'destructive' is denied for caller 'cli'");

    // plugin's table drops accesses-network from its defaults.
    CHECK(p.decide("r", caps({"read-only"}), caller::plugin).allow);
    const decision net = p.decide("n", caps({"accesses-network"}), caller::plugin);
    CHECK_FALSE(net.allow);
    CHECK(net.reason == "capability 'accesses-network' is not allowed for caller 'plugin'");

    // A configured table for one caller leaves the other on the defaults.
    permissions_config only_cli;
    only_cli.cli = caller_policy_config{{"writes-files"}, {}, {}};
    const policy q(only_cli);
    CHECK_FALSE(q.decide("r", caps({"read-only"}), caller::cli).allow);
    CHECK(q.decide("r", caps({"read-only"}), caller::plugin).allow);
    CHECK(q.decide("n", caps({"accesses-network"}), caller::plugin).allow);
}

TEST_CASE("deny wins over allow, and is reported before a not-allowed", "[permissions]") {
    permissions_config cfg;
    cfg.plugin = caller_policy_config{{"read-only", "writes-files"}, {"writes-files"}, {}};
    const policy p(cfg);
    const decision both = p.decide("w", caps({"writes-files"}), caller::plugin);
    CHECK_FALSE(both.allow);
    CHECK(both.reason == "capability 'writes-files' is denied for caller 'plugin'");

    // starts-process (not allowed) comes before writes-files in enum order, yet the deny is
    // what the reason names.
    const decision mixed =
        p.decide("w", caps({"starts-process", "writes-files", "read-only"}), caller::plugin);
    CHECK_FALSE(mixed.allow);
    CHECK(mixed.reason == "capability 'writes-files' is denied for caller 'plugin'");

    CHECK(p.decide("r", caps({"read-only"}), caller::plugin).allow);
}

TEST_CASE("rules: first match wins, before the caller lists", "[permissions]") {
    permissions_config cfg;
    cfg.rules = {
        permission_rule_config{"fs_*", std::string("plugin"), true, false},
        permission_rule_config{"fs_delete", std::nullopt, false, false},
        permission_rule_config{"fs_?", std::nullopt, false, false},
        permission_rule_config{"net_*", std::string("cli"), false, false},
    };
    const policy p(cfg);

    const decision plugin_write = p.decide("fs_write", caps({"writes-files"}), caller::plugin);
    CHECK(plugin_write.allow);
    CHECK(plugin_write.reason == "rule 1 (tool 'fs_*', caller 'plugin') allows");

    // Rule 1 is plugin-only: cli falls through to rule 2.
    const decision cli_delete = p.decide("fs_delete", caps({"read-only"}), caller::cli);
    CHECK_FALSE(cli_delete.allow);
    CHECK(cli_delete.reason == "rule 2 (tool 'fs_delete') denies");
    // ...while for plugin the earlier rule 1 already matched.
    CHECK(p.decide("fs_delete", caps({"destructive"}), caller::plugin).allow);

    const decision short_name = p.decide("fs_x", caps({"read-only"}), caller::cli);
    CHECK_FALSE(short_name.allow);
    CHECK(short_name.reason == "rule 3 (tool 'fs_?') denies");

    const decision net = p.decide("net_get", caps({"accesses-network"}), caller::cli);
    CHECK_FALSE(net.allow);
    CHECK(net.reason == "rule 4 (tool 'net_*', caller 'cli') denies");
    // No rule for plugin: the caller lists decide.
    const decision plugin_net = p.decide("net_get", caps({"accesses-network"}), caller::plugin);
    CHECK(plugin_net.allow);
    CHECK(plugin_net.reason == "capabilities [accesses-network] allowed for caller 'plugin'");

    // A name no rule matches.
    CHECK_FALSE(p.decide("other", caps({"writes-files"}), caller::cli).allow);
    CHECK(p.decide("other", caps({"read-only"}), caller::cli).allow);
}

TEST_CASE("a deny rule overrides capabilities the lists would allow", "[permissions]") {
    permissions_config cfg = example_config();
    cfg.rules = {permission_rule_config{"echo", std::nullopt, false, false}};
    const policy p(cfg);
    const decision d = p.decide("echo", caps({"read-only"}), caller::cli);
    CHECK_FALSE(d.allow);
    CHECK(d.reason == "rule 1 (tool 'echo') denies");
}

TEST_CASE("glob_match", "[permissions]") {
    CHECK(glob_match("*", ""));
    CHECK(glob_match("*", "anything"));
    CHECK(glob_match("", ""));
    CHECK_FALSE(glob_match("", "a"));
    CHECK(glob_match("fs_*", "fs_"));
    CHECK(glob_match("fs_*", "fs_read"));
    CHECK_FALSE(glob_match("fs_*", "xfs_read"));
    CHECK_FALSE(glob_match("fs_*", "fs"));
    CHECK(glob_match("*_file", "read_file"));
    CHECK(glob_match("a*b*c", "aXXbYYc"));
    CHECK_FALSE(glob_match("a*b*c", "aXXbYYcd"));
    CHECK(glob_match("fs_?", "fs_x"));
    CHECK_FALSE(glob_match("fs_?", "fs_"));
    CHECK_FALSE(glob_match("fs_?", "fs_xy"));
    CHECK(glob_match("[abc]x", "bx"));
    CHECK_FALSE(glob_match("[abc]x", "dx"));
    CHECK(glob_match("v[0-9]", "v7"));
    CHECK_FALSE(glob_match("v[0-9]", "vx"));
    CHECK(glob_match("[!x]y", "ay"));
    CHECK_FALSE(glob_match("[!x]y", "xy"));
    CHECK(glob_match("[]]", "]"));
    CHECK(glob_match("[!]]", "a"));
    CHECK(glob_match("[a-]", "-"));
    CHECK(glob_match("[", "[")); // unterminated: literal
    CHECK(glob_match("a[b", "a[b"));
    CHECK(glob_match("\\*", "*"));
    CHECK_FALSE(glob_match("\\*", "x"));
    CHECK_FALSE(glob_match("a\\", "a\\")); // dangling escape matches nothing
    CHECK(glob_match("[[:digit:]]x", "5x"));
    CHECK_FALSE(glob_match("[[:bogus:]]", "b"));
    CHECK(glob_match("a/*", "a/b/c")); // no FNM_PATHNAME: '*' crosses '/'
    CHECK(glob_match("*", ".hidden")); // no FNM_PERIOD

    // Pathological patterns finish at once (the matcher never backtracks more than O(n*m)).
    const std::string long_a(5000, 'a');
    CHECK_FALSE(glob_match("*a*a*a*a*a*a*a*a*a*a*a*a*b", long_a));
    CHECK(glob_match("*a*a*a*a*a*a*a*a*a*a*a*a*", long_a));
}

TEST_CASE("glob_match agrees with fnmatch(3) without flags", "[permissions]") {
    const std::vector<std::string> patterns = {
        "*",       "?",      "fs_*",   "*_*",  "a?c",          "[abc]",
        "[!abc]",  "[^abc]", "[a-c]*", "[]a]", "[!]a]",        "[a-]",
        "[-a]",    "*[0-9]", "\\*",    "\\?x", "a\\b",         "[\\]]",
        "[a\\-z]", "[",      "a[",     "[!",   "*[[:alpha:]]", "[[:upper:][:digit:]]*",
        "[[:x]",   "x*y*z",  "**a**",  "a*",   "*.py",         "[z-a]",
        "[.]",     "[*]",    "[?]"};
    const std::vector<std::string> names = {"",       "a",  "b",  "abc", "a-c", "fs_read", "x_y",
                                            "]",      "-",  "*",  "?x",  "ab",  "a\\b",    "[",
                                            "a[",     "[!", "Z9", "9",   "xyz", "xaybz",   "zz",
                                            "foo.py", ".",  "A",  "z",   "aa",  "[x",      "x"};
    for (const auto& pat : patterns) {
        for (const auto& name : names) {
            CAPTURE(pat, name);
            CHECK(glob_match(pat, name) == (::fnmatch(pat.c_str(), name.c_str(), 0) == 0));
        }
    }
}

TEST_CASE("ask: caller lists and rules ask, deny still wins, and what a grant must cover",
          "[permissions][grants]") {
    permissions_config cfg;
    cfg.plugin = caller_policy_config{
        {"read-only", "accesses-network", "writes-files"}, {"destructive"}, {"writes-files"}};
    cfg.rules = {permission_rule_config{"tmp_*", std::string("plugin"), false, true}};
    const policy p(cfg);

    // On both allow and ask: ask wins over allow (§12: deny -> grant -> ask -> allow).
    const decision w = p.decide("write", caps({"read-only", "writes-files"}), caller::plugin);
    CHECK_FALSE(w.allow);
    CHECK(w.ask);
    CHECK(w.outcome() == verdict::ask);
    CHECK(w.grantable);
    CHECK(w.needed == caps({"writes-files"})); // read-only is allowed outright
    CHECK(w.reason == "capability 'writes-files' needs approval for caller 'plugin'");

    // An explicit deny is never asked about and no grant lifts it.
    const decision d = p.decide("rm", caps({"writes-files", "destructive"}), caller::plugin);
    CHECK(d.outcome() == verdict::deny);
    CHECK_FALSE(d.grantable);

    // Merely not allowed: denied, but a grant may cover it.
    const decision n = p.decide("spawn", caps({"starts-process"}), caller::plugin);
    CHECK(n.outcome() == verdict::deny);
    CHECK(n.grantable);
    CHECK(n.needed == caps({"starts-process"}));

    // A rule that asks, even for a read-only tool: a grant must cover all the tool's
    // capabilities (a grant for something else does not lift it).
    const decision r = p.decide("tmp_list", caps({"read-only"}), caller::plugin);
    CHECK(r.outcome() == verdict::ask);
    CHECK(r.reason == "rule 1 (tool 'tmp_*', caller 'plugin') asks for approval");
    CHECK(r.needed == caps({"read-only"}));
    // ...but the caller's deny list comes first: an ask rule never lifts an explicit deny.
    const decision rd = p.decide("tmp_rm", caps({"destructive"}), caller::plugin);
    CHECK(rd.outcome() == verdict::deny);
    CHECK_FALSE(rd.grantable);
    CHECK(rd.reason == "capability 'destructive' is denied for caller 'plugin'");

    // Allowed outright: no grant needed, none consulted.
    const decision a = p.decide("read", caps({"read-only"}), caller::plugin);
    CHECK(a.outcome() == verdict::allow);
    CHECK_FALSE(a.grantable);
    // The cli caller keeps its defaults: nothing asks.
    CHECK(p.decide("write", caps({"writes-files"}), caller::cli).outcome() == verdict::deny);
}

TEST_CASE("grant_store: matching by caller, session, tool glob and capabilities, uses, expiry",
          "[permissions][grants]") {
    using namespace std::chrono_literals;
    grant_store store;
    const auto now = wall_clock::now();
    grant session_write;
    session_write.id = "g_1";
    session_write.session_id = "s_a";
    session_write.tool = "fs_*";
    session_write.capabilities = caps({"writes-files"});
    session_write.uses_left = 2;
    store.add(session_write);
    grant expiring;
    expiring.id = "g_2";
    expiring.who = caller::cli;
    expiring.capabilities = caps({"starts-process"});
    expiring.expires_at = now + 10s;
    store.add(expiring);

    const auto wf = caps({"writes-files"});
    CHECK(store.match("fs_write", wf, caller::plugin, "s_a", now)->id == "g_1");
    CHECK(store.match("fs_write", wf, caller::plugin, "s_b", now) == nullptr); // other session
    CHECK(store.match("net_get", wf, caller::plugin, "s_a", now) == nullptr);  // other tool
    CHECK(store.match("fs_rm", caps({"writes-files", "destructive"}), caller::plugin, "s_a",
                      now) == nullptr); // destructive is not granted
    CHECK(store.match("x", caps({"starts-process"}), caller::cli, "s_z", now)->id == "g_2");
    CHECK(store.match("x", caps({"starts-process"}), caller::plugin, "s_z", now) == nullptr);
    CHECK(store.match("x", caps({"starts-process"}), caller::cli, "s_z", now + 11s) == nullptr);

    // Uses count down; the last one removes the grant.
    CHECK_FALSE(store.use("g_1"));
    const auto last = store.use("g_1");
    REQUIRE(last);
    CHECK(last->id == "g_1");
    CHECK(store.match("fs_write", wf, caller::plugin, "s_a", now) == nullptr);

    // Expiry and sessions.
    CHECK(store.next_expiry() == now + 10s);
    CHECK(store.expire(now + 5s).empty());
    const auto gone = store.expire(now + 10s);
    REQUIRE(gone.size() == 1);
    CHECK(gone[0].id == "g_2");
    CHECK(store.all().empty());
    grant s;
    s.id = "g_3";
    s.session_id = "s_q";
    s.capabilities = wf;
    store.add(s);
    CHECK(store.remove_session("s_other").empty());
    CHECK(store.remove_session("s_q").size() == 1);
    CHECK_FALSE(store.remove("g_3"));
}

} // namespace unit_permissions_test
