// registry: construction, the permission policy, status queries and the audit entry points the
// daemon uses. The registry's other jobs are in their own files (see registry.hpp).
#include "registry/registry.hpp"

#include "hooks/hooks.hpp"
#include "protocol/json_writer.hpp"
#include "protocol/server_frames.hpp"

#include <asio/post.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>

namespace meith::registry {

using protocol::append_json_string;

registry::registry(asio::any_io_executor ex, const config::config& cfg, audit::audit_log* audit)
    : ex_(std::move(ex)), cfg_(cfg), policy_(cfg.permissions),
      audit_(ex_, audit, cfg.audit.on_failure == config::audit_failure_policy::fail_closed),
      redactor_(audit::default_redactor()), approvals_(ex_, audit_, redactor_) {
    tools_.on_change = [this] {
        post_tools_changed();
        post_held_recheck();
    };
    rates_.configure(cfg.limits.rates);
    set_clients(cfg.clients);
}

std::optional<std::string> registry::source_hidden(const permissions::client_profile& profile,
                                                   const tools::tool_source& src) const {
    if (profile.names_sources()) return profile.source_hidden(src.name(), false);
    const auto tools = tools_.tools_of(src);
    const bool shows = std::any_of(tools.begin(), tools.end(),
                                   [&](const auto& t) { return profile.visible(t->name); });
    return profile.source_hidden(src.name(), shows);
}

void registry::set_clients(const std::vector<config::client_config>& clients) {
    profiles_.clear();
    profile_by_agent_.clear();
    for (const auto& c : clients) {
        auto p = std::make_shared<const permissions::client_profile>(c);
        for (const auto& a : c.agents)
            profile_by_agent_.emplace(a, p);
        profiles_.emplace(c.name, std::move(p));
    }
    tools_.profiles_changed(); // what a profile's clients see may have changed
}

std::size_t registry::count_hidden(const permissions::client_profile& profile) const {
    std::size_t n = 0;
    tools_.for_each([&](const tool& t) { n += profile.visible(t.name) ? 0 : 1; });
    return n;
}

std::string registry::client_profile_names() const {
    std::string out;
    for (const auto& [name, p] : profiles_)
        out += (out.empty() ? "" : ", ") + name;
    return out.empty() ? "none" : out;
}

std::uint64_t registry::subscribe_tools_changed(std::function<void()> fn) {
    tools_changed_subscribers_.emplace(++next_subscriber_, std::move(fn));
    return next_subscriber_;
}

void registry::post_tools_changed() {
    if (tools_changed_posted_ || tools_changed_subscribers_.empty()) return;
    tools_changed_posted_ = true;
    // After this turn: a reload or a re-list changes many tools, the subscribers hear it once.
    asio::post(ex_, [this, alive = std::weak_ptr<bool>(alive_)] {
        if (alive.expired()) return;
        tools_changed_posted_ = false;
        std::vector<std::function<void()>> notify;
        for (const auto& [token, fn] : tools_changed_subscribers_)
            notify.push_back(fn); // a subscriber may unsubscribe while notified
        for (auto& fn : notify)
            fn();
    });
}

registry::~registry() = default;

// ---- permissions --------------------------------------------------------------------------

void registry::set_permissions(const config::permissions_config& permissions) {
    policy_ = permissions::policy(permissions);
    tools_.invalidate();
    // After the reload that called this has swapped everything (sources, hooks): a call now
    // allowed runs against the new config.
    asio::post(ex_, [this, alive = std::weak_ptr<bool>(alive_)] {
        if (alive.lock()) redecide_held_calls();
    });
}

registry::call_decision registry::decide_call(const tool& t, permissions::caller who,
                                              const permissions::client_profile* profile) const {
    call_decision out;
    if (profile) {
        if (auto why = profile->hidden(t.name)) {
            // Refused before validation, grants and approval: nothing of it is reachable.
            out.hidden = true;
            out.decision.reason = "tool '" + t.name + "' is hidden: " + *why;
            return out;
        }
    }
    if (t.quarantined) {
        // docs/protocol.md §22: no grant, approval or hook reaches a tool held in quarantine.
        out.quarantined = true;
        out.decision.reason = "tool '" + t.name +
                              "' is quarantined: its definition changed since a person accepted "
                              "it (or it is new); see the change and accept it with `meith tools "
                              "accept " +
                              t.name + "` from a terminal";
        return out;
    }
    out.decision = policy_.decide(t.name, t.capabilities, who);
    return out;
}

registry::call_decision
registry::decide_family_request(tools::tool_source& src, std::string_view target,
                                permissions::caller who,
                                const permissions::client_profile* profile) const {
    call_decision out;
    if (profile) {
        if (auto why = source_hidden(*profile, src)) {
            // As a hidden tool: refused before the policy, nothing of the source reachable.
            out.hidden = true;
            out.decision.reason = std::move(*why);
            return out;
        }
    }
    const auto* peer = src.mcp();
    out.decision = policy_.decide(target, peer ? peer->resource_capabilities() : 0, who);
    return out;
}

void registry::redecide_held_calls() {
    // `deny` holds against everything the socket accepts (docs/security.md), a call held under
    // the old policy included: each is decided again, on its tool as it is now, and what no
    // longer asks leaves the approvers (failed or denied, or allowed outright and run).
    for (auto& c : approvals_.held_calls()) {
        if (!c->target || c->resolved()) continue;
        auto r = recheck_held(*c);
        if (!r.failure && !r.decision.allow && r.decision.ask) {
            c->decision = std::move(r.decision);
            continue;
        }
        approvals_.withdraw(c->approval_id, r.failure          ? r.failure->error->message
                                            : r.decision.allow ? "the reloaded config allows it"
                                                               : "the reloaded config denies it: " +
                                                                     r.decision.reason);
        settle_redecided(c, std::move(r), "the config was reloaded while the call was held");
    }
}

void registry::post_held_recheck() {
    if (held_recheck_posted_ || approvals_.held_count() == 0) return;
    held_recheck_posted_ = true;
    // After this turn: a re-listing registers the tools, then checks their pins.
    asio::post(ex_, [this, alive = std::weak_ptr<bool>(alive_)] {
        if (alive.expired()) return;
        held_recheck_posted_ = false;
        for (auto& c : approvals_.held_calls()) {
            if (!c->target || c->resolved()) continue;
            auto r = recheck_held(*c);
            if (!r.failure) continue; // still the person's to decide (a reload re-decides)
            approvals_.withdraw(c->approval_id, r.failure->error->message);
            settle_redecided(c, std::move(r), {});
        }
    });
}

std::string registry::explain_policy(std::string_view tool_name, permissions::caller who,
                                     const permissions::client_profile* profile) const {
    protocol::policy_explanation e;
    e.tool_name = tool_name;
    e.caller = permissions::to_string(who);
    if (profile) {
        e.client = profile->name();
        tool_name = profile->real_name(tool_name);
    }
    std::string m;
    const auto found = tools_.find(tool_name);
    if (!found) {
        const std::string reason =
            "no tool named '" + std::string(tool_name) + "' (calls resolve UNKNOWN_TOOL)";
        e.decision = "deny";
        e.reason = reason;
        protocol::append_policy_explanation(m, e);
        return m;
    }
    const auto& t = *found;
    // The decision a call would meet now: hidden, quarantined, else the policy's.
    const auto verdict = decide_call(t, who, profile);
    std::string capabilities;
    permissions::append_capabilities(capabilities, t.capabilities);
    e.known = true;
    e.capabilities_json = capabilities;
    e.reason = verdict.decision.reason;
    if (verdict.hidden) {
        e.hidden = true;
        e.decision = "deny";
        protocol::append_policy_explanation(m, e);
        return m;
    }
    if (profile && profile->shown_name(t.name) != t.name) e.original_name = t.name;
    const auto& d = verdict.decision;
    e.quarantined = verdict.quarantined;
    e.decision = permissions::to_string(d.outcome());
    e.grantable = d.grantable;
    if (hooks_)
        for (const char* phase : {"before_execution", "after_execution"})
            if (hooks_->has_filters(phase, t.name)) e.filter_hooks.emplace_back(phase);
    protocol::append_policy_explanation(m, e);
    return m;
}

// ---- status ---------------------------------------------------------------------------------

void registry::append_tool_descriptors(std::string& out, permissions::caller who,
                                       tools::list_format format,
                                       const permissions::client_profile* profile) {
    if (!profile) return tools_.append_descriptors(out, who, policy_, format);
    tools::tool_table::list_filter filter;
    filter.profile = profile;
    tools_.append_filtered(out, who, policy_, format, filter);
}

std::size_t registry::append_tool_page(std::string& out, permissions::caller who,
                                       tools::list_format format,
                                       const permissions::client_profile* profile,
                                       std::size_t offset, std::size_t limit, bool permitted) {
    std::size_t total = 0;
    tools::tool_table::list_filter filter;
    filter.profile = profile;
    filter.permitted_only = permitted || format != tools::list_format::meith;
    filter.offset = offset;
    filter.limit = limit;
    filter.matched = &total;
    tools_.append_filtered(out, who, policy_, format, filter);
    return total;
}

std::string registry::sources_json() const {
    std::string out = "[";
    bool first = true;
    for (const auto& s : sources_) {
        if (!first) out.push_back(',');
        first = false;
        out += s->status_json();
    }
    // Configured but off (`enabled = false`): listed, so a person sees why it has no tools.
    for (const auto& src : cfg_.sources) {
        if (src.enabled) continue;
        if (!first) out.push_back(',');
        first = false;
        out.push_back('{');
        protocol::json_members m(out);
        m.string("name", src.name).string("kind", config::to_string(src.kind));
        m.null("pid").string("state", "disabled").number("restarts", 0).number("tools", 0);
        m.string("lastError", "");
        out.push_back('}');
    }
    if (hooks_) hooks_->append_status(out, first);
    out.push_back(']');
    return out;
}

// ---- sessions -------------------------------------------------------------------------------

void registry::observe_session(std::string_view phase, std::string_view session_id, pid_t pid,
                               uid_t uid) {
    if (!hooks_) return;
    // The hook's event (docs/protocol.md §7 "hooks").
    std::string p = "{";
    protocol::json_members m(p);
    m.string("hook", "session").string("phase", phase);
    m.key("event").push_back('{');
    m.string("session_id", session_id)
        .number("pid", static_cast<std::uint64_t>(pid))
        .number("uid", uid);
    p += "}}";
    hooks_->observe(phase, "", p);
}

// ---- audit ----------------------------------------------------------------------------------

void registry::append_redacted(std::string& out, std::string_view s) const {
    append_redacted_json_string(out, s);
}

void registry::audit_rejected_call(const rejected_call& r) {
    write_rejected_call_audit(audit_, redactor_, r);
}

} // namespace meith::registry

