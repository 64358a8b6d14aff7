// meith: the command-line client of meithd. Parses the command line, picks the subcommand
// from the table below and turns cli_error into "meith: ..." plus an exit status.
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
    const std::string full_name =
        cmd->sub.empty() ? std::string(cmd->name) : fmt::format("{} {}", cmd->name, cmd->sub);
    if (opts.json && !cmd->takes_json) {
        throw usage_error(fmt::format("'{}' does not take --json", full_name));
    }
    if (opts.all && cmd->name != "mcp") {
        throw usage_error(fmt::format("'{}' does not take --all", full_name));
    }
    if (opts.timeout_ms && !cmd->takes_timeout) {
        throw usage_error(fmt::format("'{}' does not take --timeout-ms", full_name));
    }
    if (opts.text && cmd->name != "call" && cmd->name != "preview") {
        throw usage_error(fmt::format("'{}' does not take --text", full_name));
    }
    if (opts.raw && cmd->name != "call") {
        throw usage_error(fmt::format("'{}' does not take --raw", full_name));
    }
    if (opts.force && cmd->name != "init") {
        throw usage_error(fmt::format("'{}' does not take --force", full_name));
    }
    if ((opts.model || opts.display) && cmd->name != "call") {
        throw usage_error(fmt::format("'{}' does not take --model or --display", full_name));
    }
    if (!opts.tags.empty() && cmd->name != "tools") {
        throw usage_error(fmt::format("'{}' does not take --tag", full_name));
    }
    if (opts.format && cmd->name != "tools") {
        throw usage_error(fmt::format("'{}' does not take --format", full_name));
    }
    if (opts.has_service_options() && cmd->name != "service") {
        throw usage_error(fmt::format("'{}' does not take --socket-activated, --dry-run or "
                                      "--manager",
                                      full_name));
    }
    if (opts.has_grant_options() && cmd->name != "grant") {
        throw usage_error(
            fmt::format("'{}' does not take --session, --uses or --expires", full_name));
    }
    const bool grant_tool = cmd->name == "grant" && opts.tool && !opts.since && !opts.denied &&
                            !opts.event && !opts.limit && !opts.file && !opts.follow;
    if (opts.has_audit_filters() && !cmd->takes_audit_filters && !grant_tool) {
        throw usage_error(fmt::format("'{}' does not take --since, --tool, --denied, --event, "
                                      "--limit, --file or --follow",
                                      full_name));
    }
    try {
        return cmd->run(opts);
    } catch (const meith::protocol::client_error& e) {
        throw to_cli_error(e, opts); // the one place transport errors become CLI errors
    }
}

} // namespace

int main(int argc, char** argv) {
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
