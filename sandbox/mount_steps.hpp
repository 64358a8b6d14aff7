// mount_steps: the mounts that keep protected and hidden paths so inside a confined child's
// mount namespace (docs/protocol.md §15 "Protected paths", the hidden credential stores),
// shared by enter() (sandbox/mounts.cpp, a direct start) and meith-sandbox-init's zygote
// (sandbox/init_zygote.cpp), which checks them again for every run: the host replacing a file
// by rename(2) (git's lock-file writes, credential stores) detaches the mounts on it in every
// other mount namespace, and a prepared tree would show the new file unprotected. Raw system
// calls only (async-signal-safe); each returns 0 or the errno, a path gone being no failure.
#pragma once

namespace meith::sandbox {

/// Mounts a clone of `path` (a file, or a folder with what is mounted beneath it) over
/// itself, read-only when asked: pinned (it cannot be renamed away) and, read-only, protected.
int remount_over_itself(const char* path, bool read_only) noexcept;

/// An empty read-only 4 KiB tmpfs over the folder `path`.
int hide_folder(const char* path) noexcept;

/// `empty_file` (the daemon's, 0400) bound read-only over the file `path`.
int hide_file(const char* path, const char* empty_file) noexcept;

/// Whether `path` (not followed when a symlink) is the root of a mount here: a step above
/// still in place (statx STATX_ATTR_MOUNT_ROOT, Linux 5.8). False when it is not there.
bool is_mount_root(const char* path) noexcept;

} // namespace meith::sandbox
