// egress_events: what a source does with its egress proxy's connections (docs/protocol.md
// §19): one `egress` audit line per connection (source, tool, caller, request id when the
// connection belongs to one call, host, port, address, decision, rule, bytes, duration) and,
// for a refused one, a `sandbox_violation` tool event to that call naming the rule that would
// allow it. Internal to sources/.
#pragma once

#include "egress/proxy.hpp"
#include "tools/call.hpp"
#include "tools/tool_source.hpp"

#include <functional>
#include <memory>

namespace meith::sources {

/// The call a connection belongs to, asked once as the connection is accepted (it keeps that
/// answer, weakly, to its close): a one-shot run's own call, or a long-running child's only
/// call in flight (null when it has none or several: the connection is then the source's).
using egress_owner = std::function<tools::call_ptr()>;

/// Sets `opts`' callbacks: audit lines through `events.lifecycle` of `src`, violations to the
/// call `owner` names when it is still running, unknown targets (rules.ask) to
/// `events.egress_ask`. The callbacks hold `src` weakly.
void bind_egress_events(egress::proxy_options& opts, const std::shared_ptr<tools::tool_source>& src,
                        tools::source_events events, egress_owner owner);

} // namespace meith::sources
