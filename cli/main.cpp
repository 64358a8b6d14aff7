// meith: the command-line client of meithd. Parses the command line, picks the subcommand
// from the table below and turns cli_error into "meith: ..." plus an exit status.
#include "cli/commands.hpp"
#include "cli/errors.hpp"
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

struct command {
    std::string_view name;
    std::string_view sub;      ///< second word for a subcommand ("sources restart"), or empty
    std::string_view synopsis; ///< arguments after the name(s), for the usage text
    std::string_view summary;
    std::size_t min_args; ///< positionals after the name(s)
    std::size_t max_args;
    bool takes_json;
    bool takes_timeout;
    bool takes_audit_filters; ///< --since, --tool, --denied, --event, --limit, --file
    int (*run)(const options&);
};

constexpr command commands[] = {
    {"status", "", "", "show the daemon, session and tool counts", 0, 0, false, false, false,
     run_status},
    {"tools", "", "[--json] [--format F] [--tag T]...",
     "list tools with their permission for the caller; --format openai|openai.responses|"
     "anthropic|mcp prints them as that API takes them (only the allowed ones); --tag: only "
     "tools these tags enable",
     0, 0, true, false, false, run_tools},
    {"call", "", "TOOL [JSON | --text FILE|-] [--timeout-ms N] [--model] [--display] [--json]",
     "call TOOL with JSON arguments (default {})", 1, 2, true, true, false, run_call},
    {"preview", "", "TOOL [JSON | --text FILE|-] [--json]",
     "what a call would do, without running it (exit 1: it would be denied)", 1, 2, true, false,
     false, run_preview},
    {"sources", "", "[--json]", "list tool sources: state, pid, restarts, last error", 0, 0, true,
     false, false, run_sources},
    {"sources", "restart", "NAME [--timeout-ms N]",
     "restart the tool source NAME (waits up to 60 s)", 1, 1, false, true, false,
     run_source_restart},
    {"reload", "", "[--json]",
     "reload meithd's config file (as SIGHUP does); exit 1 if it was refused", 0, 0, true, false,
     false, run_reload},
    {"policy", "check", "TOOL [--caller cli|plugin] [--json]",
     "would a call to TOOL be allowed? (exit 0 allow, 1 deny or ask)", 1, 1, true, false, false,
     run_policy_check},
    {"approve", "", "",
     "answer held calls as they come (y once, s for the session, n deny); needs a terminal", 0, 0,
     false, false, false, run_approve},
    {"grant", "",
     "CAP[,CAP...] [--tool GLOB] [--caller C] [--session ID] [--uses N] "
     "[--expires DUR] [--json]",
     "let calls needing these capabilities through without asking", 1, 1, true, false, false,
     run_grant},
    {"grants", "", "[--json]", "list the grants in force", 0, 0, true, false, false, run_grants},
    {"revoke", "", "GRANT_ID", "revoke a grant", 1, 1, false, false, false, run_revoke},
    {"mcp", "", "[--caller cli|plugin] [--all]",
     "serve the tools to an MCP client on stdin/stdout (caller plugin unless --caller)", 0, 0,
     false, false, false, run_mcp},
    {"service", "install", "[--socket-activated] [--dry-run]",
     "run meithd as a user service (systemd user unit / launchd agent), now and at login", 0, 0,
     false, false, false, run_service_install},
    {"service", "uninstall", "[--dry-run]", "stop the user service and remove its files", 0, 0,
     false, false, false, run_service_uninstall},
    {"service", "status", "[--dry-run]", "show the user service's files and state", 0, 0, false,
     false, false, run_service_status},
    {"audit", "", "[FILTERS] [--limit N] [--json] [--file PATH]",
     "show the audit log (read directly; meithd need not run)", 0, 0, true, false, true, run_audit},
};

/// "sources restart NAME …": the words a command is invoked with, then its synopsis.
std::string head_of(const command& c) {
    std::string head(c.name);
    if (!c.sub.empty()) head += fmt::format(" {}", c.sub);
    if (!c.synopsis.empty()) head += fmt::format(" {}", c.synopsis);
    return head;
}

