// What the commands share about tool sources (sources.cpp): the list_sources request, a
// source's sandbox in words, which sources are down, and waiting for sources to settle after a
// restart or a reload.
#pragma once

#include "cli/discovery.hpp"
#include "cli/options.hpp"
#include "cli/session.hpp"

#include <chrono>
#include <string>
#include <vector>

namespace meith::cli {

/// list_sources' array. Throws cli_error on a reply without one.
json list_sources(session& s);

/// A source's sandbox as a person reads it (docs/protocol.md §15): "off (sandbox = "off")",
/// "none: WHY" (unconfined), else "confined: " and what it may do beyond reading —
/// "read-only", or "writes", "network", "runs programs" — and "(profile NAME)" when it runs
/// in a sandbox profile.
std::string sandbox_text(const json& src);

/// The sources that are failed or restarting.
std::vector<const json*> sources_down(const json& sources);

/// Polls list_sources (every 100 ms) until every source in `names` is ready, failed or
/// stopped, or `timeout` passes; returns the last list.
json await_settled(session& s, const std::vector<std::string>& names,
                   std::chrono::milliseconds timeout);

/// Prints to stderr, for each of `names` that is not ready, why (failed: its whole error;
/// still starting: how long it was waited for) and where to read more. exit_ok when all are
/// ready, else exit_tool_failed.
/// `again`: say "failed again" (a restart).
int report_settled(const json& sources, const std::vector<std::string>& names,
                   const daemon_location& where, std::chrono::milliseconds waited, bool again);

/// --timeout-ms, else 60 s: how long a restart or reload waits for its sources' outcome.
std::chrono::milliseconds settle_wait(const options& opts);

} // namespace meith::cli
