#include "registry/registry.hpp"

#include "protocol/json_writer.hpp"
#include "registry/hooks.hpp"
#include "registry/schema_validator.hpp"

#include <asio/post.hpp>
#include <spdlog/spdlog.h>

namespace meith::registry {

using namespace std::string_view_literals;

using protocol::append_json_string;
using protocol::error_code;
using protocol::tool_result;

namespace {

std::string_view end_name(call_end how) {
    switch (how) {
    case call_end::tool:
        return "tool";
    case call_end::timeout:
        return "timeout";
    case call_end::cancel:
        return "cancel";
    case call_end::disconnect:
        return "client_disconnected";
    case call_end::shutdown:
        return "shutdown";
    case call_end::refused:
        return "refused";
    }
    return "tool";
}

void append_capabilities(std::string& out, permissions::capability_set caps) {
    // Every audit line carries its tool's capabilities: each set's JSON is built once.
    static const auto rendered = [] {
        std::array<std::string, 256> all;
        for (std::size_t set = 0; set < all.size(); ++set) {
            std::string& json = all[set];
            json.push_back('[');
            bool first = true;
            for (auto name :
                 permissions::capability_names(static_cast<permissions::capability_set>(set))) {
                if (!first) json.push_back(',');
                first = false;
                append_json_string(json, name);
            }
            json.push_back(']');
        }
        return all;
    }();
    out.append(rendered[caps]);
}

/// Strings from clients and tools in audit lines: most hold no secret-looking text at all,
/// which redact_text finds without rewriting anything.
void append_redacted_string(std::string& out, std::string_view s) {
    append_json_string(out, audit::default_redactor().redact_text(s));
}

} // namespace

std::string_view to_string(source_state s) {
    switch (s) {
    case source_state::starting:
        return "starting";
    case source_state::ready:
        return "ready";
    case source_state::restarting:
        return "restarting";
    case source_state::failed:
        return "failed";
    case source_state::stopped:
        return "stopped";
    }
    return "unknown";
}

source_state state_of(process_state s) {
    switch (s) {
    case process_state::starting:
        return source_state::starting;
    case process_state::ready:
        return source_state::ready;
    case process_state::restarting:
        return source_state::restarting;
    case process_state::failed:
        return source_state::failed;
    case process_state::stopped:
        return source_state::stopped;
    }
    return source_state::failed;
}

// ---- call ------------------------------------------------------------------------------

call::call(asio::any_io_executor ex, std::shared_ptr<call_sink> sink)
    : sink_(std::move(sink)), ex_(std::move(ex)) {
}

void call::emit(std::string_view event_json) {
    if (!resolved_ && !tool_done_ && sink_) sink_->on_tool_event(request_id, event_json);
}

void call::resolve(tool_result result, call_end how) {
    if (resolved_) return;
    if (how == call_end::tool) {
        if (tool_done_) return;
        tool_done_ = true;
        abandon_ = nullptr; // the tool is no longer running: nothing to undo
        if (owner_) {
            owner_->after_tool(shared_from_this(), std::move(result));
            return;
        }
    }
    finalize(std::move(result), how);
}

void call::finalize(tool_result result, call_end how) {
    if (resolved_) return;
    resolved_ = true;
    end_ = how;
    if (deadline_) deadline_->cancel();
    auto abandon = std::move(abandon_);
    abandon_ = nullptr;
    if (how != call_end::tool && abandon) abandon();
    if (owner_)
        owner_->finish(*this, result);
    else if (sink_)
        sink_->on_tool_result(request_id, result);
    sink_.reset(); // breaks the connection <-> call cycle
}

// ---- registry --------------------------------------------------------------------------

registry::registry(asio::any_io_executor ex, const config::config& cfg, audit::audit_log* audit)
    : ex_(std::move(ex)), cfg_(cfg), policy_(cfg.permissions), audit_(audit),
      redactor_(audit::default_redactor()) {
    if (audit_)
        // The writer thread tells the I/O thread that lines are in the file; the replies that
        // waited for them go out there.
        audit_->set_commit_listener([this, alive = std::weak_ptr<bool>(alive_)] {
            asio::post(ex_, [this, alive] {
                if (alive.lock()) run_audit_waiters();
            });
        });
}

registry::~registry() {
    if (audit_) audit_->set_commit_listener(nullptr);
}

void registry::add_source(std::shared_ptr<tool_source> source) {
    sources_.push_back(std::move(source));
}

void registry::start(std::function<void(std::optional<std::string>)> on_ready) {
    on_ready_ = std::move(on_ready);
    unsettled_ = sources_.size();
    source_events events;
    events.registered = [this](tool_source& src, std::vector<tool_definition> defs) {
        // A source removed by a config reload may still finish starting: it offers nothing.
        if (std::none_of(sources_.begin(), sources_.end(),
                         [&](const auto& s) { return s.get() == &src; }))
            return std::optional<std::string>();
        return register_tools(src, std::move(defs));
    };
    events.settled = [this](tool_source&) {
        if (unsettled_ > 0 && --unsettled_ == 0 && on_ready_) {
            started_ = true;
            auto ready = std::move(on_ready_);
            ready(startup_error_);
        }
    };
    events.lifecycle = [this](tool_source& src, std::string_view event, std::string_view details) {
        invalidate_descriptors(); // "available" follows the source's state
        std::string fields = R"("source":)";
        append_json_string(fields, src.name());
        if (!details.empty()) {
            fields += ',';
            fields += details;
        }
        audit_event(event, fields);
    };
    events_ = events;
    if (sources_.empty()) {
        started_ = true;
        on_ready_(std::nullopt);
        return;
    }
    for (auto& s : sources_)
        s->start(events);
}

std::optional<std::string> registry::register_tools(tool_source& src,
                                                    std::vector<tool_definition> defs) {
    // The source's own prefix: a reload may add it before the daemon's config is replaced.
    const std::string& prefix = src.prefix();

    std::vector<std::shared_ptr<const tool>> fresh;
    for (auto& d : defs) {
        auto t = std::make_shared<tool>();
        t->name = prefix + d.name;
        t->remote_name = std::move(d.name);
        t->description = std::move(d.description);
        t->input_schema_json = std::move(d.input_schema_json);
        t->capabilities = permissions::capability_set_from(d.capabilities);
        t->timeout_ms = d.timeout_ms;
        t->source = src.shared_from_this();
        if (!t->input_schema_json.empty()) {
            auto compiled = schema_validator::compile(t->input_schema_json);
            if (compiled.error) {
                spdlog::error("source '{}': tool '{}' skipped: {}", src.name(), t->name,
                              *compiled.error);
                continue;
            }
            t->validator = std::move(compiled.validator);
        }
        auto it = tools_.find(t->name);
        if (it != tools_.end() && it->second->source.get() != &src) {
            std::string err = "tool name '" + t->name + "' is offered by both source '" +
                              it->second->source->name() + "' and source '" + src.name() +
                              "' (set `prefix` on one of them)";
            if (!started_ && !startup_error_) startup_error_ = err;
            return err;
        }
        for (const auto& f : fresh)
            if (f->name == t->name)
                return "source '" + src.name() + "' offers tool '" + t->name + "' twice";
        fresh.push_back(std::move(t));
    }
    for (auto it = tools_.begin(); it != tools_.end();) {
        if (it->second->source.get() == &src)
            it = tools_.erase(it);
        else
            ++it;
    }
    for (auto& t : fresh)
        tools_.emplace(t->name, std::move(t));
    invalidate_descriptors();
    spdlog::info("source '{}': {} tool(s) registered", src.name(), fresh.size());
    return std::nullopt;
}

void registry::reject(const call_ptr& c, error_code code, std::string message,
                      const simdjson::dom::element* args) {
    c->owner_ = this;
    c->args_json = args ? simdjson::minify(*args) : "null";
    active_.insert(c.get());
    c->resolve(tool_result::failure(code, std::move(message)), call_end::refused);
}

void registry::dispatch(const call_ptr& c, simdjson::dom::element args) {
    c->owner_ = this;
    c->args_json = simdjson::minify(args);
    // Summarised now, from the arguments' text or the parsed value, not parsed again later.
    if (audit_) redactor_.append_summary_element(c->args_summary, args, c->args_json);
    active_.insert(c.get());

    if (shutting_down_) {
        c->resolve(tool_result::failure(error_code::runtime_shutting_down,
                                        "meithd is shutting down and accepts no new calls"),
                   call_end::refused);
        return;
    }
    if (audit_failing() && cfg_.audit.on_failure == config::audit_failure_policy::fail_closed) {
        c->resolve(tool_result::failure(error_code::tool_failed,
                                        "the audit log cannot be written, so calls are refused "
                                        "(audit.on_failure = \"fail_closed\")"),
                   call_end::refused);
        return;
    }
    auto it = tools_.find(c->tool_name);
    if (it == tools_.end()) {
        c->resolve(
            tool_result::failure(error_code::unknown_tool, "no tool named '" + c->tool_name + "'"),
            call_end::refused);
        return;
    }
    c->target = it->second;
    const tool& t = *c->target;
    if (t.validator) {
        if (auto err = t.validator->validate(args)) {
            c->resolve(tool_result::failure(error_code::validation_error, std::move(*err)),
                       call_end::refused);
            return;
        }
    }
    c->decision = policy_.decide(t.name, t.capabilities, c->caller);
    c->decided = true;
    if (!c->decision.allow) {
        c->resolve(tool_result::failure(error_code::permission_denied,
                                        "permission denied: " + c->decision.reason),
                   call_end::refused);
        return;
    }
    std::uint64_t timeout = c->timeout_ms  ? c->timeout_ms
                            : t.timeout_ms ? *t.timeout_ms
                                           : cfg_.tools.default_timeout_ms;
    if (cfg_.limits.max_timeout_ms > 0 && timeout > cfg_.limits.max_timeout_ms)
        timeout = cfg_.limits.max_timeout_ms;
    // steady_timer counts nanoseconds in 64 bits: keep far from overflow (~31 years).
    constexpr std::uint64_t max_representable_ms = 1'000'000'000'000;
    if (timeout > max_representable_ms) timeout = max_representable_ms;
    c->timeout_ms = timeout;
    auto arm_deadline = [&c, timeout] {
        // Measured from the call's arrival, whenever it is armed.
        c->deadline().expires_at(c->started + std::chrono::milliseconds(timeout));
        c->deadline().async_wait(
            [weak = std::weak_ptr<call>(c), timeout](const std::error_code& ec) {
                if (ec) return;
                if (auto self = weak.lock())
                    self->finalize(tool_result::failure(error_code::timeout,
                                                        "the call did not finish within " +
                                                            std::to_string(timeout) + " ms"),
                                   call_end::timeout);
            });
    };
    if (!hooks_) {
        run_on_source(c);
        // A tool that answered at once (built-ins) never needs a timer: saves two
        // timerfd_settime(2) calls per call on the hot path.
        if (!c->tool_done() && !c->resolved()) arm_deadline();
        return;
    }
    arm_deadline();
    // Hook time counts against the call's timeout (§7): the deadline is already armed.
    record_observers(
        *c, "before_execution",
        hooks_->observe("before_execution", t.name, hook_payload("before_execution", *c, nullptr)));
    if (!hooks_->has_filters("before_execution", t.name)) {
        run_on_source(c);
        return;
    }
    hooks_->filter(
        "before_execution", t.name, hook_payload("before_execution", *c, nullptr), time_left(*c),
        [this, weak = std::weak_ptr<call>(c), alive = std::weak_ptr<bool>(alive_)](
            std::vector<hook_verdict> verdicts) {
            auto c = weak.lock();
            if (!c || c->resolved() || !alive.lock()) return;
            record_hooks(*c, verdicts);
            if (!verdicts.empty() && !verdicts.back().allow) {
                c->decision = {false, verdicts.back().reason};
                c->finalize(tool_result::failure(error_code::permission_denied,
                                                 "permission denied: " + verdicts.back().reason),
                            call_end::refused);
                return;
            }
            run_on_source(c);
        });
}

void registry::run_on_source(const call_ptr& c) {
    tool_source& src = *c->target->source;
    // The source may have been removed by a reload while the call waited (for a hook): it is
    // still alive (the call's tool holds it) but stopped, and runs nothing more.
    if (src.state() == source_state::stopped) {
        c->resolve(tool_result::failure(error_code::tool_failed,
                                        "source '" + src.name() +
                                            "' was stopped (removed by a config reload, or the "
                                            "daemon is shutting down) before the call could run"));
        return;
    }
    src.execute(c, *c->target);
}

void registry::append_redacted(std::string& out, std::string_view s) const {
    append_redacted_string(out, s);
}

std::chrono::milliseconds registry::time_left(const call& c) const {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        c.deadline_->expiry() - std::chrono::steady_clock::now());
    return std::max(left, std::chrono::milliseconds(1));
}

