// grants: capabilities a person granted beyond the static policy (PROTOCOL.md §12,
// docs/protocol.md §14).
//
// A grant lets calls through that the policy would ask about or merely not allow (never an
// explicit deny): those of one caller and/or one session, to tools matching a glob, whose
// capabilities not allowed outright (`decision::needed`) are all among the grant's. It may
// count uses down and expire. The store is plain data: who audits, persists and times
// expiry is the registry's `approvals` (approvals/approvals.hpp). I/O-thread only.
#pragma once

#include "permissions/policy.hpp"

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace meith::permissions {

using wall_clock = std::chrono::system_clock;

struct grant {
    std::string id;                        ///< "g_" + 16 hex digits
    std::optional<caller> who;             ///< absent: every caller
    std::optional<std::string> session_id; ///< absent: every session
    std::optional<std::string> tool;       ///< glob (fnmatch(3) syntax); absent: every tool
    capability_set capabilities = 0;
    std::optional<std::uint64_t> uses_left;           ///< absent: unlimited
    std::optional<wall_clock::time_point> expires_at; ///< absent: never
    wall_clock::time_point created_at = wall_clock::now();
    std::string approval_id; ///< the approval (allow_session) that made it; "" for a grant frame
};

/// Why a grant ended, for the audit line.
enum class grant_end { revoked, used_up, expired, session_ended };
std::string_view to_string(grant_end e);

class grant_store {
  public:
    /// Adds `g` (its id set by the caller) and returns it.
    const grant& add(grant g);

    /// Removes and returns the grant `id`, if any.
    std::optional<grant> remove(std::string_view id);

    /// The oldest live grant covering a call of `tool` by `who` in `session` whose capabilities
    /// not allowed outright are `needed`; null when none. Does not count a use.
    const grant* match(std::string_view tool, capability_set needed, caller who,
                       std::string_view session, wall_clock::time_point now) const;

    /// Counts one use of grant `id`. Returns the grant when that was its last use (it is then
    /// removed); nullopt otherwise (unlimited, uses left, or no such grant).
    std::optional<grant> use(std::string_view id);

    /// Removes and returns the grants expired at `now`.
    std::vector<grant> expire(wall_clock::time_point now);

    /// Removes and returns the grants bound to `session`.
    std::vector<grant> remove_session(std::string_view session);

    /// The earliest expiry among the grants, if any expires.
    std::optional<wall_clock::time_point> next_expiry() const;

    const std::vector<grant>& all() const { return grants_; }
    const grant* find(std::string_view id) const;

  private:
    std::vector<grant> grants_; ///< in creation order (match picks the oldest)
};

} // namespace meith::permissions
