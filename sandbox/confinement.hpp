// confinement: which kernel sandbox a source, exec tool or hook runs under (PROTOCOL.md §13,
// docs/protocol.md §15), and how `list_sources` shows it.
//
// A source runs confined to the union of its tools' capabilities; a tool host or MCP server
// reports its tools only once running, so it first starts confined to the capabilities its
// config's `capabilities` table names (read-only when it names none), and when the tools it
// lists need other ones it is restarted once under their union before they are registered.
// Exec tools and hooks declare theirs in the config. A source that names a sandbox profile
// (`profile`) runs confined to it whatever its tools say; one whose tools declare nothing
// (`unknown`) runs in the `default` profile; a hook with `unknown` capabilities, unconfined.
#pragma once

#include "config/config.hpp"
#include "egress/proxy.hpp"
#include "permissions/policy.hpp"
#include "sandbox/sandbox.hpp"

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace meith::sandbox {

struct confinement {
    /// Null: unconfined (sandbox = "off", unknown capabilities, or nothing to confine with).
    std::shared_ptr<const sandbox::plan> plan;
    permissions::capability_set capabilities = 0;
    /// The members of list_sources' `"sandbox"` object (without braces): mode, capabilities,
    /// fs, net, exec, and why it is unconfined when it is.
    std::string status_members;
    /// `sandbox = "require"` and the kernel cannot confine it: the source must not start.
    std::optional<std::string> refusal;
    /// "TMPDIR=…": the child's own writable temporary folder, to add to its environment
    /// (`apply_env`).
    std::string tmpdir_env;
    /// Writable folders left out because they hold meithd's home (its cwd, root or a
    /// sandbox_paths.write entry): a tool that writes there meets EACCES.
    std::vector<std::string> withheld;
    std::filesystem::path cwd; ///< the program's cwd, for sandbox_hint
    /// The sandbox profile its process runs in ("browser", "node,browser"; "default" for a
    /// source whose tools declare nothing), empty for none (docs/protocol.md §15 "Profiles").
    /// With one, the plan follows `process_capabilities`, not `capabilities` (its tools').
    std::string profile;
    permissions::capability_set process_capabilities = 0;
    std::vector<std::filesystem::path> profile_write; ///< writable whatever its capabilities
    std::map<std::string, std::string> profile_env;   ///< added by apply_env
    std::vector<std::string> profile_sockets; ///< its own Unix socket folders ("{tmp}": TMPDIR)
    /// The source's `network` rules when its process runs behind meithd's egress proxy
    /// (docs/protocol.md §19); null otherwise. The source sets the callbacks;
    /// process::confined_spec gives it to every start.
    std::shared_ptr<egress::proxy_options> egress;
};

/// When `error_text` (a failed call's message and details) reads like a refusal — EACCES,
/// EPERM, EROFS, "permission denied", "operation not permitted", "read-only file system" —
/// and `c` confines the program, what the sandbox allows and the declaration that would allow
/// more (docs/protocol.md §15): `accesses-network` for a connection, `starts-process` or
/// sandbox_paths.exec for running a program, `writes-files` (its cwd, root, sandbox_paths.write)
/// for a write, and a cwd withheld because it holds meithd's home. Empty otherwise.
std::string sandbox_hint(const confinement& c, std::string_view error_text);

/// meithd's home and socket: no sandbox ever lets a tool write the home or a folder holding
/// it (its config, audit log, grants, approver secret), and with namespaces both are hidden
/// from every confined child. The tools' temporary folders are made outside it, under
/// $XDG_RUNTIME_DIR/meith-tools (else /tmp/meith-tools-<uid>), one folder per home. Set once
/// by the daemon at start.
void set_confinement_home(std::filesystem::path home, std::filesystem::path socket = {});

/// meithd's config file when it lives outside the home (`--config`): inside a tool's
/// writable root it stays read-only and the folders down to it pinned, as a protected path
/// that no `sandbox_paths.write` lifts (docs/protocol.md §15). Set once by the daemon.
void set_confinement_config(std::filesystem::path config_file);

/// Where the tools' temporary folders are made (each confined child's TMPDIR is a folder
/// inside): $XDG_RUNTIME_DIR/mt/<8 hex digits> or /tmp/mt-<uid>/<…>; empty when none can be.
std::filesystem::path tools_tmp_root();

/// The home set_confinement_home was given (absolute), or an empty path (unit tests).
const std::filesystem::path& confinement_home();

/// Puts `c`'s TMPDIR and its profile's environment into `env` ("NAME=value" items), replacing
/// values inherited from the daemon; a profile's name the source's own `env` sets is left.
void apply_env(const confinement& c, std::vector<std::string>& env,
               const std::map<std::string, std::string>& own = {});

/// Works out the confinement of `name` (a source or hook) running `argv` in `cwd` with
/// `capabilities`; `config_json` is the source's host config (its `root` is writable with
/// writes-files). Logs once per daemon which protections the kernel lacks.
confinement confine(const std::string& name, config::sandbox_mode mode,
                    const config::sandbox_paths_config& paths,
                    permissions::capability_set capabilities, const std::vector<std::string>& argv,
                    const std::filesystem::path& cwd, const std::string& config_json = "{}");

/// The union of the capabilities of `tool_caps` (each a tool's list; an empty list is
/// `unknown`).
permissions::capability_set union_of(const std::vector<std::vector<std::string>>& tool_caps);

/// The union of the values of a source's `capabilities` table; read-only when it is empty.
permissions::capability_set declared_ahead(const config::source_config& cfg);

/// What a host or MCP server is first started with: declared_ahead(cfg), plus the union its
/// tools needed when the same source (name, command and cwd) last settled, as remembered in
/// HOME/sandbox-memory.json. Without the memory a source whose tools need more than read-only
/// starts twice at every daemon start (PROTOCOL.md §13 moves it into its tools' sandbox); the
/// listing still decides, so a remembered set that is too wide is narrowed the same way. The
/// file is trusted only when it is a regular file of this user not writable by others; no
/// home (unit tests): nothing is remembered.
permissions::capability_set started_with(const config::source_config& cfg);

/// Records `settled` (the union the source's tools need, which it now runs in) for
/// `started_with`; rewrites the file (0600, through a temporary file and rename) only when it
/// changes. Failures are logged, never thrown.
void remember_settled(const config::source_config& cfg, permissions::capability_set settled);

} // namespace meith::sandbox
