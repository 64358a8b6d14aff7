// options: the command line of `meith`. Global and per-command options may come before or
// after the subcommand; main checks the per-command ones against its command table.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace meith::cli {

struct options {
    std::optional<std::filesystem::path> socket; ///< --socket PATH
    std::optional<std::filesystem::path> home;   ///< --home DIR
    std::string caller = "cli";                  ///< --caller cli|plugin
    bool caller_given = false;                   ///< --caller was on the command line
    bool help = false;                           ///< -h, --help
    bool version = false;                        ///< --version
    bool json = false;                           ///< --json (tools, call, sources)
    bool all = false;                            ///< --all (mcp: list every tool)
    std::optional<std::uint64_t> timeout_ms;     ///< --timeout-ms N (call, sources restart)
    std::vector<std::string> words;              ///< positionals; words[0] is the subcommand
    std::vector<std::string> args;               ///< the whole command line after argv[0], as given
    bool no_autostart = false;                   ///< --no-autostart (else env MEITH_NO_AUTOSTART)
    std::optional<std::string> format;           ///< --format F (tools: a provider's format)
    bool model = false;                          ///< --model (call: print modelContent)
    std::optional<std::string> text;             ///< --text FILE|- (call, preview: a text payload)
    std::vector<std::string> tags;               ///< --tag T, repeatable (tools)
    std::optional<std::string> search;           ///< --search WORDS (tools)
    std::optional<std::string> client;           ///< --client NAME: a client profile
    bool display = false;                        ///< --display (call: print meta.display)
    bool raw = false;                            ///< --raw (call: the result's text as is)
    bool force = false;                          ///< --force (init: replace an existing config)
    bool yes = false;         ///< --yes, -y (import, connect: apply without asking)
    bool undo = false;        ///< --undo (connect: put the old config back)
    bool learn_start = false; ///< --start (sources learn: start and return)
    bool learn_stop = false;  ///< --stop (sources learn: stop and propose)
    bool write = false;       ///< --write (sources learn: write the learned keys)

    // service only:
    bool socket_activated = false;      ///< --socket-activated (install)
    bool dry_run = false;               ///< --dry-run: print, change nothing (service, import)
    std::optional<std::string> manager; ///< --manager systemd|launchd (default: this OS's)

    // grant only (main refuses them elsewhere); --tool and --caller scope the grant too:
    std::optional<std::string> grant_session;    ///< --session ID
    std::optional<std::uint64_t> uses;           ///< --uses N
    std::optional<std::chrono::seconds> expires; ///< --expires DUR

    // audit only (main refuses them elsewhere):
    std::optional<std::chrono::seconds> since; ///< --since DUR (30s, 10m, 2h, 1d)
    std::optional<std::string> tool;           ///< --tool NAME
    bool denied = false;                       ///< --denied
    std::optional<std::string> event;          ///< --event NAME|all
    std::optional<std::size_t> limit;          ///< --limit N
    std::optional<std::filesystem::path> file; ///< --file PATH
    bool follow = false;                       ///< -f, --follow: then print lines as appended

    /// True when any of the audit-only options above was given.
    bool has_audit_filters() const {
        return since || tool || denied || event || limit || file || follow;
    }
    /// True when any of the grant-only options above was given.
    bool has_grant_options() const { return grant_session || uses || expires; }
    /// True when any of the service-only options above was given.
    bool has_service_options() const { return socket_activated || manager; }
};

/// Parses the arguments after argv[0]. Accepts `--opt VALUE` and `--opt=VALUE`; everything
/// after `--` is positional. Throws usage_error on unknown options or bad values.
options parse_options(const std::vector<std::string>& args);

} // namespace meith::cli
