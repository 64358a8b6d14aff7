// admission: whether meithd takes a connection, decided before any frame is read
// (docs/protocol.md §5 "Connections", docs/security.md "The control plane is not reachable from
// a tool"). Pure: the caller gathers the facts (platform/peer.hpp) and sends, audits and closes.
#pragma once

#include "platform/peer.hpp"

#include <cstddef>
#include <optional>
#include <string>

namespace meith::daemon {

/// A refused connection: the error frame to send it, best effort (empty: closed without a
/// word), and the members of its `connection_rejected` audit line.
struct connection_refusal {
    std::string frame;
    std::string audit_fields;
};

/// Why the connection of `peer` is refused, in order: a peer of another uid than `self_uid`
/// (or one the system cannot tell), a process of a tool's (`tool_problem`, from
/// platform::tool_peer_problem), or `open` connections already at `max_connections`
/// (limits.max_connections). nullopt: it is taken.
std::optional<connection_refusal>
refuse_connection(const std::optional<platform::peer_identity>& peer, uid_t self_uid,
                  const std::optional<std::string>& tool_problem, std::size_t open,
                  std::size_t max_connections);

} // namespace meith::daemon
