// source_memory: what meithd remembers per source between starts, in one owner-only JSON file
// each — `{"sources":{"NAME":{"key":"…","FIELD":VALUE}}}`, where `key` ties an entry to the
// command and cwd it was learnt from (a changed command forgets it). HOME/sandbox-memory.json
// (the capabilities a source settled in, sandbox/confinement.hpp) and HOME/mcp-revisions.json
// (the MCP revision it negotiated, sources/revision_memory.hpp) are two such files. Read only
// when a regular file of this user not writable by others (config/private_file.hpp).
#pragma once

#include "config/config.hpp"

#include <filesystem>
#include <optional>
#include <string>

namespace meith::config {

/// The value `field` of `cfg`'s entry in `file`, as JSON text ("12", "\"2025-11-25\""), when
/// there is one for the same command and cwd. Nothing for an empty path or an untrusted file.
std::optional<std::string> remembered(const std::filesystem::path& file, std::string_view field,
                                      const source_config& cfg);

/// Sets `field` of `cfg`'s entry to `value_json` (JSON text); rewrites the file (0600, through
/// a temporary file and rename) only when that changes it. False (errno set) when it could not
/// be written; never throws.
bool remember(const std::filesystem::path& file, std::string_view field, const source_config& cfg,
              const std::string& value_json);

} // namespace meith::config
