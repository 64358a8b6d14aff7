#include "permissions/grants.hpp"

#include <algorithm>

namespace meith::permissions {

std::string_view to_string(grant_end e) {
    switch (e) {
    case grant_end::revoked:
        return "revoked";
    case grant_end::used_up:
        return "used_up";
    case grant_end::expired:
        return "expired";
    case grant_end::session_ended:
        return "session_ended";
    }
    return "revoked";
}

const grant& grant_store::add(grant g) {
    grants_.push_back(std::move(g));
    return grants_.back();
}

std::optional<grant> grant_store::remove(std::string_view id) {
    auto it =
        std::find_if(grants_.begin(), grants_.end(), [&](const grant& g) { return g.id == id; });
    if (it == grants_.end()) return std::nullopt;
    grant g = std::move(*it);
    grants_.erase(it);
    return g;
}

const grant* grant_store::match(std::string_view tool, capability_set needed, caller who,
                                std::string_view session, wall_clock::time_point now) const {
    for (const auto& g : grants_) {
        if (g.expires_at && *g.expires_at <= now) continue;
        if (g.uses_left && *g.uses_left == 0) continue;
        if (g.who && *g.who != who) continue;
        if (g.session_id && *g.session_id != session) continue;
        if (g.tool && !glob_match(*g.tool, tool)) continue;
        if ((needed & ~g.capabilities) != 0) continue;
        return &g;
    }
    return nullptr;
}

std::optional<grant> grant_store::use(std::string_view id) {
    auto it =
        std::find_if(grants_.begin(), grants_.end(), [&](const grant& g) { return g.id == id; });
    if (it == grants_.end() || !it->uses_left) return std::nullopt;
    if (*it->uses_left > 0) --*it->uses_left;
    if (*it->uses_left > 0) return std::nullopt;
    grant g = std::move(*it);
    grants_.erase(it);
    return g;
}

namespace {

template <class Pred>
std::vector<grant> take_if(std::vector<grant>& grants, Pred pred) {
    std::vector<grant> out;
    auto keep = std::stable_partition(grants.begin(), grants.end(),
                                      [&](const grant& g) { return !pred(g); });
    std::move(keep, grants.end(), std::back_inserter(out));
    grants.erase(keep, grants.end());
    return out;
}

} // namespace

std::vector<grant> grant_store::expire(wall_clock::time_point now) {
    return take_if(grants_, [&](const grant& g) { return g.expires_at && *g.expires_at <= now; });
}

std::vector<grant> grant_store::remove_session(std::string_view session) {
    return take_if(grants_,
                   [&](const grant& g) { return g.session_id && *g.session_id == session; });
}

std::optional<wall_clock::time_point> grant_store::next_expiry() const {
    std::optional<wall_clock::time_point> next;
    for (const auto& g : grants_)
        if (g.expires_at && (!next || *g.expires_at < *next)) next = g.expires_at;
    return next;
}

const grant* grant_store::find(std::string_view id) const {
    for (const auto& g : grants_)
        if (g.id == id) return &g;
    return nullptr;
}

} // namespace meith::permissions
