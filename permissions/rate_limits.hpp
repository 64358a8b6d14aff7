// rate_limits: `[[limits.rates]]` (docs/protocol.md §21), token buckets against runaway agent
// loops. Each rule keeps a bucket of `calls` tokens per caller (or per session), refilled
// evenly over `per_s` seconds; a call allowed by the policy takes a token from the bucket of
// every rule it falls under, or, when one is empty, is refused with RATE_LIMITED and takes
// none. Applied after the policy decision (a denied call never spends a token). I/O-thread
// only; the clock is passed in (unit tests drive it).
#pragma once

#include "config/config.hpp"
#include "permissions/policy.hpp"

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace meith::permissions {

class rate_limiter {
  public:
    using clock = std::chrono::steady_clock;

    /// Why a call was refused: the rule (its index in [[limits.rates]]), a message saying
    /// which limit and when to retry, and that wait in milliseconds.
    struct refusal {
        std::size_t rule = 0;
        std::string message;
        std::uint64_t retry_after_ms = 0;
    };

    /// Replaces the rules; every bucket starts full again (a reload).
    void configure(const std::vector<config::rate_limit_config>& rules);
    bool empty() const { return rules_.empty(); }

    /// Takes a token for a call of `tool` (with `caps`) by `who` in `session` at `now` from
    /// every bucket it falls under; a refusal (nothing taken) when one is empty.
    std::optional<refusal> take(caller who, std::string_view session, std::string_view tool,
                                capability_set caps, clock::time_point now);

    /// Drops `session`'s buckets (its connection closed).
    void end_session(std::string_view session);

  private:
    struct bucket {
        double tokens = 0;
        clock::time_point last;
    };
    struct rule {
        config::rate_limit_config cfg;
        std::optional<caller> who;
        capability_set capability = 0; ///< 0: any tool
        double refill_per_s = 0;
        std::unordered_map<std::string, bucket> buckets; ///< by caller name or session id
    };
    std::vector<rule> rules_;
};

} // namespace meith::permissions
