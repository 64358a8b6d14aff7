// connect_edit: a client's config rewritten so that its MCP servers are one entry, `meith`,
// running `meith mcp` (`meith connect`, docs/bring-your-servers.md). Pure functions over text.
#pragma once

#include "cli/clients.hpp"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace meith::cli {

/// `text` (the client's config; empty: no file yet) with its servers replaced by one entry
/// named "meith" that runs `command`. JSON is written back with two-space indents (comments of
/// a VS Code file are not kept: `meith connect --undo` restores the file byte for byte); in
/// Codex's TOML only the `[mcp_servers.*]` tables change. nullopt with `why` when the text is
/// not such a config.
std::optional<std::string> connected_config(std::string_view text, client_format format,
                                            bool typed_entries,
                                            const std::vector<std::string>& command,
                                            std::string& why);

/// The names of the servers `text` declares, in its order; empty when it is not readable.
std::vector<std::string> server_names(std::string_view text, client_format format);

/// Whether `text` runs its servers through meith: an entry "meith" whose arguments start
/// with "mcp".
bool is_connected(std::string_view text, client_format format);

} // namespace meith::cli
