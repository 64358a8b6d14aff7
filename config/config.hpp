// config: the user's TOML config (docs/configuration.md) compiled into a validated, immutable
// value.
//
// Parsing is two-step: toml++ gives located syntax, then `load_config` checks every key
// (unknown keys are errors), every type and every range, and reports the first problem as
// "FILE:LINE:COL: message". Nothing here touches the daemon; the value is plain data and
// safe to share between threads once built.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace meith::config {

/// Maximum durations (ms): past them a config is refused, naming the key and the maximum, so no
/// value can overflow std::chrono's 64-bit nanoseconds (docs/configuration.md).
/// Call timeouts (limits.max_timeout_ms, tools.default_timeout_ms, a tool's timeout_ms): 7 days.
inline constexpr std::uint64_t max_call_timeout_ms = 7ull * 24 * 3600 * 1000;
/// limits.idle_timeout_ms: 7 days.
inline constexpr std::uint64_t max_idle_timeout_ms = 7ull * 24 * 3600 * 1000;
/// Graces, start and hook timeouts, write stalls (kill_grace_ms, shutdown_grace_ms,
/// start_timeout_ms, a hook's timeout_ms, limits.write_stall_ms): 1 hour.
inline constexpr std::uint64_t max_grace_ms = 3600ull * 1000;

/// [limits] (docs/protocol.md §2, §5, §8). Sizes in bytes, times in milliseconds.
/// One `[[limits.rates]]` entry (docs/protocol.md §21): a token bucket of `calls` tokens that
/// refills evenly over `per_s` seconds, one bucket per caller (or per session with
/// `per_session`), taken from by every call allowed to a tool matching `tool` (and having
/// `capability`, when given) made by `caller` (absent: any caller).
struct rate_limit_config {
    std::optional<std::string> caller;     ///< "cli" | "plugin"; absent: every caller
    std::string tool = "*";                ///< glob on the tool name (`*`, `?`, `[...]`)
    std::optional<std::string> capability; ///< only tools that declare it
    std::uint64_t calls = 0;               ///< the bucket's size: calls in a burst
    std::uint64_t per_s = 60;              ///< seconds for an empty bucket to fill again
    bool per_session = false;              ///< `scope = "session"`: a bucket per session

    bool operator==(const rate_limit_config&) const = default;
};

struct limits_config {
    std::uint64_t max_frame_bytes = 8 * 1024 * 1024;
    std::uint64_t max_result_bytes = 8 * 1024 * 1024;
    std::uint64_t max_timeout_ms = 600000;
    std::uint64_t max_connections = 1024;
    std::uint64_t max_calls_in_flight_per_connection = 64;
    std::uint64_t max_outbound_bytes = 16 * 1024 * 1024; ///< raised to max_result_bytes if lower
    std::uint64_t idle_timeout_ms = 0;                   ///< 0 = no idle timeout
    /// A connection over max_outbound_bytes whose socket takes no byte for this long is closed.
    std::uint64_t write_stall_ms = 10000;
    std::vector<rate_limit_config> rates; ///< `[[limits.rates]]`, in order

    bool operator==(const limits_config&) const = default;
};

/// [tools] (docs/protocol.md §5, §7).
struct tools_config {
    std::uint64_t default_timeout_ms = 30000;
    std::uint64_t shutdown_grace_ms = 5000;
    std::uint64_t kill_grace_ms = 2000; ///< SIGTERM -> SIGKILL for a stopped process group
    /// A tool first seen is held in quarantine until a person accepts it (docs/protocol.md
    /// §22); off: it is pinned as it is.
    bool quarantine_new = false;
    /// Names of the daemon's environment variables passed on to every child (exact names, or
    /// prefixes ending in `*`); each source's and hook's `env` table is added on top.
    std::vector<std::string> env_allow = {
        "PATH",       "HOME",      "USER",        "LOGNAME", "SHELL",
        "LANG",       "LC_*",      "TZ",          "TMPDIR",  "XDG_RUNTIME_DIR",
        "MEITH_HOME", "NODE_PATH", "NODE_OPTIONS"};

    bool operator==(const tools_config&) const = default;
};

enum class fsync_policy { never, always, interval };
enum class audit_failure_policy { fail_closed, keep_going };