std::string registry::hook_payload(std::string_view phase, const call& c,
                                   const tool_result* response) const {
    // Arguments stay nested under request.args, beside the metadata, never merged (§7).
    std::string p = R"({"hook":"tool","phase":)";
    append_json_string(p, phase);
    p += R"(,"request":{"name":)";
    append_json_string(p, c.tool_name);
    p += R"(,"args":)";
    p += c.args_json;
    p += R"(,"call_id":)";
    append_json_string(p, c.request_id);
    p += R"(,"session_id":)";
    append_json_string(p, c.session_id);
    p += R"(,"caller":)";
    append_json_string(p, permissions::to_string(c.caller));
    p += '}';
    if (response) {
        p += R"(,"response":)";
        protocol::append_tool_result(p, *response);
    }
    p += '}';
    return p;
}

void registry::record_hooks(call& c, const std::vector<hook_verdict>& verdicts) {
    for (const auto& v : verdicts) {
        if (!c.hooks_json.empty()) c.hooks_json += ',';
        c.hooks_json += R"({"name":)";
        append_json_string(c.hooks_json, v.name);
        c.hooks_json += R"(,"phase":)";
        append_json_string(c.hooks_json, v.phase);
        c.hooks_json += R"(,"kind":"filter","decision":)";
        c.hooks_json += v.allow ? R"("allow")" : R"("deny")";
        c.hooks_json += R"(,"reason":)";
        if (v.reason.empty())
            c.hooks_json += "null";
        else
            append_redacted_string(c.hooks_json, v.reason);
        c.hooks_json += '}';
    }
}

