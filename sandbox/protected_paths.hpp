// protected_paths: what stays read-only inside a confined child's writable roots
// (docs/protocol.md §15 "Protected paths"): the `[sandbox] protected_paths` names that exist in
// each root, a repository's hook folders, meithd's own config file, and the folders to pin so
// that none of them (nor meithd's home) can be renamed away and replaced.
#pragma once

#include "config/config.hpp"

#include <filesystem>
#include <vector>

namespace meith::sandbox {

/// Whether `a` is `b` or lies beneath it (lexically).
bool path_within(const std::filesystem::path& a, const std::filesystem::path& b);

/// `p` made canonical as far as it exists (std::filesystem::weakly_canonical), else normalised.
std::filesystem::path canonical_or_normal(const std::filesystem::path& p);

/// The paths to mount read-only over themselves and the folders to pin (outer folders first).
struct protected_set {
    std::vector<std::filesystem::path> read_only, pinned;
};

/// For writable `roots`: each `paths.protect` name that exists in a root (not a symlink) and
/// that no `paths.write` entry lifts (one naming it or a folder between it and its root); in a
/// root holding a git repository (`.git` a folder), its hooks folder — `.git/hooks`, made empty
/// (0755, as `git init` makes it) when it is missing and protected by name, and the folder its
/// `core.hooksPath` names when that lies inside the root and exists; `config_file` (meithd's
/// `--config`) when a root holds it outside `home`, and meithd's own executable and
/// meith-sandbox-init when a root holds them, whatever `paths.write` says; and the folders
/// between a root and each of these, and `home`, to pin. `home` and `config_file` may be empty.
protected_set protected_in_roots(const std::vector<std::filesystem::path>& roots,
                                 const config::sandbox_paths_config& paths,
                                 const std::filesystem::path& home,
                                 const std::filesystem::path& config_file);

} // namespace meith::sandbox
