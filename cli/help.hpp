// help: the table of `meith` commands — names, arguments, what each does, its own options —
// and the texts built from it: `meith --help`, `meith help CMD` / `meith CMD --help`, and
// "did you mean" suggestions for mistyped commands and tool names.
#pragma once

#include "protocol/suggest.hpp"

#include "cli/options.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace meith::cli {

/// The per-command options a command accepts (`command::accepts`); any other one given on its
/// command line is a usage error (check_options).
namespace opt {
enum : std::uint32_t {
    json = 1u << 0,          ///< --json
    timeout = 1u << 1,       ///< --timeout-ms
    tool = 1u << 2,          ///< --tool (audit filter; grant scope)
    audit = 1u << 3,         ///< --since, --denied, --event, --limit, --file, --follow
    all = 1u << 4,           ///< --all
    text = 1u << 5,          ///< --text
    raw = 1u << 6,           ///< --raw
    force = 1u << 7,         ///< --force
    model_display = 1u << 8, ///< --model, --display
    tag = 1u << 9,           ///< --tag
    format = 1u << 10,       ///< --format
    service = 1u << 11,      ///< --socket-activated, --manager
    grant = 1u << 12,        ///< --session, --uses, --expires
    search = 1u << 13,       ///< --search
    client = 1u << 14,       ///< --client (a client profile, docs/protocol.md §23)
    dry_run = 1u << 15,      ///< --dry-run
    yes = 1u << 16,          ///< --yes
    undo = 1u << 17,         ///< --undo
    learn = 1u << 18,        ///< --start, --stop, --write (sources learn)
};
} // namespace opt

struct command {
    std::string_view name;
    std::string_view sub;      ///< second word for a subcommand ("sources restart"), or empty
    std::string_view synopsis; ///< arguments after the name(s), for the usage text
    std::string_view summary;  ///< one line
    std::size_t min_args;      ///< positionals after the name(s)
    std::size_t max_args;
    std::uint32_t accepts;    ///< opt:: bits: the per-command options it takes
    bool connects;            ///< talks to meithd (so --socket, --no-autostart apply)
    std::string_view details; ///< `meith help CMD`: its options and examples, lines of text
    int (*run)(const options&);
};

/// Every command, in the order `meith --help` lists them.
std::span<const command> commands();

/// The command `words` names: one with a matching second word first, else the plain one;
/// nullptr when none.
const command* find_command(const std::vector<std::string>& words);

/// Throws usage_error ("'NAME' does not take --X") when `opts` holds a per-command option
/// that `c` does not accept (its `accepts` bits). Global options are always accepted.
void check_options(const command& c, const options& opts);

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
