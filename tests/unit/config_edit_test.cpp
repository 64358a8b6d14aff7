// Unit tests for config/config_edit: a person's "allow always" added to a source's
// network.allow as a text edit that keeps the file as written (docs/protocol.md §19).
#include "config/config.hpp"
#include "config/config_edit.hpp"

#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>

#include <sys/stat.h>
#include <unistd.h>

namespace fs = std::filesystem;
using namespace meith::config;

namespace unit_config_edit_test { // one namespace per file: the tests build as unity batches

namespace {

std::string edited(std::string_view text, std::string_view source, std::string_view rule) {
    std::string why;
    auto out = with_network_allow_rule(text, source, rule, why);
    INFO(why);
    REQUIRE(out);
    // Whatever the edit, the result is a config meithd loads, with the rule where it belongs.
    auto loaded = parse_config(*out, "test.toml", "/etc/meith");
    INFO(*out);
    INFO((loaded.error ? loaded.error->to_string() : std::string()));
    REQUIRE_FALSE(loaded.error);
    for (const auto& s : loaded.value->sources)
        if (s.name == source) {
            REQUIRE(s.sandbox_paths.network);
            const auto& allow = s.sandbox_paths.network->allow;
            CHECK(std::find(allow.begin(), allow.end(), rule) != allow.end());
        }
    return *out;
}

std::string refused(std::string_view text, std::string_view source, std::string_view rule) {
    std::string why;
    CHECK_FALSE(with_network_allow_rule(text, source, rule, why));
    return why;
}

constexpr std::string_view head = "[permissions.callers.plugin]\n"
                                  "allow = [\"accesses-network\"]  # agents may reach the web\n\n";

} // namespace

TEST_CASE("config edit: a rule joins an inline network table's allow array, the rest kept") {
    const std::string text = std::string(head) +
                             "[[sources]]\nname = \"other\"\nkind = \"exec\"\ncommand = "
                             "[\"x\"]\ntool = { name = \"tx\", description = \"d\" }\n"
                             "network = { allow = [\"a.test\"] }\n\n"
                             "[[sources]]\nname = \"web\"   # fetches pages\nkind = \"exec\"\n"
                             "command = [\"y\"]\ntool = { name = \"ty\", description = \"d\" }\n"
                             "network = { allow = [\n  \"api.example.com:443\", # the API\n], "
                             "ask = true }\n";
    const std::string out = edited(text, "web", "docs.example.com:443");
    CHECK(out == std::string(head) +
                     "[[sources]]\nname = \"other\"\nkind = \"exec\"\ncommand = [\"x\"]\ntool = { "
                     "name = \"tx\", description = \"d\" }\n"
                     "network = { allow = [\"a.test\"] }\n\n"
                     "[[sources]]\nname = \"web\"   # fetches pages\nkind = \"exec\"\n"
                     "command = [\"y\"]\ntool = { name = \"ty\", description = \"d\" }\n"
                     "network = { allow = [\"docs.example.com:443\", \n  \"api.example.com:443\", "
                     "# the API\n], ask = true }\n");
    // Again: already listed, no change.
    CHECK(edited(out, "web", "docs.example.com:443") == out);
}

TEST_CASE("config edit: an empty allow array, an inline table without allow, a network header") {
    CHECK(edited("[[sources]]\nname = \"w\"\nkind = \"exec\"\ncommand = [\"y\"]\ntool = { name = "
                 "\"ty\", description = \"d\" }\n"
                 "network = { allow = [], ask = true }\n",
                 "w", "[2001:db8::1]:443") ==
          "[[sources]]\nname = \"w\"\nkind = \"exec\"\ncommand = [\"y\"]\ntool = { name = \"ty\", "
          "description = \"d\" }\n"
          "network = { allow = [\"[2001:db8::1]:443\", ], ask = true }\n");
    CHECK(edited("[[sources]]\nname = \"w\"\nkind = \"exec\"\ncommand = [\"y\"]\ntool = { name = "
                 "\"ty\", description = \"d\" }\n"
                 "network = { ask = true }\n",
                 "w", "x.test:80") == "[[sources]]\nname = \"w\"\nkind = \"exec\"\ncommand = "
                                      "[\"y\"]\ntool = { name = \"ty\", description = \"d\" }\n"
                                      "network = { allow = [\"x.test:80\"], ask = true }\n");
    CHECK(edited("[[sources]]\nname = \"w\"\nkind = \"exec\"\ncommand = [\"y\"]\ntool = { name = "
                 "\"ty\", description = \"d\" }\n"
                 "network = {}\n",
                 "w", "x.test:80") == "[[sources]]\nname = \"w\"\nkind = \"exec\"\ncommand = "
                                      "[\"y\"]\ntool = { name = \"ty\", description = \"d\" }\n"
                                      "network = { allow = [\"x.test:80\"] }\n");
    CHECK(edited("[[sources]]\nname = \"w\"\nkind = \"exec\"\ncommand = [\"y\"]\ntool = { name = "
                 "\"ty\", description = \"d\" }\n\n"
                 "[sources.network]  # où il va\nask = true\n",
                 "w", "x.test:80") ==
          "[[sources]]\nname = \"w\"\nkind = \"exec\"\ncommand = [\"y\"]\ntool = { name = \"ty\", "
          "description = \"d\" }\n\n"
          "[sources.network]  # où il va\nallow = [\"x.test:80\"]\nask = true\n");
    // Code points before the array on its line: columns count them, not bytes. (Checked as
    // text: meithd itself would refuse the non-ASCII rule.)
    std::string why;
    CHECK(with_network_allow_rule("[[sources]]\nname = \"w\"\n"
                                  "network = { deny = [\"ü.test\"], allow = [] }\n",
                                  "w", "x.test:80", why) ==
          "[[sources]]\nname = \"w\"\n"
          "network = { deny = [\"ü.test\"], allow = [\"x.test:80\", ] }\n");
}

TEST_CASE("config edit: no such source, no network table, or a layout it cannot edit: refused") {
    CHECK_THAT(refused("[[sources]]\nname = \"w\"\nkind = \"exec\"\ncommand = [\"y\"]\ntool = { "
                       "name = \"ty\", description = \"d\" }\n",
                       "v", "x.test"),
               Catch::Contains("no [[sources]] entry named 'v'"));
    CHECK_THAT(refused("[[sources]]\nname = \"w\"\nkind = \"exec\"\ncommand = [\"y\"]\ntool = { "
                       "name = \"ty\", description = \"d\" }\n",
                       "w", "x.test"),
               Catch::Contains("no network table"));
    CHECK_THAT(refused("[[sources]]\nname = \"w\"\nkind = \"exec\"\ncommand = [\"y\"]\ntool = { "
                       "name = \"ty\", description = \"d\" }\n"
                       "network.ask = true\n",
                       "w", "x.test"),
               Catch::Contains("not where this edit can find it"));
    CHECK_THAT(refused("[[sources]\n", "w", "x.test"), Catch::Contains("does not parse"));
}

TEST_CASE("config edit: the file is replaced whole with its mode, through a symlink") {
    char tmpl[] = "/tmp/meith-config-edit-XXXXXX";
    REQUIRE(::mkdtemp(tmpl) != nullptr);
    const fs::path dir = tmpl;
    const fs::path real = dir / "real.toml";
    std::ofstream(real) << "[[sources]]\nname = \"w\"\nkind = \"exec\"\ncommand = [\"y\"]\ntool = "
                           "{ name = \"ty\", description = \"d\" }\n"
                           "network = { allow = [], ask = true }\n";
    REQUIRE(::chmod(real.c_str(), 0640) == 0);
    fs::create_symlink(real, dir / "meithd.toml");
    CHECK_FALSE(add_network_allow_rule(dir / "meithd.toml", "w", "x.test:443"));
    CHECK(fs::is_symlink(dir / "meithd.toml"));
    std::ifstream in(real);
    std::stringstream ss;
    ss << in.rdbuf();
    CHECK(ss.str().find("allow = [\"x.test:443\", ]") != std::string::npos);
    struct stat st {};
    REQUIRE(::stat(real.c_str(), &st) == 0);
    CHECK((st.st_mode & 07777) == 0640);
    CHECK(std::distance(fs::directory_iterator(dir), fs::directory_iterator()) == 2);
    const auto error = add_network_allow_rule(dir / "meithd.toml", "nope", "x.test:443");
    REQUIRE(error);
    CHECK_THAT(*error, Catch::Contains("no [[sources]] entry named 'nope'"));
    fs::remove_all(dir);
}

TEST_CASE("with_source_keys replaces a key where it stands, adds a new one after the entry's "
          "last plain key (before dotted and table keys), and refuses a key written as a table "
          "of its own",
          "[config][learn]") {
    const std::string text = "# mine\n[[sources]]\nname = \"a\"\ncommand = [\"x\"]\n"
                             "sandbox_paths = { write = [\"/old\"] }  # kept?\n"
                             "tool.name = \"t\"\n\n[[sources]]\nname = \"b\"\ncommand = [\"y\"]\n";
    std::string why;
    const auto out = with_source_keys(
        text, "a",
        {{"sandbox_paths", "{ write = [\"/new\"] }"}, {"network", "{ allow = [\"x.test\"] }"}},
        why);
    REQUIRE(out);
    CHECK(*out == "# mine\n[[sources]]\nname = \"a\"\ncommand = [\"x\"]\n"
                  "sandbox_paths = { write = [\"/new\"] }  # kept?\n"
                  "network = { allow = [\"x.test\"] }\ntool.name = \"t\"\n\n[[sources]]\n"
                  "name = \"b\"\ncommand = [\"y\"]\n");
    CHECK_FALSE(with_source_keys(text, "c", {{"profile", "[\"default\"]"}}, why));
    CHECK_THAT(why, Catch::Contains("no [[sources]] entry named 'c'"));
    const std::string headed =
        "[[sources]]\nname = \"a\"\ncommand = [\"x\"]\n[sources.network]\nallow = [\"y\"]\n";
    CHECK_FALSE(with_source_keys(headed, "a", {{"network", "{ allow = [\"z\"] }"}}, why));
    CHECK_THAT(why, Catch::Contains("table of its own"));
}

} // namespace unit_config_edit_test
