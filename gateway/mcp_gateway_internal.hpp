// mcp_gateway_internal: what gateway/mcp_gateway.cpp (lists, routing, requests) and
// gateway/mcp_subscribers.cpp (subscribers, notifications, subscriptions, log levels) share.
// Not a public header.
#pragma once

#include "protocol/json_writer.hpp"

#include <array>
#include <cstddef>
#include <string>
#include <string_view>

namespace meith::gateway::gateway_detail {

// JSON-RPC / MCP error codes (JSON-RPC 2.0 §5.1; MCP server/resources "Error Handling").
constexpr int method_not_found = -32601;
constexpr int invalid_params = -32602;
constexpr int internal_error = -32603;
constexpr int resource_not_found = -32002;
constexpr int permission_denied = -32001; ///< meith's: the policy refused (docs/protocol.md §17)

/// Pages of one list walk; a server that keeps handing out cursors is cut off past this.
constexpr std::size_t max_pages = 1000;

/// MCP logging levels, least severe first (server/utilities/logging, RFC 5424 names).
constexpr std::array<std::string_view, 8> log_levels{"debug", "info",     "notice", "warning",
                                                     "error", "critical", "alert",  "emergency"};

inline int level_index(std::string_view level) {
    for (std::size_t i = 0; i < log_levels.size(); ++i)
        if (log_levels[i] == level) return static_cast<int>(i);
    return -1;
}
inline std::string json_string(std::string_view s) {
    std::string out;
    protocol::append_json_string(out, s);
    return out;
}

} // namespace meith::gateway::gateway_detail