std::string usage() {
    std::string out = "usage: meith [OPTIONS] COMMAND [ARGS]\n\nCommands:\n";
    for (const command& c : commands) {
        const std::string head = head_of(c);
        if (head.size() <= 28) {
            out += fmt::format("  {:<30}{}\n", head, c.summary);
        } else {
            out += fmt::format("  {}\n  {:<30}{}\n", head, "", c.summary);
        }
    }
    out += "\nOptions (before or after COMMAND):\n"
           "  --socket PATH     daemon socket (default: socketPath in $MEITH_HOME/config.json)\n"
           "  --home DIR        meith home (default: $MEITH_HOME, else ~/.meith)\n"
           "  --caller NAME     cli or plugin (default: cli)\n"
           "  --no-autostart    fail when meithd is not running instead of starting it\n"
           "                    (also env MEITH_NO_AUTOSTART=1)\n"
           "  -h, --help        show this help\n"
           "  --version         show the version\n"
           "\nAudit (audit.jsonl and its rotated files audit.jsonl.N, oldest first):\n"
           "  --since DUR       only lines from the last DUR: 30s, 10m, 2h, 1d\n"
           "  --tool NAME       only lines for the tool NAME\n"
           "  --caller C        only lines whose caller is C (cli or plugin)\n"
           "  --denied          only calls the policy denied (decision \"deny\")\n"
           "  --event NAME      only events NAME (tool_call, list_tools, daemon_start, ...) or\n"
           "                    all; default: the table shows tool_call and tool_call_rejected,\n"
           "                    --json shows every event\n"
           "  --limit N         only the last N lines that match\n"
           "  --json            the matching lines as JSON Lines (one object per line, as logged)\n"
           "  --file PATH       the log to read (default: auditPath in $MEITH_HOME/config.json,\n"
           "                    else $MEITH_HOME/audit.jsonl)\n"
           "\nGrants (meith grant ...; the grant's scope, all optional):\n"
           "  --tool GLOB       only tools matching GLOB (*, ?, [...])\n"
           "  --caller C        only calls by caller C (cli or plugin)\n"
           "  --session ID      only calls of session ID (see meith approve, meith audit)\n"
           "  --uses N          good for N calls\n"
           "  --expires DUR     good for DUR: 30s, 10m, 2h, 1d\n"
           "\nService (meith service ...):\n"
           "  --socket-activated  install: systemd starts meithd on the first connection\n"
           "  --dry-run         print the files and commands, change nothing\n"
           "  --manager M       systemd or launchd (default: this system's)\n"
           "\nA command that finds no daemon answering starts one (meithd --detach, logging to\n"
           "$MEITH_HOME/meithd.log, or the user unit when installed) and waits until it is ready.\n"
           "\nDuring call, Ctrl-C cancels the call; a second Ctrl-C exits at once.\n"
           "Exit status: 0 ok, 1 the tool returned an error (or meithd refused a restart, or\n"
           "policy check said deny), 2 usage/connection/protocol error, 130 interrupted.\n";
    return out;
}

/// The command `words` names: one with a matching second word first, else the plain one.
const command* find_command(const std::vector<std::string>& words) {
    for (const command& c : commands) {
        if (c.name == words[0] && !c.sub.empty() && words.size() > 1 && c.sub == words[1]) {
            return &c;
        }
    }
    for (const command& c : commands) {
        if (c.name == words[0] && c.sub.empty()) return &c;
    }
    return nullptr;
}

int run(const std::vector<std::string>& args) {
    const options opts = parse_options(args);
    if (opts.help) {
        fmt::print("{}", usage());
        return exit_ok;
    }
    if (opts.version) {
        fmt::print("meith {}\n", MEITH_VERSION);
        return exit_ok;
    }
    if (opts.words.empty()) throw usage_error("no command given");

    const command* cmd = find_command(opts.words);
    if (cmd == nullptr) {
        // "policy" alone, "policy nope": point at the subcommands that name exists with.
        std::string known;
        for (const command& c : commands) {
            if (c.name != opts.words[0]) continue;
            known += fmt::format("{}meith {}", known.empty() ? "" : "\n       ", head_of(c));
        }
        if (!known.empty()) throw usage_error("usage: " + known);
        throw usage_error(fmt::format("unknown command '{}'", opts.words[0]));
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
                            !opts.event && !opts.limit && !opts.file;
    if (opts.has_audit_filters() && !cmd->takes_audit_filters && !grant_tool) {
        throw usage_error(fmt::format("'{}' does not take --since, --tool, --denied, --event, "
                                      "--limit or --file",
                                      full_name));
    }
    try {
        return cmd->run(opts);
    } catch (const meith::protocol::client_error& e) {
        throw to_cli_error(e); // the one place transport errors become CLI errors
    }
}

} // namespace

int main(int argc, char** argv) {
    try {
        return run(std::vector<std::string>(argv + 1, argv + argc));
    } catch (const usage_error& e) {
        fmt::print(stderr, "meith: {}\nTry 'meith --help'.\n", e.what());
        return e.exit_code();
    } catch (const cli_error& e) {
        fmt::print(stderr, "meith: {}\n", e.what());
        return e.exit_code();
    } catch (const std::exception& e) {
        fmt::print(stderr, "meith: internal error: {}\n", e.what());
        return exit_error;
    }
}
