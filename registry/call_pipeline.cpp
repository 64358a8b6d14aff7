// call_pipeline: the one path every call takes (docs/architecture.md "The path of one call").
//
// Owns `call` resolution and the registry's dispatch: shutting down? -> audit failing under
// fail_closed? -> lookup -> validate the arguments -> permission -> deadline -> observe and
// filter hooks before_execution -> run on the source -> (the tool's result) observe and filter
// hooks after_execution -> finish: the result-size limit, the audit line (once), the reply.
// Also rejections without a run, and aborting every call at shutdown.
#include "registry/registry.hpp"

#include "hooks/hooks.hpp"
#include "protocol/json_minify.hpp"
#include "protocol/json_writer.hpp"
#include "protocol/server_frames.hpp"
#include "schema/validator.hpp"

#include <fmt/format.h>

namespace meith::registry {

using protocol::append_json_string;
using protocol::error_code;
using protocol::tool_result;

namespace {

/// What hooks are given about a call in `phase`: the arguments stay nested under
/// request.args, beside the metadata, never merged (§7). One per phase, shared by the observe
/// and the filter hooks.
std::string hook_payload(std::string_view phase, const call& c, const tool_result* response) {
    std::string p = "{";
    protocol::json_members m(p);
    m.string("hook", "tool").string("phase", phase);
    m.key("request").push_back('{');
    m.string("name", c.tool_name)
        .raw("args", c.args_json)
        .string("call_id", c.request_id)
        .string("session_id", c.session_id)
        .string("caller", permissions::to_string(c.caller));
    p += '}';
    if (response) protocol::append_tool_result(m.key("response"), *response);
    p += '}';
    return p;
}

/// The call's timeout: its own, else its tool's, else the default; capped by
/// limits.max_timeout_ms and kept far from the timer's overflow (~31 years).
std::uint64_t effective_timeout(const call& c, const tool& t, const config::config& cfg) {
    std::uint64_t timeout = c.timeout_ms   ? c.timeout_ms
                            : t.timeout_ms ? *t.timeout_ms
                                           : cfg.tools.default_timeout_ms;
    if (cfg.limits.max_timeout_ms > 0 && timeout > cfg.limits.max_timeout_ms)
        timeout = cfg.limits.max_timeout_ms;
    constexpr std::uint64_t max_representable_ms = 1'000'000'000'000;
    return std::min(timeout, max_representable_ms);
}

/// The arguments against the tool (docs/protocol.md §13): a text-payload tool takes one string,
/// every other tool an object; then its schema. The failure to answer with, or nullopt.
std::optional<tool_result> check_arguments(const tool& t, simdjson::dom::element args) {
    if (const bool text = t.payload_kind == "text"; text != args.is_string())
        return tool_result::failure(
            error_code::validation_error,
            text ? "'" + t.name + "' is a text-payload tool: arguments must be a string"
                 : "arguments must be a JSON object");
    if (t.validator) {
        if (auto err = t.validator->validate(args))
            return tool_result::failure(error_code::validation_error, std::move(*err));
    }
    return std::nullopt;
}

/// An `ask` call with nobody to ask: denied at once, saying so (PROTOCOL.md §12).
void deny_without_approver(call& c) {
    c.decision.reason += "; no approver is connected (run `meith approve` in a terminal)";
    c.resolve(tool_result::failure(error_code::permission_denied,
                                   "permission denied: " + c.decision.reason),
              tools::call_end::refused);
}

} // namespace

// ---- dispatch -----------------------------------------------------------------------------

void registry::reject(const tools::call_ptr& c, error_code code, std::string message,
                      const simdjson::dom::element* args) {
    c->adopt(this);
    c->args_json = args ? simdjson::minify(*args) : "null";
    calls_.add(*c);
    c->resolve(tool_result::failure(code, std::move(message)), tools::call_end::refused);
}

std::optional<tool_result> registry::closed_to_calls() const {
    if (shutting_down_)
        return tool_result::failure(error_code::runtime_shutting_down,
                                    "meithd is shutting down and accepts no new calls");
    if (audit_refuses_calls())
        return tool_result::failure(error_code::tool_failed,
                                    "the audit log cannot be written, so calls are refused "
                                    "(audit.on_failure = \"fail_closed\")");
    return std::nullopt;
}

void registry::dispatch(const tools::call_ptr& c, simdjson::dom::element args) {
    c->adopt(this);
    c->args_json = protocol::minified(args);
    if (audit_.enabled()) record_args(redactor_, *c, args);
    calls_.add(*c);

    if (auto closed = closed_to_calls()) {
        c->resolve(std::move(*closed), tools::call_end::refused);
        return;
    }
    if (c->profile) {
        // docs/protocol.md §23: the client means a tool by the name its profile shows; the
        // call, its audit line and any approval name the real tool.
        if (const auto real = c->profile->real_name(c->tool_name); real != c->tool_name)
            c->tool_name = std::string(real);
    }
    c->target = tools_.find(c->tool_name);
    if (!c->target) {
        c->resolve(
            tool_result::failure(error_code::unknown_tool, "no tool named '" + c->tool_name + "'"),
            tools::call_end::refused);
        return;
    }
    const tool& t = *c->target;
    // The one decision (decide_call): preview_tool_call, check_policy and a held call's
    // re-decision make the same.
    auto verdict = decide_call(t, c->caller, c->profile.get());
    if (verdict.hidden) {
        // Refused before validation, grants and approval: nothing of it is reachable.
        c->decision = std::move(verdict.decision);
        c->decided = true; // audited as the deny it is
        refuse(c);
        return;
    }
    if (auto invalid = check_arguments(t, args)) {
        c->resolve(std::move(*invalid), tools::call_end::refused);
        return;
    }
    if (verdict.quarantined) {
        // docs/protocol.md §22: no grant or approval reaches a tool held in quarantine.
        c->decision = std::move(verdict.decision);
        refuse(c);
        return;
    }
    c->decision = std::move(verdict.decision);
    c->decided = true;
    c->timeout_ms = effective_timeout(*c, t, cfg_);
    settle(c);
}

void registry::settle(const tools::call_ptr& c) {
    // PROTOCOL.md §12 order: deny -> a matching grant -> ask -> allow. A grant is looked for
    // only when the policy does not allow outright, so an allowed call spends no use.
    if (!c->decision.allow && c->decision.grantable) {
        if (auto id = approvals_.use_grant(*c, c->decision.needed)) {
            c->grant_id = std::move(*id);
            c->decision.allow = true;
            c->decision.ask = false;
            c->decision.reason = "grant " + c->grant_id + " allows (" + c->decision.reason + ")";
        }
    }
    if (!c->decision.allow) {
        if (c->decision.ask) {
            hold_for_approval(c);
            return;
        }
        refuse(c);
        return;
    }
    proceed(c);
}

void registry::refuse(const tools::call_ptr& c) {
    std::string message = "permission denied: " + c->decision.reason;
    // Refused for `unknown` capabilities: say how to declare them (docs/configuration.md).
    if (c->target &&
        (c->target->capabilities & permissions::bit(permissions::capability::unknown)) &&
        c->decision.reason.find("'unknown'") != std::string::npos)
        if (auto hint = c->target->source->capabilities_hint(c->target->remote_name); !hint.empty())
            message += "; " + hint;
    // Refused only because nothing allows it (not an explicit deny): a person can say yes.
    if (c->target && c->decision.grantable && !c->decision.ask && c->decision.needed != 0 &&
        (c->decision.needed & permissions::bit(permissions::capability::unknown)) == 0) {
        std::string caps;
        for (const auto name : permissions::capability_names(c->decision.needed))
            caps += (caps.empty() ? "" : ",") + std::string(name);
        message += fmt::format("; a person can let it through: meith grant {} --caller {} "
                               "--tool {} (from a terminal)",
                               caps, permissions::to_string(c->caller), c->target->name);
    }
    c->resolve(tool_result::failure(error_code::permission_denied, std::move(message)),
               tools::call_end::refused);
}

registry::held_recheck registry::recheck_held(call& c) const {
    // Decided as a fresh call of the same name would be now (dispatch's order): the tool may
    // be gone, replaced by a re-listing (a new schema), hidden or quarantined meanwhile.
    held_recheck r;
    const auto now = tools_.find(c.tool_name);
    if (!now) {
        c.decided = false;
        r.failure =
            tool_result::failure(error_code::unknown_tool, "no tool named '" + c.tool_name + "'");
        return r;
    }
    c.target = now;
    const tool& t = *now;
    auto verdict = decide_call(t, c.caller, c.profile.get());
    const auto refused = [&] {
        c.decision = std::move(verdict.decision);
        c.decided = true; // audited as the deny it is
        r.failure = tool_result::failure(error_code::permission_denied,
                                         "permission denied: " + c.decision.reason);
        return r;
    };
    if (verdict.hidden) return refused();
    simdjson::dom::parser parser;
    simdjson::dom::element args;
    if (parser.parse(c.args_json).get(args) == simdjson::SUCCESS) {
        if (const bool text = t.payload_kind == "text"; text != args.is_string()) {
            c.decided = false;
            r.failure = tool_result::failure(
                error_code::validation_error,
                text ? "'" + t.name + "' is a text-payload tool: arguments must be a string"
                     : "arguments must be a JSON object");
            return r;
        }
        if (t.validator) {
            if (auto err = t.validator->validate(args)) {
                c.decided = false;
                r.failure = tool_result::failure(error_code::validation_error, std::move(*err));
                return r;
            }
        }
    }
    if (verdict.quarantined) return refused();
    r.decision = std::move(verdict.decision);
    return r;
}

void registry::settle_redecided(const tools::call_ptr& c, held_recheck r, std::string_view why) {
    c->on_abandon(nullptr);
    c->awaiting_approval = false;
    if (r.failure) {
        // What a fresh call would get, word for word.
        c->resolve(std::move(*r.failure), tools::call_end::refused);
        return;
    }
    c->decision = std::move(r.decision);
    if (!why.empty()) c->decision.reason += " (decided again: " + std::string(why) + ")";
    if (c->decision.allow)
        proceed(c);
    else
        refuse(c);
}

namespace {

/// "30 s", "1.5 s", "250 ms": a timeout for a person.
std::string seconds_text(std::uint64_t ms) {
    if (ms < 1000) return std::to_string(ms) + " ms";
    if (ms % 1000 == 0) return std::to_string(ms / 1000) + " s";
    return fmt::format("{:.1f} s", static_cast<double>(ms) / 1000.0);
}

} // namespace

void registry::arm_deadline(const tools::call_ptr& c) {
    const std::uint64_t timeout = c->timeout_ms;
    c->deadline().expires_at(c->started + std::chrono::milliseconds(timeout));
    c->deadline().async_wait([weak = std::weak_ptr<call>(c), timeout](const std::error_code& ec) {
        if (ec) return;
        auto self = weak.lock();
        if (!self) return;
        // Held for approval all along: nobody answered, and the tool never ran (§14).
        std::string message =
            self->awaiting_approval
                ? "no approver answered within " + seconds_text(timeout) +
                      " (the call's timeout); it did not run"
                : "the call did not finish within " + std::to_string(timeout) + " ms";
        self->finalize(tool_result::failure(error_code::timeout, std::move(message)),
                       tools::call_end::timeout);
    });
}

void registry::hold_for_approval(const tools::call_ptr& c) {
    if (approvals_.approver_count() == 0) {
        deny_without_approver(*c);
        return;
    }
    // The timeout runs while the call is held; a cancel, the timeout or the client leaving
    // withdraw the request from the approvers.
    c->awaiting_approval = true;
    arm_deadline(c);
    auto approval_id = std::make_shared<std::string>();
    const std::weak_ptr<call> weak = c;
    const std::weak_ptr<bool> alive = alive_;
    c->on_abandon([this, weak, approval_id, alive] {
        auto self = weak.lock();
        if (!self || alive.expired() || approval_id->empty()) return;
        const tools::call_end how = self->end();
        approvals_.withdraw(*approval_id,
                            how == tools::call_end::timeout      ? "the call timed out"
                            : how == tools::call_end::cancel     ? "the client cancelled it"
                            : how == tools::call_end::disconnect ? "the client disconnected"
                            : how == tools::call_end::shutdown   ? "meithd is shutting down"
                                                                 : "the call ended");
    });
    preview_call(c->target, c->args_json, [this, weak, approval_id, alive](preview p) {
        auto c = weak.lock();
        if (!c || c->resolved() || alive.expired()) return;
        // The preview may have taken a while (a tool host's): look again.
        if (shutting_down_) {
            c->resolve(tool_result::failure(error_code::runtime_shutting_down,
                                            "meithd is shutting down and accepts no new calls"),
                       tools::call_end::shutdown);
            return;
        }
        if (approvals_.approver_count() == 0) {
            deny_without_approver(*c);
            return;
        }
        // A reload or a re-listing during the preview may have changed the answer: decided
        // again, on the tool as it is now.
        if (auto r = recheck_held(*c); r.failure || r.decision.allow || !r.decision.ask) {
            settle_redecided(c, std::move(r), "the config was reloaded while the call was held");
            return;
        }
        *approval_id = approvals_.hold(
            c, p.text,
            [this, weak, approval_id, alive](approvals::approval_answer a, std::string reason) {
                auto c = weak.lock();
                if (!c || c->resolved() || alive.expired()) return;
                on_approval_answer(c, a, std::move(reason));
            });
        c->approval_id = *approval_id; // its line names the approval however the call ends
        // The caller hears that a person is being asked (meith call prints it, meith mcp sends
        // it as progress).
        std::string event;
        protocol::append_approval_pending_event(
            event, *approval_id, c->timeout_ms,
            "waiting for a person to approve it in `meith approve` (up to " +
                seconds_text(c->timeout_ms) + ")");
        c->emit(event);
    });
}

void registry::on_approval_answer(const tools::call_ptr& c, approvals::approval_answer a,
                                  std::string reason) {
    c->on_abandon(nullptr);
    c->awaiting_approval = false;
    if (a != approvals::approval_answer::deny) {
        // A person said yes to the tool as it was: it may be gone, replaced or
        // quarantined since (§22), or denied by a reload not yet applied to it.
        if (auto r = recheck_held(*c); r.failure || (!r.decision.allow && !r.decision.ask)) {
            settle_redecided(c, std::move(r),
                             "the tool or the config changed "
                             "while the call was held");
            return;
        }
    }
    if (a == approvals::approval_answer::deny) {
        c->decision.ask = false;
        c->decision.grantable = false; // a person said no: no grant hint
        c->decision.reason =
            reason.empty() ? "denied by an approver" : "denied by an approver: " + reason;
        refuse(c);
        return;
    }
    c->decision.allow = true;
    c->decision.ask = false;
    c->decision.reason = a == approvals::approval_answer::allow_once
                             ? "approved once by an approver"
                             : "approved for the session by an approver";
    proceed(c);
}

void registry::begin_shutdown() {
    shutting_down_ = true;
    for (auto& c : approvals_.held_calls())
        c->resolve(tool_result::failure(error_code::runtime_shutting_down,
                                        "meithd is shutting down; the call was held for approval "
                                        "and did not run"),
                   tools::call_end::shutdown);
}

void registry::proceed(const tools::call_ptr& c) {
    const tool& t = *c->target;
    // [[limits.rates]] (docs/protocol.md §21): after the policy (and a person) allowed it.
    if (!rates_.empty()) {
        if (auto limited = rates_.take(c->caller, c->session_id, t.name, t.capabilities,
                                       std::chrono::steady_clock::now())) {
            std::string details = "{";
            protocol::json_members(details)
                .number("retryAfterMs", limited->retry_after_ms)
                .number("rule", limited->rule + 1);
            details += '}';
            c->finalize(tool_result::failure(error_code::rate_limited, std::move(limited->message),
                                             std::move(details)),
                        tools::call_end::refused);
            return;
        }
    }
    if (!hooks_) {
        run_on_source(c);
        // A tool that answered at once (built-ins) never needs a timer: saves two
        // timerfd_settime(2) calls per call on the hot path.
        if (!c->tool_done() && !c->resolved()) arm_deadline(c);
        return;
    }
    arm_deadline(c);
    // Hook time counts against the call's timeout (§7): the deadline is already armed.
    std::string payload = hook_payload("before_execution", *c, nullptr);
    record_observers(*c, "before_execution", hooks_->observe("before_execution", t.name, payload));
    if (!hooks_->has_filters("before_execution", t.name)) {
        run_on_source(c);
        return;
    }
    hooks_->filter(
        "before_execution", t.name, std::move(payload), c->deadline().expiry(),
        [this, weak = std::weak_ptr<call>(c),
         alive = std::weak_ptr<bool>(alive_)](std::vector<hooks::hook_verdict> verdicts) {
            auto c = weak.lock();
            if (!c || c->resolved() || !alive.lock()) return;
            record_filter_verdicts(*c, verdicts);
            if (!verdicts.empty() && !verdicts.back().allow) {
                c->decision.allow = false;
                c->decision.reason = verdicts.back().reason;
                c->finalize(tool_result::failure(error_code::permission_denied,
                                                 "permission denied: " + verdicts.back().reason),
                            tools::call_end::refused);
                return;
            }
            run_on_source(c);
        });
}

void registry::run_on_source(const tools::call_ptr& c) {
    tools::tool_source& src = *c->target->source;
    // The source may have been removed by a reload while the call waited (for a hook): it is
    // still alive (the call's tool holds it) but stopped, and runs nothing more.
    if (src.state() == tools::source_state::stopped) {
        c->resolve(tool_result::failure(error_code::tool_failed,
                                        "source '" + src.name() +
                                            "' was stopped (removed by a config reload, or the "
                                            "daemon is shutting down) before the call could run"));
        return;
    }
    src.execute(c, *c->target);
}

void registry::after_tool(const tools::call_ptr& c, tool_result r) {
    // A refusal by the tool's sandbox says so, and what would allow it (docs/protocol.md §15).
    // A connection the egress proxy refused is the precise reason (§19), which "fetch failed"
    // or ECONNREFUSED in the tool's own words does not give.
    if (!r.ok && r.error && r.error->code == error_code::tool_failed && c->target) {
        const auto hint =
            !c->egress_refusal.empty()
                ? c->egress_refusal
                : c->target->source->sandbox_hint(r.error->message + '\n' + r.error->details_json);
        if (!hint.empty()) r.error->message += " — " + hint;
    }
    if (!hooks_ || !c->target) {
        shape_result(c, std::move(r));
        return;
    }
    const auto& name = c->target->name;
    std::string payload = hook_payload("after_execution", *c, &r);
    record_observers(*c, "after_execution", hooks_->observe("after_execution", name, payload));
    if (!hooks_->has_filters("after_execution", name)) {
        shape_result(c, std::move(r));
        return;
    }
    hooks_->filter("after_execution", name, std::move(payload), c->deadline().expiry(),
                   [this, weak = std::weak_ptr<call>(c),
                    r = std::move(r)](std::vector<hooks::hook_verdict> verdicts) mutable {
                       auto c = weak.lock();
                       if (!c || c->resolved()) return;
                       record_filter_verdicts(*c, verdicts);
                       if (!verdicts.empty() && !verdicts.back().allow) {
                           // The tool ran, but its result is withheld (§7).
                           c->decision.allow = false;
                           c->decision.reason = verdicts.back().reason;
                           c->finalize(
                               tool_result::failure(error_code::permission_denied,
                                                    "result withheld: " + verdicts.back().reason),
                               tools::call_end::tool);
                           return;
                       }
                       shape_result(c, std::move(r));
                   });
}

// ---- finish -------------------------------------------------------------------------------

void registry::finish(call& c, tool_result& r) {
    calls_.remove(c);
    // The whole result counts: content, meta (with a display), diagnostics and modelContent
    // (a host's format_tool_result may be far larger than the content; an error's details are
    // cut by the sources that make them).
    const std::size_t size = r.content_json.size() + r.meta_json.size() +
                             r.diagnostics_json.size() + r.model_content_json.size();
    std::optional<tool_result> too_big;
    if (size > cfg_.limits.max_result_bytes)
        too_big = tool_result::failure(error_code::tool_failed,
                                       "the tool's result is " + std::to_string(size) +
                                           " bytes (content, meta, diagnostics and "
                                           "modelContent), over limits.max_result_bytes (" +
                                           std::to_string(cfg_.limits.max_result_bytes) + ")");
    const tool_result& outcome = too_big ? *too_big : r;
    // The call's one audit line is written (visible to readers) before the reply is queued
    // (§6), and it records what the client receives.
    write_call_audit(audit_, c, outcome);
    if (too_big) r = std::move(*too_big);
}

void registry::abort_all(error_code code, const std::string& message, tools::call_end how) {
    for (auto& c : calls_.snapshot())
        c->resolve(tool_result::failure(code, message), how);
}

} // namespace meith::registry
