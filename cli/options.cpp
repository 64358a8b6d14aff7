#include "cli/options.hpp"

#include "cli/errors.hpp"

#include <charconv>
#include <string_view>

#include <fmt/core.h>

namespace meith::cli {

namespace {

std::uint64_t parse_timeout(const std::string& text) {
    std::uint64_t v = 0;
    const char* end = text.data() + text.size();
    auto [ptr, ec] = std::from_chars(text.data(), end, v);
    if (ec != std::errc() || ptr != end || v == 0) {
        throw usage_error(fmt::format("--timeout-ms needs a positive integer, got '{}'", text));
    }
    return v;
}

} // namespace

options parse_options(const std::vector<std::string>& args) {
    options o;
    bool only_words = false;
    for (std::size_t i = 0; i < args.size(); ++i) {
        const std::string& arg = args[i];
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
            if (o.caller != "cli" && o.caller != "plugin") {
                throw usage_error(
                    fmt::format("--caller must be cli or plugin, got '{}'", o.caller));
            }
        } else if (name == "--timeout-ms") {
            o.timeout_ms = parse_timeout(value());
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
