// clients_config: `[clients.NAME]` tables, the client profiles (docs/protocol.md §23).
#include "config/config.hpp"
#include "config/paths.hpp"
#include "config/toml_checker.hpp"

#include <algorithm>
#include <array>
#include <map>
#include <string_view>

#include <fmt/format.h>
#include <toml++/toml.h>

namespace meith::config::detail {

namespace {

using namespace std::string_view_literals;

constexpr std::array client_caller_names{"cli"sv, "plugin"sv};

/// A profile's name: what `meith mcp --client NAME` and a hello's `clientInfo.client` give.
bool valid_profile_name(std::string_view n) {
    if (n.empty() || n.size() > 64) return false;
    return std::all_of(n.begin(), n.end(), [](char ch) {
        return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
               ch == '_' || ch == '-' || ch == '.';
    });
}

/// A tool name as MCP clients take it (MCP 2025-11-25 "Tool names": 1-128 characters of
/// letters, digits, '_', '-' and '.').
bool valid_tool_name(std::string_view n) {
    if (n.empty() || n.size() > 128) return false;
    return std::all_of(n.begin(), n.end(), [](char ch) {
        return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
               ch == '_' || ch == '-' || ch == '.';
    });
}

void parse_overrides(checker& c, const scope& s, const toml::table& t, client_config& out) {
    std::map<std::string, std::string> shown; // new name -> the tool it renames
    for (auto&& [k, v] : t) {
        const std::string tool(k.str());
        const auto* o = v.as_table();
        if (o == nullptr) {
            c.type_error(v, fmt::format("'overrides.{}' in {}", tool, s.name), "a table");
            continue;
        }
        const scope os{*o, fmt::format("{} overrides.{}", s.name, tool)};
        for (auto&& [ok, ov] : *o) {
            const std::string_view key = ok.str();
            if (key == "capabilities" || key == "annotations" || key == "inputSchema" ||
                key == "input_schema")
                c.fail(ok.source().begin.line != 0 ? ok.source() : ov.source(),
                       fmt::format("'{}' in {} cannot be overridden: a profile may rename a "
                                   "tool and reword its description, never make it look safer "
                                   "(only 'name' and 'description')",
                                   key, os.name));
        }
        c.check_keys(os, {"name", "description", "capabilities", "annotations", "inputSchema",
                          "input_schema"});
        tool_override_config ov;
        if (auto n = c.read_string(os, "name", true)) {
            if (!valid_tool_name(*n)) {
                c.fail(o->get("name")->source(),
                       fmt::format("'name' in {} must be 1-128 letters, digits, '_', '-' or '.' "
                                   "(an MCP tool name), not \"{}\"",
                                   os.name, *n));
            } else if (auto [it, fresh] = shown.emplace(*n, tool); !fresh) {
                c.fail(o->get("name")->source(),
                       fmt::format("'name' in {}: \"{}\" is already the name given to '{}'",
                                   os.name, *n, it->second));
            }
            ov.name = std::move(n);
        }
        if (auto d = c.read_string(os, "description", false)) ov.description = std::move(d);
        out.overrides.emplace(tool, std::move(ov));
    }
}

} // namespace

void parse_clients(checker& c, const scope& root, std::vector<client_config>& out) {
    const toml::table* all = c.read_table(root, "clients");
    if (all == nullptr) return;
    std::map<std::string, std::string> agent_owner; // MCP client name -> profile
    for (auto&& [k, v] : *all) {
        client_config p;
        p.name = std::string(k.str());
        const auto* t = v.as_table();
        if (t == nullptr) {
            c.type_error(v, fmt::format("'clients.{}'", p.name), "a table ([clients.NAME])");
            continue;
        }
        const scope s{*t, fmt::format("[clients.{}]", p.name)};
        if (!valid_profile_name(p.name))
            c.fail(k.source().begin.line != 0 ? k.source() : v.source(),
                   fmt::format("client profile name \"{}\" may only use letters, digits, '_', "
                               "'.' and '-' (at most 64)",
                               p.name));
        c.check_keys(s, {"tools", "caller", "search", "pinned", "agents", "overrides", "sources"});
        if (auto globs = c.read_string_array(s, "sources", false, true)) {
            for (const auto& g : *globs)
                if (g == "!" || g.empty())
                    c.fail(t->get("sources")->source(),
                           fmt::format("'sources' in {}: \"{}\" names no source (a glob, or '!' "
                                       "and a glob to leave sources out)",
                                       s.name, g));
            p.sources = std::move(*globs);
        }
        if (auto globs = c.read_string_array(s, "tools", false, true)) p.tools = std::move(*globs);
        for (const auto& g : p.tools)
            if (g == "!" || g.empty())
                c.fail(t->get("tools")->source(),
                       fmt::format("'tools' in {}: \"{}\" names no tool (a glob, or '!' and a "
                                   "glob to leave tools out)",
                                   s.name, g));
        if (auto i = c.read_enum(s, "caller", client_caller_names))
            p.caller = std::string(client_caller_names[*i]);
        if (auto b = c.read_bool(s, "search")) p.search = *b;
        if (auto pins = c.read_string_array(s, "pinned", false, true)) p.pinned = std::move(*pins);
        if (auto agents = c.read_string_array(s, "agents", false, true)) {
            for (const auto& a : *agents)
                if (auto [it, fresh] = agent_owner.emplace(a, p.name); !fresh)
                    c.fail(t->get("agents")->source(),
                           fmt::format("'agents' in {}: \"{}\" already selects [clients.{}]; an "
                                       "MCP client's name may select one profile",
                                       s.name, a, it->second));
            p.agents = std::move(*agents);
        }
        if (const auto* o = c.read_table(s, "overrides")) parse_overrides(c, s, *o, p);
        out.push_back(std::move(p));
    }
}

} // namespace meith::config::detail