void registry::record_observers(call& c, std::string_view phase,
                                const std::vector<std::string>& names) {
    for (const auto& name : names) {
        if (!c.hooks_json.empty()) c.hooks_json += ',';
        c.hooks_json += R"({"name":)";
        append_json_string(c.hooks_json, name);
        c.hooks_json += R"(,"phase":)";
        append_json_string(c.hooks_json, phase);
        c.hooks_json += R"(,"kind":"observe","decision":"notified","reason":null})";
    }
}

void registry::after_tool(const call_ptr& c, tool_result r) {
    if (!hooks_ || !c->target) {
        c->finalize(std::move(r), call_end::tool);
        return;
    }
    const auto& name = c->target->name;
    record_observers(
        *c, "after_execution",
        hooks_->observe("after_execution", name, hook_payload("after_execution", *c, &r)));
    if (!hooks_->has_filters("after_execution", name)) {
        c->finalize(std::move(r), call_end::tool);
        return;
    }
    auto payload = hook_payload("after_execution", *c, &r);
    hooks_->filter("after_execution", name, std::move(payload), time_left(*c),
                   [weak = std::weak_ptr<call>(c),
                    r = std::move(r)](std::vector<hook_verdict> verdicts) mutable {
                       auto c = weak.lock();
                       if (!c || c->resolved()) return;
                       record_hooks(*c, verdicts);
                       if (!verdicts.empty() && !verdicts.back().allow) {
                           // The tool ran, but its result is withheld (§7).
                           c->decision = {false, verdicts.back().reason};
                           c->finalize(
                               tool_result::failure(error_code::permission_denied,
                                                    "result withheld: " + verdicts.back().reason),
                               call_end::tool);
                           return;
                       }
                       c->finalize(std::move(r), call_end::tool);
                   });
}

