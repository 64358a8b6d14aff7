// sandbox_config: the keys that say how a source's or hook's process is confined
// (docs/configuration.md "Sources", docs/protocol.md §15): `sandbox`, `sandbox_paths` and a
// source's `profile`.
#include "config/config.hpp"
#include "config/paths.hpp"
#include "config/profiles.hpp"
#include "config/toml_checker.hpp"

#include <array>
#include <string_view>
#include <utility>

#include <fmt/format.h>
#include <toml++/toml.h>

namespace meith::config::detail {

using namespace std::string_view_literals;

void parse_sandbox(checker& c, const scope& s, sandbox_mode& mode, sandbox_paths_config& paths) {
    static constexpr std::array modes{"enforce"sv, "require"sv, "off"sv};
    if (auto i = c.read_enum(s, "sandbox", modes))
        mode = std::array{sandbox_mode::enforce, sandbox_mode::require, sandbox_mode::off}[*i];
    if (const auto* t = c.read_table(s, "sandbox_paths")) {
        const scope p{*t, fmt::format("the sandbox_paths of {}", s.name)};
        c.check_keys(p, {"read", "write", "exec", "sockets"});
        for (auto [key, list] :
             {std::pair{"read"sv, &paths.read}, std::pair{"write"sv, &paths.write},
              std::pair{"exec"sv, &paths.exec}, std::pair{"sockets"sv, &paths.sockets}}) {
            if (auto names = c.read_string_array(p, key, false, true)) {
                for (const auto& n : *names) {
                    fs::path path = expand_tilde(fs::path(n));
                    if (path.is_relative()) path = c.base_dir() / path;
                    list->push_back(path.lexically_normal());
                }
            }
        }
    }
}

void parse_profile(checker& c, const scope& s, sandbox_paths_config& paths) {
    const toml::node* n = s.table.get("profile");
    if (n == nullptr) return;
    const std::string what = checker::label(s, "profile");
    std::vector<std::string> names;
    if (auto one = n->value<std::string>()) {
        names.push_back(*one);
    } else if (!n->is_array()) {
        c.fail(n->source(), fmt::format("{} must be a profile's name or an array of them ({})",
                                        what, sandbox_profile_names()));
        return;
    } else if (auto list = c.read_string_array(s, "profile", true, true)) {
        names = std::move(*list);
    } else {
        return; // read_string_array said what is wrong
    }
    for (const auto& name : names)
        if (find_sandbox_profile(name) == nullptr) {
            c.fail(n->source(), fmt::format("{} names an unknown sandbox profile \"{}\"; known "
                                            "profiles: {} (docs/protocol.md §15, \"Profiles\")",
                                            what, name, sandbox_profile_names()));
            return;
        }
    paths.profile = std::move(names);
}

void check_tmpdir(checker& c, const toml::table& t, const scope& s, const source_config& src) {
    if (src.sandbox == sandbox_mode::off || !src.env.contains("TMPDIR")) return;
    const auto* env = t.get("env");
    const auto* node = env && env->as_table() ? env->as_table()->get("TMPDIR") : nullptr;
    c.fail(node ? node->source() : env->source(),
           fmt::format("`TMPDIR` in the env of {} would be replaced: a confined source's TMPDIR is "
                       "its own private, size-bounded temporary folder (docs/protocol.md §15); "
                       "remove it from `env`, and name a folder it must write in "
                       "`sandbox_paths.write` (or run it with sandbox = \"off\")",
                       s.name));
}

} // namespace meith::config::detail
