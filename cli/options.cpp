#include "cli/options.hpp"

#include "cli/errors.hpp"

#include <charconv>
#include <string_view>

#include <fmt/core.h>

namespace meith::cli {

namespace {

std::uint64_t parse_positive(const std::string& name, const std::string& text) {
    std::uint64_t v = 0;
    const char* end = text.data() + text.size();
    auto [ptr, ec] = std::from_chars(text.data(), end, v);
    if (ec != std::errc() || ptr != end || v == 0) {
        throw usage_error(fmt::format("{} needs a positive integer, got '{}'", name, text));
    }
    return v;
}

/// "30s", "10m", "2h", "1d": a positive count and one unit.
std::chrono::seconds parse_duration(const std::string& text, std::string_view option) {
    const auto bad = [&] {
        return usage_error(
            fmt::format("{} needs a duration like 30s, 10m, 2h or 1d, got '{}'", option, text));
    };
    if (text.size() < 2) throw bad();
    std::uint64_t n = 0;
    const char* end = text.data() + text.size() - 1;
    auto [ptr, ec] = std::from_chars(text.data(), end, n);
    if (ec != std::errc() || ptr != end || n == 0) throw bad();
    std::uint64_t unit = 0;
    switch (text.back()) {
    case 's':
        unit = 1;
        break;
    case 'm':
        unit = 60;
        break;
    case 'h':
        unit = 3600;
        break;
    case 'd':
        unit = 86400;
        break;
    default:
        throw bad();
    }
    constexpr std::uint64_t max_seconds = 100ULL * 366 * 86400; // a century is plenty
    if (n > max_seconds / unit) throw bad();
    return std::chrono::seconds(static_cast<std::chrono::seconds::rep>(n * unit));
}

/// `value` unless it is empty: then "NAME needs WHAT".
std::string nonempty(const std::string& name, std::string value, std::string_view what) {
    if (value.empty()) throw usage_error(fmt::format("{} needs {}", name, what));
    return value;
}

/// One option: a flag (`flag` set: takes no value) or one that takes a value (`set`).
struct option_row {
    std::string_view name;
    std::string_view alias; ///< a short form ("-f"), or empty
    bool options::*flag = nullptr;
    void (*set)(options&, const std::string& name, std::string value) = nullptr;
};

// Every option of every command; which command may take which is checked by the command
// table (cli/commands.cpp: check_options).
constexpr option_row option_table[] = {
    {"--socket", {}, nullptr, [](options& o, const std::string&, std::string v) { o.socket = v; }},
    {"--home", {}, nullptr, [](options& o, const std::string&, std::string v) { o.home = v; }},
    {"--caller",
     {},
     nullptr,
     [](options& o, const std::string&, std::string v) {
         if (v != "cli" && v != "plugin")
             throw usage_error(fmt::format("--caller must be cli or plugin, got '{}'", v));
         o.caller = std::move(v);
         o.caller_given = true;
     }},
    {"--timeout-ms",
     {},
     nullptr,
     [](options& o, const std::string& n, std::string v) { o.timeout_ms = parse_positive(n, v); }},
    {"--since",
     {},
     nullptr,
     [](options& o, const std::string& n, std::string v) { o.since = parse_duration(v, n); }},
    {"--expires",
     {},
     nullptr,
     [](options& o, const std::string& n, std::string v) { o.expires = parse_duration(v, n); }},
    {"--uses",
     {},
     nullptr,
     [](options& o, const std::string& n, std::string v) { o.uses = parse_positive(n, v); }},
    {"--session",
     {},
     nullptr,
     [](options& o, const std::string& n, std::string v) {
         o.grant_session = nonempty(n, std::move(v), "a session id");
     }},
    {"--tool", {}, nullptr, [](options& o, const std::string&, std::string v) { o.tool = v; }},
    {"--denied", {}, &options::denied, nullptr},
    {"--event",
     {},
     nullptr,
     [](options& o, const std::string& n, std::string v) {
         o.event = nonempty(n, std::move(v), "a name or 'all'");
     }},
    {"--limit",
     {},
     nullptr,
     [](options& o, const std::string& n, std::string v) {
         o.limit = static_cast<std::size_t>(parse_positive(n, v));
     }},
    {"--file",
     {},
     nullptr,
     [](options& o, const std::string& n, std::string v) {
         o.file = nonempty(n, std::move(v), "a path");
     }},
    {"--follow", "-f", &options::follow, nullptr},
    {"--format",
     {},
     nullptr,
     [](options& o, const std::string& n, std::string v) {
         o.format = nonempty(n, std::move(v), "a name");
     }},
    {"--text",
     {},
     nullptr,
     [](options& o, const std::string& n, std::string v) {
         o.text = nonempty(n, std::move(v), "a file, or - for standard input");
     }},
    {"--tag",
     {},
     nullptr,
     [](options& o, const std::string& n, std::string v) {
         o.tags.push_back(nonempty(n, std::move(v), "a name"));
     }},
    {"--client",
     {},
     nullptr,
     [](options& o, const std::string& n, std::string v) {
         o.client = nonempty(n, std::move(v), "a client profile's name ([clients.NAME])");
     }},
    {"--search",
     {},
     nullptr,
     [](options& o, const std::string& n, std::string v) {
         o.search = nonempty(n, std::move(v), "words to search for");
     }},
    {"--display", {}, &options::display, nullptr},
    {"--raw", {}, &options::raw, nullptr},
    {"--force", {}, &options::force, nullptr},
    {"--yes", "-y", &options::yes, nullptr},
    {"--undo", {}, &options::undo, nullptr},
    {"--start", {}, &options::learn_start, nullptr},
    {"--stop", {}, &options::learn_stop, nullptr},
    {"--write", {}, &options::write, nullptr},
    {"--model", {}, &options::model, nullptr},
    {"--no-autostart", {}, &options::no_autostart, nullptr},
    {"--socket-activated", {}, &options::socket_activated, nullptr},
    {"--dry-run", {}, &options::dry_run, nullptr},
    {"--manager",
     {},
     nullptr,
     [](options& o, const std::string&, std::string v) {
         if (v != "systemd" && v != "launchd")
             throw usage_error(fmt::format("--manager must be systemd or launchd, got '{}'", v));
         o.manager = std::move(v);
     }},
    {"--all", {}, &options::all, nullptr},
    {"--json", {}, &options::json, nullptr},
    {"--help", "-h", &options::help, nullptr},
    {"--version", {}, &options::version, nullptr},
};

const option_row* find_option(std::string_view name) {
    for (const auto& row : option_table)
        if (row.name == name || (!row.alias.empty() && row.alias == name)) return &row;
    return nullptr;
}

} // namespace

options parse_options(const std::vector<std::string>& args) {
    options o;
    o.args = args;
    bool only_words = false;
    for (std::size_t i = 0; i < args.size(); ++i) {
        const std::string& arg = args[i];
        // A lone "-" is a word (call TOOL -: arguments from standard input).
        if (only_words || arg.size() < 2 || arg[0] != '-') {
            o.words.push_back(arg);
            continue;
        }
        if (arg == "--") {
            only_words = true;
            continue;
        }
        std::string name = arg;
        std::optional<std::string> inline_value;
        if (auto eq = arg.find('='); arg.starts_with("--") && eq != std::string::npos) {
            name = arg.substr(0, eq);
            inline_value = arg.substr(eq + 1);
        }
        const option_row* row = find_option(name);
        if (!row) throw usage_error(fmt::format("unknown option '{}'", arg));
        if (row->flag) {
            if (inline_value) throw usage_error(name + " takes no value");
            o.*(row->flag) = true;
            continue;
        }
        // --search alone is `meith mcp`'s search mode; with words, `meith tools` searches.
        if (name == "--search" && !inline_value &&
            (i + 1 >= args.size() || (args[i + 1].size() > 1 && args[i + 1][0] == '-'))) {
            o.search = std::string();
            continue;
        }
        if (!inline_value && i + 1 >= args.size()) throw usage_error(name + " needs a value");
        row->set(o, name, inline_value ? *inline_value : args[++i]);
    }
    return o;
}

} // namespace meith::cli
