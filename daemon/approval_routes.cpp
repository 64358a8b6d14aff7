// approval_routes: the grant and approval frames of a connection (PROTOCOL.md §12,
// docs/protocol.md §14).
//
// approver_hello proves a person at a terminal: the secret from `$MEITH_HOME/approver.secret`
// (only the user can read it) and a controlling terminal on the peer process (Linux:
// /proc/<pid>/stat tty_nr ≠ 0; macOS: the kernel's process record), same uid being checked for
// every connection already (§5). Anything else is refused with an error frame and audited as
// `approver_rejected`. Only approvers answer held calls, grant and revoke; any connection may
// list the grants that apply to its own session.
#include "daemon/connection.hpp"

#include "protocol/json_writer.hpp"

#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <variant>
#include <vector>

#include <fmt/format.h>
#include <unistd.h>

namespace meith::daemon {

using protocol::append_json_string;

namespace {

/// The grant frame's `grant` object as a request, or an error text.
std::variant<approvals::grant_request, std::string> parse_grant(simdjson::dom::object g) {
    approvals::grant_request r;
    bool has_caps = false;
    for (auto field : g) {
        const std::string_view key = field.key;
        const auto& v = field.value;
        std::string_view s;
        if (v.is_null()) continue;
        if (key == "caller") {
            if (v.get_string().get(s) != simdjson::SUCCESS || (s != "cli" && s != "plugin"))
                return std::string(R"(grant.caller must be "cli" or "plugin")");
            r.who = permissions::caller_from_claim(s);
        } else if (key == "sessionId") {
            if (v.get_string().get(s) != simdjson::SUCCESS || s.empty())
                return std::string("grant.sessionId must be a non-empty string");
            r.session_id = std::string(s);
        } else if (key == "tool") {
            if (v.get_string().get(s) != simdjson::SUCCESS || s.empty())
                return std::string("grant.tool must be a non-empty string (a glob)");
            r.tool = std::string(s);
        } else if (key == "capabilities") {
            simdjson::dom::array caps;
            if (v.get_array().get(caps) != simdjson::SUCCESS)
                return std::string("grant.capabilities must be an array of capability names");
            for (auto cap : caps) {
                std::optional<permissions::capability> c;
                if (cap.get_string().get(s) == simdjson::SUCCESS)
                    c = permissions::capability_from_string(s);
                if (!c)
                    return "unknown capability " + simdjson::minify(cap) +
                           " in grant.capabilities (read-only, writes-files, controls-browser, "
                           "starts-process, accesses-network, destructive, unknown)";
                r.capabilities |=
                    static_cast<permissions::capability_set>(1u << static_cast<unsigned>(*c));
            }
            has_caps = true;
        } else if (key == "uses" || key == "expiresInMs") {
            std::uint64_t n = 0;
            if (v.get_uint64().get(n) != simdjson::SUCCESS || n == 0)
                return "grant." + std::string(key) + " must be a positive integer";
            // Far from the clocks' overflow (~292 years of nanoseconds), as timeouts are.
            constexpr std::uint64_t max_expiry_ms = 1'000'000'000'000; // ~31 years
            if (key == "expiresInMs" && n > max_expiry_ms)
                return "grant.expiresInMs must be at most 1000000000000 (about 31 years)";
            (key == "uses" ? r.uses : r.expires_in_ms) = n;
        } else {
            return "unknown member \"" + std::string(key) +
                   "\" in grant (caller, sessionId, tool, capabilities, uses, expiresInMs)";
        }
    }
    if (!has_caps || r.capabilities == 0)
        return std::string("grant.capabilities must name at least one capability");
    return r;
}

} // namespace

void connection::deliver(std::string_view frame) {
    if (closed_) return;
    outbound_.append(frame);
    flush();
}

void connection::on_approver_hello(const protocol::frame_head& f,
                                   const protocol::approver_hello_frame& body, std::string&) {
    std::string fields;
    protocol::json_members(fields)
        .string("sessionId", session_id_)
        .number("pid", static_cast<std::uint64_t>(peer_.pid))
        .number("uid", peer_.uid);
    auto& desk = registry_.approvals();
    std::optional<std::string> problem;
    if (!desk.approver_secret_matches(body.secret))
        problem = "the secret is not the one in approver.secret";
    else
        problem = platform::controlling_terminal_problem(peer_.pid, accepted_ticks_);
    if (problem) {
        protocol::append_error_frame(outbound_, f.request_id,
                                     "not accepted as an approver: " + *problem,
                                     protocol::refusal::approver_refused);
        audit_approver_rejected(*problem);
        return;
    }
    registry_.audit_trail().event("approver_connected", fields);
    protocol::append_approver_hello_result(outbound_, f.request_id, session_id_, desk.held_count());
    if (!approver_) {
        approver_ = true;
        desk.add_approver(*this); // the calls held so far follow the reply
    }
}

void connection::audit_approver_rejected(std::string_view reason) {
    std::string fields;
    protocol::json_members(fields)
        .string("sessionId", session_id_)
        .number("pid", static_cast<std::uint64_t>(peer_.pid))
        .number("uid", peer_.uid)
        .string("reason", reason);
    registry_.audit_trail().event("approver_rejected", fields);
}

bool connection::refuse_unless_approver(const protocol::frame_head& f) {
    if (approver_) return false;
    const std::string why = std::string("only an approver may send ") + std::string(f.type_name) +
                            " (approver_hello with the secret, from a terminal)";
    protocol::append_error_frame(outbound_, f.request_id, why, protocol::refusal::not_an_approver);
    std::string fields;
    protocol::json_members(fields)
        .string("sessionId", session_id_)
        .string("frame", f.type_name)
        .string("reason", why);
    registry_.audit_trail().event("frame_refused", fields);
    return true;
}

void connection::on_approve(const protocol::frame_head& f, const protocol::approve_frame& body,
                            std::string&) {
    if (refuse_unless_approver(f)) return;
    const auto answer = approvals::approval_answer_from(body.decision);
    if (!answer) {
        protocol::append_error_frame(
            outbound_, f.request_id,
            R"(approve: decision must be "allow_once", "allow_session", "allow_always" (egress )"
            R"(requests only) or "deny")");
        return;
    }
    if (*answer == approvals::approval_answer::allow_always &&
        registry_.approvals().is_held_call(body.approval_id)) {
        protocol::append_error_frame(
            outbound_, f.request_id,
            R"(approve: "allow_always" answers egress requests only; answer a held call with )"
            R"("allow_once", "allow_session" or "deny")");
        return;
    }
    if (auto err = registry_.approvals().answer(body.approval_id, *answer, std::string(body.reason),
                                                *this))
        protocol::append_error_frame(outbound_, f.request_id, *err,
                                     protocol::refusal::no_such_approval);
}

void connection::on_grant(const protocol::frame_head& f, const protocol::grant_frame& body,
                          std::string&) {
    if (refuse_unless_approver(f)) return;
    auto parsed = parse_grant(body.grant);
    if (auto* err = std::get_if<std::string>(&parsed)) {
        protocol::append_error_frame(outbound_, f.request_id, *err);
        return;
    }
    const std::string id =
        registry_.approvals().add_grant(std::get<approvals::grant_request>(parsed), session_id_);
    protocol::append_grant_result(outbound_, "grant_result", f.request_id, id);
}

void connection::on_revoke(const protocol::frame_head& f, const protocol::revoke_frame& body,
                           std::string&) {
    if (refuse_unless_approver(f)) return;
    if (!registry_.approvals().revoke(body.grant_id, session_id_)) {
        protocol::append_error_frame(outbound_, f.request_id,
                                     "no grant '" + std::string(body.grant_id) +
                                         "' (revoked, used up or expired already?)",
                                     protocol::refusal::no_such_grant);
        return;
    }
    protocol::append_grant_result(outbound_, "revoke_result", f.request_id, body.grant_id);
}

void connection::on_accept_tool(const protocol::frame_head& f,
                                const protocol::accept_tool_frame& body, std::string&) {
    // A tool's changed definition is trusted again only by a person (docs/protocol.md §22).
    if (refuse_unless_approver(f)) return;
    if (body.accept_preview) {
        std::string members;
        if (auto err = registry_.append_held_definition(members, f.tool_name)) {
            protocol::append_error_frame(outbound_, f.request_id, *err);
            return;
        }
        protocol::append_reply(outbound_, "tool_definition", f.request_id, members);
        return;
    }
    if (auto err = registry_.accept_tool(f.tool_name, session_id_)) {
        protocol::append_error_frame(outbound_, f.request_id, *err);
        return;
    }
    protocol::append_tool_accepted(outbound_, f.request_id, f.tool_name);
}

void connection::on_list_grants(const protocol::frame_head& f, std::string&) {
    // An approver sees every grant; anyone else those that apply to its own session.
    protocol::append_grants_list(
        outbound_, f.request_id,
        registry_.approvals().grants_json(approver_ ? nullptr : &session_id_));
}

} // namespace meith::daemon
