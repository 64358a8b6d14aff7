#include "permissions/policy.hpp"

#include "protocol/json_writer.hpp"

#include <array>
#include <cctype>

#include <fmt/format.h>

namespace meith::permissions {

namespace {

constexpr std::array<std::string_view, capability_count> capability_wire_names{
    "read-only",        "writes-files", "controls-browser", "starts-process",
    "accesses-network", "destructive",  "unknown",
};

constexpr capability_set default_allow =
    bit(capability::read_only) | bit(capability::accesses_network);

/// Names in a validated config list; names the config check let through but we do not know
/// (none today) are skipped rather than guessed at.
capability_set set_of(const std::vector<std::string>& names) {
    capability_set set = 0;
    for (const auto& n : names)
        if (auto c = capability_from_string(n)) set |= bit(*c);
    return set;
}

/// POSIX character classes of fnmatch(3), in the C locale.
std::optional<bool> in_class(std::string_view name, unsigned char ch) {
    const int c = ch;
    if (name == "alnum") return std::isalnum(c) != 0;
    if (name == "alpha") return std::isalpha(c) != 0;
    if (name == "blank") return std::isblank(c) != 0;
    if (name == "cntrl") return std::iscntrl(c) != 0;
    if (name == "digit") return std::isdigit(c) != 0;
    if (name == "graph") return std::isgraph(c) != 0;
    if (name == "lower") return std::islower(c) != 0;
    if (name == "print") return std::isprint(c) != 0;
    if (name == "punct") return std::ispunct(c) != 0;
    if (name == "space") return std::isspace(c) != 0;
    if (name == "upper") return std::isupper(c) != 0;
    if (name == "xdigit") return std::isxdigit(c) != 0;
    return std::nullopt;
}

enum class step { match, no_match, invalid };

/// Matches the bracket expression starting at pattern[p] == '[' against `ch`. On return `next`
/// is the index after the closing ']'. An unterminated '[' is an ordinary character, as in
/// glibc; `invalid` (unknown class, dangling '\') means the whole pattern matches nothing.
step match_bracket(std::string_view pat, std::size_t p, unsigned char ch, std::size_t& next) {
    std::size_t i = p + 1;
    bool negate = false;
    if (i < pat.size() && (pat[i] == '!' || pat[i] == '^')) {
        negate = true;
        ++i;
    }
    bool matched = false;
    bool first = true;
    for (;;) {
        if (i >= pat.size()) { // unterminated: a literal '['
            next = p + 1;
            return ch == '[' ? step::match : step::no_match;
        }
        auto lo = static_cast<unsigned char>(pat[i]);
        if (lo == ']' && !first) {
            next = i + 1;
            return matched != negate ? step::match : step::no_match;
        }
        first = false;
        if (lo == '[' && i + 1 < pat.size() && pat[i + 1] == ':') {
            const std::size_t end = pat.find(":]", i + 2);
            const std::string_view name =
                end == std::string_view::npos ? std::string_view{} : pat.substr(i + 2, end - i - 2);
            const bool lowercase_name =
                !name.empty() &&
                name.find_first_not_of("abcdefghijklmnopqrstuvwxyz") == std::string_view::npos;
            if (lowercase_name) {
                const auto in = in_class(name, ch);
                if (!in) return step::invalid;
                matched = matched || *in;
                i = end + 2;
                continue;
            }
            // Not a class after all: '[' is an ordinary member.
        }
        if (lo == '\\') {
            if (i + 1 >= pat.size()) return step::invalid;
            lo = static_cast<unsigned char>(pat[i + 1]);
            i += 2;
        } else {
            ++i;
        }
        if (i + 1 < pat.size() && pat[i] == '-' && pat[i + 1] != ']') {
            auto hi = static_cast<unsigned char>(pat[i + 1]);
            i += 2;
            if (hi == '\\') {
                if (i >= pat.size()) return step::invalid;
                hi = static_cast<unsigned char>(pat[i]);
                ++i;
            }
            if (lo <= ch && ch <= hi) matched = true;
        } else if (lo == ch) {
            matched = true;
        }
    }
}

/// One pattern element that is not '*' against one character.
step match_one(std::string_view pat, std::size_t p, unsigned char ch, std::size_t& next) {
    switch (pat[p]) {
    case '?':
        next = p + 1;
        return step::match;
    case '[':
        return match_bracket(pat, p, ch, next);
    case '\\':
        if (p + 1 >= pat.size()) return step::invalid;
        next = p + 2;
        return static_cast<unsigned char>(pat[p + 1]) == ch ? step::match : step::no_match;
    default:
        next = p + 1;
        return static_cast<unsigned char>(pat[p]) == ch ? step::match : step::no_match;
    }
}

} // namespace

std::string_view to_string(verdict v) {
    return v == verdict::allow ? "allow" : v == verdict::ask ? "ask" : "deny";
}

std::string_view to_string(caller c) {
    return c == caller::cli ? "cli" : "plugin";
}

caller caller_from_claim(std::string_view claim) {
    return claim == "cli" ? caller::cli : caller::plugin;
}

std::string_view to_string(capability c) {
    return capability_wire_names[static_cast<std::size_t>(c)];
}

std::optional<capability> capability_from_string(std::string_view name) {
    for (std::size_t i = 0; i < capability_count; ++i)
        if (capability_wire_names[i] == name) return static_cast<capability>(i);
    return std::nullopt;
}

capability_set capability_set_from(std::span<const std::string> names) {
    if (names.empty()) return bit(capability::unknown);
    capability_set set = 0;
    for (const auto& n : names)
        set |= bit(capability_from_string(n).value_or(capability::unknown));
    return set;
}

std::vector<std::string_view> capability_names(capability_set set) {
    std::vector<std::string_view> out;
    for (std::size_t i = 0; i < capability_count; ++i)
        if ((set & (1u << i)) != 0) out.push_back(capability_wire_names[i]);
    return out;
}

bool glob_match(std::string_view pattern, std::string_view name) {
    // Iterative wildcard matching: on a mismatch, go back to the last '*' and let it swallow
    // one more character. Every other element matches exactly one character, so remembering
    // only the last star is enough, and the cost is O(pattern * name) at worst.
    constexpr auto none = std::string_view::npos;
    std::size_t p = 0;
    std::size_t n = 0;
    std::size_t star_p = none;
    std::size_t star_n = 0;
    while (n < name.size()) {
        if (p < pattern.size()) {
            if (pattern[p] == '*') {
                star_p = ++p;
                star_n = n;
                continue;
            }
            std::size_t next = p;
            const step s = match_one(pattern, p, static_cast<unsigned char>(name[n]), next);
            if (s == step::invalid) return false;
            if (s == step::match) {
                p = next;
                ++n;
                continue;
            }
        }
        if (star_p == none) return false;
        p = star_p;
        n = ++star_n;
    }
    while (p < pattern.size() && pattern[p] == '*')
        ++p;
    return p == pattern.size();
}

policy::policy(const config::permissions_config& cfg) : rules_(cfg.rules) {
    const std::array<const std::optional<config::caller_policy_config>*, 2> tables{&cfg.cli,
                                                                                   &cfg.plugin};
    for (std::size_t i = 0; i < tables.size(); ++i) {
        if (*tables[i])
            callers_[i] = {set_of((*tables[i])->allow), set_of((*tables[i])->deny),
                           set_of((*tables[i])->ask)};
        else
            callers_[i] = {default_allow, 0, 0};
    }
    for (std::size_t i = 0; i < rules_.size(); ++i) {
        const auto& rule = rules_[i];
        const std::string scope =
            rule.caller ? fmt::format(", caller '{}'", *rule.caller) : std::string();
        rule_reasons_.push_back(fmt::format("rule {} (tool '{}'{}) {}", i + 1, rule.tool, scope,
                                            rule.ask     ? "asks for approval"
                                            : rule.allow ? "allows"
                                                         : "denies"));
    }
    for (std::size_t w = 0; w < callers_.size(); ++w) {
        const std::string_view who_name = to_string(static_cast<caller>(w));
        for (std::size_t i = 0; i < capability_count; ++i) {
            denied_reasons_[w][i] = fmt::format("capability '{}' is denied for caller '{}'",
                                                capability_wire_names[i], who_name);
            not_allowed_reasons_[w][i] =
                fmt::format("capability '{}' is not allowed for caller '{}'",
                            capability_wire_names[i], who_name);
            ask_reasons_[w][i] = fmt::format("capability '{}' needs approval for caller '{}'",
                                             capability_wire_names[i], who_name);
        }
        for (std::size_t set = 0; set < allowed_reasons_[w].size(); ++set)
            allowed_reasons_[w][set] = fmt::format(
                "capabilities [{}] allowed for caller '{}'",
                fmt::join(capability_names(static_cast<capability_set>(set)), ", "), who_name);
    }
}

decision policy::decide(std::string_view tool_name, capability_set caps, caller who) const {
    // Bits past the known capabilities cannot be vouched for: count them as unknown.
    constexpr auto known = static_cast<capability_set>((1u << capability_count) - 1);
    if (caps == 0 || (caps & ~known) != 0)
        caps = static_cast<capability_set>((caps & known) | bit(capability::unknown));
    const auto w = static_cast<std::size_t>(who);
    const caller_lists& lists = callers_[w];
    // Allowed outright: on the allow list and not on the ask list.
    const auto plain = static_cast<capability_set>(lists.allow & ~lists.ask);
    const auto needed = static_cast<capability_set>(caps & ~plain);

    // An explicit deny of the caller's list: final, and checked before a rule that asks.
    const auto denied = [&]() -> std::optional<decision> {
        for (std::size_t i = 0; i < capability_count; ++i)
            if ((caps & (1u << i)) != 0 && (lists.deny & (1u << i)) != 0)
                return decision{false, denied_reasons_[w][i]};
        return std::nullopt;
    };

    const std::string_view who_name = to_string(who);
    for (std::size_t i = 0; i < rules_.size(); ++i) {
        const auto& rule = rules_[i];
        if (rule.caller && *rule.caller != who_name) continue;
        if (!glob_match(rule.tool, tool_name)) continue;
        if (!rule.ask) return {rule.allow, rule_reasons_[i]};
        // PROTOCOL.md §12: deny (rules, then caller lists) -> grant -> ask. A rule asks about
        // the tool itself, so a grant must cover every one of its capabilities.
        if (auto d = denied()) return *d;
        return {false, rule_reasons_[i], true, caps, true};
    }

    if (auto d = denied()) return *d;
    if (needed == 0) return {true, allowed_reasons_[w][caps]};
    // Not allowed outright: not allowed at all wins over ask, as a stronger "no"; a grant
    // may still cover either.
    for (std::size_t i = 0; i < capability_count; ++i) {
        const auto b = static_cast<capability_set>(1u << i);
        if ((needed & b) != 0 && (lists.allow & b) == 0 && (lists.ask & b) == 0)
            return {false, not_allowed_reasons_[w][i], false, needed, true};
    }
    for (std::size_t i = 0; i < capability_count; ++i)
        if ((needed & (1u << i)) != 0) return {false, ask_reasons_[w][i], true, needed, true};
    return {true, allowed_reasons_[w][caps]}; // unreachable: needed != 0 has a first bit
}

void append_capabilities(std::string& out, capability_set caps) {
    // Every audit line and descriptor carries its tool's capabilities: each set's JSON is
    // built once.
    static const auto rendered = [] {
        std::array<std::string, 256> all;
        for (std::size_t set = 0; set < all.size(); ++set) {
            std::string& json = all[set];
            json.push_back('[');
            bool first = true;
            for (auto name : capability_names(static_cast<capability_set>(set))) {
                if (!first) json.push_back(',');
                first = false;
                protocol::append_json_string(json, name);
            }
            json.push_back(']');
        }
        return all;
    }();
    out.append(rendered[caps]);
}

} // namespace meith::permissions
