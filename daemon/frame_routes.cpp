// frame_routes: what a connection does with each client frame type (docs/protocol.md §3).
//
// One table row per frame type: who may send it (operator-only frames are the cli caller's:
// restarting a source, reloading the config), whether the connection writes an audit event
// for it (named after the frame, with the session id and the members the route adds), and
// the route itself. handle_frame() is the one place that decodes, refuses and audits, so a
// new frame (tools_changed, preview, grants, approvals) is one row and one function.
// Tool calls are audited by the registry, one line per call (§6); a refused operator-only
// frame writes a `frame_refused` event.
#include "daemon/connection.hpp"

#include "protocol/json_writer.hpp"

#include <array>
#include <fmt/format.h>

namespace meith::daemon {

using protocol::append_json_string;
using protocol::frame_type;

namespace {

/// The frame type a route's handler takes: its second parameter, when it has one.
template <class Handler>
struct body_of {
    using type = void; // the handler takes the head only
};
template <class Body>
struct body_of<void (connection::*)(const protocol::frame_head&, const Body&, std::string&)> {
    using type = Body;
};

} // namespace

struct connection::frame_route {
    frame_type type;
    bool operator_only;       ///< only the cli caller may send it
    bool audited;             ///< the connection writes an event named after the frame type
    std::string_view refusal; ///< the error frame's text when refused
    void (*handle)(connection& c, const protocol::client_frame& f, std::string& audit_fields);
};

/// Calls `Handler` with the frame as its own type: the head, and the type's members when the
/// handler takes them (the decoder made them for this type, so `as` cannot fail).
template <auto Handler>
void connection::route_to(connection& c, const protocol::client_frame& f, std::string& audit) {
    using body = typename body_of<decltype(Handler)>::type;
    if constexpr (std::is_void_v<body>)
        (c.*Handler)(f, audit);
    else
        (c.*Handler)(f, f.as<body>(), audit);
}

const connection::frame_route& connection::route_of(frame_type type) {
    // In frame_type order (checked below), so a route is found by index.
    static constexpr std::array<frame_route, 20> routes{{
        {frame_type::hello, false, false, {}, &route_to<&connection::on_hello>},
        {frame_type::list_tools, false, true, {}, &route_to<&connection::on_list_tools>},
        {frame_type::tool_call, false, false, {}, &route_to<&connection::on_tool_call>},
        {frame_type::cancel_tool_call,
         false,
         true,
         {},
         &route_to<&connection::on_cancel_tool_call>},
        {frame_type::list_sources, false, false, {}, &route_to<&connection::on_list_sources>},
        {frame_type::restart_source, true, false, "only the cli caller may restart sources",
         &route_to<&connection::on_restart_source>},
        {frame_type::check_policy, false, false, {}, &route_to<&connection::on_check_policy>},
        {frame_type::reload_config, true, false, "only the cli caller may reload the config",
         &route_to<&connection::on_reload_config>},
        // Audited when the preview is made (it may wait for the tool host).
        {frame_type::preview_tool_call,
         false,
         false,
         {},
         &route_to<&connection::on_preview_tool_call>},
        // Grants and approvals (approval_routes.cpp): each audits what it decides itself.
        {frame_type::approver_hello, false, false, {}, &route_to<&connection::on_approver_hello>},
        {frame_type::approve, false, false, {}, &route_to<&connection::on_approve>},
        {frame_type::grant, false, false, {}, &route_to<&connection::on_grant>},
        {frame_type::revoke, false, false, {}, &route_to<&connection::on_revoke>},
        {frame_type::list_grants, false, false, {}, &route_to<&connection::on_list_grants>},
        {frame_type::accept_tool, false, false, {}, &route_to<&connection::on_accept_tool>},
        {frame_type::learn_source, true, false, "only the cli caller may make a source learn",
         &route_to<&connection::on_learn_source>},
        // MCP families beyond tools (mcp_routes.cpp): the gateway audits each request.
        {frame_type::mcp_request, false, false, {}, &route_to<&connection::on_mcp_request>},
        {frame_type::client_response, false, false, {}, &route_to<&connection::on_client_response>},
        // `meith mcp` hands over its stdio (mcp_routes.cpp): audited by the route.
        {frame_type::mcp_handoff, false, false, {}, &route_to<&connection::on_mcp_handoff>},
        {frame_type::other, false, false, {}, &route_to<&connection::on_other>},
    }};
    static_assert([] {
        for (std::size_t i = 0; i < routes.size(); ++i)
            if (static_cast<std::size_t>(routes[i].type) != i) return false;
        return static_cast<std::size_t>(frame_type::other) + 1 == routes.size();
    }());
    return routes[static_cast<std::size_t>(type)];
}

void connection::handle_frame(std::string_view line) {
    arm_idle_timer();
    const protocol::client_frame f = decoder_.decode(line);
    if (f.error) {
        protocol::append_error_frame(outbound_, f.request_id, *f.error);
        if (f.type == frame_type::tool_call) audit_rejected_call(f, *f.error);
        if (f.type == frame_type::approver_hello) audit_approver_rejected(*f.error);
        return;
    }
    const frame_route& r = route_of(f.type);
    std::string fields;
    if (r.operator_only && caller_for(f) != permissions::caller::cli) {
        // An operator's act asked for by a plugin: refused, and on file.
        protocol::append_error_frame(outbound_, f.request_id, std::string(r.refusal),
                                     protocol::refusal::not_allowed);
        protocol::json_members(fields)
            .string("sessionId", session_id_)
            .string("frame", f.type_name)
            .string("caller", permissions::to_string(caller_for(f)))
            .string("reason", r.refusal);
        registry_.audit_trail().event("frame_refused", fields);
        return;
    }
    if (r.audited) protocol::json_members(fields).string("sessionId", session_id_);
    r.handle(*this, f, fields);
    if (r.audited) registry_.audit_trail().event(f.type_name, fields);
}

void connection::on_hello(const protocol::frame_head& f, const protocol::hello_frame& body,
                          std::string&) {
    if (f.client && *f.client != client_name_) {
        // docs/protocol.md §23: a profile narrows what a connection reaches, so it is chosen
        // once; a later hello may repeat it, never swap it for a wider one.
        if (!client_name_.empty()) {
            protocol::append_error_frame(
                outbound_, f.request_id,
                fmt::format("this connection keeps client profile '{}', which its first hello "
                            "named; open another connection for profile '{}'",
                            client_name_, *f.client));
            return;
        }
        if (!registry_.client_profile(*f.client)) {
            protocol::append_error_frame(
                outbound_, f.request_id,
                fmt::format("no client profile named '{}' in meithd's config (profiles: {}); "
                            "add a [clients.{}] table (docs/configuration.md) and `meith reload`",
                            *f.client, registry_.client_profile_names(), *f.client));
            return;
        }
        client_name_ = std::string(*f.client);
    }
    if (f.caller_claim) {
        hello_claim_ = std::string(*f.caller_claim);
        has_hello_claim_ = true;
    }
    if (f.agent) hello_agent_ = std::string(*f.agent);
    if (body.client_capabilities)
        client_caps_ = read_client_capabilities(*body.client_capabilities);
    if (body.subscribe_mcp) mcp_.set_profile(mcp_subscriber(true), profile_for(f));
    if (body.subscribe_tools_changed && tools_changed_token_ == 0)
        tools_changed_token_ = registry_.subscribe_tools_changed([weak = weak_from_this()] {
            auto self = weak.lock();
            if (!self || self->closed_) return;
            protocol::append_tools_changed(self->outbound_);
            self->flush();
        });
    std::string client;
    if (const auto p = profile_for(f)) {
        client = "{";
        protocol::json_members m(client);
        m.string("name", p->name()).boolean("search", p->search());
        m.key("pinned").push_back('[');
        for (const auto& name : p->pinned()) {
            if (client.back() != '[') client += ',';
            append_json_string(client, p->shown_name(name));
        }
        client += "]}";
    }
    protocol::append_hello_result(outbound_, f.request_id, session_id_,
                                  permissions::to_string(caller_for(f)), MEITH_VERSION, client);
}

void connection::on_list_tools(const protocol::frame_head& f,
                               const protocol::list_tools_frame& body, std::string& audit_fields) {
    const auto who = caller_for(f);
    const auto profile = profile_for(f);
    auto format = tools::list_format::meith;
    if (!body.list_format.empty()) {
        const auto parsed = tools::list_format_from_string(body.list_format);
        if (!parsed) {
            protocol::append_error_frame(outbound_, f.request_id,
                                         fmt::format("unknown list_tools format \"{}\"; one of {}",
                                                     body.list_format, tools::list_format_names()));
            return;
        }
        format = *parsed;
    }
    if (body.has_query) {
        protocol::append_tools_list_head(outbound_, f.request_id);
        const std::size_t n = registry_.append_tool_search(
            outbound_, body.list_query, body.list_limit, who, format, profile.get());
        protocol::append_tools_list_tail(outbound_);
        protocol::json_members m(audit_fields);
        registry_.append_redacted(m.key("query"), body.list_query);
        m.number("matches", n);
    } else if (body.has_page) {
        // docs/protocol.md §5 "Pages": a slice of the listing, and how many it holds in all.
        protocol::append_tools_list_head(outbound_, f.request_id);
        const std::size_t total =
            registry_.append_tool_page(outbound_, who, format, profile.get(), body.list_offset,
                                       body.list_limit, body.list_permitted);
        protocol::append_tools_list_tail(outbound_, total,
                                         profile ? std::optional<std::string_view>(profile->name())
                                                 : std::nullopt);
        protocol::json_members(audit_fields).number("offset", body.list_offset);
    } else if (body.has_tags || body.has_models) {
        list_tools_tagged(f, body, who, format, profile);
    } else {
        protocol::append_tools_list_head(outbound_, f.request_id);
        registry_.append_tool_descriptors(outbound_, who, format, profile.get());
        if (profile) // docs/protocol.md §23: how many it hides (check_policy says why, per tool)
            protocol::append_tools_list_tail(outbound_, std::nullopt, profile->name(),
                                             registry_.count_hidden(*profile));
        else
            protocol::append_tools_list_tail(outbound_);
    }
    protocol::json_members m(audit_fields);
    m.string("caller", permissions::to_string(who));
    if (profile) m.string("client", profile->name());
    m.number("tools", registry_.tool_count());
    if (body.has_tags)
        m.raw("tags", registry_.redactor().summarize_json(simdjson::minify(body.tags)));
    if (format != tools::list_format::meith) m.string("format", tools::to_string(format));
}

void connection::list_tools_tagged(const protocol::frame_head& f,
                                   const protocol::list_tools_frame& body, permissions::caller who,
                                   tools::list_format format,
                                   registry::registry::profile_ptr profile) {
    // Tag filtering, maybe asking hosts' get_tags: rendered afresh, answered when done.
    std::optional<std::vector<std::string>> tags;
    if (body.has_tags) {
        tags.emplace();
        for (auto t : body.tags)
            tags->emplace_back(t.get_string().value_unsafe());
    }
    std::string models = body.has_models ? simdjson::minify(body.models) : std::string();
    std::optional<std::string> id;
    if (f.request_id) id = std::string(*f.request_id);
    ++async_replies_;
    registry_.list_tools_filtered(
        who, format, std::move(tags), std::move(models),
        [weak = weak_from_this(), id](std::string tools) {
            auto self = weak.lock();
            if (!self) return;
            --self->async_replies_;
            if (self->closed_) return;
            protocol::append_tools_list_head(self->outbound_, id);
            self->outbound_.append(tools);
            protocol::append_tools_list_tail(self->outbound_);
            self->flush();
        },
        std::move(profile));
}

void connection::on_list_sources(const protocol::frame_head& f, std::string&) {
    protocol::append_sources_list(outbound_, f.request_id, registry_.sources_json());
}

void connection::on_check_policy(const protocol::frame_head& f, std::string&) {
    const auto profile = profile_for(f);
    protocol::append_policy_decision(
        outbound_, f.request_id,
        registry_.explain_policy(f.tool_name, caller_for(f), profile.get()));
}

void connection::on_restart_source(const protocol::frame_head& f,
                                   const protocol::restart_source_frame& body, std::string&) {
    if (!registry_.restart_source(body.source_name))
        protocol::append_error_frame(outbound_, f.request_id,
                                     "no source named '" + std::string(body.source_name) + "'",
                                     protocol::refusal::no_such_source);
    else
        protocol::append_source_restarted(outbound_, f.request_id, body.source_name);
}

void connection::on_learn_source(const protocol::frame_head& f,
                                 const protocol::learn_source_frame& body, std::string&) {
    const auto outcome = registry_.learn_source(body.source_name, body.learn_stop);
    if (outcome.error)
        protocol::append_error_frame(outbound_, f.request_id, *outcome.error,
                                     outcome.error->starts_with("no source named")
                                         ? protocol::refusal::no_such_source
                                         : protocol::refusal::protocol_error);
    else
        protocol::append_reply(outbound_, body.learn_stop ? "source_learned" : "source_learning",
                               f.request_id, outcome.members);
}

void connection::on_reload_config(const protocol::frame_head& f, std::string&) {
    if (auto result = registry_.reload_config())
        protocol::append_config_reloaded(outbound_, f.request_id, *result);
    else
        protocol::append_error_frame(outbound_, f.request_id,
                                     "this daemon cannot reload its config");
}

void connection::on_cancel_tool_call(const protocol::frame_head& f, std::string& audit_fields) {
    auto it = calls_.find(std::string(*f.request_id));
    protocol::json_members m(audit_fields);
    registry_.append_redacted(m.key("requestId"), *f.request_id);
    m.boolean("inFlight", it != calls_.end());
    if (it == calls_.end()) return; // naming no call in flight changes nothing (§3)
    auto c = it->second;
    c->resolve(protocol::tool_result::failure(protocol::error_code::cancelled,
                                              "the call was cancelled by the client"),
               tools::call_end::cancel);
}

void connection::on_other(const protocol::frame_head&, std::string&) {
    // Unknown types are ignored (§3: forward compatibility); the decoder answered bad ones.
}

void connection::handle_oversized() {
    // Found by scanning the whole frame's top level as it passed: a requestId written after a
    // long `arguments` is found, and one nested inside them is not taken for it.
    using kind = protocol::top_level_scanner::value::kind;
    const auto& rid = framer_.oversized_member(0);
    const auto& type = framer_.oversized_member(1);
    const auto id = rid.k == kind::string ? protocol::usable_request_id(rid.text) : std::nullopt;
    const std::string why =
        "frame of " + std::to_string(framer_.dropped_bytes()) +
        " bytes is over limits.max_frame_bytes (" +
        std::to_string(registry_.cfg().limits.max_frame_bytes) +
        "); raise `max_frame_bytes` under [limits] in meithd.toml (then `meith reload`), or send "
        "less (a text-payload tool reads a file by path)";
    protocol::append_error_frame(outbound_, id, why, protocol::refusal::frame_too_large);
    if (type.k == kind::string && type.text == "tool_call") {
        protocol::frame_head f;
        f.type = frame_type::tool_call;
        f.request_id = id;
        audit_rejected_call(f, why);
    }
}

registry::registry::profile_ptr connection::profile_for(const protocol::frame_head& f) const {
    if (!client_name_.empty()) {
        if (auto p = registry_.client_profile(client_name_)) return p;
        return std::make_shared<const permissions::client_profile>(
            permissions::client_profile::removed(client_name_));
    }
    return registry_.profile_for_agent(agent_for(f));
}

permissions::caller connection::caller_for(const protocol::frame_head& f) const {
    if (!client_name_.empty() || f.agent || !hello_agent_.empty())
        if (const auto p = profile_for(f); p && p->mapped_caller()) return *p->mapped_caller();
    if (f.caller_claim) return permissions::caller_from_claim(*f.caller_claim);
    if (has_hello_claim_) return permissions::caller_from_claim(hello_claim_);
    return permissions::caller::plugin;
}

std::string_view connection::agent_for(const protocol::frame_head& f) const {
    return f.agent ? *f.agent : std::string_view(hello_agent_);
}

std::string_view connection::claim_for(const protocol::frame_head& f) const {
    if (f.caller_claim) return *f.caller_claim;
    if (has_hello_claim_) return hello_claim_;
    return {};
}

void connection::on_preview_tool_call(const protocol::frame_head& f, std::string&) {
    // docs/protocol.md §13: permission-checked like a call, never runs the tool, audited.
    const std::string request_id(*f.request_id);
    const auto profile = profile_for(f);
    auto t = registry_.find_tool(profile ? profile->real_name(f.tool_name) : f.tool_name);
    // The decision a call would meet now (a quarantined tool is denied), as dispatch makes it.
    std::optional<registry::registry::call_decision> verdict;
    if (t) verdict = registry_.decide_call(*t, caller_for(f), profile.get());
    if (verdict && verdict->hidden) {
        protocol::append_error_frame(outbound_, f.request_id, verdict->decision.reason,
                                     protocol::refusal::not_allowed);
        return;
    }
    if (!t) {
        protocol::append_error_frame(outbound_, f.request_id,
                                     "unknown tool '" + std::string(f.tool_name) + "'",
                                     protocol::refusal::unknown_tool);
        return;
    }
    const bool text_payload = t->payload_kind == "text";
    if (f.has_arguments && f.arguments.is_string() != text_payload) {
        protocol::append_error_frame(
            outbound_, f.request_id,
            text_payload ? "'" + t->name + "' is a text-payload tool: arguments must be a string"
                         : "'" + t->name + "' takes an arguments object");
        return;
    }
    const std::string args_json = f.has_arguments ? simdjson::minify(f.arguments)
                                  : text_payload  ? std::string(R"("")")
                                                  : std::string("{}");
    const auto who = caller_for(f);
    const auto permission = verdict->decision.outcome();
    std::string fields;
    protocol::json_members m(fields);
    m.string("sessionId", session_id_);
    registry_.append_redacted(m.key("requestId"), request_id);
    m.string("toolName", t->name).string("caller", permissions::to_string(who));
    if (profile) m.string("client", profile->name());
    m.string("permission", permissions::to_string(permission))
        .raw("args", registry_.redactor().summarize_json(args_json));
    ++async_replies_;
    registry_.preview_call(
        t, args_json,
        [weak = weak_from_this(), request_id, name = t->name, permission,
         fields = std::move(fields)](registry::registry::preview p) mutable {
            auto self = weak.lock();
            if (!self) return;
            --self->async_replies_;
            protocol::json_members(fields).string("previewBy", p.from_host ? "host" : "default");
            self->registry_.audit_trail().event("tool_preview", fields);
            if (self->closed_) return;
            protocol::append_tool_preview(self->outbound_, request_id, name, p.text,
                                          permissions::to_string(permission));
            self->flush();
        });
}

void connection::on_tool_call(const protocol::frame_head& f, const protocol::tool_call_frame& body,
                              std::string&) {
    const std::string_view id = *f.request_id;
    std::string key(id);
    if (calls_.count(key)) {
        const std::string why = "requestId '" + key + "' is already in flight on this connection";
        protocol::append_error_frame(outbound_, id, why);
        audit_rejected_call(f, why, body.timeout_ms);
        return;
    }
    const auto limit = registry_.cfg().limits.max_calls_in_flight_per_connection;
    if (calls_.size() >= limit) {
        const std::string why = "too many calls in flight on this connection (limit " +
                                std::to_string(limit) +
                                ", limits.max_calls_in_flight_per_connection)";
        protocol::append_error_frame(outbound_, id, why, protocol::refusal::limit_reached);
        audit_rejected_call(f, why, body.timeout_ms);
        return;
    }
    auto c = std::make_shared<tools::call>(socket_.get_executor(), shared_from_this());
    c->request_id = key;
    c->session_id = session_id_;
    c->caller = caller_for(f);
    c->claimed_caller = std::string(claim_for(f));
    c->agent = std::string(agent_for(f));
    c->profile = profile_for(f);
    c->traceparent = std::string(body.traceparent);
    c->tool_name = std::string(f.tool_name);
    c->timeout_ms = body.timeout_ms.value_or(0);
    c->result_model = body.result_model;
    c->result_display = body.display;
    calls_.emplace(std::move(key), c);
    if (body.call_error)
        registry_.reject(c, protocol::error_code::validation_error, *body.call_error,
                         f.has_arguments ? &f.arguments : nullptr);
    else
        registry_.dispatch(c, f.arguments);
}

void connection::audit_rejected_call(const protocol::frame_head& f, std::string_view reason,
                                     std::optional<std::uint64_t> timeout_ms) {
    // The same record as a tool_call line, written by the registry (registry/call_audit.hpp).
    registry::rejected_call r;
    r.request_id = f.request_id;
    r.session_id = session_id_;
    r.caller = caller_for(f);
    r.claimed_caller = claim_for(f);
    r.agent = agent_for(f);
    const auto profile = profile_for(f);
    if (profile) r.client = profile->name();
    r.tool_name = f.tool_name;
    r.reason = reason;
    r.timeout_ms = timeout_ms;
    r.arguments = f.has_arguments ? &f.arguments : nullptr;
    registry_.audit_rejected_call(r);
}

} // namespace meith::daemon
