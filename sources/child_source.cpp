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
      confine_config_json_(std::move(confine_config_json)), start_caps_(start_caps),
      // An on-demand source is confined at its first start (or when `meith sources` shows it):
      // its cgroup, TMPDIR, seccomp filter and paths cost nothing at meithd's start.
      conf_(cfg.on_demand ? sandbox::confinement{}
                          : sandbox::confine(cfg.name, cfg.sandbox, cfg.sandbox_paths, start_caps,
                                             cfg.command, cfg.cwd, confine_config_json_)),
      confined_(!cfg.on_demand), spec_confined_(!cfg.on_demand),
      peer_(ex, reaper,
            process::confined_spec(label_, cfg.command, cfg.cwd, whole.tools.env_allow, cfg.env,
                                   &conf_),
            pol, dialect, label_, make_handlers()),
      proc_(peer_.process()), idle_timer_(ex) {
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
    if (idle_) return tools::source_state::idle;
    if (wake_pending_) return tools::source_state::starting;
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
    if (confined_) { // else at its first start (an on-demand source)
        if (!confine_spec()) {
            settle();
            return;
        }
        bind_egress();
    }
    // What is known of it is listed at once (docs/protocol.md §1 "Startup order"): its pinned
    // definitions, or the one tool its config declares. A call waits for its process as for
    // any start; the listing the process gives replaces this one.
    std::size_t listed = listed_before_start() ? tool_count() : 0;
    if (listed == 0 && events_.pinned) {
        auto defs = events_.pinned(*this);
        for (auto& d : defs)
            if (auto it = cfg_.timeout_ms.find(d.name); it != cfg_.timeout_ms.end())
                d.timeout_ms = it->second;
        listed = defs.size();
        if (listed > 0 && events_.registered) {
            if (auto err = events_.registered(*this, std::move(defs))) {
                proc_.fail_permanently(std::move(*err));
                settle();
                return;
            }
        }
    }
    listed_tools_ = listed;
    if (cfg_.on_demand) {
        if (listed > 0) {
            // Nothing runs until a call needs it (docs/configuration.md "Starting on demand").
            idle_ = true;
            spdlog::info("{} starts on demand: {} tool(s) listed from {}", label_, listed,
                         listed_before_start() ? "its config" : "their pinned definitions");
            settle();
            return;
        }
        spdlog::info("{} starts on demand, but no listing of it is pinned yet: it starts now to "
                     "list its tools, and stops after {} ms without calls",
                     label_, cfg_.idle_stop_ms);
        if (!confine_spec()) {
            settle();
            return;
        }
    } else if (listed > 0) {
        wait_note_ = fmt::format("waiting for {} to start (its tools were listed from their "
                                 "pins; up to {} ms)",
                                 label_, cfg_.start_timeout_ms);
        settle(); // meithd need not wait for it to be ready
    }
    proc_.start();
}

void child_source::restart() {
    if (idle_) {
        wake();
        return;
    }
    if (!confine_spec()) return;
    proc_.restart();
}

const sandbox::confinement& child_source::confinement() const {
    if (!confined_) {
        conf_ = sandbox::confine(cfg_.name, cfg_.sandbox, cfg_.sandbox_paths, start_caps_,
                                 cfg_.command, cfg_.cwd, confine_config_json_);
        confined_ = true;
    }
    return conf_;
}

bool child_source::confine_spec() {
    const auto& conf = confinement();
    if (conf.refusal) {
        spdlog::error("{} not started: {}", label_, *conf.refusal);
        proc_.fail_permanently(*conf.refusal); // fails the calls that wait, saying why
        return false;
    }
    if (std::exchange(spec_confined_, true)) return true;
    auto env = proc_.spec().env;
    sandbox::apply_env(conf, env, cfg_.env);
    proc_.respawn_confined(conf.plan, std::move(env), conf.egress); // nothing runs yet: sets it
    bind_egress();
    return true;
}

tools::call_ptr child_source::waiting_call_of_one_session() const {
    tools::call_ptr newest;
    for (const auto& [c, t] : waiting_) {
        if (c->resolved()) continue;
        if (newest && c->session_id != newest->session_id) return nullptr;
        newest = c;
    }
    return newest;
}

void child_source::touch() {
    last_use_ = std::chrono::steady_clock::now();
    if (idle_) wake();
}

void child_source::wake() {
    idle_ = false;
    if (!confine_spec()) return;
    wait_note_ = fmt::format("starting {} on demand (its first call since it was idle; up to "
                             "{} ms)",
                             label_, cfg_.start_timeout_ms);
    idle_timer_.cancel();
    if (events_.lifecycle) {
        std::string fields;
        protocol::json_members(fields).string("reason", "on_demand");
        events_.lifecycle(*this, "source_waking", fields);
    }
    if (idle_stopping_) {
        wake_pending_ = true; // started when the idle stop ends
        return;
    }
    proc_.start();
}

