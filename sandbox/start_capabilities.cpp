// What a source first starts with: the capabilities it declares ahead, and the union its tools
// needed when it last settled, remembered in HOME/sandbox-memory.json (sandbox/confinement.hpp:
// started_with, remember_settled, declared_ahead, union_of).
#include "sandbox/confinement.hpp"

#include "config/private_file.hpp"
#include "protocol/json_writer.hpp"

#include <filesystem>
#include <map>
#include <string>
#include <utility>

#include <simdjson.h>
#include <spdlog/spdlog.h>

namespace meith::sandbox {

namespace fs = std::filesystem;
using permissions::capability;
using permissions::capability_set;
using protocol::append_json_string;

capability_set union_of(const std::vector<std::vector<std::string>>& tool_caps) {
    capability_set u = 0;
    for (const auto& caps : tool_caps)
        u |= permissions::capability_set_from(caps);
    return u;
}

namespace {

/// HOME/sandbox-memory.json: {"sources":{"NAME":{"key":"…","capabilities":N}}}, N the
/// capability bit set. `key` ties an entry to the command and cwd it was learnt from.
fs::path memory_file() {
    return confinement_home().empty() ? fs::path() : confinement_home() / "sandbox-memory.json";
}

std::string memory_key(const config::source_config& cfg) {
    std::string key;
    for (const auto& a : cfg.command) {
        key += a;
        key.push_back('\n');
    }
    return key + cfg.cwd.string();
}

using memory = std::map<std::string, std::pair<std::string, capability_set>>;

memory read_memory() {
    memory m;
    const fs::path file = memory_file();
    if (file.empty()) return m;
    const config::private_file_read r = config::read_private_file(file, std::size_t{1} << 20);
    if (r.st != config::private_file_read::status::ok) return m;
    const std::string& text = r.text;
    simdjson::dom::parser parser;
    simdjson::dom::object sources;
    if (parser.parse(text).get_object()["sources"].get_object().get(sources) != simdjson::SUCCESS)
        return m;
    for (auto [name, entry] : sources) {
        std::string_view key;
        std::uint64_t caps = 0;
        if (entry["key"].get_string().get(key) == simdjson::SUCCESS &&
            entry["capabilities"].get_uint64().get(caps) == simdjson::SUCCESS)
            m[std::string(name)] = {std::string(key), static_cast<capability_set>(caps)};
    }
    return m;
}

void write_memory(const memory& m) {
    const fs::path file = memory_file();
    std::string out = "{";
    protocol::json_members(out).key("sources").push_back('{');
    bool first = true;
    for (const auto& [name, entry] : m) {
        if (!first) out.push_back(',');
        first = false;
        protocol::append_json_string(out, name); // a source's name: a key of its own, escaped
        out += ":{";
        protocol::json_members(out).string("key", entry.first).number("capabilities", entry.second);
        out.push_back('}');
    }
    out += "}}\n";
    if (!config::write_private_file(file, out))
        spdlog::warn("cannot save {}: {}", file.string(), std::strerror(errno));
}

} // namespace

capability_set started_with(const config::source_config& cfg) {
    const capability_set ahead = declared_ahead(cfg);
    const memory m = read_memory();
    const auto it = m.find(cfg.name);
    if (it == m.end() || it->second.first != memory_key(cfg)) return ahead;
    return ahead | it->second.second;
}

void remember_settled(const config::source_config& cfg, capability_set settled) {
    if (memory_file().empty()) return;
    memory m = read_memory();
    auto& entry = m[cfg.name];
    const std::string key = memory_key(cfg);
    if (entry.first == key && entry.second == settled) return;
    entry = {key, settled};
    write_memory(m);
}

capability_set declared_ahead(const config::source_config& cfg) {
    capability_set u = 0;
    for (const auto& [tool, caps] : cfg.capabilities)
        u |= permissions::capability_set_from(caps);
    return u ? u : bit(capability::read_only);
}

} // namespace meith::sandbox
