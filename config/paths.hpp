// paths: where meithd's files live (docs/protocol.md §1) and the ownership/mode checks on them.
// Pure functions over the environment and the file system; no global state.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

namespace meith::config {

/// Resolves the home folder: `flag` (--home) > env MEITH_HOME > `$HOME/.meith`.
std::filesystem::path resolve_home(const std::optional<std::filesystem::path>& flag);

/// Whether `home` is the default home, `$HOME/.meith` (symlinks resolved).
bool is_default_home(const std::filesystem::path& home);

/// Resolves the socket path: `flag` (--socket) > `from_config` ([socket] path) >
/// `$XDG_RUNTIME_DIR/meith/meithd.sock` (when set, absolute, and `home` is the default home) >
/// `home/meithd.sock`.
std::filesystem::path resolve_socket_path(const std::optional<std::filesystem::path>& flag,
                                          const std::optional<std::filesystem::path>& from_config,
                                          const std::filesystem::path& home);

/// Expands a leading "~" or "~/" to $HOME; other paths are returned unchanged.
std::filesystem::path expand_tilde(const std::filesystem::path& p);

/// A `command` word with the user's home filled in, as a shell would: a leading "~" or "~/",
/// and each `$HOME` or `${HOME}` (not `$HOMEDIR`). Unchanged when $HOME is not set
/// (docs/configuration.md "Sources": command).
std::string expand_home_in_word(const std::string& word);

/// A source's own folder: `$XDG_STATE_HOME/meith/sources/NAME`, else
/// `~/.local/state/meith/sources/NAME` (XDG Base Directory Specification). Outside meithd's home,
/// which the sandbox hides; `meith import` makes it the imported sources' cwd, and every sandbox
/// profile lets the source write there (docs/protocol.md §15 "Profiles").
std::filesystem::path source_state_dir(const std::string& name);

/// Creates `dir` with mode 0700 if missing (parents too, each 0700), then checks it is owned by
/// the current user and not writable by group or others, unless `allow_sticky` and the folder
/// has the sticky bit (e.g. /tmp). Returns an error message naming the chmod/chown to run, or
/// nullopt when the folder is fit for use. (docs/protocol.md §1)
std::optional<std::string> ensure_private_dir(const std::filesystem::path& dir, bool allow_sticky);

} // namespace meith::config
