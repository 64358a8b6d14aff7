// admission: whether meithd takes a connection (daemon/admission.hpp).
#include "daemon/admission.hpp"

#include "protocol/json_writer.hpp"
#include "protocol/server_frames.hpp"

#include <fmt/format.h>

namespace meith::daemon {

std::optional<connection_refusal>
refuse_connection(const std::optional<platform::peer_identity>& peer, uid_t self_uid,
                  const std::optional<std::string>& tool_problem, std::size_t open,
                  std::size_t max_connections) {
    connection_refusal r;
    protocol::json_members m(r.audit_fields);
    if (!peer || peer->uid != self_uid) {
        // Closed before any frame is read or sent (§5).
        m.string("reason", "peer uid differs from the daemon's");
        if (peer)
            m.number("pid", static_cast<std::uint64_t>(peer->pid)).number("uid", peer->uid);
        else
            m.null("pid").null("uid");
        return r;
    }
    if (tool_problem) {
        // A tool (or a process of a tool's) is never a client: not cli, not an approver, not
        // an operator (docs/security.md).
        protocol::append_error_frame(r.frame, std::nullopt,
                                     "meithd does not take connections from the tools it runs (" +
                                         *tool_problem +
                                         "); a tool cannot call meithd, approve or change its "
                                         "config (docs/security.md)",
                                     protocol::refusal::tool_process);
        m.string("reason", "a tool's process: " + *tool_problem);
    } else if (open >= max_connections) {
        protocol::append_error_frame(
            r.frame, std::nullopt,
            fmt::format("too many connections (limit {}, limits.max_connections)", max_connections),
            protocol::refusal::limit_reached);
        m.string("reason", fmt::format("over limits.max_connections ({})", max_connections));
    } else {
        return std::nullopt;
    }
    m.number("pid", static_cast<std::uint64_t>(peer->pid)).number("uid", peer->uid);
    return r;
}

} // namespace meith::daemon
