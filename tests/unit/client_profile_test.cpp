// Unit tests for permissions/client_profile: `[clients.NAME]` globs, renames and the reasons a
// tool is hidden (docs/protocol.md §23).
#include "permissions/client_profile.hpp"

#include <catch2/catch.hpp>

using namespace meith;
using permissions::client_profile;

namespace unit_client_profile_test { // one namespace per file: the tests build as unity batches

namespace {

config::client_config profile(std::vector<std::string> tools) {
    config::client_config c;
    c.name = "p";
    c.tools = std::move(tools);
    return c;
}

} // namespace

TEST_CASE(
    "client profile: includes, then `!` excludes, order aside, and no globs give every tool") {
    const client_profile all(profile({}));
    CHECK(all.visible("anything"));
    const client_profile only_out(profile({"!fs_delete*"}));
    CHECK(only_out.visible("fs_read"));
    CHECK_FALSE(only_out.visible("fs_delete_file"));
    const client_profile fs(profile({"!fs_delete*", "fs_*", "echo"}));
    CHECK(fs.visible("fs_read"));
    CHECK(fs.visible("echo"));
    CHECK_FALSE(fs.visible("fs_delete_tree"));
    CHECK_FALSE(fs.visible("kv"));
    CHECK(*fs.hidden("fs_delete_tree") ==
          "client profile 'p' leaves it out ('!fs_delete*' in [clients.p] tools)");
    CHECK(*fs.hidden("kv") == "client profile 'p' does not include it (it matches none of "
                              "[clients.p] tools = [!fs_delete*, fs_*, echo])");
}

TEST_CASE("client profile: a rename maps the shown name to the real one, and a tool whose name "
          "another took is hidden") {
    auto c = profile({});
    c.overrides["word_count"].name = "count";
    c.overrides["word_count"].description = "Counts words";
    const client_profile p(c);
    CHECK(p.real_name("count") == "word_count");
    CHECK(p.real_name("word_count") == "word_count");
    CHECK(p.real_name("echo") == "echo");
    CHECK(p.shown_name("word_count") == "count");
    CHECK(p.shown_name("echo") == "echo");
    REQUIRE(p.override_of("word_count") != nullptr);
    CHECK(*p.override_of("word_count")->description == "Counts words");
    CHECK(p.override_of("echo") == nullptr);
    // A real tool named `count` is out of reach under the name the override gave away.
    CHECK_THAT(*p.hidden("count"), Catch::Contains("shows 'word_count' under this name"));
}

TEST_CASE("client profile: the caller it maps to, and a removed profile hides everything") {
    auto c = profile({});
    c.caller = "plugin";
    CHECK(*client_profile(c).mapped_caller() == permissions::caller::plugin);
    CHECK_FALSE(client_profile(profile({})).mapped_caller());
    const auto gone = client_profile::removed("p");
    CHECK_THAT(*gone.hidden("echo"), Catch::Contains("no longer in meithd's config"));
    CHECK(*gone.mapped_caller() == permissions::caller::plugin);
}

} // namespace unit_client_profile_test
