// source_memory: a remembered fact per source, in an owner-only JSON file (see the header).
#include "config/source_memory.hpp"

#include "config/private_file.hpp"

#include <nlohmann/json.hpp>

namespace meith::config {

namespace {

std::string memory_key(const source_config& cfg) {
    std::string key;
    for (const auto& a : cfg.command)
        key += a + '\n';
    return key + cfg.cwd.string();
}

/// The file's `sources` object; empty when the file is missing, untrusted or malformed.
nlohmann::json read_sources(const std::filesystem::path& file) {
    if (file.empty()) return nlohmann::json::object();
    const auto r = read_private_file(file, std::size_t{1} << 20);
    if (r.st != private_file_read::status::ok) return nlohmann::json::object();
    auto doc = nlohmann::json::parse(r.text, nullptr, false);
    if (!doc.is_object() || !doc.contains("sources") || !doc["sources"].is_object())
        return nlohmann::json::object();
    return doc["sources"];
}

} // namespace

std::optional<std::string> remembered(const std::filesystem::path& file, std::string_view field,
                                      const source_config& cfg) {
    const nlohmann::json sources = read_sources(file);
    const auto it = sources.find(cfg.name);
    if (it == sources.end() || !it->is_object()) return std::nullopt;
    const auto key = it->find("key");
    const auto value = it->find(std::string(field));
    if (key == it->end() || !key->is_string() || *key != memory_key(cfg) || value == it->end())
        return std::nullopt;
    return value->dump();
}

bool remember(const std::filesystem::path& file, std::string_view field, const source_config& cfg,
              const std::string& value_json) {
    if (file.empty()) return true;
    nlohmann::json sources = read_sources(file);
    const auto value = nlohmann::json::parse(value_json, nullptr, false);
    nlohmann::json entry = {{"key", memory_key(cfg)}, {std::string(field), value}};
    if (sources.contains(cfg.name) && sources[cfg.name] == entry) return true;
    sources[cfg.name] = std::move(entry);
    const std::string out = nlohmann::json{{"sources", sources}}.dump() + "\n";
    return write_private_file(file, out);
}

} // namespace meith::config
