// help: the table of `meith` commands — names, arguments, what each does, its own options —
// and the texts built from it: `meith --help`, `meith help CMD` / `meith CMD --help`, and
// "did you mean" suggestions for mistyped commands and tool names.
#pragma once

#include "protocol/suggest.hpp"

#include "cli/options.hpp"

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace meith::cli {

struct command {
    std::string_view name;
    std::string_view sub;      ///< second word for a subcommand ("sources restart"), or empty
    std::string_view synopsis; ///< arguments after the name(s), for the usage text
    std::string_view summary;  ///< one line
    std::size_t min_args;      ///< positionals after the name(s)
    std::size_t max_args;
    bool takes_json;
    bool takes_timeout;
    bool takes_audit_filters; ///< --since, --tool, --denied, --event, --limit, --file
    bool connects;            ///< talks to meithd (so --socket, --no-autostart apply)
    std::string_view details; ///< `meith help CMD`: its options and examples, lines of text
    int (*run)(const options&);
};

/// Every command, in the order `meith --help` lists them.
std::span<const command> commands();

/// The command `words` names: one with a matching second word first, else the plain one;
/// nullptr when none.
const command* find_command(const std::vector<std::string>& words);

/// "sources restart NAME [--timeout-ms N]": the words a command is invoked with, then its
/// synopsis.
std::string head_of(const command& c);

/// `meith --help`: every command and the global options.
std::string usage();

/// `meith help CMD` and `meith CMD --help`: usage, summary and the command's own options.
std::string command_help(const command& c);

using protocol::closest_names; // protocol/suggest.hpp

/// "; did you mean 'a' or 'b'?" for `suggestions`, or "" when there are none.
std::string did_you_mean(const std::vector<std::string>& suggestions);

} // namespace meith::cli
