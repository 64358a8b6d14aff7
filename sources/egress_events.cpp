// egress_events: audit members and violation events of proxied connections (see the header).
#include "sources/egress_events.hpp"

#include "audit/redactor.hpp"
#include "protocol/json_writer.hpp"
#include "protocol/server_frames.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace meith::sources {

namespace {

/// Whose a connection is, taken as it is accepted: the call (weakly: a connection may outlive
/// it) and what its audit line says of it.
struct connection_owner {
    std::weak_ptr<tools::call> owner;
    std::string tool, caller, request_id;
};

const connection_owner* owner_of(const egress::connection_record& r) {
    return static_cast<const connection_owner*>(r.owner.get());
}

/// The call `r` was accepted for, while it still runs.
tools::call_ptr running_owner(const egress::connection_record& r) {
    const auto* o = owner_of(r);
    auto c = o ? o->owner.lock() : nullptr;
    return c && !c->resolved() ? c : nullptr;
}

std::string audit_members(const egress::connection_record& r) {
    std::string out;
    protocol::json_members m(out);
    if (const auto* o = owner_of(r))
        m.string("tool", o->tool).string("caller", o->caller).string("requestId", o->request_id);
    m.string("protocol", r.protocol);
    m.string("host", audit::default_redactor().redact_text(r.host));
    m.number("port", r.port).string("decision", r.allowed ? "allow" : "deny");
    if (!r.address.empty()) m.string("address", r.address);
    if (!r.rule.empty()) m.string("rule", r.rule);
    if (!r.reason.empty()) m.string("reason", audit::default_redactor().redact_text(r.reason));
    m.number("bytesSent", r.bytes_sent).number("bytesReceived", r.bytes_received);
    m.key("durationMs") += std::to_string(r.duration.count());
    return out;
}

/// The refusal in words, with the rule that would allow it.
std::string refusal_text(const egress::connection_record& r, std::string_view source) {
    std::string message =
        fmt::format("meith's egress proxy refused {}:{}: {}", r.host, r.port, r.reason);
    if (!r.suggestion.empty()) message += fmt::format(" ({} of source '{}')", r.suggestion, source);
    return message;
}

std::string violation_event(const egress::connection_record& r, std::string_view source) {
    const std::string message = refusal_text(r, source);
    std::string e;
    protocol::append_network_violation_event(e, r.host, r.port, message, r.suggestion);
    return e;
}

} // namespace

void bind_egress_events(egress::proxy_options& opts, const std::shared_ptr<tools::tool_source>& src,
                        tools::source_events events, egress_owner owner) {
    std::weak_ptr<tools::tool_source> weak = src;
    opts.owner = [owner = std::move(owner)]() -> std::shared_ptr<const void> {
        auto c = owner();
        if (!c) return nullptr;
        return std::make_shared<const connection_owner>(connection_owner{
            c, c->tool_name, std::string(permissions::to_string(c->caller)), c->request_id});
    };
    opts.on_closed = [weak, events](const egress::connection_record& r) {
        auto s = weak.lock();
        if (!s || !events.lifecycle) return;
        events.lifecycle(*s, "egress", audit_members(r));
    };
    opts.ask = [weak, events](const egress::connection_record& r, egress::ask_reply reply) {
        auto s = weak.lock();
        if (!s || !events.egress_ask) return reply({false, "the source is gone", {}});
        events.egress_ask(*s, r, running_owner(r), std::move(reply));
    };
    opts.on_refused = [weak](const egress::connection_record& r) {
        auto s = weak.lock();
        if (!s) return;
        spdlog::info("source '{}': egress refused {}:{}: {}", s->name(),
                     audit::default_redactor().redact_text(r.host), r.port,
                     audit::default_redactor().redact_text(r.reason));
        if (auto c = running_owner(r)) {
            c->emit(violation_event(r, s->name()));
            c->egress_refusal = audit::default_redactor().redact_text(refusal_text(r, s->name()));
        }
    };
}

} // namespace meith::sources
