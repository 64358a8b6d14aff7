// tool_table: registration, lookup and the ToolDescriptors cache (see tool_table.hpp).
#include "tools/tool_table.hpp"

#include <algorithm>
#include <unordered_set>

#include "protocol/json_writer.hpp"
#include "schema/validator.hpp"

#include <spdlog/spdlog.h>

namespace meith::tools {

namespace {
tool_table::registration refused(std::string why, bool clash) {
    tool_table::registration r;
    r.error = std::move(why);
    r.clash = clash;
    return r;
}
} // namespace

tool_table::registration tool_table::register_source(tool_source& src,
                                                     std::vector<tool_definition> defs,
                                                     const source_order& precedes) {
    if (defs.size() > max_tools_per_source)
        return refused("source '" + src.name() + "' lists " + std::to_string(defs.size()) +
                           " tools, more than meithd takes from one source (" +
                           std::to_string(max_tools_per_source) +
                           "); split its tools over several sources",
                       false);
    // The source's own prefix: a reload may add it before the daemon's config is replaced.
    const std::string& prefix = src.prefix();

    registration out;
    std::vector<std::shared_ptr<const tool>> fresh;
    fresh.reserve(defs.size());
    std::unordered_set<std::string_view> names; // views into fresh's tools, which never move
    names.reserve(defs.size());
    for (auto& d : defs) {
        auto t = std::make_shared<tool>();
        t->name = prefix + d.name;
        t->remote_name = std::move(d.name);
        t->description = std::move(d.description);
        t->input_schema_json = std::move(d.input_schema_json);
        t->extra_descriptor_json = std::move(d.extra_descriptor_json);
        t->capabilities = permissions::capability_set_from(d.capabilities);
        t->timeout_ms = d.timeout_ms;
        t->payload_kind = std::move(d.payload_kind);
        t->payload_format_json = std::move(d.payload_format_json);
        t->task_required = d.task_required;
        t->source = src.shared_from_this();
        if (t->input_schema_json.empty()) {
            // No schema (a text-payload tool): nothing to check beyond its argument's type.
        } else if (d.from_pin) {
            t->validator = std::make_shared<schema::lazy_validator>(t->input_schema_json);
        } else {
            auto compiled = schema::schema_validator::compile(t->input_schema_json);
            if (compiled.error) {
                spdlog::error("source '{}': tool '{}' skipped: {}", src.name(), t->name,
                              *compiled.error);
                continue;
            }
            if (compiled.validator)
                t->validator =
                    std::make_shared<schema::lazy_validator>(std::move(compiled.validator));
        }
        auto it = tools_.find(t->name);
        if (it != tools_.end() && it->second->source.get() != &src) {
            const auto& holder = it->second->source;
            std::string why = "tool name '" + t->name + "' is offered by both source '" +
                              holder->name() + "' and source '" + src.name() +
                              "' (set `prefix` on one of them)";
            if (!precedes || !precedes(src, *holder)) return refused(std::move(why), true);
            if (std::find(out.displaced.begin(), out.displaced.end(), holder) ==
                out.displaced.end()) {
                out.displaced.push_back(holder);
                out.displaced_why.push_back(why + "; '" + src.name() +
                                            "' comes first in the config and keeps it");
            }
        }
        if (!names.insert(t->name).second)
            return refused("source '" + src.name() + "' offers tool '" + t->name + "' twice",
                           false);
        fresh.push_back(std::move(t));
    }
    for (const auto& d : out.displaced)
        remove_source(*d);
    remove_source(src);
    for (auto& t : fresh)
        tools_.emplace(t->name, std::move(t));
    tools_changed();
    spdlog::info("source '{}': {} tool(s) registered", src.name(), fresh.size());
    return out;
}

void tool_table::remove_source(const tool_source& src) {
    std::erase_if(tools_, [&src](const auto& entry) { return entry.second->source.get() == &src; });
    tools_changed();
}

void tool_table::append_descriptors(std::string& out, permissions::caller who,
                                    const permissions::policy& policy, list_format format) {
    const auto i =
        static_cast<std::size_t>(who) * list_format_count + static_cast<std::size_t>(format);
    if (!descriptors_valid_[i]) {
        descriptors_[i].clear();
        render(descriptors_[i], who, policy, format);
        descriptors_valid_[i] = true;
    }
    out.append(descriptors_[i]);
}

std::size_t tool_table::append_search(std::string& out, std::string_view query, std::size_t limit,
                                      permissions::caller who, const permissions::policy& policy,
                                      list_format format,
                                      const permissions::client_profile* profile) {
    const profile_index* view =
        profile && profile->has_overrides() ? &index_for(*profile) : nullptr;
    if (!view && !index_.built()) {
        std::vector<const tool*> all;
        all.reserve(tools_.size());
        for (const auto& [name, t] : tools_)
            all.push_back(t.get());
        index_.build(all);
    }
    const auto real = [view](const tool& t) -> const tool& {
        if (!view) return t;
        const auto it = view->real.find(&t);
        return it == view->real.end() ? t : *it->second;
    };
    // Only what the caller may call, or ask a person for (PROTOCOL.md §11): a search never
    // shows a tool the list would not let it use.
    const auto hits = (view ? view->index : index_).search(query, limit, [&](const tool& shown) {
        const tool& t = real(shown);
        if (t.quarantined) return false;
        if (profile && !profile->visible(t.name)) return false;
        const auto d = policy.decide(t.name, t.capabilities, who);
        return d.allow || d.ask;
    });
    bool first = true;
    for (const auto& h : hits) {
        if (!first) out.push_back(',');
        first = false;
        const tool& t = real(*h.t);
        if (format != list_format::meith)
            append_provider(out, t, format, profile);
        else
            append_descriptor(out, t, t.source->tags(), who, policy, profile);
    }
    return hits.size();
}

const tool_table::profile_index& tool_table::index_for(const permissions::client_profile& profile) {
    if (auto it = profile_indexes_.find(profile.name()); it != profile_indexes_.end())
        return it->second;
    profile_index& v = profile_indexes_[profile.name()];
    std::vector<const tool*> all;
    all.reserve(tools_.size());
    for (const auto& [name, t] : tools_) {
        const config::tool_override_config* ov = profile.override_of(t->name);
        if (!ov) {
            all.push_back(t.get());
            continue;
        }
        auto& copy = v.shown.emplace_back(std::make_unique<tool>(*t));
        if (ov->name) copy->name = *ov->name;
        if (ov->description) copy->description = *ov->description;
        v.real.emplace(copy.get(), t.get());
        all.push_back(copy.get());
    }
    v.index.build(all);
    return v;
}

bool tool_table::set_quarantined(std::string_view name, bool quarantined) {
    auto it = tools_.find(name);
    if (it == tools_.end()) return false;
    if (it->second->quarantined == quarantined) return true;
    auto copy = std::make_shared<tool>(*it->second);
    copy->quarantined = quarantined;
    it->second = std::move(copy);
    tools_changed();
    return true;
}

std::vector<std::shared_ptr<const tool>> tool_table::tools_of(const tool_source& src) const {
    std::vector<std::shared_ptr<const tool>> out;
    for (const auto& [name, t] : tools_)
        if (t->source.get() == &src) out.push_back(t);
    return out;
}

std::vector<std::shared_ptr<tool_source>> tool_table::sources_with_tools() const {
    std::vector<std::shared_ptr<tool_source>> out;
    for (const auto& [name, t] : tools_)
        if (std::find(out.begin(), out.end(), t->source) == out.end()) out.push_back(t->source);
    return out;
}

void tool_table::append_descriptor(std::string& out, const tool& tool_ref,
                                   const std::vector<std::string>& tags, permissions::caller who,
                                   const permissions::policy& policy,
                                   const permissions::client_profile* profile) {
    const tool* t = &tool_ref;
    const config::tool_override_config* ov = profile ? profile->override_of(t->name) : nullptr;
    out.push_back('{');
    protocol::json_members m(out);
    m.string("name", ov && ov->name ? *ov->name : t->name);
    if (ov && ov->name) m.string("originalName", t->name);
    m.string("description", ov && ov->description ? *ov->description : t->description);
    if (!t->input_schema_json.empty()) m.raw("inputSchema", t->input_schema_json);
    if (!t->extra_descriptor_json.empty()) {
        out.push_back(',');
        out.append(t->extra_descriptor_json);
    }
    if (t->payload_kind == "text") {
        m.string("payloadKind", "text");
        if (!t->payload_format_json.empty()) m.raw("format", t->payload_format_json);
    }
    protocol::append_json_string_array(m.key("tags"), tags);
    permissions::append_capabilities(m.key("capabilities"), t->capabilities);
    if (t->timeout_ms)
        m.number("timeoutMs", *t->timeout_ms);
    else
        m.null("timeoutMs");
    m.string("source", t->source->name()).string("sourceKind", t->source->kind());
    m.boolean("available", t->source->state() != source_state::failed);
    if (t->quarantined) {
        m.string("permission", "deny").boolean("quarantined", true);
        out.push_back('}');
        return;
    }
    m.string("permission",
             permissions::to_string(policy.decide(t->name, t->capabilities, who).outcome()));
    out.push_back('}');
}

void tool_table::append_provider(std::string& out, const tool& t, list_format format,
                                 const permissions::client_profile* profile) {
    const config::tool_override_config* ov = profile ? profile->override_of(t.name) : nullptr;
    if (!ov) return append_provider_tool(out, t, format);
    tool shown = t; // a profile's few overrides: a copy each, only here
    if (ov->name) shown.name = *ov->name;
    if (ov->description) shown.description = *ov->description;
    append_provider_tool(out, shown, format);
}

void tool_table::render(std::string& out, permissions::caller who,
                        const permissions::policy& policy, list_format format,
                        const list_filter* filter) const {
    bool first = true;
    const permissions::client_profile* profile = filter ? filter->profile : nullptr;
    std::size_t passed = 0; // tools past every filter, for a page
    for (const auto& [name, t] : tools_) {
        if (profile && !profile->visible(t->name)) continue;
        if (filter && filter->permitted_only) {
            if (t->quarantined) continue;
            const auto d = policy.decide(t->name, t->capabilities, who);
            if (!d.allow && !d.ask) continue;
        }
        // A page (never with tags or models, whose filters follow): counted past the filters above.
        if (filter && (filter->offset != 0 || filter->limit != static_cast<std::size_t>(-1) ||
                       filter->matched)) {
            const std::size_t index = passed++;
            if (index < filter->offset || index - filter->offset >= filter->limit) continue;
        }
        std::vector<std::string> tags;
        if (filter && filter->source_tags) {
            if (auto it = filter->source_tags->find(t->source.get());
                it != filter->source_tags->end())
                tags = it->second;
        } else {
            tags = t->source->tags();
        }
        if (filter && filter->tags) {
            // docs/protocol.md §13: a host's required_tags must all be among the frame's tags.
            const auto required = t->source->required_tags();
            const bool missing = std::any_of(required.begin(), required.end(), [&](const auto& r) {
                return std::find(filter->tags->begin(), filter->tags->end(), r) ==
                       filter->tags->end();
            });
            if (missing) continue;
        }
        if (format != list_format::meith) {
            // A model is offered only what its caller may call (PROTOCOL.md §11).
            // A tool a person may approve is offered too: the call is held, not refused.
            const auto d = policy.decide(t->name, t->capabilities, who);
            if ((!d.allow && !d.ask) || t->quarantined) continue;
            if (!first) out.push_back(',');
            first = false;
            append_provider(out, *t, format, profile);
            continue;
        }
        if (!first) out.push_back(',');
        first = false;
        append_descriptor(out, *t, tags, who, policy, profile);
    }
    if (filter && filter->matched) *filter->matched = passed;
}

} // namespace meith::tools