void registry::observe_session(std::string_view phase, std::string_view session_id, pid_t pid,
                               uid_t uid) {
    if (!hooks_) return;
    std::string p = R"({"hook":"session","phase":)";
    append_json_string(p, phase);
    p += R"(,"event":{"session_id":)";
    append_json_string(p, session_id);
    p += R"(,"pid":)" + std::to_string(pid) + R"(,"uid":)" + std::to_string(uid) + "}}";
    hooks_->observe(phase, "", p);
}

std::string registry::explain_policy(std::string_view tool_name, permissions::caller who) const {
    std::string m = R"("toolName":)";
    append_json_string(m, tool_name);
    m += R"(,"caller":)";
    append_json_string(m, permissions::to_string(who));
    auto it = tools_.find(tool_name);
    if (it == tools_.end()) {
        m += R"(,"known":false,"capabilities":null,"decision":"deny","reason":)";
        append_json_string(m, "no tool named '" + std::string(tool_name) +
                                  "' (calls resolve UNKNOWN_TOOL)");
        m += R"(,"filterHooks":[])";
        return m;
    }
    const auto& t = *it->second;
    const auto d = policy_.decide(t.name, t.capabilities, who);
    m += R"(,"known":true,"capabilities":)";
    append_capabilities(m, t.capabilities);
    m += d.allow ? R"(,"decision":"allow","reason":)" : R"(,"decision":"deny","reason":)";
    append_json_string(m, d.reason);
    m += R"(,"filterHooks":[)";
    bool first = true;
    if (hooks_)
        for (const char* phase : {"before_execution", "after_execution"})
            if (hooks_->has_filters(phase, t.name)) {
                if (!first) m += ',';
                first = false;
                append_json_string(m, phase);
            }
    m += ']';
    return m;
}

