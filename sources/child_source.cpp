#include "sources/child_source.hpp"

#include "sources/egress_events.hpp"

#include "process/confined_spec.hpp"
#include "protocol/json_writer.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace meith::sources {

using protocol::error_code;
using protocol::tool_result;

child_source::child_source(asio::any_io_executor ex, process::child_reaper& reaper,
                           const config::source_config& cfg, const config::config& whole,
                           std::string label, std::string_view kind,
                           std::string confine_config_json, permissions::capability_set start_caps,
                           process::rpc_dialect dialect, process::supervised_process::policy pol)
    : cfg_(cfg), whole_(whole), label_(std::move(label)), kind_(kind),
      confine_config_json_(std::move(confine_config_json)),
      conf_(sandbox::confine(cfg.name, cfg.sandbox, cfg.sandbox_paths, start_caps, cfg.command,
                             cfg.cwd, confine_config_json_)),
      peer_(std::move(ex), reaper,
            process::confined_spec(label_, cfg.command, cfg.cwd, whole.tools.env_allow, cfg.env,
                                   &conf_),
            pol, dialect, label_, make_handlers()),
      proc_(peer_.process()) {
}

process::supervised_process::policy child_source::default_policy(const config::source_config& cfg,
                                                                 const config::config& whole) {
    process::supervised_process::policy p;
    p.max_line_bytes = whole.limits.max_result_bytes + 1024 * 1024; // envelope slack
    p.start_timeout = std::chrono::milliseconds(cfg.start_timeout_ms);
    return p;
}

process::rpc_peer::handlers child_source::make_handlers() {
    process::rpc_peer::handlers h;
    h.on_spawn = [this] { on_spawn(); };
    h.on_exit = [this](const std::string&) {
        on_child_exit();
        settle(); // a first start that failed still counts toward readiness (§7)
    };
    h.on_lifecycle = [this](std::string_view event, const std::string& details) {
        if (events_.lifecycle) events_.lifecycle(*this, event, details);
        if (event == "source_failed") {
            settle();
            fail_waiting(proc_.last_error());
        }
    };
    h.on_incoming = [this](simdjson::dom::object msg) { on_incoming(msg); };
    return h;
}

tools::source_state child_source::state() const {
    if (!started_) return tools::source_state::starting;
    return proc_.state();
}

void child_source::start(tools::source_events events) {
    events_ = std::move(events);
    started_ = true;
    if (auto err = before_start()) {
        proc_.fail_permanently(std::move(*err));
        settle();
        return;
    }
    if (conf_.refusal) {
        spdlog::error("{} not started: {}", label_, *conf_.refusal);
        proc_.fail_permanently(*conf_.refusal);
        settle();
        return;
    }
    bind_egress();
    proc_.start();
}

void child_source::bind_egress() {
    if (!conf_.egress) return;
    // A long-running child's connection is a call's only while that call is the only one in
    // flight there (docs/protocol.md §19); otherwise it is the source's alone.
    std::weak_ptr<child_source> weak = std::static_pointer_cast<child_source>(shared_from_this());
    bind_egress_events(*conf_.egress, shared_from_this(), events_, [weak]() -> tools::call_ptr {
        auto self = weak.lock();
        return self ? self->sole_call_in_flight() : nullptr;
    });
}

tools::call_ptr child_source::sole_call_in_flight() {
    std::erase_if(egress_calls_, [](const std::weak_ptr<tools::call>& w) {
        auto c = w.lock();
        return !c || c->resolved();
    });
    return egress_calls_.size() == 1 ? egress_calls_.front().lock() : nullptr;
}

void child_source::execute(const tools::call_ptr& c, const tools::tool& t) {
    if (conf_.egress) {
        (void)sole_call_in_flight(); // prunes the finished
        egress_calls_.push_back(c);
    }
    switch (state()) {
    case tools::source_state::ready:
        send_execute(c, t);
        return;
    case tools::source_state::starting:
    case tools::source_state::restarting:
        // Wait for the child within the call's own timeout (§7).
        waiting_.emplace_back(c, &t);
        c->on_abandon([this, raw = c.get()] {
            std::erase_if(waiting_, [raw](const auto& w) { return w.first.get() == raw; });
        });
        return;
    case tools::source_state::failed:
    case tools::source_state::stopped:
        c->resolve(tool_result::failure(
            error_code::tool_failed,
            fmt::format("{} is {}: {}", label_, to_string(state()),
                        proc_.last_error().empty() ? "not running" : proc_.last_error())));
        return;
    }
}

void child_source::stop(std::chrono::milliseconds kill_grace, std::function<void()> done) {
    fail_waiting("was stopped (the daemon is shutting down, or a reload removed it)");
    proc_.stop(kill_grace, std::move(done));
}

