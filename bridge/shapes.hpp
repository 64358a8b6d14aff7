// shapes: what `meith mcp` says to an MCP client, free of I/O (docs/protocol.md §10, §17):
// the server's capabilities and discover result, tools as MCP Tools, ToolResults as
// CallToolResults, and the 2026-07-28 revision's per-request envelope.
#pragma once

#include "bridge/json.hpp"

#include <array>
#include <string_view>

namespace meith::bridge::shapes {

/// Revisions spoken with `initialize`, newest first (MCP basic/lifecycle).
inline constexpr std::array<std::string_view, 4> legacy_revisions = {"2025-11-25", "2025-06-18",
                                                                     "2025-03-26", "2024-11-05"};
/// The stateless revision: `server/discover`, every request carrying its own envelope.
inline constexpr std::string_view modern_revision = "2026-07-28";

// _meta keys of the 2026-07-28 envelope (the TypeScript SDK 2.x's constants).
inline constexpr std::string_view protocol_version_key = "io.modelcontextprotocol/protocolVersion";
inline constexpr std::string_view client_capabilities_key =
    "io.modelcontextprotocol/clientCapabilities";
inline constexpr std::string_view client_info_key = "io.modelcontextprotocol/clientInfo";
inline constexpr std::string_view server_info_key = "io.modelcontextprotocol/serverInfo";
inline constexpr std::string_view subscription_id_key = "io.modelcontextprotocol/subscriptionId";

/// ServerCapabilities of `meith mcp`: tools, resources (subscribe, listChanged), prompts,
/// completions and logging — every family meithd forwards.
json server_capabilities();
/// `{"name":"meith","version":…}`.
json server_info();
/// The `server/discover` result (2026-07-28).
json discover_result();

/// A meithd ToolDescriptor as an MCP Tool: name, description, inputSchema (one string `input`
/// for a text-payload tool), and title, annotations, outputSchema, execution, icons and
/// _meta as the source gave them; annotations derived from capabilities when it gave none.
json tool_of(const json& descriptor);

/// A ToolResult as a CallToolResult. An MCP source's result (ok, or isError in the error's
/// details) passes through unchanged; other results become text (and structuredContent for
/// an object). `unknown_tool` is set for UNKNOWN_TOOL (a JSON-RPC error instead).
/// `tool_result` is taken (its members moved into the answer, not copied).
json call_result(json tool_result, bool& unknown_tool, std::string& message);

/// Moves member `key` out of `obj` (null when absent or `obj` is no object).
json take(json& obj, std::string_view key);

/// Adds what every 2026-07-28 result of `method` carries: resultType "complete" (unless set)
/// and _meta.serverInfo; for the cacheable ones (the lists, resources/read, server/discover)
/// ttlMs 0 and cacheScope "private" (meith's answers change with its sources and policy).
void mark_modern(json& result, std::string_view method);

} // namespace meith::bridge::shapes