bool registry::restart_source(std::string_view name) {
    for (auto& s : sources_)
        if (s->name() == name) {
            s->restart();
            invalidate_descriptors();
            std::string fields = R"("source":)";
            append_json_string(fields, name);
            audit_event("source_restart_requested", fields);
            return true;
        }
    if (hooks_ && hooks_->restart(name)) {
        std::string fields = R"("hook":)";
        append_json_string(fields, name);
        audit_event("source_restart_requested", fields);
        return true;
    }
    return false;
}

void registry::add_live_source(std::shared_ptr<tool_source> source) {
    if (shutting_down_) return; // never started: stop_sources() may have run already
    sources_.push_back(std::move(source));
    invalidate_descriptors();
    sources_.back()->start(events_);
}

bool registry::remove_source(std::string_view name) {
    auto it = std::find_if(sources_.begin(), sources_.end(),
                           [&](const auto& s) { return s->name() == name; });
    if (it == sources_.end()) return false;
    tool_source* src = it->get();
    for (auto t = tools_.begin(); t != tools_.end();) {
        if (t->second->source.get() == src)
            t = tools_.erase(t);
        else
            ++t;
    }
    invalidate_descriptors();
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

std::optional<source_state> registry::source_state_of(std::string_view name) const {
    for (const auto& s : sources_)
        if (s->name() == name) return s->state();
    return std::nullopt;
}

void registry::set_permissions(const config::permissions_config& permissions) {
    policy_ = permissions::policy(permissions);
    invalidate_descriptors();
}

void registry::finish(call& c, const tool_result& r) {
    active_.erase(&c);
    // The whole result counts: content, meta and diagnostics (an error's details are cut by
    // the sources that make them).
    const std::size_t size = r.content_json.size() + r.meta_json.size() + r.diagnostics_json.size();
    if (size > cfg_.limits.max_result_bytes) {
        const auto too_big =
            tool_result::failure(error_code::tool_failed,
                                 "the tool's result is " + std::to_string(size) +
                                     " bytes (content, meta and diagnostics), over "
                                     "limits.max_result_bytes (" +
                                     std::to_string(cfg_.limits.max_result_bytes) + ")");
        write_call_audit(c, too_big);
        if (c.sink_) c.sink_->on_tool_result(c.request_id, too_big);
        return;
    }
    // The audit line is written (visible to readers) before the reply is queued (§6).
    write_call_audit(c, r);
    if (c.sink_) c.sink_->on_tool_result(c.request_id, r);
}

void registry::write_call_audit(const call& c, const tool_result& r) {
    if (!audit_) return;
    // Built straight into the audit batch; the writer thread redacts the two summaries.
    std::string& l = audit_->begin_line();
    l.append(R"({"ts":)"sv);
    audit::append_rfc3339_json(l);
    l.append(R"(,"event":"tool_call","requestId":)"sv);
    append_redacted_string(l, c.request_id);
    l.append(R"(,"sessionId":)"sv);
    append_json_string(l, c.session_id);
    l.append(R"(,"caller":)"sv);
    append_json_string(l, permissions::to_string(c.caller));
    l.append(R"(,"claimedCaller":)"sv);
    if (c.claimed_caller.empty())
        l.append("null"sv);
    else
        append_redacted_string(l, c.claimed_caller);
    l.append(R"(,"toolName":)"sv);
    append_redacted_string(l, c.tool_name);
    l.append(R"(,"source":)"sv);
    if (c.target)
        append_json_string(l, c.target->source->name());
    else
        l.append("null"sv);
    l.append(R"(,"capabilities":)"sv);
    if (c.target)
        append_capabilities(l, c.target->capabilities);
    else
        l.append("null"sv);
    l.append(R"(,"decision":)"sv);
    if (c.decided) {
        l.append(c.decision.allow ? R"("allow")"sv : R"("deny")"sv);
        l.append(R"(,"reason":)"sv);
        append_redacted_string(l, c.decision.reason); // may be a hook's words
    } else {
        l.append(R"(null,"reason":null)"sv);
    }
    l.append(R"(,"timeoutMs":)"sv);
    if (c.timeout_ms)
        protocol::append_uint(l, c.timeout_ms);
    else
        l.append("null"sv);
    l.append(R"(,"durationMs":)"sv);
    protocol::append_duration_ms(l, std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        std::chrono::steady_clock::now() - c.started)
                                        .count());
    l.append(r.ok ? R"(,"ok":true,"errorCode":)"sv : R"(,"ok":false,"errorCode":)"sv);
    if (r.error)
        append_json_string(l, protocol::to_string(r.error->code));
    else
        l.append("null"sv);
    l.append(R"(,"end":")"sv);
    l.append(end_name(c.end()));
    l.append(R"(","hooks":[)"sv);
    l.append(c.hooks_json);
    l.append(R"(],"args":)"sv);
    if (!c.args_summary.empty())
        l.append(c.args_summary);
    else
        audit_->begin_summary().append(c.args_json.empty() ? std::string_view("null")
                                                           : c.args_json);
    audit_->end_summary().append(R"(,"result":)");
    protocol::append_tool_result(audit_->begin_summary(), r);
    audit_->end_summary().push_back('}');
    end_audit_line();
}

void registry::end_audit_line() {
    audit_->end_line();
    if (!commit_posted_) {
        // Whatever queued it, the line is submitted by the end of this I/O turn.
        commit_posted_ = true;
        asio::post(ex_, [this, alive = std::weak_ptr<bool>(alive_)] {
            if (!alive.lock()) return;
            commit_posted_ = false;
            commit_audit();
        });
    }
}

std::uint64_t registry::commit_audit() {
    if (!audit_) return 0;
    const auto seq = audit_->submit();
    // A batch written inline by submit() has no writer notification: waiters run here.
    if (!audit_waiters_.empty()) run_audit_waiters();
    return seq;
}

void registry::commit_audit_now() {
    if (!audit_) return;
    audit_->wait_committed(commit_audit());
    run_audit_waiters();
}

void registry::after_audit(std::uint64_t seq, std::function<void()> fn) {
    if (audit_committed(seq)) {
        fn();
        return;
    }
    audit_waiters_.emplace_back(seq, std::move(fn));
}

void registry::run_audit_waiters() {
    if (!audit_ || audit_waiters_.empty()) return;
    const auto done = audit_->committed();
    // Waiters are few (one per connection with replies waiting); run the ready ones in order.
    auto ready = std::stable_partition(audit_waiters_.begin(), audit_waiters_.end(),
                                       [done](const auto& w) { return w.first > done; });
    std::vector<std::function<void()>> run;
    run.reserve(static_cast<std::size_t>(audit_waiters_.end() - ready));
    for (auto it = ready; it != audit_waiters_.end(); ++it)
        run.push_back(std::move(it->second));
    audit_waiters_.erase(ready, audit_waiters_.end());
    for (auto& fn : run)
        fn();
}

bool registry::audit_event(std::string_view event, std::string_view fields_json) {
    if (!audit_) return true;
    std::string& l = audit_->begin_line();
    l.append(R"({"ts":)");
    audit::append_rfc3339_json(l);
    l.append(R"(,"event":)");
    append_json_string(l, event);
    if (!fields_json.empty()) {
        l.push_back(',');
        l.append(fields_json);
    }
    l.push_back('}');
    end_audit_line();
    return !audit_failing();
}

void registry::append_tool_descriptors(std::string& out, permissions::caller who) {
    const auto i = static_cast<std::size_t>(who);
    if (!descriptors_valid_[i]) {
        descriptors_[i].clear();
        render_descriptors(descriptors_[i], who);
        descriptors_valid_[i] = true;
    }
    out.append(descriptors_[i]);
}

void registry::render_descriptors(std::string& out, permissions::caller who) const {
    bool first = true;
    for (const auto& [name, t] : tools_) {
        if (!first) out.push_back(',');
        first = false;
        out.append(R"({"name":)");
        append_json_string(out, t->name);
        out.append(R"(,"description":)");
        append_json_string(out, t->description);
        if (!t->input_schema_json.empty()) {
            out.append(R"(,"inputSchema":)");
            out.append(t->input_schema_json);
        }
        out.append(R"(,"capabilities":)");
        append_capabilities(out, t->capabilities);
        out.append(R"(,"timeoutMs":)");
        if (t->timeout_ms)
            protocol::append_uint(out, *t->timeout_ms);
        else
            out.append("null");
        out.append(R"(,"source":)");
        append_json_string(out, t->source->name());
        out.append(R"(,"available":)");
        out.append(t->source->state() == source_state::failed ? "false" : "true");
        out.append(R"(,"permission":)");
        out.append(policy_.decide(t->name, t->capabilities, who).allow ? R"("allow"})"
                                                                       : R"("deny"})");
    }
}

std::string registry::sources_json() const {
    std::string out = "[";
    bool first = true;
    for (const auto& s : sources_) {
        if (!first) out.push_back(',');
        first = false;
        out += s->status_json();
    }
    if (hooks_) hooks_->append_status(out, first);
    out.push_back(']');
    return out;
}

void registry::abort_all(error_code code, const std::string& message, call_end how) {
    std::vector<call_ptr> calls;
    for (call* c : active_)
        calls.push_back(c->shared_from_this());
    for (auto& c : calls)
        c->resolve(tool_result::failure(code, message), how);
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