/// [audit] (docs/protocol.md §6).
struct audit_config {
    /// false turns the audit trail off entirely (for benchmarks and diagnosis only; the
    /// daemon warns at startup). Not part of docs/protocol.md, which audits every call.
    bool enabled = true;
    std::optional<std::filesystem::path> path; ///< absent: $MEITH_HOME/audit.jsonl; "~" expanded
    std::uint64_t max_bytes = 64 * 1024 * 1024;
    std::uint64_t keep = 5;
    fsync_policy fsync = fsync_policy::never;
    audit_failure_policy on_failure = audit_failure_policy::fail_closed;

    bool operator==(const audit_config&) const = default;
};

/// One `[permissions.callers.X]` table: replaces that caller's default allow/deny lists.
/// Capability names are validated: read-only, writes-files, controls-browser, starts-process,
/// accesses-network, destructive, unknown.
struct caller_policy_config {
    std::vector<std::string> allow;
    std::vector<std::string> deny;
    std::vector<std::string> ask; ///< held for a person's approval (PROTOCOL.md §12)

    bool operator==(const caller_policy_config&) const = default;
};

/// One `[[permissions.rules]]` entry; first match wins, before the caller defaults.
struct permission_rule_config {
    std::string tool;                  ///< glob on the tool name (`*`, `?`, `[...]`)
    std::optional<std::string> caller; ///< "cli" | "plugin"; absent = every caller
    bool allow = false;                ///< decision = "allow" (else "deny" or "ask")
    bool ask = false;                  ///< decision = "ask" (PROTOCOL.md §12)

    bool operator==(const permission_rule_config&) const = default;
};

struct permissions_config {
    std::optional<caller_policy_config> cli;    ///< absent: built-in defaults
    std::optional<caller_policy_config> plugin; ///< absent: built-in defaults
    std::vector<permission_rule_config> rules;
    /// Keep grants without a session in `$MEITH_HOME/grants.json` (0600) across restarts,
    /// expiry honoured (PROTOCOL.md §12).
    bool persist_grants = false;

    bool operator==(const permissions_config&) const = default;
};

/// `host` (tool host), `exec` (exec tool), `mcp` (an MCP server over stdio, docs/protocol.md §7).
enum class source_kind { host, exec, mcp };
/// The kind's name as written in the config (`kind = "host"`), and as the source factory
/// table (sources/factory.hpp) knows it.
std::string_view to_string(source_kind k);
enum class exec_mode { oneshot, server };

/// The single tool an exec source provides (`tool = {...}`).
struct exec_tool_config {
    std::string name;
    std::string description;
    std::vector<std::string> capabilities;
    std::string input_schema_json; ///< JSON text; empty = absent
    std::optional<std::uint64_t> timeout_ms;

    bool operator==(const exec_tool_config&) const = default;
};

/// One `[[sources]]` entry (docs/protocol.md §7).
/// A source's kernel confinement (PROTOCOL.md §13): `enforce` confines with what the kernel
/// offers, `require` refuses to start a source the kernel cannot fully confine, `off` runs it
/// unconfined.
enum class sandbox_mode { enforce, require, off };

/// `sandbox_paths`: what a confined child may do beyond its capabilities' defaults. Paths are
/// absolute ("~" expanded, relative ones resolved against the config file's folder).
/// What stays read-only inside every writable root unless `sandbox_paths.write` names it
/// (docs/protocol.md §15, "Protected paths"): repository hooks and config, shell start-up
/// files, agents' and editors' config. Relative to each writable root.
inline const std::vector<std::string>& default_protected_paths() {
    static const std::vector<std::string> list = {
        ".git/hooks",    ".git/config", ".gitmodules",  ".mcp.json",   ".vscode",
        ".idea",         ".claude",     ".codex",       ".cursor",     ".bashrc",
        ".bash_profile", ".bash_login", ".bash_logout", ".profile",    ".zshrc",
        ".zshenv",       ".zprofile",   ".zlogin",      ".config/fish"};
    return list;
}

/// A source's `network = { allow, deny, allow_private, ask }` (docs/protocol.md §19): its
/// egress goes through meithd's proxy, to what the rules name (egress/rules.hpp gives their
/// form); with `ask`, a host no rule names is held for a person at `meith approve`.
struct network_config {
    std::vector<std::string> allow, deny;
    bool allow_private = false;
    bool ask = false;

    bool operator==(const network_config&) const = default;
};

