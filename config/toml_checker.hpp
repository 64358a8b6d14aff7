// toml_checker: the typed reader config.cpp checks a TOML document with. Each reader names the
// key's table and line in its message ("meithd.toml:12: source 'weather': `timeout_ms` must be
// a positive integer"), suggests the key a misspelt one meant, and keeps only the problem that
// comes first in the file. Internal to config/.
#pragma once

#include "config/config.hpp"
#include "config/paths.hpp"
#include "protocol/suggest.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <filesystem>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <toml++/toml.h>

namespace meith::config::detail {

namespace fs = std::filesystem;
using namespace std::string_view_literals;

/// The values of a tool's `capabilities` (docs/configuration.md).
inline constexpr std::array capability_names{
    "read-only"sv,        "writes-files"sv, "controls-browser"sv, "starts-process"sv,
    "accesses-network"sv, "destructive"sv,  "unknown"sv,
};

inline std::string_view type_name(toml::node_type t) {
    switch (t) {
    case toml::node_type::table:
        return "a table";
    case toml::node_type::array:
        return "an array";
    case toml::node_type::string:
        return "a string";
    case toml::node_type::integer:
        return "an integer";
    case toml::node_type::floating_point:
        return "a float";
    case toml::node_type::boolean:
        return "a boolean";
    case toml::node_type::date:
        return "a date";
    case toml::node_type::time:
        return "a time";
    case toml::node_type::date_time:
        return "a date-time";
    case toml::node_type::none:
        break;
    }
    return "nothing";
}

template <std::size_t N>
std::string quoted_list(const std::array<std::string_view, N>& names) {
    std::string out;
    for (std::size_t i = 0; i < N; ++i) {
        if (i > 0) out += i + 1 == N ? " or " : ", ";
        out += fmt::format("\"{}\"", names[i]);
    }
    return out;
}

template <std::size_t N>
std::optional<std::size_t> index_of(const std::array<std::string_view, N>& names,
                                    std::string_view v) {
    for (std::size_t i = 0; i < N; ++i)
        if (names[i] == v) return i;
    return std::nullopt;
}

/// TOML value -> JSON: tables, arrays and scalars map one to one; dates and times become
/// their TOML text (e.g. "1979-05-27T07:32:00Z").
inline nlohmann::json to_json(const toml::node& n) {
    if (const auto* t = n.as_table()) {
        auto obj = nlohmann::json::object();
        for (auto&& [k, v] : *t)
            obj[std::string(k.str())] = to_json(v);
        return obj;
    }
    if (const auto* a = n.as_array()) {
        auto arr = nlohmann::json::array();
        for (const auto& e : *a)
            arr.push_back(to_json(e));
        return arr;
    }
    if (const auto* v = n.as_string()) return v->get();
    if (const auto* v = n.as_integer()) return v->get();
    if (const auto* v = n.as_floating_point()) return v->get();
    if (const auto* v = n.as_boolean()) return v->get();
    std::ostringstream os;
    if (const auto* v = n.as_date()) os << v->get();
    if (const auto* v = n.as_time()) os << v->get();
    if (const auto* v = n.as_date_time()) os << v->get();
    return os.str();
}

inline std::string json_text(const toml::node& n) {
    // toml++ only yields valid UTF-8, but "replace" keeps dump() from ever throwing.
    return to_json(n).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

/// A table being checked and how messages name it ("[limits]", "source 'weather'", or
/// empty for the document root).
struct scope {
    const toml::table& table;
    std::string name;
};

/// Walks the document and keeps the problem that comes first in the file, so the user fixes
/// errors top to bottom whatever order the checks run in. Readers report and return nullopt;
/// callers then keep the default, and skip checks that depend on the failed value.
class checker {
  public:
    checker(std::string display_name, fs::path base_dir)
        : display_(std::move(display_name)), base_(std::move(base_dir)) {}

    bool failed() const { return error_.has_value(); }
    const std::optional<config_error>& error() const { return error_; }
    const fs::path& base_dir() const { return base_; }

    std::string where(const toml::source_region& r) const {
        if (r.begin.line == 0) return display_;
        return fmt::format("{}:{}:{}", display_, r.begin.line, r.begin.column);
    }

    void fail(const toml::source_region& r, std::string message) {
        const std::pair<std::uint32_t, std::uint32_t> at{r.begin.line, r.begin.column};
        if (error_ && at >= at_) return;
        at_ = at;
        error_ = config_error{where(r), std::move(message)};
    }

    static std::string label(const scope& s, std::string_view key) {
        if (s.name.empty()) return fmt::format("'{}'", key);
        return fmt::format("'{}' in {}", key, s.name);
    }

    /// Every key of the table not in `allowed` is an error, with a suggestion for typos.
    void check_keys(const scope& s, std::initializer_list<std::string_view> allowed) {
        for (auto&& [k, v] : s.table) {
            const std::string_view key = k.str();
            if (std::find(allowed.begin(), allowed.end(), key) != allowed.end()) continue;
            std::string message = s.name.empty()
                                      ? fmt::format("unknown top-level key '{}'", key)
                                      : fmt::format("unknown key '{}' in {}", key, s.name);
            std::string_view best;
            std::size_t best_d = 3;
            for (auto candidate : allowed) {
                const std::size_t d = protocol::edit_distance(key, candidate);
                if (d < best_d && d < std::max<std::size_t>(2, candidate.size() / 2)) {
                    best = candidate;
                    best_d = d;
                }
            }
            if (!best.empty()) message += fmt::format(" (did you mean '{}'?)", best);
            fail(k.source().begin.line != 0 ? k.source() : v.source(), std::move(message));
        }
    }

    /// True when present; otherwise reports the table as missing `key` — or, when the table
    /// holds a key that is `key` misspelt (`comand`), that key at its own line with "did you
    /// mean", which is the mistake a person made.
    bool require(const scope& s, std::string_view key) {
        if (s.table.contains(key)) return true;
        for (auto&& [k, v] : s.table) {
            const std::string_view typed = k.str();
            const std::size_t d = protocol::edit_distance(typed, key);
            if (d == 0 || d > 2 || d >= std::max<std::size_t>(2, key.size() / 2)) continue;
            fail(k.source().begin.line != 0 ? k.source() : v.source(),
                 fmt::format("unknown key '{}' in {} (did you mean '{}'? '{}' is required)", typed,
                             s.name.empty() ? "the document" : s.name, key, key));
            return false;
        }
        fail(s.table.source(), fmt::format("missing required key '{}' in {}", key,
                                           s.name.empty() ? "the document" : s.name));
        return false;
    }

    void type_error(const toml::node& n, const std::string& what, std::string_view expected) {
        fail(n.source(), fmt::format("{} must be {}, not {}", what, expected, type_name(n.type())));
    }

    std::optional<std::string> string_of(const toml::node& n, const std::string& what,
                                         bool non_empty) {
        const auto* v = n.as_string();
        if (v == nullptr) {
            type_error(n, what, non_empty ? "a non-empty string" : "a string");
            return std::nullopt;
        }
        const std::string& s = v->get();
        if (non_empty && s.empty()) {
            fail(n.source(), fmt::format("{} must not be empty", what));
            return std::nullopt;
        }
        if (s.find('\0') != std::string::npos) {
            fail(n.source(), fmt::format("{} must not contain a NUL character", what));
            return std::nullopt;
        }
        return s;
    }

    std::optional<std::uint64_t>
    uint_of(const toml::node& n, const std::string& what, std::uint64_t min,
            std::uint64_t max = std::numeric_limits<std::uint64_t>::max()) {
        const std::string expected = min == 0   ? "a non-negative integer"
                                     : min == 1 ? "a positive integer"
                                                : fmt::format("an integer of at least {}", min);
        const auto* v = n.as_integer();
        if (v == nullptr) {
            type_error(n, what, expected);
            return std::nullopt;
        }
        const std::int64_t i = v->get();
        if (i < 0 || static_cast<std::uint64_t>(i) < min) {
            fail(n.source(), fmt::format("{} must be {}, not {}", what, expected, i));
            return std::nullopt;
        }
        if (static_cast<std::uint64_t>(i) > max) {
            fail(n.source(),
                 fmt::format("{} must be at most {}{}, not {}", what, max,
                             max % 86'400'000 == 0 && max >= 86'400'000
                                 ? fmt::format(" ({} days)", max / 86'400'000)
                             : max % 60'000 == 0 ? fmt::format(" ({} minutes)", max / 60'000)
                                                 : std::string(),
                             i));
            return std::nullopt;
        }
        return static_cast<std::uint64_t>(i);
    }

    std::optional<std::string> read_string(const scope& s, std::string_view key, bool non_empty) {
        const auto* n = s.table.get(key);
        return n ? string_of(*n, label(s, key), non_empty) : std::nullopt;
    }

    std::optional<bool> read_bool(const scope& s, std::string_view key) {
        const auto* n = s.table.get(key);
        if (n == nullptr) return std::nullopt;
        if (const auto* v = n->as_boolean()) return v->get();
        type_error(*n, label(s, key), "true or false");
        return std::nullopt;
    }

    std::optional<std::uint64_t>
    read_uint(const scope& s, std::string_view key, std::uint64_t min = 0,
              std::uint64_t max = std::numeric_limits<std::uint64_t>::max()) {
        const auto* n = s.table.get(key);
        return n ? uint_of(*n, label(s, key), min, max) : std::nullopt;
    }

    template <std::size_t N>
    std::optional<std::size_t> read_enum(const scope& s, std::string_view key,
                                         const std::array<std::string_view, N>& names) {
        const auto* n = s.table.get(key);
        if (n == nullptr) return std::nullopt;
        auto v = string_of(*n, label(s, key), false);
        if (!v) return std::nullopt;
        if (auto i = index_of(names, *v)) return i;
        fail(n->source(),
             fmt::format("{} must be {}, not \"{}\"", label(s, key), quoted_list(names), *v));
        return std::nullopt;
    }

    const toml::table* read_table(const scope& s, std::string_view key) {
        const auto* n = s.table.get(key);
        if (n == nullptr) return nullptr;
        if (const auto* t = n->as_table()) return t;
        type_error(*n, label(s, key), "a table");
        return nullptr;
    }

    /// `[[key]]` (or `key = [{...}, ...]`): the entries that are tables.
    std::vector<const toml::table*> read_table_array(const scope& s, std::string_view key) {
        std::vector<const toml::table*> out;
        const auto* n = s.table.get(key);
        if (n == nullptr) return out;
        const auto* a = n->as_array();
        if (a == nullptr) {
            type_error(*n, label(s, key), "an array of tables");
            return out;
        }
        for (const auto& e : *a) {
            if (const auto* t = e.as_table())
                out.push_back(t);
            else
                type_error(e, fmt::format("each entry of {}", label(s, key)), "a table");
        }
        return out;
    }

    std::optional<std::vector<std::string>> string_array_of(const toml::node& n,
                                                            const std::string& what,
                                                            bool non_empty_list,
                                                            bool non_empty_items) {
        const auto* a = n.as_array();
        if (a == nullptr) {
            type_error(n, what,
                       non_empty_list ? "a non-empty array of strings" : "an array of strings");
            return std::nullopt;
        }
        if (non_empty_list && a->empty()) {
            fail(n.source(), fmt::format("{} must not be empty", what));
            return std::nullopt;
        }
        std::vector<std::string> out;
        bool ok = true;
        for (std::size_t i = 0; i < a->size(); ++i) {
            auto s = string_of((*a)[i], fmt::format("each item of {}", what), non_empty_items);
            if (s)
                out.push_back(std::move(*s));
            else
                ok = false;
        }
        if (!ok) return std::nullopt;
        return out;
    }

    std::optional<std::vector<std::string>> read_string_array(const scope& s, std::string_view key,
                                                              bool non_empty_list,
                                                              bool non_empty_items) {
        const auto* n = s.table.get(key);
        if (n == nullptr) return std::nullopt;
        return string_array_of(*n, label(s, key), non_empty_list, non_empty_items);
    }

    /// An array of capability names, each checked against docs/protocol.md §5.
    std::optional<std::vector<std::string>> capabilities_of(const toml::node& n,
                                                            const std::string& what) {
        auto names = string_array_of(n, what, false, false);
        if (!names) return std::nullopt;
        const auto& a = *n.as_array();
        bool ok = true;
        for (std::size_t i = 0; i < names->size(); ++i) {
            if (index_of(capability_names, (*names)[i])) continue;
            fail(a[i].source(),
                 fmt::format("unknown capability \"{}\" in {}; known capabilities: {}", (*names)[i],
                             what, quoted_list(capability_names)));
            ok = false;
        }
        if (!ok) return std::nullopt;
        return names;
    }

    std::optional<std::vector<std::string>> read_capabilities(const scope& s,
                                                              std::string_view key) {
        const auto* n = s.table.get(key);
        return n ? capabilities_of(*n, label(s, key)) : std::nullopt;
    }

    /// A path: "~" expanded, relative ones resolved against the config file's folder.
    std::optional<fs::path> read_path(const scope& s, std::string_view key) {
        auto v = read_string(s, key, true);
        if (!v) return std::nullopt;
        fs::path p = expand_tilde(fs::path(*v));
        if (p.is_relative()) p = base_ / p;
        return p.lexically_normal();
    }

    std::optional<std::map<std::string, std::string>> read_env(const scope& s,
                                                               std::string_view key) {
        const auto* t = read_table(s, key);
        if (t == nullptr) return std::nullopt;
        std::map<std::string, std::string> out;
        bool ok = true;
        for (auto&& [k, v] : *t) {
            const std::string name(k.str());
            if (name.empty() || name.find('=') != std::string::npos ||
                name.find('\0') != std::string::npos) {
                fail(k.source(), fmt::format("environment variable name '{}' in {} is not valid",
                                             name, label(s, key)));
                ok = false;
                continue;
            }
            auto value = string_of(
                v, fmt::format("environment variable '{}' in {}", name, label(s, key)), false);
            if (value)
                out.emplace(name, std::move(*value));
            else
                ok = false;
        }
        if (!ok) return std::nullopt;
        return out;
    }

    std::optional<std::string> read_json_table(const scope& s, std::string_view key) {
        const auto* t = read_table(s, key);
        if (t == nullptr) return std::nullopt;
        return json_text(*t);
    }

  private:
    std::string display_;
    fs::path base_;
    std::optional<config_error> error_;
    std::pair<std::uint32_t, std::uint32_t> at_{};
};

/// Sets `field` when `v` holds a value (a key the reader found and accepted).
template <typename T>
void assign(T& field, std::optional<T> v) {
    if (v) field = std::move(*v);
}

/// A remote MCP source's keys — `url`, `headers`, `allow_private_network`, `ca_file`, `oauth`
/// — of the `[[sources]]` table `t` (config/remote_config.cpp, docs/protocol.md §18).
void parse_remote(checker& c, const scope& s, const toml::table& t, source_config& src);

/// `sandbox` and `sandbox_paths`, shared by sources and hooks (config/sandbox_config.cpp).
void parse_sandbox(checker& c, const scope& s, sandbox_mode& mode, sandbox_paths_config& paths);

/// A source's `profile`: one name or an array of names of config/profiles.hpp, each checked.
void parse_profile(checker& c, const scope& s, sandbox_paths_config& paths);

/// A source's `env` must not set TMPDIR while it is confined: its sandbox gives it its own.
void check_tmpdir(checker& c, const toml::table& t, const scope& s, const source_config& src);

/// `[clients.NAME]` tables (config/clients_config.cpp, docs/protocol.md §23).
void parse_clients(checker& c, const scope& root, std::vector<client_config>& out);

} // namespace meith::config::detail
