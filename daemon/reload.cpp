#include "daemon/reload.hpp"

#include "config/config_edit.hpp"
#include "protocol/json_writer.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace meith::daemon {

namespace {

const config::source_config* named(const std::vector<config::source_config>& v,
                                   const std::string& name) {
    auto it = std::find_if(v.begin(), v.end(), [&](const auto& s) { return s.name == name; });
    return it == v.end() ? nullptr : &*it;
}

} // namespace

std::vector<std::string> reload_plan::changed() const {
    std::vector<std::string> out;
    if (limits) out.emplace_back("limits");
    if (tools) out.emplace_back("tools");
    if (permissions) out.emplace_back("permissions");
    if (clients) out.emplace_back("clients");
    if (!added.empty() || !removed.empty() || !replaced.empty()) out.emplace_back("sources");
    return out;
}

reload_plan plan_reload(const config::config& running, const config::config& next) {
    reload_plan p;
    if (next.socket_path != running.socket_path) p.needs_restart.emplace_back("socket");
    if (!(next.audit == running.audit)) p.needs_restart.emplace_back("audit");
    if (!(next.hooks == running.hooks)) p.needs_restart.emplace_back("hooks");
    p.limits = !(next.limits == running.limits);
    p.tools = !(next.tools == running.tools);
    auto permissions = next.permissions;
    if (permissions.persist_grants != running.permissions.persist_grants) {
        p.needs_restart.emplace_back("permissions.persist_grants");
        permissions.persist_grants = running.permissions.persist_grants;
    }
    p.permissions = !(permissions == running.permissions);
    p.clients = !(next.clients == running.clients);
    // A source with `enabled = false` is configured but not run: as if absent.
    const auto running_one = [](const std::vector<config::source_config>& v,
                                const std::string& name) -> const config::source_config* {
        const auto* s = named(v, name);
        return s != nullptr && s->enabled ? s : nullptr;
    };
    for (const auto& old : running.sources)
        if (old.enabled && !running_one(next.sources, old.name)) p.removed.push_back(old.name);
    for (const auto& src : next.sources) {
        if (!src.enabled) continue;
        const auto* old = running_one(running.sources, src.name);
        if (!old)
            p.added.push_back(src.name);
        else if (*old == src)
            p.kept.push_back(src.name);
        else
            p.replaced.push_back(src.name);
    }
    return p;
}

void append_reload_reply(std::string& out, const std::optional<std::filesystem::path>& file,
                         const reload_plan& plan, const std::vector<std::string>& restarted) {
    protocol::json_members m(out);
    m.boolean("ok", true);
    m.string_or_null("file", file ? std::optional<std::string_view>(file->string()) : std::nullopt);
    protocol::append_json_string_array(m.key("changed"), plan.changed());
    m.key("sources").push_back('{');
    protocol::append_json_string_array(m.key("added"), plan.added);
    protocol::append_json_string_array(m.key("removed"), plan.removed);
    protocol::append_json_string_array(m.key("replaced"), plan.replaced);
    protocol::append_json_string_array(m.key("restarted"), restarted);
    out += '}';
    protocol::append_json_string_array(m.key("needsRestart"), plan.needs_restart);
}

std::vector<std::string> apply_reload(const reload_plan& plan, config::config& cfg,
                                      config::config&& next, registry::registry& reg,
                                      const source_maker& make_source) {
    if (plan.limits) {
        cfg.limits = next.limits;
        reg.set_rate_limits(cfg.limits.rates);
    }
    if (plan.tools) cfg.tools = next.tools;
    if (plan.permissions) {
        const bool persist = cfg.permissions.persist_grants; // applies at the next start
        cfg.permissions = next.permissions;
        cfg.permissions.persist_grants = persist;
        reg.set_permissions(cfg.permissions);
    }
    if (plan.clients) {
        cfg.clients = next.clients;
        reg.set_clients(cfg.clients);
    }
    const auto has = [](const std::vector<std::string>& v, const std::string& name) {
        return std::find(v.begin(), v.end(), name) != v.end();
    };
    for (const auto& name : plan.removed)
        reg.remove_source(name);
    std::vector<std::string> restarted;
    for (const auto& src : next.sources) {
        if (!src.enabled) continue;
        if (has(plan.kept, src.name)) {
            // Unchanged; a source marked failed gets a fresh start (docs/protocol.md §7).
            if (reg.source_state_of(src.name) == tools::source_state::failed) {
                reg.restart_source(src.name);
                restarted.push_back(src.name);
            }
            continue;
        }
        if (has(plan.replaced, src.name)) reg.remove_source(src.name);
        reg.add_live_source(make_source(src));
    }
    cfg.sources = std::move(next.sources); // every source owns a copy of its table
    return restarted;
}

std::optional<std::string> keep_egress_rule(const std::optional<std::filesystem::path>& file,
                                            config::config& cfg, registry::registry& reg,
                                            std::string_view source, std::string_view rule) {
    if (!file) return "meithd runs on its built-in defaults (no config file)";
    if (auto error = config::add_network_allow_rule(*file, source, rule)) return error;
    for (auto& s : cfg.sources)
        if (s.name == source && s.sandbox_paths.network) {
            auto& allow = s.sandbox_paths.network->allow;
            if (std::find(allow.begin(), allow.end(), rule) == allow.end())
                allow.emplace_back(rule);
        }
    std::string m;
    protocol::json_members(m)
        .string("source", source)
        .string("rule", rule)
        .string("file", file->string());
    reg.audit_trail().event("egress_rule_added", m);
    spdlog::info("source '{}': \"{}\" added to network.allow in {} (allowed always at "
                 "`meith approve`)",
                 source, rule, file->string());
    return std::nullopt;
}

} // namespace meith::daemon