// ---- pinned tool definitions (docs/protocol.md §22) ------------------------------------------

namespace meith::registry {

std::optional<std::string> registry::pin_tools_in(std::filesystem::path file) {
    pinning_ = true;
    return pins_.load(std::move(file));
}

std::optional<std::string> registry::accept_tool(std::string_view name, std::string_view by) {
    const auto t = tools_.find(name);
    if (!t) return "no tool '" + std::string(name) + "' (see `meith tools`)";
    if (!t->quarantined || !pins_.accept(t->source->name(), t->remote_name))
        return "tool '" + std::string(name) + "' is not quarantined: nothing to accept";
    tools_.set_quarantined(name, false);
    std::string fields;
    protocol::json_members m(fields);
    m.string("source", t->source->name());
    append_redacted(m.key("toolName"), name);
    m.string("hash", tools::tool_pins::definition_of(*t).hash).string("approverSession", by);
    audit_.event("tool_definition_accepted", fields);
    spdlog::info("source '{}': tool '{}' accepted by a person; callable again", t->source->name(),
                 name);
    return std::nullopt;
}

std::optional<std::string> registry::append_held_definition(std::string& out,
                                                            std::string_view name) {
    const auto t = tools_.find(name);
    if (!t) return "no tool '" + std::string(name) + "' (see `meith tools`)";
    const auto held = t->quarantined ? pins_.held(t->source->name(), t->remote_name) : std::nullopt;
    if (!held) return "tool '" + std::string(name) + "' is not quarantined: nothing to accept";
    const auto append_definition = [&](const tools::tool_pins::definition& d) {
        out += '{';
        protocol::json_members(out)
            .string("hash", d.hash)
            .string("description", d.description)
            .string("inputSchema", d.input_schema_json)
            .string("extra", d.extra_json)
            .raw("capabilities", d.capabilities.empty() ? "[]" : d.capabilities)
            .string_or_null("acceptedAt", d.accepted_at.empty()
                                              ? std::nullopt
                                              : std::optional<std::string_view>(d.accepted_at));
        out += '}';
    };
    protocol::json_members m(out);
    m.string("toolName", name).string("source", t->source->name());
    if (held->first) {
        m.key("pinned");
        append_definition(*held->first);
    } else {
        m.null("pinned");
    }
    m.key("held");
    append_definition(held->second);
    return std::nullopt;
}

} // namespace meith::registry
