// definitions: see definitions.hpp.
#include "cli/commands/definitions.hpp"

#include "cli/table.hpp"

#include <algorithm>
#include <vector>

#include <fmt/core.h>

namespace meith::cli {

namespace {

/// `text` split into lines.
std::vector<std::string> text_lines(const std::string& text) {
    std::vector<std::string> out;
    std::size_t at = 0;
    while (at <= text.size()) {
        const auto nl = text.find('\n', at);
        out.push_back(text.substr(at, nl - at));
        if (nl == std::string::npos) break;
        at = nl + 1;
    }
    return out;
}

/// A line diff (longest common subsequence): "  " kept, "- " removed, "+ " added.
void print_diff(const std::string& label, const std::string& before, const std::string& after) {
    if (before == after) {
        fmt::print("  {} (unchanged)\n", label);
        return;
    }
    fmt::print("  {}:\n", label);
    const auto a = text_lines(before), b = text_lines(after);
    std::vector<std::vector<std::size_t>> lcs(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
    for (std::size_t i = a.size(); i-- > 0;)
        for (std::size_t j = b.size(); j-- > 0;)
            lcs[i][j] =
                a[i] == b[j] ? lcs[i + 1][j + 1] + 1 : std::max(lcs[i + 1][j], lcs[i][j + 1]);
    std::size_t i = 0, j = 0;
    while (i < a.size() || j < b.size()) {
        if (i < a.size() && j < b.size() && a[i] == b[j]) {
            fmt::print("      {}\n", sanitize(a[i++], false)), ++j;
        } else if (i < a.size() && (j == b.size() || lcs[i + 1][j] >= lcs[i][j + 1])) {
            fmt::print("    - {}\n", sanitize(a[i++], false));
        } else {
            fmt::print("    + {}\n", sanitize(b[j++], false));
        }
    }
}

/// A definition member as text for the diff: JSON pretty-printed, words wrapped at sentences.
std::string member_text(const json* def, std::string_view key) {
    if (def == nullptr || !def->is_object()) return {};
    const json* v = get_field(*def, key);
    if (v == nullptr || v->is_null()) return {};
    if (v->is_string()) {
        const std::string s = v->get<std::string>();
        if (key == "description") return s;
        const json parsed = json::parse(s, nullptr, false);
        if (!parsed.is_discarded() && !s.empty()) {
            // The rest of the descriptor is members without braces: parse it as an object.
            return pretty(parsed);
        }
        const json members = json::parse("{" + s + "}", nullptr, false);
        return members.is_discarded() ? s : pretty(members);
    }
    return pretty(*v);
}

} // namespace

void print_definition_diff(const std::string& name, const json& diff) {
    const json* pinned = get_field(diff, "pinned");
    const json* held = get_field(diff, "held");
    const bool is_new = pinned == nullptr || pinned->is_null();
    const auto source = get_string(diff, "source").value_or("-");
    fmt::print("Tool {} of source '{}' is quarantined: {}\n", sanitize(name, false),
               sanitize(source, false),
               is_new ? std::string("it is new ([tools] quarantine_new), never accepted")
                      : "its definition changed since it was accepted on " +
                            get_string(*pinned, "acceptedAt").value_or("-"));
    print_diff("description", member_text(pinned, "description"), member_text(held, "description"));
    print_diff("input schema", member_text(pinned, "inputSchema"),
               member_text(held, "inputSchema"));
    print_diff("title, annotations, output schema", member_text(pinned, "extra"),
               member_text(held, "extra"));
    print_diff("capabilities", member_text(pinned, "capabilities"),
               member_text(held, "capabilities"));
}

} // namespace meith::cli
