#include "sources/declared_capabilities.hpp"

#include "permissions/policy.hpp"

namespace meith::sources {

const std::vector<std::string>* declared_capabilities(const config::source_config& cfg,
                                                      std::string_view name) {
    if (cfg.capabilities.empty()) return nullptr;
    if (auto it = cfg.capabilities.find(std::string(name)); it != cfg.capabilities.end())
        return &it->second;
    const std::vector<std::string>* best = nullptr;
    std::size_t best_length = 0;
    for (const auto& [pattern, caps] : cfg.capabilities) {
        if (pattern.find_first_of("*?[") == std::string::npos) continue;
        if (pattern.size() > best_length && permissions::glob_match(pattern, name)) {
            best = &caps;
            best_length = pattern.size();
        }
    }
    return best;
}

} // namespace meith::sources
