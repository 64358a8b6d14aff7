// What a source first starts with: the capabilities it declares ahead, and the union its tools
// needed when it last settled, remembered in HOME/sandbox-memory.json (sandbox/confinement.hpp:
// started_with, remember_settled, declared_ahead, union_of).
#include "sandbox/confinement.hpp"

#include "config/source_memory.hpp"

#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <utility>

#include <spdlog/spdlog.h>

namespace meith::sandbox {

namespace fs = std::filesystem;
using permissions::capability;
using permissions::capability_set;

capability_set union_of(const std::vector<std::vector<std::string>>& tool_caps) {
    capability_set u = 0;
    for (const auto& caps : tool_caps)
        u |= permissions::capability_set_from(caps);
    return u;
}

namespace {

/// HOME/sandbox-memory.json: {"sources":{"NAME":{"key":"…","capabilities":N}}}, N the
/// capability bit set (a config::source_memory file).
fs::path memory_file() {
    return confinement_home().empty() ? fs::path() : confinement_home() / "sandbox-memory.json";
}

} // namespace

capability_set started_with(const config::source_config& cfg) {
    const capability_set ahead = declared_ahead(cfg);
    const auto text = config::remembered(memory_file(), "capabilities", cfg);
    std::uint64_t caps = 0;
    if (!text || std::from_chars(text->data(), text->data() + text->size(), caps).ec != std::errc{})
        return ahead;
    return ahead | static_cast<capability_set>(caps);
}

void remember_settled(const config::source_config& cfg, capability_set settled) {
    if (!config::remember(memory_file(), "capabilities", cfg, std::to_string(settled)))
        spdlog::warn("cannot save {}: {}", memory_file().string(), std::strerror(errno));
}

capability_set declared_ahead(const config::source_config& cfg) {
    capability_set u = 0;
    for (const auto& [tool, caps] : cfg.capabilities)
        u |= permissions::capability_set_from(caps);
    return u ? u : bit(capability::read_only);
}

} // namespace meith::sandbox
