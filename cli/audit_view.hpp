// audit_view: how `meith audit` shows audit lines (docs/protocol.md §6) as a table — the time
// column (with the date when the lines span more than one calendar day), the call columns, why
// a call was denied or failed, and a one-line summary of every other event (source and daemon
// lifecycle, connections, approvals, grants, reloads).
#pragma once

#include "cli/session.hpp"

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace meith::cli {

/// An RFC 3339 timestamp ("2026-11-21T10:00:00.123Z", or with an offset) as a time point.
std::optional<std::chrono::system_clock::time_point> parse_audit_ts(std::string_view ts);

/// tool_call and tool_call_rejected: the events with the call columns.
bool is_call_event(std::string_view event);

/// Why a call line was denied, rejected or failed (its reason, or the error message of its
/// result); "" for a call that went through.
std::string call_reason(const json& line);

/// Any other event: what it is about (a source, hook, session, grant, ...; "-" when nothing)
/// and its fields in a few words ("pid 123 exited with status 1").
struct event_summary {
    std::string subject;
    std::string text;
};
event_summary summarize_event(const json& line);

/// Audit lines as aligned rows. The call layout is TIME EVENT TOOL CALLER DECISION RESULT MS
/// REQUEST DETAILS (other events show their subject under TOOL and their summary after it);
/// the events layout, for a selection without calls, TIME EVENT SUBJECT DETAILS. DETAILS is
/// cut so a line fits `width`.
class audit_table {
  public:
    audit_table(bool call_layout, std::size_t width);

    /// Prints the header and `lines`, with columns as wide as their widest cell. `follow`:
    /// columns get typical widths at least, so rows printed later by print_row line up.
    void print(const std::vector<const json*>& lines, bool follow);
    /// Prints one more row with the columns of print(). The date joins the time once the rows
    /// span two days.
    void print_row(const json& line);

  private:
    struct row {
        std::vector<std::string> cells; ///< aligned columns
        std::string tail;               ///< DETAILS: after the cells, cut to fit
    };
    row make_row(const json& line) const;
    void print_line(const row& r) const;
    void widen(const row& r);

    bool calls_;
    std::size_t width_;
    bool dated_ = false;     ///< the time column shows the date too
    std::optional<int> day_; ///< the local day of the rows so far (year * 1000 + yday)
    std::vector<std::size_t> widths_;
};

} // namespace meith::cli
