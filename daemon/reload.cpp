#include "daemon/reload.hpp"

#include "protocol/json_writer.hpp"

#include <algorithm>

namespace meith::daemon {

namespace {

const config::source_config* named(const std::vector<config::source_config>& v,
                                   const std::string& name) {
    auto it = std::find_if(v.begin(), v.end(), [&](const auto& s) { return s.name == name; });
    return it == v.end() ? nullptr : &*it;
}

void append_list(std::string& out, std::string_view key, const std::vector<std::string>& v) {
    protocol::append_json_string(out, key);
    out += ":[";
    for (std::size_t i = 0; i < v.size(); ++i) {
        if (i) out += ',';
        protocol::append_json_string(out, v[i]);
    }
    out += ']';
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
    for (const auto& old : running.sources)
        if (!named(next.sources, old.name)) p.removed.push_back(old.name);
    for (const auto& src : next.sources) {
        const auto* old = named(running.sources, src.name);
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
    out += R"(true,"file":)";
    if (file)
        protocol::append_json_string(out, file->string());
    else
        out += "null";
    out += ',';
    append_list(out, "changed", plan.changed());
    out += R"(,"sources":{)";
    append_list(out, "added", plan.added);
    out += ',';
    append_list(out, "removed", plan.removed);
    out += ',';
    append_list(out, "replaced", plan.replaced);
    out += ',';
    append_list(out, "restarted", restarted);
    out += "},";
    append_list(out, "needsRestart", plan.needs_restart);
}

} // namespace meith::daemon
