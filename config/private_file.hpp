// private_file: small state files in meithd's home that only its user may have written —
// grants.json (docs/protocol.md §14, PROTOCOL.md §12) and sandbox-memory.json (§15). Read only
// when trusted; written whole, so a crash leaves the old file or the new one, never half.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>

namespace meith::config {

struct private_file_read {
    enum class status {
        ok,         ///< `text` holds the file
        missing,    ///< no such file (ENOENT): nothing saved yet
        unreadable, ///< open or read failed: `error` is the errno
        untrusted,  ///< not a regular file of this user, writable by group or others, or
                    ///< over `max_bytes`: not read
    };
    status st = status::missing;
    std::string text;
    int error = 0;
};

/// Reads `file` (not following a symlink) when it is a regular file owned by the effective
/// uid, not writable by group or others, and at most `max_bytes` long.
private_file_read read_private_file(const std::filesystem::path& file,
                                    std::size_t max_bytes = std::size_t{16} << 20);

/// Writes `text` to FILE.tmp (created 0600, not through a symlink), fsyncs it, renames it over
/// `file` and fsyncs the folder, so a crash leaves the old file or the new one, never an empty one.
/// False when any step failed (errno says which; the temporary file is removed).
bool write_private_file(const std::filesystem::path& file, std::string_view text);

} // namespace meith::config
