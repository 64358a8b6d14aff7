#include "cli/help.hpp"

#include "cli/commands.hpp"
#include "cli/errors.hpp"

#include <algorithm>
#include <array>
#include <tuple>

#include <fmt/core.h>

namespace meith::cli {

namespace {

int run_help(const options& opts);
int run_version(const options& opts);

constexpr std::string_view call_input =
    "Arguments (a JSON object; default {}):\n"
    "  JSON              on the command line: '{\"path\":\"README.md\"}'\n"
    "  -                 read the JSON from standard input (no argv size limit)\n"
    "  @FILE             read the JSON from FILE\n"
    "  --text FILE|-     a text-payload tool's text, from FILE or standard input\n";

constexpr command table[] = {
    {"status", "", "[--json]", "show the daemon, session and tool counts", 0, 0, opt::json, true,
     "  --json            the daemon, session and counts as one JSON object\n", run_status},
    {"tools", "", "[NAME] [--json] [--format F] [--tag T]... [--search WORDS] [--client NAME]",
     "list tools with their permission for you; NAME: describe one tool", 0, 1,
     opt::json | opt::tag | opt::format | opt::search | opt::client, true,
     "  NAME              describe one tool: description, permission and why, capabilities,\n"
     "                    source, timeout, tags and its input schema\n"
     "  --json            the tools (or the one tool) as meithd lists them\n"
     "  --format F        openai, openai.responses, anthropic or mcp: the tools you may call,\n"
     "                    as that API takes them (JSON)\n"
     "  --tag T           only tools these tags enable (repeatable)\n"
     "  --search WORDS    the 10 tools you may use that best match WORDS (their names,\n"
     "                    titles, descriptions and parameter names), best first\n"
     "  --client NAME     as client profile NAME ([clients.NAME]) sees them\n"
     "\nExamples:\n"
     "  meith tools\n"
     "  meith tools --search 'read a file'\n"
     "  meith tools read_file\n"
     "  meith tools --format anthropic > tools.json\n",
     run_tools},
    {"call", "",
     "TOOL [JSON | - | @FILE | --text FILE|-] [--timeout-ms N] [--raw] [--model] [--display] "
     "[--json] [--client NAME]",
     "call TOOL and print its result (events on stderr as they come)", 1, 2,
     opt::json | opt::timeout | opt::text | opt::raw | opt::model_display | opt::client, true,
     "Output:\n"
     "  (default)         a string result as text, any other result as JSON (indented on a\n"
     "                    terminal, one line otherwise); events and errors on stderr\n"
     "  --raw             the result's text exactly as is, no newline added: a string result,\n"
     "                    an object's \"content\" or \"text\" string, MCP text blocks joined;\n"
     "                    else JSON on one line\n"
     "  --model           what a model would be given (modelContent)\n"
     "  --display         what a UI would render (meta.display)\n"
     "  --json            the whole result object\n"
     "  --timeout-ms N    give up after N ms (TIMEOUT)\n"
     "  --client NAME     call through client profile NAME ([clients.NAME])\n"
     "\nCtrl-C cancels the call (the tool is told to stop) and waits for CANCELLED; a second\n"
     "Ctrl-C exits at once. Exit status: 0 ok, 1 the tool failed or was refused, 2 usage or\n"
     "connection error, 130 interrupted.\n"
     "\nExamples:\n"
     "  meith call read_file '{\"path\":\"README.md\"}' --raw\n"
     "  jq -n '{text: \"one two\"}' | meith call word_count -\n"
     "  meith call write_file @args.json\n"
     "  meith call apply_patch --text fix.diff\n",
     run_call},
    {"preview", "", "TOOL [JSON | - | @FILE | --text FILE|-] [--json] [--client NAME]",
     "what a call would do, without running it (exit 1: it would be denied)", 1, 2,
     opt::json | opt::text | opt::client, true,
     "  --json            the preview as meithd sends it\n"
     "  --client NAME     as client profile NAME ([clients.NAME]) would\n",
     run_preview},
    {"sources", "", "[NAME] [--json]",
     "list tool sources: state, pid, restarts, sandbox, last error; NAME: one in full", 0, 1,
     opt::json, true,
     "  NAME              one source in full: its whole last error and its program's last\n"
     "                    stderr lines (redacted)\n"
     "  --json            every field meithd reports per source (e.g. \"cancel\": whether a\n"
     "                    tool host stops a cancelled call; \"stderr\": its last lines)\n",
     run_sources},
    {"tools", "accept", "NAME",
     "show a quarantined tool's changed definition and accept it (from a terminal)", 1, 1, 0, true,
     "  NAME              a tool `meith tools` marks quarantined: its definition changed since\n"
     "                    it was accepted (or it is new, with [tools] quarantine_new). Shows the\n"
     "                    change, asks, and makes the new definition the accepted one.\n",
     run_tools_accept},
    {"sources", "restart", "NAME [--timeout-ms N]",
     "restart the tool source NAME and wait for it (exit 1 if it fails again)", 1, 1, opt::timeout,
     true,
     "  --timeout-ms N    wait at most N ms for the source to be ready or fail (default 60 s)\n",
     run_source_restart},
    {"sources", "update", "NAME [--dry-run] [--yes]",
     "move a source `meith import` pinned to its package's newest version (shows the change first)",
     1, 1, opt::dry_run | opt::yes, false,
     "  NAME              a source whose entry says \"# Pinned: PACKAGE@VERSION from npm\"\n"
     "  --dry-run         print the version change and the diff of meithd.toml; change nothing\n"
     "  --yes, -y         apply without asking (else asked at the terminal)\n"
     "Installs the new version into the source's folder of the server store (npm, a lock file,\n"
     "no install scripts). After `meith reload`, a tool whose definition changed is held until\n"
     "you accept it: `meith tools accept TOOL` shows the change.\n",
     run_source_update},
    {"sources", "learn", "NAME [--start | --stop] [--write]",
     "learn the smallest sandbox profile a source needs while you use it, then show it as a diff",
     1, 1, opt::learn | opt::json, true,
     "  NAME              a source meithd runs as a process (not a remote server)\n"
     "  --start           start learning and return; `--stop` ends it later (for scripts)\n"
     "  --stop            stop learning and show the profile that covers what it did\n"
     "  --write           write the learned keys into meithd.toml without asking, and reload\n"
     "Without --start or --stop: starts, waits for Enter, then stops. While it learns, the\n"
     "source runs with writes under your home, programs and the network allowed, and every\n"
     "path written, program run, socket connected and name looked up recorded (never\n"
     "contents); meithd's home, the credential stores and other services' sockets stay out of\n"
     "reach. The result is its `profile`, `sandbox_paths` and `network` keys, shown as a diff of\n"
     "meithd.toml (docs/protocol.md §15 \"Learned profiles\").\n",
     run_source_learn},
    {"login", "", "SOURCE [--timeout-ms N]",
     "log in to a remote MCP server (OAuth): prints the URL to authorize, stores the grant", 1, 1,
     opt::timeout, true,
     "  SOURCE            a source with a `url` (docs/configuration.md, remote MCP servers)\n"
     "  --timeout-ms N    wait at most N ms for the browser's answer (default 5 min)\n"
     "Opens $BROWSER, or xdg-open on a desktop; on a headless machine open the printed URL\n"
     "anywhere that can reach this machine's 127.0.0.1 (e.g. through `ssh -L`). A source\n"
     "whose `oauth` has a client secret or key and grant = \"client_credentials\" (or an ID\n"
     "token for cross-app access) needs no browser. After a call refused for want of a scope\n"
     "(`meith sources SOURCE` shows it), a login asks for that scope too.\n",
     run_login},
    {"secret", "set", "NAME",
     "keep a secret for sources (typed at the terminal, or piped in; never on the command line)", 1,
     1, 0, false,
     "  NAME              1-64 letters, digits, '_', '-' or '.'. A source's env value or a\n"
     "                    remote source's header names it as \"${secret:NAME}\"; meithd fills\n"
     "                    it in at the source's next start and redacts it from logs, audit\n"
     "                    lines and results. Kept in the desktop's Secret Service when one\n"
     "                    runs (MEITH_SECRET_SERVICE=off: never), else encrypted in\n"
     "                    $MEITH_HOME/secrets.enc under a key in ~/.config/meith-keys/\n"
     "                    (MEITH_SECRETS_KEY overrides).\n"
     "\nExamples:\n"
     "  meith secret set GITHUB_TOKEN\n"
     "  printf %s \"$TOKEN\" | meith secret set GITHUB_TOKEN\n",
     run_secret_set},
    {"import", "", "[PATH] [--client NAME] [--dry-run] [--yes]",
     "bring the MCP servers of another client's config under meith (shows the change first)", 0, 1,
     opt::client | opt::dry_run | opt::yes, false,
     "  PATH              a config with \"mcpServers\" (Claude Desktop, Claude Code's .mcp.json,\n"
     "                    Cursor, Gemini CLI, Windsurf), VS Code's mcp.json (\"servers\") or\n"
     "                    Codex's config.toml ([mcp_servers])\n"
     "  --client NAME     read that client's own files instead: claude-code, claude-desktop,\n"
     "                    cursor, vscode, codex, gemini, windsurf (user and project scope)\n"
     "  --dry-run         print the change to meithd.toml; change nothing\n"
     "  --yes, -y         apply without asking (else asked at the terminal)\n"
     "Each server becomes a source named after it, its tools prefixed NAME_; values that look\n"
     "like credentials go to the secret store as ${secret:NAME.KEY}; `npx -y PACKAGE` is\n"
     "installed once, pinned (npm, no install scripts), and run with node directly. Importing\n"
     "again changes only what changed. docs/bring-your-servers.md.\n"
     "\nExamples:\n"
     "  meith import .mcp.json --dry-run\n"
     "  meith import --client claude-desktop\n",
     run_import},
    {"connect", "", "CLIENT [--client PROFILE] [--dry-run] [--yes] [--undo]",
     "point an MCP client at meith mcp in place of its own servers (shows the change first)", 1, 1,
     opt::client | opt::dry_run | opt::yes | opt::undo, false,
     "  CLIENT            claude-code, claude-desktop, cursor, vscode, codex, gemini or\n"
     "                    windsurf: its user config gets one server, meith (this meith, mcp)\n"
     "  --client PROFILE  serve it through client profile PROFILE ([clients.PROFILE])\n"
     "  --dry-run         print the change, change nothing\n"
     "  --yes, -y         apply without asking (else asked at the terminal)\n"
     "  --undo            put the config back exactly as it was before `meith connect`\n"
     "The file as it was is kept in $XDG_STATE_HOME/meith/connect/CLIENT/. Import the\n"
     "client's servers first (meith import --client CLIENT) so that meith runs them.\n"
     "\nExamples:\n"
     "  meith import --client cursor && meith connect cursor\n"
     "  meith connect cursor --undo\n",
     run_connect},
    {"clients", "", "[--json]", "the MCP clients on this machine: config, servers, connected?", 0,
     0, opt::json, false, "  --json            the same as JSON\n", run_clients},
    {"secret", "list", "", "list the secrets' names (never their values)", 0, 0, 0, false, "",
     run_secret_list},
    {"secret", "rm", "NAME", "remove a secret", 1, 1, 0, false, "", run_secret_rm},
    {"reload", "", "[--json] [--timeout-ms N]",
     "reload meithd's config file (as SIGHUP does); exit 1 if it was refused or a source failed", 0,
     0, opt::json | opt::timeout, true,
     "  --json            the reload's outcome as meithd sends it\n"
     "  --timeout-ms N    wait at most N ms for added, replaced and restarted sources to be\n"
     "                    ready or fail (default 60 s)\n",
     run_reload},
    {"stop", "", "[--timeout-ms N]", "stop meithd gracefully (its user unit through systemctl)", 0,
     0, opt::timeout, true,
     "Calls in flight get [tools] shutdown_grace_ms to finish. When the user unit of `meith\n"
     "service install` runs it: systemctl --user stop meithd.service; else SIGTERM to the\n"
     "meithd that answers on the socket. A daemon not running is not an error.\n"
     "  --timeout-ms N    wait at most N ms for it to exit (default 30 s)\n",
     run_stop},
    {"restart", "", "[--timeout-ms N]",
     "stop meithd, then start it again as auto-start does, and wait until it answers", 0, 0,
     opt::timeout, true,
     "Through its user unit when that runs it (systemctl --user restart meithd.service); else\n"
     "stop as `meith stop` does, then meithd --detach on this home (with the --config FILE\n"
     "the old daemon read, if any). Applies what a reload cannot ([socket], [audit], hooks).\n"
     "  --timeout-ms N    wait at most N ms for the old daemon to exit (default 30 s)\n",
     run_restart},
    {"policy", "check", "TOOL [--caller cli|plugin] [--client NAME] [--json]",
     "would a call to TOOL be allowed? (exit 0 allow, 1 deny or ask)", 1, 1,
     opt::json | opt::client, true,
     "  --caller C        ask for caller C (cli or plugin)\n"
     "  --client NAME     through client profile NAME: TOOL as it shows it, and why it hides\n"
     "                    TOOL when it does\n"
     "  --json            the decision as meithd sends it\n",
     run_policy_check},
    {"approve", "", "",
     "answer held calls as they come (y once, s for the session, n deny); needs a terminal", 0, 0,
     0, true,
     "Keys: y allow once, s allow for the caller's session, n deny (then a reason), q quit.\n",
     run_approve},
    {"grant", "",
     "CAP[,CAP...] [--tool GLOB] [--caller C] [--session ID] [--uses N] [--expires DUR] "
     "[--json]",
     "let calls needing these capabilities through without asking", 1, 1,
     opt::json | opt::grant | opt::tool, true,
     "  --tool GLOB       only tools matching GLOB (*, ?, [...])\n"
     "  --caller C        only calls by caller C (cli or plugin)\n"
     "  --session ID      only calls of session ID (see meith approve, meith audit)\n"
     "  --uses N          good for N calls\n"
     "  --expires DUR     good for DUR: 30s, 10m, 2h, 1d\n"
     "  --json            the grant as meithd sends it\n",
     run_grant},
    {"grants", "", "[--json]", "list the grants in force", 0, 0, opt::json, true,
     "  --json            the grants as meithd sends them\n", run_grants},
    {"revoke", "", "GRANT_ID", "revoke a grant", 1, 1, 0, true, "", run_revoke},
    {"audit", "", "[FILTERS] [--limit N] [--json] [--file PATH] [-f|--follow]",
     "show the audit log (read directly; meithd need not run)", 0, 0,
     opt::json | opt::tool | opt::audit, false,
     "Reads audit.jsonl and its rotated files audit.jsonl.N, oldest first.\n"
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
     "  -f, --follow      then keep printing lines as they are appended (across rotation\n"
     "                    and truncation; with --limit N the last N first) until Ctrl-C or\n"
     "                    SIGTERM, which end it with exit status 0\n",
     run_audit},
    {"mcp", "", "[--caller cli|plugin] [--all] [--search] [--client NAME]",
     "serve the tools to an MCP client on stdin/stdout (caller plugin unless --caller)", 0, 0,
     opt::all | opt::search | opt::client, true,
     "  --caller C        the caller the MCP client's calls are made as (default plugin)\n"
     "  --all             list every tool, also those the caller may not call\n"
     "  --search          list only search_tools and call_tool: the client finds tools by\n"
     "                    words and loads their schemas when it needs them\n"
     "  --client NAME     serve client profile NAME ([clients.NAME]): its tools, names,\n"
     "                    caller and search mode (without it: the profile whose `agents`\n"
     "                    lists the MCP client's name, if any)\n",
     run_mcp},
    {"service", "install", "[--socket-activated] [--dry-run]",
     "run meithd as a user service (systemd user unit / launchd agent), now and at login", 0, 0,
     opt::service | opt::dry_run, false,
     "  --socket-activated  systemd starts meithd on the first connection\n"
     "  --dry-run         print the files and commands, change nothing\n"
     "  --manager M       systemd or launchd (default: this system's)\n",
     run_service_install},
    {"service", "uninstall", "[--dry-run]", "stop the user service and remove its files", 0, 0,
     opt::service | opt::dry_run, false,
     "  --dry-run         print the commands, change nothing\n"
     "  --manager M       systemd or launchd (default: this system's)\n",
     run_service_uninstall},
    {"service", "status", "[--dry-run]", "show the user service's files and state", 0, 0,
     opt::service | opt::dry_run, false,
     "  --dry-run         print the commands, change nothing\n"
     "  --manager M       systemd or launchd (default: this system's)\n",
     run_service_status},
    {"init", "", "[--force]",
     "write a working $MEITH_HOME/meithd.toml with the example tools (by absolute path)", 0, 0,
     opt::force, false,
     "The config names the example tools where this meith finds them (a source tree's\n"
     "examples/, or the installed share/doc/meith/examples) by absolute path, so it works from\n"
     "any folder; the file tools are confined to the folder you run it in.\n"
     "  --force           replace an existing meithd.toml (the old one is kept as .bak)\n",
     run_init},
    {"help", "", "[COMMAND]", "show the help of meith or of one command", 0, 2, 0, false, "",
     run_help},
    {"version", "", "", "show meith's version", 0, 0, 0, false, "", run_version},
};

std::string global_options() {
    return "Options (before or after COMMAND):\n"
           "  --socket PATH     daemon socket (default: socketPath in $MEITH_HOME/config.json)\n"
           "  --home DIR        meith home (default: $MEITH_HOME, else ~/.meith)\n"
           "  --caller NAME     cli or plugin (default: cli)\n"
           "  --no-autostart    fail when meithd is not running instead of starting it\n"
           "                    (also env MEITH_NO_AUTOSTART=1)\n"
           "  -h, --help        show this help (after a command: that command's help)\n"
           "  --version         show the version\n";
}

int run_help(const options& opts) {
    if (opts.words.size() == 1) {
        fmt::print("{}", usage());
        return exit_ok;
    }
    std::vector<std::string> rest(opts.words.begin() + 1, opts.words.end());
    const command* c = find_command(rest);
    if (c == nullptr) {
        // "meith help service": every subcommand of that name.
        std::string family;
        for (const command& k : table)
            if (k.name == rest[0]) family += (family.empty() ? "" : "\n") + command_help(k);
        if (!family.empty()) {
            fmt::print("{}", family);
            return exit_ok;
        }
        std::vector<std::string> names;
        for (const command& k : table)
            names.emplace_back(k.name);
        throw usage_error(
            fmt::format("no command '{}'{}", rest[0], did_you_mean(closest_names(rest[0], names))));
    }
    fmt::print("{}", command_help(*c));
    return exit_ok;
}

int run_version(const options&) {
    fmt::print("meith {}\n", MEITH_VERSION);
    return exit_ok;
}

} // namespace

std::span<const command> commands() {
    return table;
}

const command* find_command(const std::vector<std::string>& words) {
    if (words.empty()) return nullptr;
    for (const command& c : table)
        if (c.name == words[0] && !c.sub.empty() && words.size() > 1 && c.sub == words[1])
            return &c;
    for (const command& c : table)
        if (c.name == words[0] && c.sub.empty()) return &c;
    return nullptr;
}

void check_options(const command& c, const options& opts) {
    const std::string full_name =
        c.sub.empty() ? std::string(c.name) : fmt::format("{} {}", c.name, c.sub);
    // One row per option family: given on the command line?, the bit, how the error names it.
    const std::tuple<bool, std::uint32_t, std::string_view> families[] = {
        {opts.json, opt::json, "--json"},
        {opts.all, opt::all, "--all"},
        {opts.timeout_ms.has_value(), opt::timeout, "--timeout-ms"},
        {opts.text.has_value(), opt::text, "--text"},
        {opts.raw, opt::raw, "--raw"},
        {opts.force, opt::force, "--force"},
        {opts.model || opts.display, opt::model_display, "--model or --display"},
        {!opts.tags.empty(), opt::tag, "--tag"},
        {opts.format.has_value(), opt::format, "--format"},
        {opts.search.has_value(), opt::search, "--search"},
        {opts.client.has_value(), opt::client, "--client"},
        {opts.has_service_options(), opt::service, "--socket-activated or --manager"},
        {opts.dry_run, opt::dry_run, "--dry-run"},
        {opts.yes, opt::yes, "--yes"},
        {opts.undo, opt::undo, "--undo"},
        {opts.has_grant_options(), opt::grant, "--session, --uses or --expires"},
        {opts.tool.has_value(), opt::tool, "--tool"},
        {opts.since || opts.denied || opts.event || opts.limit || opts.file || opts.follow,
         opt::audit, "--since, --denied, --event, --limit, --file or --follow"},
    };
    for (const auto& [given, bit, names] : families)
        if (given && (c.accepts & bit) == 0)
            throw usage_error(fmt::format("'{}' does not take {}", full_name, names));
}

std::string head_of(const command& c) {
    std::string head(c.name);
    if (!c.sub.empty()) head += fmt::format(" {}", c.sub);
    if (!c.synopsis.empty()) head += fmt::format(" {}", c.synopsis);
    return head;
}

std::string usage() {
    std::string out = "usage: meith [OPTIONS] COMMAND [ARGS]\n\nCommands:\n";
    for (const command& c : table) {
        const std::string head = head_of(c);
        if (head.size() <= 28)
            out += fmt::format("  {:<30}{}\n", head, c.summary);
        else
            out += fmt::format("  {}\n  {:<30}{}\n", head, "", c.summary);
    }
    out += "\n" + global_options();
    out += "\n'meith help COMMAND' (or 'meith COMMAND --help') shows a command's own options.\n"
           "\nA command that finds no daemon answering starts one (meithd --detach, logging to\n"
           "$MEITH_HOME/meithd.log, or the user unit when installed) and waits until it is ready.\n"
           "\nExit status: 0 ok, 1 the tool returned an error (or meithd refused a restart, or\n"
           "policy check said deny), 2 usage/connection/protocol error, 130 interrupted.\n";
    return out;
}

std::string command_help(const command& c) {
    std::string out = fmt::format("usage: meith {}\n\n{}\n", head_of(c), c.summary);
    if (c.name == "call" || c.name == "preview") out += fmt::format("\n{}", call_input);
    if (!c.details.empty()) out += fmt::format("\n{}", c.details);
    if (c.connects) out += "\n" + global_options();
    return out;
}

std::string did_you_mean(const std::vector<std::string>& suggestions) {
    if (suggestions.empty()) return "";
    std::string out = "; did you mean ";
    for (std::size_t i = 0; i < suggestions.size(); ++i) {
        if (i > 0) out += i + 1 == suggestions.size() ? " or " : ", ";
        out += fmt::format("'{}'", suggestions[i]);
    }
    return out + "?";
}

} // namespace meith::cli