struct sandbox_paths_config {
    std::vector<std::filesystem::path> read; ///< accepted; reading is allowed everywhere
    std::vector<std::filesystem::path> write;
    std::vector<std::filesystem::path> exec;
    /// Path Unix sockets (or their folders) the process may connect to (docs/protocol.md §15).
    std::vector<std::filesystem::path> sockets;
    /// `[sandbox] protected_paths`, copied into every source and hook: names relative to
    /// each writable root that stay read-only there.
    std::vector<std::string> protect = default_protected_paths();
    /// The source's `network` table, when it has one (sources only; not a remote source).
    std::optional<network_config> network;
    /// The source's `profile` (config/profiles.hpp, docs/protocol.md §15 "Profiles"): the names
    /// it gave, checked. Empty: none, and its process is confined as its tools declare.
    std::vector<std::string> profile;
    /// The source's own folder (source_state_dir): writable in every profile, its caches sent
    /// there. Empty for hooks.
    std::filesystem::path state_dir;

    bool operator==(const sandbox_paths_config&) const = default;
};

/// `instances` (docs/configuration.md "Instances"): one process for every client (`shared`),
/// one per client profile or MCP client name (`per_client`), one per connection
/// (`per_session`).
enum class instance_mode { shared, per_client, per_session };

struct source_config {
    std::string name;
    source_kind kind = source_kind::host;
    exec_mode mode = exec_mode::oneshot;    ///< exec only
    std::vector<std::string> command;       ///< argv, non-empty
    std::filesystem::path cwd;              ///< absolute; default: the config file's folder
    std::map<std::string, std::string> env; ///< added to the child's environment
    std::string config_json = "{}";         ///< host `init` config, as JSON text
    /// tool (unprefixed) -> capabilities; for an MCP source it wins over the tool's annotations
    std::map<std::string, std::vector<std::string>> capabilities;
    std::map<std::string, std::uint64_t> timeout_ms; ///< tool -> timeout
    std::string prefix;                              ///< prepended to every tool name
    std::uint64_t start_timeout_ms = 10000;
    std::optional<exec_tool_config> tool; ///< exec only, required there
    /// mcp only: map the tools' MCP annotations to capabilities (default: every tool whose
    /// `capabilities` entry is absent is `unknown`).
    bool trust_annotations = false;
    /// mcp only: the capabilities of reading its resources, getting its prompts and asking it
    /// for completions, decided by the policy like a call's (docs/protocol.md §17).
    std::vector<std::string> resource_capabilities{"read-only"};
    /// mcp only: declare the `roots` client capability, so the server's roots/list goes to the
    /// client of the call in flight (its cwd otherwise). Off by default: a server told of roots
    /// may trade the folders its command names for them (docs/protocol.md §17).
    bool forward_roots = false;
    /// `enabled = false`: configured but not run — no process, no tools, listed by list_sources
    /// as "disabled" (docs/configuration.md); a reload that flips it starts or stops it.
    bool enabled = true;
    /// `start = "on-demand"` (docs/configuration.md "Starting on demand"): not run until a
    /// call needs it; listed from its pinned definitions (docs/protocol.md §22), and stopped
    /// again after `idle_stop_ms` without calls. `eager` (the default): run from meithd's start.
    bool on_demand = false;
    /// on-demand only: milliseconds without a call in flight after which its process stops.
    std::uint64_t idle_stop_ms = 300000;
    /// host and stdio mcp: who shares one process (sources/instance_pool.hpp).
    instance_mode instances = instance_mode::shared;
    /// per-client / per-session only: at most this many instances run at once.
    std::uint64_t max_instances = 8;
    /// per-client / per-session only: how long an instance outlives its last session.
    std::uint64_t instance_grace_ms = 10000;
    /// mcp only: a remote server's Streamable HTTP endpoint (docs/protocol.md §18); such a
    /// source has no `command` (meithd runs its bridge, meith-remote).
    std::string url;
    /// url only: request headers, name -> value; `${secret:NAME}` in a value stands for the
    /// file HOME/secrets/NAME (0600), read when the source starts.
    std::map<std::string, std::string> headers;
    /// url only: allow loopback, private, link-local and metadata addresses, and http://.
    bool allow_private_network = false;
    std::filesystem::path ca_file; ///< url only: extra trust anchors (PEM), besides the system's
    std::string oauth_client_id;   ///< url only: a client id registered by hand for `meith login`
    std::string oauth_scope;       ///< url only: the scope `meith login` asks for
    /// url only: the NAME of the secret (`${secret:NAME}`) holding the pre-registered client's
    /// secret, or its private key (PEM, for private_key_jwt); never the value itself.
    std::string oauth_client_secret, oauth_private_key;
    /// url only, for enterprise-managed cross-app access (SEP-990): the NAME of the secret
    /// holding the user's ID token from their identity provider, that provider's token
    /// endpoint and meith's client id there.
    std::string oauth_id_token, oauth_idp_token_endpoint, oauth_idp_client_id;
    /// url only: "" (the server decides: an authorization code login where it offers one),
    /// "authorization_code", "client_credentials" (a token without a person, RFC 6749 §4.4) or
    /// "cross_app_access" (the ID token exchanged, SEP-990).
    std::string oauth_grant;
    sandbox_mode sandbox = sandbox_mode::enforce;
    sandbox_paths_config sandbox_paths;

