// import: the MCP servers of another client's config, read and turned into meith's `[[sources]]`
// entries (`meith import`, docs/bring-your-servers.md). Pure functions over text: the CLI reads
// the files, keeps the secrets, pins npx packages and writes meithd.toml.
//
// Formats read (each client's documented shape):
//   - `{"mcpServers": {NAME: {command, args, env, cwd} | {url | serverUrl | httpUrl, type,
//     headers}}}`: Claude Desktop (claude_desktop_config.json), Claude Code (.mcp.json, and
//     ~/.claude.json with its per-project `projects.PATH.mcpServers`), Cursor (mcp.json),
//     Gemini CLI (settings.json), Windsurf (mcp_config.json);
//   - `{"servers": {NAME: {type: "stdio"|"http"|"sse", command, args, env, cwd, url,
//     headers}}}`: VS Code (.vscode/mcp.json, the user's mcp.json);
//   - `[mcp_servers.NAME]` with command, args, env, cwd, url, http_headers: Codex
//     (~/.codex/config.toml).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace meith::config::import {

/// One MCP server as a client's config declares it.
struct server_entry {
    std::string name;                           ///< as the client names it
    std::vector<std::string> command;           ///< stdio: the program and its arguments
    std::map<std::string, std::string> env;     ///< stdio
    std::optional<std::string> cwd;             ///< stdio
    std::string url;                            ///< remote: its Streamable HTTP (or SSE) endpoint
    std::map<std::string, std::string> headers; ///< remote
    /// Why it is imported switched off (commented out) rather than run: a `docker run` entry
    /// (meith runs processes in its own sandbox, not containers), an SSE-only endpoint, an
    /// entry the client itself disabled. Empty: it runs.
    std::string off_reason;
};

/// The entries of a client config `text`: JSON with `mcpServers` (at the top or under each of
/// Claude Code's `projects`) or VS Code's `servers`, or Codex's TOML (`toml` true). Entries the
/// client disabled are kept with an `off_reason`. Empty with `why` when the text is not such a
/// config.
std::vector<server_entry> read_client_config(std::string_view text, bool toml, std::string& why);

/// Whether the env variable or header `name` with `value` holds a credential: by name
/// (`*_TOKEN`, `*_KEY`, `*SECRET*`, `*PASSWORD*`, `*PASSWD*`, `*CREDENTIAL*`, `Authorization`,
/// `Cookie`, `*API_KEY*`) or by shape (a known token prefix such as `ghp_`, `sk-`, `xox`,
/// `glpat-`, `AKIA`; a URL with a password; 24+ letters and digits mixed without spaces). A
/// value that already names a secret or a variable (`${...}`) is not one.
bool holds_credential(std::string_view name, std::string_view value);

/// Whether an argument holds a credential by shape alone (a URL with a password, a known token
/// prefix), e.g. server-postgres's database URL.
bool argument_holds_credential(std::string_view value);

/// A meith source name for the client's server `name`: lower case, [a-z0-9_-], at most 48
/// characters; "server" when nothing is left.
std::string source_name(std::string_view name);

/// The package an `npx`-style launcher runs: for `npx [-y|--yes] [-p PKG] PKG[@VERSION] ARGS`,
/// `npm exec [--yes] PKG -- ARGS`, `pnpm dlx PKG ARGS`, `bunx PKG ARGS`: the package spec and
/// the arguments after it. nullopt for any other command.
struct launcher_run {
    std::string launcher; ///< "npx", "npm exec", "pnpm dlx", "bunx"
    std::string package;  ///< as given: "@scope/name@1.2.3", "name", "name@latest"
    std::vector<std::string> args;
};
std::optional<launcher_run> launcher_of(const std::vector<std::string>& command);

/// A package spec without its version: "@scope/name@1.2" → "@scope/name".
std::string package_name(std::string_view spec);

/// The sandbox profile a server's package needs beyond what its tools declare: ["browser"]
/// for the packages that drive a browser as their child (Playwright's, chrome-devtools',
/// Puppeteer's), empty for the rest, whose tools' declarations decide.
std::vector<std::string> profile_for_package(std::string_view name);

/// The arguments a browser-driving package needs to start its browser inside meith's sandbox,
/// which refuses the nested user namespace Chromium's own sandbox makes (docs/protocol.md §15
/// "Profiles"): `--chrome-arg=--no-sandbox` for chrome-devtools-mcp; empty for the rest
/// (Playwright's takes PLAYWRIGHT_MCP_SANDBOX=false from the profile's environment).
std::vector<std::string> browser_args_for_package(std::string_view name);

/// One `[[sources]]` entry to write.
struct source_plan {
    std::string name;
    std::vector<std::string> command;
    std::map<std::string, std::string> env;
    std::string cwd;
    std::string url;
    std::map<std::string, std::string> headers;
    std::string prefix;                 ///< tool names' prefix ("NAME_")
    bool allow_private_network = false; ///< a url of plain http:// to this machine
    bool trust_annotations = true;      ///< the server's annotations give its capabilities
    /// The sandbox profile its process needs (docs/protocol.md §15 "Profiles"), when its
    /// package is one known to need more than its tools declare (profile_for_package).
    std::vector<std::string> profile;
    /// `instances = "per-session"`: a server whose state is its client's (a browser), as the
    /// client that starts its own servers had it (docs/configuration.md "Instances").
    bool per_session = false;
    std::vector<std::string> comments; ///< lines above the entry (where it came from, pins)
    std::string off_reason;            ///< non-empty: written commented out, with the reason
};

/// `p` as TOML text: comment lines, then `[[sources]]` with its keys in a fixed order (name,
/// kind, command or url, cwd, env or headers, prefix), each value a TOML basic string.
std::string source_toml(const source_plan& p);

/// `text` (a meithd.toml) with the `[[sources]]` entry named `name` (from its header, or the
/// comment lines that open it, to the next table header) replaced by `entry`, or `entry`
/// appended when there is none. Returns the new text and whether an entry was replaced.
std::string with_source_entry(std::string_view text, std::string_view name, std::string_view entry,
                              bool& replaced);

/// The text of the `[[sources]]` entry named `name` in `text` (as with_source_entry cuts it),
/// or nullopt.
std::optional<std::string> source_entry_text(std::string_view text, std::string_view name);

} // namespace meith::config::import
