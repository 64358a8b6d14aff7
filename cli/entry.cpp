// entry: `meith`'s main, shared with meith-credentials (cli/entry.hpp).
#include "cli/entry.hpp"
#include "cli/commands.hpp"
#include "cli/errors.hpp"
#include "cli/help.hpp"
#include "cli/options.hpp"
#include "cli/session.hpp"

#include <cstddef>
#include <exception>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/core.h>

namespace {

using namespace meith::cli;

/// " or 'meith help call'" when the command line names a command, for usage errors.
std::string help_hint(int argc, char** argv) {
    for (int i = 1; i < argc; ++i) {
        const std::string_view word = argv[i];
        if (word.starts_with("-")) continue;
        for (const command& c : commands())
            if (c.name == word) return fmt::format(" or 'meith help {}'", word);
        break;
    }
    return "";
}

int run(const std::vector<std::string>& args) {
    const options opts = parse_options(args);
    if (opts.version && opts.words.empty()) {
        fmt::print("meith {}\n", MEITH_VERSION);
        return exit_ok;
    }
    if (opts.help && opts.words.empty()) {
        fmt::print("{}", usage());
        return exit_ok;
    }
    if (opts.words.empty()) throw usage_error("no command given");

    const command* cmd = find_command(opts.words);
    if (cmd == nullptr) {
        // "policy" alone, "policy nope": point at the subcommands that name exists with.
        std::string known;
        std::vector<std::string> names;
        for (const command& c : commands()) {
            names.emplace_back(c.name);
            if (c.name != opts.words[0]) continue;
            known += fmt::format("{}meith {}", known.empty() ? "" : "\n       ", head_of(c));
        }
        if (!known.empty()) {
            if (opts.help) {
                fmt::print("usage: {}\n", known);
                return exit_ok;
            }
            throw usage_error("usage: " + known);
        }
        throw usage_error(fmt::format("unknown command '{}'{}", opts.words[0],
                                      did_you_mean(closest_names(opts.words[0], names))));
    }
    if (opts.help) { // meith CMD --help
        fmt::print("{}", command_help(*cmd));
        return exit_ok;
    }
    const std::size_t n = opts.words.size() - (cmd->sub.empty() ? 1 : 2);
    if (n < cmd->min_args || n > cmd->max_args) {
        throw usage_error(fmt::format("usage: meith {}", head_of(*cmd)));
    }
    check_options(*cmd, opts);
    try {
        return cmd->run(opts);
    } catch (const meith::protocol::client_error& e) {
        throw to_cli_error(e, opts); // the one place transport errors become CLI errors
    }
}

} // namespace

namespace meith::cli {

int main_entry(int argc, char** argv) {
    try {
        return run(std::vector<std::string>(argv + 1, argv + argc));
    } catch (const usage_error& e) {
        fmt::print(stderr, "meith: {}\nTry 'meith help'{}.\n", e.what(), help_hint(argc, argv));
        return e.exit_code();
    } catch (const cli_error& e) {
        fmt::print(stderr, "meith: {}\n", e.what());
        return e.exit_code();
    } catch (const std::exception& e) {
        fmt::print(stderr, "meith: internal error: {}\n", e.what());
        return exit_error;
    }
}

} // namespace meith::cli