std::string child_source::status_json() const {
    std::string out = "{";
    protocol::json_members m(out);
    m.string("name", cfg_.name).string("kind", kind_).string("state", to_string(state()));
    if (const auto pid = proc_.pid())
        m.number("pid", static_cast<std::uint64_t>(*pid));
    else
        m.null("pid");
    m.number("restarts", proc_.restarts());
    if (proc_.last_error().empty())
        m.null("lastError");
    else
        m.string("lastError", proc_.last_error());
    m.number("tools", tool_count());
    m.key("sandbox").push_back('{');
    out += conf_.status_members;
    out += '}';
    protocol::append_json_string_array(m.key("stderr"), proc_.stderr_tail());
    // A start its sandbox may have refused (EROFS, EACCES, a name lookup without the network):
    // the same hint a call's error gets, read off its last error and stderr (§15).
    if (!proc_.last_error().empty() || state() != tools::source_state::ready) {
        std::string said = proc_.last_error();
        for (const auto& line : proc_.stderr_tail())
            (said += '\n') += line;
        if (const std::string hint = sandbox::sandbox_hint(conf_, said); !hint.empty())
            m.string("sandboxHint", hint);
    }
    append_status(out);
    out += '}';
    return out;
}

void child_source::became_ready() {
    proc_.mark_ready();
    settle();
    auto waiting = std::move(waiting_);
    waiting_.clear();
    for (auto& [c, t] : waiting)
        if (!c->resolved()) send_execute(c, *t);
}

void child_source::settle() {
    if (!settled_) {
        settled_ = true;
        if (events_.settled) events_.settled(*this);
    }
}

tool_result child_source::request_failed(process::rpc_failure failure,
                                         const std::string& how) const {
    return tool_result::failure(
        error_code::tool_failed,
        failure == process::rpc_failure::oversized
            ? fmt::format("the tool's result is over limits.max_result_bytes ({} bytes)",
                          whole_.limits.max_result_bytes)
            : fmt::format("{} {} while the call was running", label_, how));
}

void child_source::fail_waiting(const std::string& why) {
    auto waiting = std::move(waiting_);
    waiting_.clear();
    for (auto& [c, t] : waiting)
        c->resolve(
            tool_result::failure(error_code::tool_failed, fmt::format("{}: {}", label_, why)));
}

bool child_source::confine_again() {
    conf_ = sandbox::confine(cfg_.name, cfg_.sandbox, cfg_.sandbox_paths, conf_.capabilities,
                             cfg_.command, cfg_.cwd, confine_config_json_);
    if (conf_.refusal) {
        proc_.fail_permanently(*conf_.refusal);
        return true;
    }
    auto env = proc_.spec().env;
    sandbox::apply_env(conf_, env, cfg_.env);
    bind_egress();
    const bool running = proc_.pid().has_value();
    proc_.respawn_confined(conf_.plan, std::move(env), conf_.egress); // replaces a running one
    if (!running) proc_.restart();
    return true;
}

bool child_source::reconfine(const std::vector<tools::tool_definition>& defs) {
    // A declared profile is the process's sandbox whatever its tools say: nothing to move.
    if (cfg_.sandbox == config::sandbox_mode::off || !cfg_.sandbox_paths.profile.empty())
        return false;
    std::vector<std::vector<std::string>> caps;
    for (const auto& d : defs)
        caps.push_back(d.capabilities);
    const auto wanted = defs.empty() ? conf_.capabilities : sandbox::union_of(caps);
    if (wanted == conf_.capabilities) {
        reconfined_ = false;                     // settled: a later restart may move it again
        sandbox::remember_settled(cfg_, wanted); // the next daemon start begins here
        return false;
    }
    if (reconfined_) {
        // Its tools changed with its sandbox: no second try, no loop.
        proc_.fail_permanently("its tools' capabilities changed when it was started in their "
                               "sandbox; declare them in the source's `capabilities` table");
        return true;
    }
    reconfined_ = true;
    conf_ = sandbox::confine(cfg_.name, cfg_.sandbox, cfg_.sandbox_paths, wanted, cfg_.command,
                             cfg_.cwd, confine_config_json_);
    if (conf_.refusal) {
        proc_.fail_permanently(*conf_.refusal);
        return true;
    }
    spdlog::info("{}: starting again in its tools' sandbox ({})", label_, conf_.status_members);
    auto env = proc_.spec().env;
    sandbox::apply_env(conf_, env, cfg_.env);
    bind_egress();
    proc_.respawn_confined(conf_.plan, std::move(env), conf_.egress);
    return true;
}

} // namespace meith::sources
