// source_lifecycle: the registry's sources from start to stop (docs/protocol.md §1, §7).
//
// Owns the source list and what sources report (source_events): start and readiness (each
// source settles once; a name clash fails the source that listed the taken name), registering
// their tools into the tool table, lifecycle audit lines; after start, adding a source live,
// removing one (its tools go at once, it is stopped and kept in `retiring_` until its stop
// completes), manual restarts (sources and server-mode hooks), and stopping them all at
// shutdown.
#include "registry/registry.hpp"

#include "hooks/hooks.hpp"
#include "protocol/json_writer.hpp"
#include "protocol/server_frames.hpp"

#include <asio/post.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>

namespace meith::registry {

using protocol::append_json_string;

void registry::add_source(std::shared_ptr<tools::tool_source> source) {
    sources_.push_back(std::move(source));
}

void registry::start(std::function<void()> on_ready) {
    on_ready_ = std::move(on_ready);
    unsettled_ = sources_.size();
    tools::source_events events;
    events.registered = [this](tools::tool_source& src, std::vector<tools::tool_definition> defs) {
        return on_registered(src, std::move(defs));
    };
    events.settled = [this](tools::tool_source&) { on_settled(); };
    events.lifecycle = [this](tools::tool_source& src, std::string_view event,
                              std::string_view details) { on_lifecycle(src, event, details); };
    events.descriptors_changed = [this](tools::tool_source&) { tools_.invalidate(); };
    events.mcp_notification = [this](tools::tool_source& src, std::string_view method,
                                     std::string_view params) {
        if (observer_) observer_->on_notification(src, method, params);
    };
    events.egress_ask = [this](tools::tool_source& src, const egress::connection_record& r,
                               tools::call_ptr owner, egress::ask_reply reply) {
        on_egress_ask(src, r, std::move(owner), std::move(reply));
    };
    events.pinned = [this](tools::tool_source& src) {
        return pinning_ ? pins_.definitions_of(src.name()) : std::vector<tools::tool_definition>{};
    };
    events.current = [this](const tool& t) -> std::shared_ptr<const tool> {
        auto now = tools_.find(t.name);
        return now && now->source == t.source ? now : nullptr;
    };
    events_ = events;
    if (sources_.empty()) {
        started_ = true;
        on_ready_();
        return;
    }
    for (auto& s : sources_)
        s->start(events);
}

std::optional<std::string> registry::on_registered(tools::tool_source& src,
                                                   std::vector<tools::tool_definition> defs) {
    // A source removed by a config reload may still finish starting: it offers nothing.
    if (std::none_of(sources_.begin(), sources_.end(),
                     [&](const auto& s) { return s.get() == &src; }))
        return std::nullopt;
    // A name two sources list stays with the one earlier in the config, whichever listed first;
    // the other fails alone (it marks itself failed with the error): a listing comes from its
    // program, which an `npm update` can change, so it must not stop the daemon.
    const auto precedes = [this](const tools::tool_source& a, const tools::tool_source& b) {
        for (const auto& s : sources_) {
            if (s.get() == &a) return true;
            if (s.get() == &b) return false;
        }
        return false;
    };
    auto outcome = tools_.register_source(src, std::move(defs), precedes);
    for (std::size_t i = 0; i < outcome.displaced.size(); ++i) {
        spdlog::error("source '{}' failed: {}", outcome.displaced[i]->name(),
                      outcome.displaced_why[i]);
        outcome.displaced[i]->fail(outcome.displaced_why[i]);
    }
    if (outcome.error) {
        spdlog::error("source '{}' failed: {}", src.name(), *outcome.error);
        return std::move(outcome.error);
    }
    if (pinning_) check_pins(src);
    return std::nullopt;
}

void registry::check_pins(tools::tool_source& src) {
    if (src.kind() == "builtin") return; // meith's own tools change only with meith
    // A tool host declares its tools' capabilities itself; an MCP server's and an exec tool's
    // come from the user's config (and the annotations, pinned as the server's).
    const bool config_caps = src.kind() != "host";
    for (const auto& t : tools_.tools_of(src)) {
        const auto v = pins_.check(src.name(), *t, cfg_.tools.quarantine_new, config_caps);
        if (v.capabilities_changed) {
            std::string fields;
            protocol::json_members m(fields);
            m.string("source", src.name());
            append_redacted(m.key("toolName"), t->name);
            m.key("oldCapabilities") += v.old_capabilities; // JSON arrays, as pinned
            m.key("newCapabilities") += v.new_capabilities;
            audit_.event("tool_capabilities_changed", fields);
            spdlog::info("source '{}': tool '{}' now has the capabilities {} the config gives it "
                         "(was {})",
                         src.name(), t->name, v.new_capabilities, v.old_capabilities);
        }
        if (!v.quarantined) continue;
        tools_.set_quarantined(t->name, true);
        std::string fields;
        protocol::json_members m(fields);
        m.string("source", src.name());
        append_redacted(m.key("toolName"), t->name);
        m.string_or_null("oldHash", v.old_hash.empty()
                                        ? std::nullopt
                                        : std::optional<std::string_view>(v.old_hash))
            .string("newHash", v.new_hash)
            .boolean("new", v.new_tool);
        audit_.event("tool_definition_changed", fields);
        // Approvers (`meith approve`) show the diff and take the person's answer (§22).
        std::string frame;
        protocol::append_tool_quarantined(frame, t->name, src.name(), v.new_tool);
        approvals_.notify_approvers(frame);
        spdlog::warn("source '{}': tool '{}' {}; it is quarantined until a person accepts it: "
                     "meith tools accept {}",
                     src.name(), t->name,
                     v.new_tool ? "is new ([tools] quarantine_new)"
                                : "changed its definition since it was accepted",
                     t->name);
    }
    pins_.save_if_changed();
}

void registry::on_settled() {
    if (unsettled_ > 0 && --unsettled_ == 0 && on_ready_) {
        started_ = true;
        auto ready = std::move(on_ready_);
        ready();
    }
}

void registry::on_lifecycle(tools::tool_source& src, std::string_view event,
                            std::string_view details) {
    tools_.invalidate(); // "available" follows the source's state
    std::string fields;
    protocol::json_members(fields).string("source", src.name());
    if (!details.empty()) {
        fields += ',';
        fields += details;
    }
    audit_.event(event, fields);
}

bool registry::restart_source(std::string_view name) {
    for (auto& s : sources_)
        if (s->name() == name) {
            s->restart();
            tools_.invalidate();
            std::string fields;
            protocol::json_members(fields).string("source", name);
            audit_.event("source_restart_requested", fields);
            return true;
        }
    if (hooks_ && hooks_->restart(name)) {
        std::string fields;
        protocol::json_members(fields).string("hook", name);
        audit_.event("source_restart_requested", fields);
        return true;
    }
    return false;
}

void registry::add_live_source(std::shared_ptr<tools::tool_source> source) {
    if (shutting_down_) return; // never started: stop_sources() may have run already
    sources_.push_back(std::move(source));
    tools_.invalidate();
    sources_.back()->start(events_);
}

bool registry::remove_source(std::string_view name) {
    auto it = std::find_if(sources_.begin(), sources_.end(),
                           [&](const auto& s) { return s->name() == name; });
    if (it == sources_.end()) return false;
    tools::tool_source* src = it->get();
    tools_.remove_source(*src);
    // A replaced source's table changed: what a person allowed for the old one is asked again.
    if (auto allowed = egress_allowed_.find(name); allowed != egress_allowed_.end())
        egress_allowed_.erase(allowed);
    if (observer_) observer_->on_removed(*src);
    retiring_.push_back(std::move(*it));
    sources_.erase(it);
    src->stop(std::chrono::milliseconds(cfg_.tools.kill_grace_ms), [this, src] {
        // Destroyed after this handler returns (the source may still be on the stack).
        asio::post(ex_, [this, src, alive = std::weak_ptr<bool>(alive_)] {
            if (!alive.lock()) return;
            std::erase_if(retiring_, [src](const auto& s) { return s.get() == src; });
        });
    });
    return true;
}

std::optional<tools::source_state> registry::source_state_of(std::string_view name) const {
    for (const auto& s : sources_)
        if (s->name() == name) return s->state();
    return std::nullopt;
}

void registry::stop_sources(std::function<void()> done) {
    auto remaining = std::make_shared<std::size_t>(sources_.size());
    auto finish = std::make_shared<std::function<void()>>(std::move(done));
    if (sources_.empty()) {
        (*finish)();
        return;
    }
    const std::chrono::milliseconds grace(cfg_.tools.kill_grace_ms);
    for (auto& s : sources_)
        s->stop(grace, [remaining, finish] {
            if (--*remaining == 0) (*finish)();
        });
}

} // namespace meith::registry
