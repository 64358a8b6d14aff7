// revision_memory: HOME/mcp-revisions.json (see the header).
#include "sources/revision_memory.hpp"

#include "config/private_file.hpp"
#include "protocol/json_writer.hpp"
#include "sandbox/confinement.hpp"

#include <cerrno>
#include <cstring>
#include <map>
#include <utility>

#include <simdjson.h>
#include <spdlog/spdlog.h>

namespace meith::sources {

namespace fs = std::filesystem;

namespace {

/// {"sources":{"NAME":{"key":"…","revision":"…"}}}; `key` ties an entry to its command and cwd.
using memory = std::map<std::string, std::pair<std::string, std::string>>;

fs::path memory_file() {
    const fs::path& home = sandbox::confinement_home();
    return home.empty() ? fs::path() : home / "mcp-revisions.json";
}

std::string memory_key(const config::source_config& cfg) {
    std::string key;
    for (const auto& a : cfg.command)
        key += a + '\n';
    return key + cfg.cwd.string();
}

memory read_memory() {
    memory m;
    const fs::path file = memory_file();
    if (file.empty()) return m;
    const auto r = config::read_private_file(file, std::size_t{1} << 20);
    if (r.st != config::private_file_read::status::ok) return m;
    simdjson::dom::parser parser;
    simdjson::dom::object sources;
    if (parser.parse(r.text).get_object()["sources"].get_object().get(sources) != simdjson::SUCCESS)
        return m;
    for (auto [name, entry] : sources) {
        std::string_view key, revision;
        if (entry["key"].get_string().get(key) == simdjson::SUCCESS &&
            entry["revision"].get_string().get(revision) == simdjson::SUCCESS)
            m[std::string(name)] = {std::string(key), std::string(revision)};
    }
    return m;
}

} // namespace

std::optional<std::string> remembered_revision(const config::source_config& cfg) {
    const memory m = read_memory();
    const auto it = m.find(cfg.name);
    if (it == m.end() || it->second.first != memory_key(cfg)) return std::nullopt;
    return it->second.second;
}

void remember_revision(const config::source_config& cfg, const std::string& revision) {
    const fs::path file = memory_file();
    if (file.empty()) return;
    memory m = read_memory();
    auto& entry = m[cfg.name];
    const std::string key = memory_key(cfg);
    if (entry.first == key && entry.second == revision) return;
    entry = {key, revision};
    std::string out = "{";
    protocol::json_members(out).key("sources").push_back('{');
    bool first = true;
    for (const auto& [name, e] : m) {
        if (!first) out.push_back(',');
        first = false;
        protocol::append_json_string(out, name);
        out += ":{";
        protocol::json_members(out).string("key", e.first).string("revision", e.second);
        out.push_back('}');
    }
    out += "}}\n";
    if (!config::write_private_file(file, out))
        spdlog::warn("cannot save {}: {}", file.string(), std::strerror(errno));
}

} // namespace meith::sources
