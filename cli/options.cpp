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

} // namespace

options parse_options(const std::vector<std::string>& args) {
    options o;
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
        auto value = [&]() -> std::string {
            if (inline_value) return *inline_value;
            if (i + 1 >= args.size()) throw usage_error(name + " needs a value");
            return args[++i];
        };
        auto no_value = [&] {
            if (inline_value) throw usage_error(name + " takes no value");
        };

        if (name == "--socket") {
            o.socket = value();
        } else if (name == "--home") {
            o.home = value();
        } else if (name == "--caller") {
            o.caller = value();
            o.caller_given = true;
            if (o.caller != "cli" && o.caller != "plugin") {
                throw usage_error(
                    fmt::format("--caller must be cli or plugin, got '{}'", o.caller));
            }
        } else if (name == "--timeout-ms") {
            o.timeout_ms = parse_positive(name, value());
        } else if (name == "--since") {
            o.since = parse_duration(value(), "--since");
        } else if (name == "--expires") {
            o.expires = parse_duration(value(), "--expires");
        } else if (name == "--uses") {
            o.uses = parse_positive(name, value());
        } else if (name == "--session") {
            o.grant_session = value();
            if (o.grant_session->empty()) throw usage_error("--session needs a session id");
        } else if (name == "--tool") {
            o.tool = value();
        } else if (name == "--denied") {
            no_value();
            o.denied = true;
        } else if (name == "--event") {
            o.event = value();
            if (o.event->empty()) throw usage_error("--event needs a name or 'all'");
        } else if (name == "--limit") {
            o.limit = static_cast<std::size_t>(parse_positive(name, value()));
        } else if (name == "--file") {
            o.file = value();
            if (o.file->empty()) throw usage_error("--file needs a path");
        } else if (name == "-f" || name == "--follow") {
            no_value();
            o.follow = true;
        } else if (name == "--format") {
            o.format = value();
            if (o.format->empty()) throw usage_error("--format needs a name");
        } else if (name == "--text") {
            o.text = value();
            if (o.text->empty()) throw usage_error("--text needs a file, or - for standard input");
        } else if (name == "--tag") {
            o.tags.push_back(value());
            if (o.tags.back().empty()) throw usage_error("--tag needs a name");
        } else if (name == "--display") {
            no_value();
            o.display = true;
        } else if (name == "--raw") {
            no_value();
            o.raw = true;
        } else if (name == "--force") {
            no_value();
            o.force = true;
        } else if (name == "--model") {
            no_value();
            o.model = true;
        } else if (name == "--no-autostart") {
            no_value();
            o.no_autostart = true;
        } else if (name == "--socket-activated") {
            no_value();
            o.socket_activated = true;
        } else if (name == "--dry-run") {
            no_value();
            o.dry_run = true;
        } else if (name == "--manager") {
            o.manager = value();
            if (*o.manager != "systemd" && *o.manager != "launchd")
                throw usage_error(
                    fmt::format("--manager must be systemd or launchd, got '{}'", *o.manager));
        } else if (name == "--all") {
            no_value();
            o.all = true;
        } else if (name == "--json") {
            no_value();
            o.json = true;
        } else if (name == "-h" || name == "--help") {
            no_value();
            o.help = true;
        } else if (name == "--version") {
            no_value();
            o.version = true;
        } else {
            throw usage_error(fmt::format("unknown option '{}'", arg));
        }
    }
    return o;
}

} // namespace meith::cli