    bool operator==(const source_config&) const = default;
};

enum class hook_kind { filter, observe };

/// One `[[hooks]]` entry (docs/protocol.md §7). Parsed and validated now; run by later work.
struct hook_config {
    std::string name;
    hook_kind kind = hook_kind::filter;
    exec_mode mode = exec_mode::oneshot;
    std::string phase; ///< before_execution | after_execution | session_start | session_end | ...
    std::vector<std::string> command;
    std::filesystem::path cwd;
    std::map<std::string, std::string> env;
    std::vector<std::string> tools = {"*"};
    std::uint64_t timeout_ms = 2000;
    /// Declared capabilities: the hook runs confined to them (PROTOCOL.md §13); absent: a
    /// user's own policy program, unconfined.
    std::optional<std::vector<std::string>> capabilities;
    sandbox_mode sandbox = sandbox_mode::enforce;
    sandbox_paths_config sandbox_paths;

    bool operator==(const hook_config&) const = default;
};

/// A client profile's override of one tool (docs/protocol.md §23): what its clients see the
/// tool as. Only the name and the description: capabilities and annotations are the tool's
/// own, so an override never makes a tool look safer.
struct tool_override_config {
    std::optional<std::string> name;        ///< shown (and called) as this; MCP name charset
    std::optional<std::string> description; ///< shown in place of the tool's own

    bool operator==(const tool_override_config&) const = default;
};

/// One `[clients.NAME]` table (docs/protocol.md §23): the tools an MCP client (or any client
/// that names the profile in its hello) sees and may call, enforced by meithd on list, search,
/// call, preview and approval.
struct client_config {
    std::string name;
    /// Globs on real tool names: a tool is in the profile when it matches one entry without
    /// `!` (or there is none) and no entry with `!`. Absent: every tool.
    std::vector<std::string> tools;
    std::optional<std::string> caller; ///< "cli" | "plugin": the caller its frames act as
    bool search = false;               ///< `meith mcp` lists only search_tools and call_tool
    std::vector<std::string> pinned;   ///< listed beside the meta-tools in search mode
    /// MCP client names (`clientInfo.name` of initialize) that select this profile when the
    /// connection names none.
    std::vector<std::string> agents;
    std::map<std::string, tool_override_config, std::less<>> overrides; ///< by real tool name
    /// Globs on source names (`!` to leave out): whose MCP families (resources, prompts,
    /// completions, log messages) the profile reaches. Absent: the sources of the tools it
    /// shows (docs/protocol.md §23).
    std::optional<std::vector<std::string>> sources;

    bool operator==(const client_config&) const = default;
};

/// The whole validated config. Default-constructed = the built-in defaults (no file).
struct config {
    std::optional<std::filesystem::path> source_file; ///< absent when built-in defaults
    std::optional<std::filesystem::path> socket_path; ///< [socket] path, "~" expanded
    limits_config limits;
    tools_config tools;
    audit_config audit;
    permissions_config permissions;
    std::vector<source_config> sources;
    std::vector<hook_config> hooks;
    std::vector<client_config> clients; ///< `[clients.NAME]`, by name
};

/// A startup error: `where` is "FILE:LINE:COL" (or just FILE), `message` what is wrong.
struct config_error {
    std::string where;
    std::string message;
    std::string to_string() const { return where.empty() ? message : where + ": " + message; }
};

/// Result of loading: exactly one of `value` / `error` is set.
struct load_result {
    std::optional<config> value;
    std::optional<config_error> error;
};

/// Parses and validates the TOML file at `file`. Relative `cwd` and the default `cwd` of
/// sources and hooks resolve against the file's folder; `~` in paths expands to $HOME.
/// Never throws: syntax errors, unknown keys, wrong types, bad enum values and name clashes
/// (two sources or hooks with one name) come back as `error`.
load_result load_config(const std::filesystem::path& file);

/// Same, from text (for tests); `display_name` stands in for the file name in errors and
/// `base_dir` for its folder.
load_result parse_config(std::string_view toml_text, const std::string& display_name,
                         const std::filesystem::path& base_dir);

} // namespace meith::config
