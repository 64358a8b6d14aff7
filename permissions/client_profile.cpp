// client_profile: see client_profile.hpp (docs/protocol.md §23).
#include "permissions/client_profile.hpp"

#include <fmt/format.h>

namespace meith::permissions {

client_profile::client_profile(config::client_config cfg) : cfg_(std::move(cfg)) {
    if (cfg_.caller) caller_ = caller_from_claim(*cfg_.caller);
    for (const auto& g : cfg_.tools) {
        if (g.starts_with('!'))
            exclude_.push_back(std::string_view(g).substr(1));
        else
            include_.push_back(g);
    }
    for (const auto& [real, ov] : cfg_.overrides)
        if (ov.name) renamed_.emplace(*ov.name, real);
    if (cfg_.sources)
        for (const auto& g : *cfg_.sources) {
            if (g.starts_with('!'))
                source_out_.push_back(std::string_view(g).substr(1));
            else
                source_in_.push_back(g);
        }
}

client_profile client_profile::removed(std::string name) {
    config::client_config cfg;
    cfg.name = std::move(name);
    client_profile p(std::move(cfg));
    p.removed_ = true;
    p.caller_ = caller::plugin; // the least trusted
    return p;
}

std::optional<std::string> client_profile::hidden(std::string_view real_name) const {
    if (removed_)
        return fmt::format("client profile '{}' is no longer in meithd's config (a reload "
                           "removed it); reconnect naming a profile that is there",
                           cfg_.name);
    for (auto g : exclude_)
        if (glob_match(g, real_name))
            return fmt::format("client profile '{}' leaves it out ('!{}' in [clients.{}] tools)",
                               cfg_.name, g, cfg_.name);
    if (!include_.empty()) {
        bool in = false;
        for (auto g : include_)
            if (glob_match(g, real_name)) {
                in = true;
                break;
            }
        if (!in)
            return fmt::format("client profile '{}' does not include it (it matches none of "
                               "[clients.{}] tools = [{}])",
                               cfg_.name, cfg_.name, fmt::join(cfg_.tools, ", "));
    }
    // A tool whose own name another tool's override took is not reachable by that name.
    if (auto it = renamed_.find(real_name); it != renamed_.end() && it->second != real_name)
        return fmt::format("client profile '{}' shows '{}' under this name ([clients.{}] "
                           "overrides.{})",
                           cfg_.name, it->second, cfg_.name, it->second);
    return std::nullopt;
}

std::optional<std::string> client_profile::source_hidden(std::string_view source,
                                                         bool shows_a_tool) const {
    if (removed_)
        return fmt::format("client profile '{}' is no longer in meithd's config (a reload "
                           "removed it); reconnect naming a profile that is there",
                           cfg_.name);
    if (!cfg_.sources) {
        if (shows_a_tool) return std::nullopt;
        return fmt::format("client profile '{}' shows none of its tools (name the source in "
                           "[clients.{}] sources to reach its resources and prompts)",
                           cfg_.name, cfg_.name);
    }
    for (auto g : source_out_)
        if (glob_match(g, source))
            return fmt::format("client profile '{}' leaves it out ('!{}' in [clients.{}] sources)",
                               cfg_.name, g, cfg_.name);
    if (source_in_.empty()) return std::nullopt;
    for (auto g : source_in_)
        if (glob_match(g, source)) return std::nullopt;
    return fmt::format("client profile '{}' does not include it (it matches none of [clients.{}] "
                       "sources = [{}])",
                       cfg_.name, cfg_.name, fmt::join(*cfg_.sources, ", "));
}

std::string_view client_profile::real_name(std::string_view shown) const {
    if (auto it = renamed_.find(shown); it != renamed_.end()) return it->second;
    return shown;
}

const config::tool_override_config* client_profile::override_of(std::string_view real) const {
    auto it = cfg_.overrides.find(real);
    return it == cfg_.overrides.end() ? nullptr : &it->second;
}

std::string_view client_profile::shown_name(std::string_view real) const {
    const auto* ov = override_of(real);
    return ov && ov->name ? std::string_view(*ov->name) : real;
}

} // namespace meith::permissions
