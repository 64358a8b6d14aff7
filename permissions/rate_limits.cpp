// rate_limits: token buckets per [[limits.rates]] rule (see the header).
#include "permissions/rate_limits.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace meith::permissions {

void rate_limiter::configure(const std::vector<config::rate_limit_config>& rules) {
    rules_.clear();
    for (const auto& cfg : rules) {
        rule r;
        r.cfg = cfg;
        if (cfg.caller) r.who = cfg.caller == "cli" ? caller::cli : caller::plugin;
        if (cfg.capability)
            if (auto c = capability_from_string(*cfg.capability)) r.capability = bit(*c);
        r.refill_per_s = static_cast<double>(cfg.calls) / static_cast<double>(cfg.per_s);
        rules_.push_back(std::move(r));
    }
}

std::optional<rate_limiter::refusal> rate_limiter::take(caller who, std::string_view session,
                                                        std::string_view tool, capability_set caps,
                                                        clock::time_point now) {
    if (rules_.empty()) return std::nullopt;
    // Two passes: refill and check every bucket first, so a refused call takes no token.
    std::vector<bucket*> taking;
    for (std::size_t i = 0; i < rules_.size(); ++i) {
        rule& r = rules_[i];
        if (r.who && *r.who != who) continue;
        if (r.capability != 0 && (caps & r.capability) == 0) continue;
        if (!glob_match(r.cfg.tool, tool)) continue;
        const std::string key =
            r.cfg.per_session ? std::string(session) : std::string(to_string(who));
        auto [it, fresh] = r.buckets.try_emplace(key);
        bucket& b = it->second;
        const double capacity = static_cast<double>(r.cfg.calls);
        if (fresh) {
            b.tokens = capacity;
        } else {
            const double elapsed = std::chrono::duration<double>(now - b.last).count();
            b.tokens = std::min(capacity, b.tokens + std::max(0.0, elapsed) * r.refill_per_s);
        }
        b.last = now;
        if (b.tokens < 1.0) {
            const auto wait_ms =
                static_cast<std::uint64_t>(std::ceil((1.0 - b.tokens) / r.refill_per_s * 1000.0));
            std::string what =
                r.cfg.tool == "*" ? std::string("any tool") : fmt::format("tools '{}'", r.cfg.tool);
            if (r.cfg.capability) what += fmt::format(" with '{}'", *r.cfg.capability);
            return refusal{i,
                           fmt::format("rate limit: at most {} call(s) per {} s to {} for {} {} "
                                       "([[limits.rates]] #{}); try again in {:.1f} s",
                                       r.cfg.calls, r.cfg.per_s, what,
                                       r.cfg.per_session ? "session" : "caller",
                                       r.cfg.per_session ? std::string(session)
                                                         : "'" + std::string(to_string(who)) + "'",
                                       i + 1, static_cast<double>(wait_ms) / 1000.0),
                           wait_ms};
        }
        taking.push_back(&b);
    }
    for (bucket* b : taking)
        b->tokens -= 1.0;
    return std::nullopt;
}

void rate_limiter::end_session(std::string_view session) {
    for (auto& r : rules_)
        if (r.cfg.per_session) r.buckets.erase(std::string(session));
}

} // namespace meith::permissions
