#include "approvals/approvals.hpp"
#include "approvals/approvals_internal.hpp"

#include "config/private_file.hpp"
#include "permissions/secret.hpp"
#include "protocol/json_writer.hpp"
#include "protocol/server_frames.hpp"
#include "tools/tool_table.hpp"

#include <asio/post.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>

#include <fcntl.h>
#include <simdjson.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

namespace meith::approvals {

using detail::append_optional_uint;
using detail::epoch_ms;

using permissions::grant;
using permissions::grant_end;
using permissions::wall_clock;
using protocol::append_json_string;

namespace {

/// Appends `s` as a JSON string with secrets redacted (as every audit line does).
void append_redacted_json_string(std::string& out, std::string_view s) {
    audit::default_redactor().append_redacted_json_string(out, s);
}

/// `t` as a JSON string "2026-11-24T10:00:00.123Z".
void append_rfc3339(std::string& out, wall_clock::time_point t) {
    const std::int64_t ms = epoch_ms(t);
    const std::time_t secs = static_cast<std::time_t>(ms / 1000);
    std::tm tm{};
    ::gmtime_r(&secs, &tm);
    char buf[40];
    const int n = std::snprintf(buf, sizeof buf, "\"%04d-%02d-%02dT%02d:%02d:%02d.%03dZ\"",
                                tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
                                tm.tm_sec, static_cast<int>(ms % 1000));
    out.append(buf, n > 0 ? static_cast<std::size_t>(n) : 0);
}

} // namespace

std::optional<approval_answer> approval_answer_from(std::string_view s) {
    if (s == "allow_once") return approval_answer::allow_once;
    if (s == "allow_session") return approval_answer::allow_session;
    if (s == "allow_always") return approval_answer::allow_always;
    if (s == "deny") return approval_answer::deny;
    return std::nullopt;
}

std::string_view to_string(approval_answer a) {
    switch (a) {
    case approval_answer::allow_once:
        return "allow_once";
    case approval_answer::allow_session:
        return "allow_session";
    case approval_answer::allow_always:
        return "allow_always";
    case approval_answer::deny:
        return "deny";
    }
    return "deny";
}

approval_service::approval_service(asio::any_io_executor ex, audit::audit_trail& audit,
                                   const audit::redactor& redactor)
    : ex_(ex), audit_(audit), redactor_(redactor), expiry_timer_(ex) {
}

approval_service::~approval_service() {
    *alive_ = false;
    if (save_pending_) write_grants(); // the posted rewrite will not run now
}

// ---- approvers ------------------------------------------------------------------------------

bool approval_service::approver_secret_matches(std::string_view secret) const {
    return !secret_.empty() && permissions::constant_time_equal(secret, secret_);
}

void approval_service::add_approver(approver& a) {
    if (std::find(approvers_.begin(), approvers_.end(), &a) != approvers_.end()) return;
    approvers_.push_back(&a);
    for (const auto& h : held_)
        if (!h.frame.empty()) a.deliver(h.frame);
}

void approval_service::remove_approver(approver& a) {
    std::erase(approvers_, &a);
}

void approval_service::broadcast(std::string_view frame) {
    for (approver* a : approvers_)
        a->deliver(frame);
}

// ---- held calls -------------------------------------------------------------------------------

namespace {

/// Collects the string values under secret keys of `v` (as the args summary redacts them),
/// bounded in depth and count.
void secret_values(const audit::redactor& r, simdjson::dom::element v,
                   std::vector<std::string_view>& out, int depth = 0) {
    if (depth > 32 || out.size() >= 64) return;
    simdjson::dom::object obj;
    simdjson::dom::array arr;
    if (v.get_object().get(obj) == simdjson::SUCCESS) {
        for (auto field : obj) {
            std::string_view text;
            if (r.is_secret_key(field.key) &&
                field.value.get_string().get(text) == simdjson::SUCCESS)
                out.push_back(text);
            else
                secret_values(r, field.value, out, depth + 1);
        }
    } else if (v.get_array().get(arr) == simdjson::SUCCESS) {
        for (auto item : arr)
            secret_values(r, item, out, depth + 1);
    }
}

} // namespace

std::string approval_service::redacted_preview(std::string_view preview,
                                               std::string_view args_json) const {
    // A tool host writes the preview; it may quote the arguments whole. What the args summary
    // redacts (values under secret-looking keys) is taken out of it too, then the text rules
    // run over it as over any text.
    std::string text(preview);
    simdjson::dom::parser parser;
    simdjson::dom::element args;
    if (!text.empty() &&
        parser.parse(args_json.data(), args_json.size()).get(args) == simdjson::SUCCESS) {
        std::vector<std::string_view> secrets;
        secret_values(redactor_, args, secrets);
        for (const auto secret : secrets) {
            // Shorter values would take ordinary words with them; the text rules still run.
            if (secret.size() < 4) continue;
            for (auto at = text.find(secret); at != std::string::npos;
                 at = text.find(secret, at + 10))
                text.replace(at, secret.size(), "[REDACTED]");
        }
    }
    return redactor_.redact_text(text);
}

std::string approval_service::hold(const tools::call_ptr& c, std::string_view preview,
                                   on_answer answered) {
    std::string id = "a_" + permissions::random_hex(8);
    std::string capabilities;
    permissions::append_capabilities(capabilities, c->target ? c->target->capabilities : 0);
    const std::string agent = c->agent.empty() ? "" : redactor_.redact_text(c->agent);
    const std::string args =
        c->args_summary.empty() ? redactor_.summarize_json(c->args_json) : c->args_summary;
    const std::string shown = redacted_preview(preview, c->args_json);
    protocol::approval_request_frame f;
    f.approval_id = id;
    f.request_id = c->request_id;
    f.session_id = c->session_id;
    f.caller = permissions::to_string(c->caller);
    if (!c->agent.empty()) f.agent = agent;
    // The person sees which client profile asks (docs/protocol.md §23).
    if (c->profile) f.client = c->profile->name();
    f.tool_name = c->tool_name;
    f.capabilities_json = capabilities;
    f.reason = c->decision.reason;
    f.args_json = args;
    f.preview = shown;
    f.timeout_ms = c->timeout_ms;
    std::string frame;
    protocol::append_approval_request(frame, f);

    std::string fields;
    protocol::json_members m(fields);
    m.string("approvalId", id);
    append_redacted_json_string(m.key("requestId"), c->request_id);
    m.string("sessionId", c->session_id).string("caller", permissions::to_string(c->caller));
    append_redacted_json_string(m.key("toolName"), c->tool_name);
    m.number("approvers", approvers_.size());
    audit_.event("approval_request", fields);

    broadcast(frame);
    held_.push_back({id, c, std::move(frame), std::move(answered), nullptr});
    return id;
}

std::string approval_service::hold_egress(std::string_view source,
                                          const egress::connection_record& r,
                                          const tools::call_ptr& owner,
                                          std::chrono::milliseconds timeout, on_answer answered) {
    std::string id = "a_" + permissions::random_hex(8);
    const std::string host = redactor_.redact_text(r.host);
    const std::string target = (host.find(':') != std::string::npos ? "[" + host + "]" : host) +
                               ":" + std::to_string(r.port);
    const std::string reason = "source '" + std::string(source) + "' connects to " + target +
                               ", which no rule of its network.allow or network.deny names";
    // What the call it belongs to says, redacted as every tool- or client-supplied string is.
    std::string request_id, session_id, tool_name;
    protocol::egress_request_frame f;
    f.approval_id = id;
    f.source = source;
    f.host = host;
    f.port = r.port;
    f.target = target;
    f.via = r.protocol;
    if (owner) {
        request_id = redactor_.redact_text(owner->request_id);
        session_id = redactor_.redact_text(owner->session_id);
        tool_name = redactor_.redact_text(owner->tool_name);
        f.request_id = request_id;
        f.session_id = session_id;
        f.caller = permissions::to_string(owner->caller);
        f.tool_name = tool_name;
    }
    f.reason = reason;
    f.timeout_ms = static_cast<std::uint64_t>(timeout.count());
    std::string frame;
    protocol::append_egress_request(frame, f);

    std::string fields;
    protocol::json_members m(fields);
    m.string("approvalId", id).string("kind", "egress").string("source", source);
    m.string("host", host).number("port", r.port);
    if (owner) {
        append_redacted_json_string(m.key("requestId"), owner->request_id);
        m.string("sessionId", owner->session_id)
            .string("caller", permissions::to_string(owner->caller));
        append_redacted_json_string(m.key("toolName"), owner->tool_name);
    }
    m.number("approvers", approvers_.size());
    audit_.event("approval_request", fields);

    broadcast(frame);
    auto timer = std::make_shared<asio::steady_timer>(ex_, timeout);
    timer->async_wait(
        [this, id, timeout, alive = std::weak_ptr<bool>(alive_)](const std::error_code& ec) {
            if (ec || !alive.lock()) return;
            auto it = std::find_if(held_.begin(), held_.end(),
                                   [&](const held_call& h) { return h.id == id; });
            if (it == held_.end()) return;
            on_answer answered = std::move(it->answered);
            const std::string why =
                "no approver answered within " + std::to_string(timeout.count() / 1000) + " s";
            withdraw(id, why);
            answered(approval_answer::deny, why);
        });
    held_.push_back({id, {}, std::move(frame), std::move(answered), std::move(timer)});
    return id;
}

bool approval_service::is_held_call(std::string_view approval_id) const {
    return std::any_of(held_.begin(), held_.end(),
                       [&](const held_call& h) { return h.id == approval_id && !h.egress_timer; });
}

std::vector<tools::call_ptr> approval_service::held_calls() const {
    std::vector<tools::call_ptr> out;
    for (const auto& h : held_)
        if (auto c = h.c.lock()) out.push_back(std::move(c));
    return out;
}

void approval_service::withdraw(const std::string& approval_id, std::string_view why) {
    auto it = std::find_if(held_.begin(), held_.end(),
                           [&](const held_call& h) { return h.id == approval_id; });
    if (it == held_.end()) return;
    held_.erase(it);
    std::string frame;
    protocol::append_approval_resolved(frame, approval_id, "withdrawn", why);
    broadcast(frame);
    std::string fields;
    protocol::json_members(fields)
        .string("approvalId", approval_id)
        .string("decision", "withdrawn")
        .string("reason", why)
        .null("approverSession");
    audit_.event("approval_decision", fields);
}

std::optional<std::string> approval_service::answer(std::string_view approval_id, approval_answer a,
                                                    std::string reason, approver& by) {
    auto it = std::find_if(held_.begin(), held_.end(),
                           [&](const held_call& h) { return h.id == approval_id; });
    if (it == held_.end())
        return "no held call with approvalId '" + std::string(approval_id) +
               "' (already decided, withdrawn, or never asked)";
    if (a == approval_answer::allow_always && !it->egress_timer)
        return "allow_always answers egress requests only; answer a held call with allow_once, "
               "allow_session or deny";
    held_call h = std::move(*it);
    held_.erase(it);

    std::string fields;
    protocol::json_members m(fields);
    m.string("approvalId", h.id).string("decision", to_string(a));
    if (reason.empty())
        m.null("reason");
    else
        append_redacted_json_string(m.key("reason"), reason);
    m.string("approverSession", by.approver_session());
    audit_.event("approval_decision", fields);

    std::string frame;
    protocol::append_approval_resolved(frame, h.id, to_string(a), reason);
    broadcast(frame);

    if (h.egress_timer) {
        h.egress_timer->cancel();
        h.answered(a, std::move(reason));
        return std::nullopt;
    }
    auto c = h.c.lock();
    if (!c || c->resolved()) return std::nullopt; // ended meanwhile: nothing more to do
    if (a == approval_answer::allow_session && c->target) {
        grant_request g;
        g.who = c->caller;
        g.session_id = c->session_id;
        // The exact tool: a name is a glob that matches only itself once its specials are
        // escaped.
        std::string exact;
        for (char ch : c->target->name) {
            if (ch == '*' || ch == '?' || ch == '[' || ch == '\\') exact += '\\';
            exact += ch;
        }
        g.tool = std::move(exact);
        g.capabilities = c->target->capabilities
                             ? c->target->capabilities
                             : static_cast<permissions::capability_set>(
                                   1u << static_cast<unsigned>(permissions::capability::unknown));
        add_grant(g, by.approver_session(), h.id);
    }
    h.answered(a, std::move(reason));
    return std::nullopt;
}

// ---- grants -----------------------------------------------------------------------------------

void approval_service::append_grant_json(std::string& out, const grant& g, bool redacted) const {
    out += '{';
    protocol::json_members m(out);
    const auto str = [&](std::string_view name, const std::optional<std::string>& s) {
        if (!s)
            m.null(name);
        else if (redacted)
            append_redacted_json_string(m.key(name), *s);
        else
            m.string(name, *s);
    };
    m.string("grantId", g.id);
    m.string_or_null("caller",
                     g.who ? std::optional(permissions::to_string(*g.who)) : std::nullopt);
    str("sessionId", g.session_id);
    str("tool", g.tool);
    permissions::append_capabilities(m.key("capabilities"), g.capabilities);
    append_optional_uint(m.key("usesLeft"), g.uses_left);
    if (g.expires_at)
        append_rfc3339(m.key("expiresAt"), *g.expires_at);
    else
        m.null("expiresAt");
    append_rfc3339(m.key("createdAt"), g.created_at);
    m.string_or_null("approvalId", g.approval_id.empty()
                                       ? std::nullopt
                                       : std::optional<std::string_view>(g.approval_id));
    out += '}';
}

std::string approval_service::add_grant(const grant_request& r, std::string_view by,
                                        std::string_view approval_id) {
    grant g;
    g.id = "g_" + permissions::random_hex(8);
    g.who = r.who;
    g.session_id = r.session_id;
    g.tool = r.tool;
    g.capabilities = r.capabilities;
    g.uses_left = r.uses;
    if (r.expires_in_ms) g.expires_at = g.created_at + std::chrono::milliseconds(*r.expires_in_ms);
    g.approval_id = std::string(approval_id);
    const grant& added = grants_.add(std::move(g));

    std::string fields;
    protocol::json_members m(fields);
    append_grant_json(m.key("grant"), added, true);
    m.string("by", by);
    audit_.event("grant_created", fields);
    std::string id = added.id;
    schedule_expiry();
    save();
    return id;
}

bool approval_service::revoke(std::string_view id, std::string_view by) {
    auto g = grants_.remove(id);
    if (!g) return false;
    audit_grant_end(*g, grant_end::revoked, by);
    schedule_expiry();
    save();
    return true;
}

void approval_service::audit_grant_end(const grant& g, grant_end why, std::string_view by) {
    std::string fields;
    protocol::json_members(fields)
        .string("grantId", g.id)
        .string("why", permissions::to_string(why))
        .string_or_null("by", by.empty() ? std::nullopt : std::optional(by));
    audit_.event(why == grant_end::revoked ? "grant_revoked" : "grant_expired", fields);
}

std::string approval_service::grants_json(const std::string* session) const {
    std::string out = "[";
    bool first = true;
    const auto now = wall_clock::now();
    for (const auto& g : grants_.all()) {
        if (g.expires_at && *g.expires_at <= now) continue;
        if (session && g.session_id && *g.session_id != *session) continue;
        if (!first) out += ',';
        first = false;
        append_grant_json(out, g, false);
    }
    out += ']';
    return out;
}

std::optional<std::string> approval_service::use_grant(const tools::call& c,
                                                       permissions::capability_set needed) {
    const auto now = wall_clock::now();
    const grant* g = grants_.match(c.target ? std::string_view(c.target->name) : c.tool_name,
                                   needed, c.caller, c.session_id, now);
    if (!g) return std::nullopt;
    std::string id = g->id;
    std::optional<std::uint64_t> left;
    if (g->uses_left) left = *g->uses_left - 1;
    std::string fields;
    protocol::json_members m(fields);
    m.string("grantId", id);
    append_redacted_json_string(m.key("requestId"), c.request_id);
    m.string("sessionId", c.session_id);
    append_redacted_json_string(m.key("toolName"), c.tool_name);
    append_optional_uint(m.key("usesLeft"), left);
    audit_.event("grant_used", fields);
    if (auto used_up = grants_.use(id)) {
        audit_grant_end(*used_up, grant_end::used_up, {});
        save();
    } else if (left) {
        save();
    }
    return id;
}

void approval_service::end_session(std::string_view session) {
    const auto gone = grants_.remove_session(session);
    for (const auto& g : gone)
        audit_grant_end(g, grant_end::session_ended, {});
    if (!gone.empty()) schedule_expiry();
}

void approval_service::schedule_expiry() {
    const auto next = grants_.next_expiry();
    if (!next) {
        expiry_timer_.cancel();
        return;
    }
    // The wall clock's deadline as a steady one (a grant expires after its span of time).
    const auto in = *next - wall_clock::now();
    expiry_timer_.expires_after(std::max(std::chrono::duration_cast<std::chrono::milliseconds>(in),
                                         std::chrono::milliseconds(0)) +
                                std::chrono::milliseconds(1));
    expiry_timer_.async_wait([this, alive = std::weak_ptr<bool>(alive_)](std::error_code ec) {
        if (ec || alive.expired()) return;
        expire_now();
    });
}

void approval_service::expire_now() {
    const auto gone = grants_.expire(wall_clock::now());
    for (const auto& g : gone)
        audit_grant_end(g, grant_end::expired, {});
    if (!gone.empty()) save();
    schedule_expiry();
}

} // namespace meith::approvals
