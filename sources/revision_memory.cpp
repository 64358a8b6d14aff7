// revision_memory: HOME/mcp-revisions.json (see the header), a config::source_memory file.
#include "sources/revision_memory.hpp"

#include "config/source_memory.hpp"
#include "sandbox/confinement.hpp"

#include <cerrno>
#include <cstring>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

namespace meith::sources {

namespace {

std::filesystem::path memory_file() {
    const std::filesystem::path& home = sandbox::confinement_home();
    return home.empty() ? std::filesystem::path() : home / "mcp-revisions.json";
}

} // namespace

std::optional<std::string> remembered_revision(const config::source_config& cfg) {
    const auto text = config::remembered(memory_file(), "revision", cfg);
    if (!text) return std::nullopt;
    const auto value = nlohmann::json::parse(*text, nullptr, false);
    if (!value.is_string()) return std::nullopt;
    return value.get<std::string>();
}

void remember_revision(const config::source_config& cfg, const std::string& revision) {
    if (!config::remember(memory_file(), "revision", cfg, nlohmann::json(revision).dump()))
        spdlog::warn("cannot save {}: {}", memory_file().string(), std::strerror(errno));
}

} // namespace meith::sources
