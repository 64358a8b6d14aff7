// learn: learned sandbox profiles (`meith sources learn`, docs/protocol.md §15 "Learned
// profiles"). While a source learns, its process runs in the `learning` confinement (it may
// write under the user's home, run programs and reach the network; meithd's home, its socket,
// the credential stores and the socket places stay out of reach, protected paths read-only) and
// meith-sandbox-init records what it does (sandbox/init_record.hpp). When the learning stops,
// `summarize` turns the record into the smallest profile that covers it, as the keys of the
// source's [[sources]] entry.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace meith::sandbox {

/// Sources learning now, by name, and the record file of each (process-wide; the daemon's
/// I/O thread only). A learning source's next start runs in the `learning` confinement.
void start_learning(const std::string& source, std::filesystem::path record);
void stop_learning(const std::string& source);
std::optional<std::filesystem::path> learning_record(const std::string& source);

/// What else stays read-only in the writable roots while a source learns, relative to each
/// (the home among them): where programs are started from at login, by the session or by git.
/// The protected paths cover the shells' files.
const std::vector<std::string>& learning_protected_paths();

/// What the summary leaves out or starts from, for one source.
struct learn_context {
    std::filesystem::path home;      ///< the user's home ($HOME)
    std::filesystem::path state_dir; ///< its own folder: writable in every profile
    std::filesystem::path tmp_root;  ///< the tools' temporary folders (its TMPDIR is inside)
    /// Its command and what running it takes (script interpreter, ELF loader): not proposed.
    std::vector<std::filesystem::path> programs;
    std::vector<std::string> profile; ///< its `profile` now; empty: none
    /// Paths that stay read-only whatever it learns (protected paths and learning's own, under
    /// the home and its cwd): a write there is a note, never a proposal, since naming one in
    /// `sandbox_paths.write` would lift its protection.
    std::vector<std::filesystem::path> protected_paths;
    /// What its entry allows now (kept: the learned keys add to them, never drop one).
    std::vector<std::string> read, write, exec, sockets, network_allow, network_deny;
    bool allow_private = false, ask = false;
};

/// The smallest profile that covers a record: the keys to set in the source's entry.
struct learned_profile {
    std::vector<std::string> profile;            ///< its own, else ["default"]
    bool new_profile = false;                    ///< it had none: `profile` is a key to set
    std::vector<std::string> write;              ///< sandbox_paths.write: folders (or single files)
    std::vector<std::string> exec;               ///< sandbox_paths.exec: programs
    std::vector<std::string> sockets;            ///< sandbox_paths.sockets: Unix socket paths
    std::vector<std::string> network;            ///< network.allow rules (names, else addresses)
    bool allow_private = false;                  ///< it connected to loopback
    std::vector<std::string> read, network_deny; ///< kept from its entry
    bool ask = false;                            ///< kept from its entry
    /// What the record showed that no key can allow (abstract sockets, writes to /tmp), in
    /// words; and whether the record hit its bound.
    std::vector<std::string> notes;
    bool truncated = false;
    std::size_t lines = 0; ///< facts recorded

    /// The keys as TOML lines for the [[sources]] entry: `profile = […]`, `sandbox_paths =
    /// { … }` (when a list is non-empty), `network = { allow = […] }` (when it reached any).
    std::vector<std::pair<std::string, std::string>> toml_keys() const;
    /// {"profile":[…],"write":[…],"exec":[…],"sockets":[…],"network":[…],"allowPrivate":b,
    ///  "notes":[…],"truncated":b,"lines":N}
    std::string json() const;
};

/// The profile covering `record` (lines as init_record.hpp writes them; unknown lines are
/// skipped) and what `ctx` says its entry allows now. Writes become the folders written in
/// (a file of its own where the folder is the home or a top folder), an existing folder that
/// is an ancestor of another written path left out (`mkdir -p` names every folder down to its
/// own, and most of them existed), then reduced to those not inside another one; writes inside
/// its state folder, the tools' temporary folders, /proc, /dev, /sys and /run are not
/// proposed. Programs that exist, other than `ctx.programs` and the init program, become exec
/// entries (a PATH lookup tries execve in every folder on it).
/// Names looked up become network rules; without any, the addresses connected to do.
learned_profile summarize(std::string_view record, const learn_context& ctx);

} // namespace meith::sandbox