void child_source::arm_idle() {
    if (!cfg_.on_demand) return;
    idle_timer_.expires_at(last_use_ + std::chrono::milliseconds(cfg_.idle_stop_ms));
    std::weak_ptr<tools::tool_source> weak = weak_from_this();
    idle_timer_.async_wait([weak](const std::error_code& ec) {
        if (ec) return;
        if (auto self = std::static_pointer_cast<child_source>(weak.lock())) self->on_idle_timer();
    });
}

void child_source::on_idle_timer() {
    if (idle_ || proc_.state() != tools::source_state::ready) return; // re-armed when ready
    const auto now = std::chrono::steady_clock::now();
    if (peer_.in_flight() > 0 || !waiting_.empty() || holds_work()) {
        last_use_ = now; // busy: a full idle period from now
        arm_idle();
        return;
    }
    if (now < last_use_ + std::chrono::milliseconds(cfg_.idle_stop_ms)) {
        arm_idle(); // used since the timer was armed
        return;
    }
    idle_ = true;
    idle_stopping_ = true;
    spdlog::info("{}: stopped after {} ms without calls; the next call starts it again", label_,
                 cfg_.idle_stop_ms);
    if (events_.lifecycle) {
        std::string fields;
        protocol::json_members(fields).number("idleStopMs", cfg_.idle_stop_ms);
        events_.lifecycle(*this, "source_idle_stopped", fields);
    }
    std::weak_ptr<tools::tool_source> weak = weak_from_this();
    proc_.stop(std::chrono::milliseconds(whole_.tools.kill_grace_ms), [weak] {
        auto self = std::static_pointer_cast<child_source>(weak.lock());
        if (!self) return;
        self->idle_stopping_ = false;
        if (self->wake_pending_) {
            self->wake_pending_ = false;
            self->proc_.start();
        }
    });
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
    touch(); // an idle on-demand source starts now (and is confined)
    if (conf_.egress) {
        (void)sole_call_in_flight(); // prunes the finished
        egress_calls_.push_back(c);
    }
    switch (state()) {
    case tools::source_state::ready:
        send_execute(c, t);
        return;
    case tools::source_state::idle: // not after touch()
    case tools::source_state::starting:
    case tools::source_state::restarting:
        // Wait for the child within the call's own timeout (§7).
        if (!wait_note_.empty()) {
            // The caller hears why it waits (meith mcp sends it as progress).
            std::string event = "{";
            protocol::json_members(event)
                .string("type", "progress")
                .number("progress", 0)
                .string("message", wait_note_);
            event += '}';
            c->emit(event);
        }
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
    idle_ = false; // stopped for good: a late call is refused, not a reason to start
    wake_pending_ = false;
    idle_timer_.cancel();
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
    m.number("tools", idle_ ? listed_tools_ : tool_count());
    if (cfg_.on_demand) m.string("start", "on-demand").number("idleStopMs", cfg_.idle_stop_ms);
    m.key("sandbox").push_back('{');
    out += confinement().status_members;
    out += '}';
    protocol::append_json_string_array(m.key("stderr"), proc_.stderr_tail());
    // A start its sandbox may have refused (EROFS, EACCES, a name lookup without the network):
    // the same hint a call's error gets, read off its last error and stderr (§15).
    if (!proc_.last_error().empty() || state() != tools::source_state::ready) {
        std::string said = proc_.last_error();
        for (const auto& line : proc_.stderr_tail())
            (said += '\n') += line;
        if (const std::string hint = sandbox::sandbox_hint(confinement(), said); !hint.empty())
            m.string("sandboxHint", hint);
    }
    append_status(out);
    out += '}';
    return out;
}

void child_source::became_ready() {
    proc_.mark_ready();
    settle();
    wait_note_.clear();
    last_use_ = std::chrono::steady_clock::now();
    arm_idle();
    auto waiting = std::move(waiting_);
    waiting_.clear();
    for (auto& [c, t] : waiting) {
        if (c->resolved()) continue;
        if (!events_.current) {
            send_execute(c, *t);
            continue;
        }
        // The tool as the process lists it now: a call that waited on a listing from the pins
        // (or on a restart) gets what the server offers, or the refusal a fresh call would.
        auto now = events_.current(*t);
        if (!now) {
            c->resolve(
                tool_result::failure(error_code::unknown_tool,
                                     fmt::format("{} no longer lists tool '{}' since it started",
                                                 label_, t->remote_name)));
        } else if (now->quarantined) {
            c->resolve(tool_result::failure(
                error_code::permission_denied,
                fmt::format("tool '{}' changed its definition when {} started; it is "
                            "quarantined until a person accepts it: meith tools accept {}",
                            now->name, label_, now->name)));
        } else {
            c->target = now;
            send_execute(c, *now);
        }
    }
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
    idle_ = false; // it starts in its new sandbox now
    idle_timer_.cancel();
    conf_ = sandbox::confine(cfg_.name, cfg_.sandbox, cfg_.sandbox_paths,
                             confined_ ? conf_.capabilities : start_caps_, cfg_.command, cfg_.cwd,
                             confine_config_json_);
    confined_ = spec_confined_ = true;
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
