// clients: the MCP clients meith knows, where each keeps its servers and in which shape
// (docs/bring-your-servers.md "Where each client keeps its servers"), for `meith import
// --client`, `meith connect` and `meith clients`.
#pragma once

#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace meith::cli {

/// How a client's file holds its servers.
enum class client_format {
    mcp_servers, ///< JSON, `"mcpServers": {NAME: {command, args, env}}`
    vscode,      ///< JSON with comments, `"servers": {NAME: {type: "stdio", command, args}}`
    codex,       ///< TOML, `[mcp_servers.NAME]` with command, args
};

struct client_info {
    std::string_view name; ///< claude-code, claude-desktop, cursor, vscode, codex, gemini, windsurf
    std::string_view display; ///< "Claude Code"
    client_format format;
    /// `stdio` entries carry `"type": "stdio"` (Claude Code's and VS Code's own shape).
    bool typed_entries;
};

/// Every client, in the order `meith clients` lists them.
std::span<const client_info> known_clients();

/// The client named `name`; throws usage_error naming the known ones.
const client_info& client_named(std::string_view name);

/// The client's config files: the user's (first) and the project's (the current folder), as
/// each client documents them. Paths whether or not they exist.
std::vector<std::filesystem::path> client_files(const client_info& c);

/// The file `meith connect` rewrites: the user's.
std::filesystem::path client_user_file(const client_info& c);

} // namespace meith::cli
