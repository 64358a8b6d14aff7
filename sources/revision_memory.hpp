// revision_memory: the MCP protocol revision each stdio server negotiated when it last started,
// remembered in HOME/mcp-revisions.json so that the next start of the same server (name,
// command and cwd) opens with what it speaks: `initialize` straight away for a server that
// answered `server/discover` with nothing usable, instead of the probe and its wait (docs/
// protocol.md §17 "Revisions towards sources"). The file is trusted only as a regular file of
// this user not writable by others (config/private_file.hpp); no home (unit tests): nothing is
// remembered.
#pragma once

#include "config/config.hpp"

#include <optional>
#include <string>

namespace meith::sources {

/// The revision `cfg`'s server negotiated last time ("2026-07-28", "2025-11-25", …), when it
/// is remembered for the same command and cwd.
std::optional<std::string> remembered_revision(const config::source_config& cfg);

/// Records `revision` for `cfg`; rewrites the file (0600, through a temporary file) only when
/// it changes. Failures are logged, never thrown.
void remember_revision(const config::source_config& cfg, const std::string& revision);

} // namespace meith::sources
