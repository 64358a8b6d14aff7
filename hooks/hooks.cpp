#include "hooks/hooks.hpp"

#include "process/confined_spec.hpp"
#include "process/rpc_peer.hpp"
#include "sandbox/confinement.hpp"

#include "audit/redactor.hpp"
#include "permissions/policy.hpp"
#include "protocol/json_writer.hpp"

#include <charconv>
#include <deque>
#include <sys/wait.h>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>
#include <simdjson.h>
#include <spdlog/spdlog.h>

namespace meith::hooks {

namespace {

constexpr std::size_t max_answer_bytes = 1024 * 1024;
constexpr std::size_t max_observe_running = 4;       ///< one-shot observe processes per hook
constexpr std::size_t max_observe_queued = 1024;     ///< events waiting for one of them
constexpr std::size_t max_observe_unanswered = 1024; ///< server-mode observe events remembered

/// Reads a filter answer: {"allow":bool,"reason"?:string}. Anything else denies.
hook_verdict read_answer(simdjson::dom::element answer, hook_verdict v) {
    bool allow = false;
    if (answer.type() != simdjson::dom::element_type::OBJECT ||
        answer["allow"].get_bool().get(allow) != simdjson::SUCCESS) {
        v.allow = false;
        v.reason = "hook '" + v.name + "' gave no {\"allow\": bool} answer (fail closed)";
        return v;
    }
    v.allow = allow;
    std::string_view reason;
    if (answer["reason"].get_string().get(reason) == simdjson::SUCCESS)
        v.reason = reason;
    else if (!allow)
        v.reason = "denied by hook '" + v.name + "'";
    return v;
}

hook_verdict deny(hook_verdict v, std::string why) {
    v.allow = false;
    v.reason = "hook '" + v.name + "' " + why + " (fail closed)";
    return v;
}

} // namespace

class hook_runner {
  public:
    hook_runner(asio::any_io_executor ex, process::child_reaper& reaper,
                const config::hook_config& cfg, const config::config& whole)
        : ex_(ex), reaper_(reaper), cfg_(cfg), whole_(whole) {
        // A hook is the user's own policy program: confined only when it declares
        // capabilities (PROTOCOL.md §13). Under sandbox = "require" on a kernel that cannot
        // confine it fully, an error is logged and it runs with what the kernel offers.
        std::optional<sandbox::confinement> conf;
        if (cfg.capabilities) {
            conf = sandbox::confine("hook-" + cfg.name, cfg.sandbox, cfg.sandbox_paths,
                                    permissions::capability_set_from(*cfg.capabilities),
                                    cfg.command, cfg.cwd);
            if (conf->refusal) spdlog::error("hook '{}': {}", cfg.name, *conf->refusal);
        }
        spec_ = process::confined_spec("hook '" + cfg.name + "'", cfg.command, cfg.cwd,
                                       whole.tools.env_allow, cfg.env, conf ? &*conf : nullptr);
        if (cfg_.mode == config::exec_mode::server) {
            process::rpc_peer::handlers h;
            h.on_spawn = [this] { proc_->mark_ready(); };
            h.on_exit = [this](const std::string&) {
                observing_.clear(); // the peer failed every request in flight
                observing_order_.clear();
            };
            h.on_lifecycle = [this](std::string_view event, const std::string& details) {
                if (lifecycle_) lifecycle_(cfg_.name, event, details);
            };
            process::supervised_process::policy pol;
            pol.max_line_bytes = max_answer_bytes;
            peer_ = std::make_unique<process::rpc_peer>(ex, reaper, spec_, pol,
                                                        process::rpc_dialect::jsonrpc,
                                                        "hook '" + cfg.name + "'", std::move(h));
            proc_ = &peer_->process();
        }
    }

    const config::hook_config& cfg() const { return cfg_; }

    bool applies(std::string_view phase, std::string_view tool_name) const {
        if (cfg_.phase != phase) return false;
        if (tool_name.empty()) return true; // session events
        for (const auto& glob : cfg_.tools)
            if (permissions::glob_match(glob, tool_name)) return true;
        return false;
    }

    void start() {
        if (proc_) proc_->start();
    }

    void stop(std::chrono::milliseconds grace, std::function<void()> done) {
        fail_pending("stopped");
        if (proc_)
            proc_->stop(grace, std::move(done));
        else
            done();
    }

    /// Asks the hook; `done(verdict)` runs exactly once.
    void ask(const std::string& payload, std::chrono::steady_clock::time_point call_deadline,
             std::function<void(hook_verdict)> done) {
        hook_verdict v{cfg_.name, cfg_.phase, false, {}};
        // When the call's deadline comes first (not the hook's own timeout_ms), it decides:
        // TIMEOUT. The hook's timer is set 1 ms after that very time point, so it never fires
        // first — Asio runs expired timers in expiry order — and only ends the hook's run.
        const auto own_end =
            std::chrono::steady_clock::now() + std::chrono::milliseconds(cfg_.timeout_ms);
        const auto limit =
            call_deadline < own_end ? call_deadline + std::chrono::milliseconds(1) : own_end;
        if (proc_)
            ask_server(payload, limit, std::move(v), std::move(done));
        else
            ask_oneshot(payload, limit, std::move(v), std::move(done));
    }

    /// Hands the event over; never waits for the answer.
    void notify(const std::string& payload) {
        if (peer_) {
            process::rpc_peer::callbacks cb;
            cb.on_message = [this](simdjson::dom::object msg, bool) {
                std::uint64_t answered = 0;
                if (msg["id"].get_uint64().get(answered) == simdjson::SUCCESS)
                    observing_.erase(answered);
                simdjson::dom::element err;
                if (msg["error"].get(err) == simdjson::SUCCESS)
                    spdlog::warn("observe hook '{}' answered an error: {}", cfg_.name,
                                 simdjson::minify(err));
            };
            if (auto id = peer_->request("hook", payload, std::move(cb)))
                remember_observed(*id);
            else
                spdlog::warn("observe hook '{}' is not running or not reading; event dropped",
                             cfg_.name);
            return;
        }
        if (running_ >= max_observe_running) {
            if (queued_.size() >= max_observe_queued) {
                spdlog::warn("observe hook '{}' is behind ({} events queued); event dropped",
                             cfg_.name, queued_.size());
                return;
            }
            queued_.push_back(payload);
            return;
        }
        run_observe(payload);
    }

    void append_status(std::string& out) const {
        out += '{';
        protocol::json_members m(out);
        m.string("name", cfg_.name)
            .string("kind", "hook")
            .string("state", to_string(proc_->state()));
        if (const auto pid = proc_->pid())
            m.number("pid", static_cast<std::uint64_t>(*pid));
        else
            m.null("pid");
        m.number("restarts", proc_->restarts());
        if (proc_->last_error().empty())
            m.null("lastError");
        else
            m.string("lastError", proc_->last_error());
        m.number("tools", 0).number("unanswered", observing_.size());
        protocol::append_json_string_array(m.key("stderr"), proc_->stderr_tail());
        out += '}';
    }
    bool is_server() const { return proc_ != nullptr; }
    void restart() {
        if (proc_) proc_->restart();
    }
    std::function<void(std::string_view, std::string_view, const std::string&)> lifecycle_;

  private:
    /// One filter question to a server-mode hook: answered once, by its reply, its timeout,
    /// the hook's exit or stop().
    struct asking {
        explicit asking(asio::any_io_executor ex) : timer(std::move(ex)) {}
        hook_verdict v;
        std::function<void(hook_verdict)> done;
        asio::steady_timer timer;
        std::uint64_t id = 0;
    };

    void ask_oneshot(const std::string& payload, std::chrono::steady_clock::time_point limit,
                     hook_verdict v, std::function<void(hook_verdict)> done) {
        struct state {
            bool answered = false;
            std::function<void(hook_verdict)> done;
            hook_verdict v;
            asio::steady_timer timer;
            std::shared_ptr<process::oneshot_run> run;
            state(asio::any_io_executor ex) : timer(ex) {}
            void answer(hook_verdict out) {
                if (answered) return;
                answered = true;
                timer.cancel();
                std::exchange(done, nullptr)(std::move(out));
            }
        };
        auto st = std::make_shared<state>(ex_);
        st->done = std::move(done);
        st->v = v;
        st->run = process::oneshot_run::start(
            ex_, reaper_, spec_, payload + "\n", max_answer_bytes,
            std::chrono::milliseconds(whole_.tools.kill_grace_ms),
            [st, this](process::oneshot_outcome out) {
                if (st->answered) return;
                if (!out.spawn_error.empty())
                    return st->answer(deny(st->v, "could not start: " + out.spawn_error));
                if (out.out_overflow) return st->answer(deny(st->v, "wrote too much"));
                if (!WIFEXITED(out.wait_status) || WEXITSTATUS(out.wait_status) != 0)
                    return st->answer(deny(st->v, process::describe_wait_status(out.wait_status)));
                simdjson::dom::element answer;
                if (parser_.parse(out.out).get(answer) != simdjson::SUCCESS)
                    return st->answer(deny(st->v, "wrote an answer that is not JSON"));
                st->answer(read_answer(answer, st->v));
            });
        st->timer.expires_at(limit);
        st->timer.async_wait([st, this](const std::error_code& ec) {
            if (ec || st->answered) return;
            st->run->kill();
            st->answer(deny(st->v, fmt::format("did not answer within {} ms", cfg_.timeout_ms)));
        });
    }

    void ask_server(const std::string& payload, std::chrono::steady_clock::time_point limit,
                    hook_verdict v, std::function<void(hook_verdict)> done) {
        if (proc_->state() != process::process_state::ready)
            return done(deny(std::move(v),
                             "is not running (" + std::string(to_string(proc_->state())) +
                                 (proc_->last_error().empty() ? "" : ": " + proc_->last_error()) +
                                 ")"));
        auto a = std::make_shared<asking>(ex_);
        a->v = std::move(v);
        a->done = std::move(done);
        process::rpc_peer::callbacks cb;
        cb.on_message = [this, a](simdjson::dom::object msg, bool) {
            simdjson::dom::element result, error;
            if (msg["result"].get(result) == simdjson::SUCCESS) {
                answer(a, [&](hook_verdict v) { return read_answer(result, std::move(v)); });
            } else if (msg["error"].get(error) == simdjson::SUCCESS) {
                std::string_view text = "error";
                if (error["message"].get_string().get(text) != simdjson::SUCCESS) text = "error";
                const std::string why = "answered an error: " + std::string(text);
                answer(a, [&](hook_verdict v) { return deny(std::move(v), why); });
            } else {
                answer(a, [](hook_verdict v) {
                    return deny(std::move(v), "answered neither result nor error");
                });
            }
        };
        cb.on_failure = [this, a](process::rpc_failure, const std::string& how) {
            answer(a, [&](hook_verdict v) { return deny(std::move(v), "exited: " + how); });
        };
        const auto id = peer_->request("hook", payload, std::move(cb));
        if (!id) return a->done(deny(std::move(a->v), "is not reading its input"));
        a->id = *id;
        asking_.emplace(*id, a);
        a->timer.expires_at(limit);
        a->timer.async_wait([this, a](const std::error_code& ec) {
            if (ec) return;
            peer_->abandon(a->id);
            answer(a, [this](hook_verdict v) {
                return deny(std::move(v),
                            fmt::format("did not answer within {} ms", cfg_.timeout_ms));
            });
        });
    }

    /// Completes question `a` (if still open) with `make(verdict)`.
    template <typename F>
    void answer(const std::shared_ptr<asking>& a, F make) {
        if (!asking_.erase(a->id) || !a->done) return;
        a->timer.cancel();
        std::exchange(a->done, nullptr)(make(std::move(a->v)));
    }

    /// Observe events sent and not answered yet. A hook that never answers would grow this
    /// without end: past `max_observe_unanswered` the oldest are forgotten (a late answer to
    /// one is then ignored like any unknown id).
    void remember_observed(std::uint64_t id) {
        observing_.insert(id);
        observing_order_.push_back(id);
        while (observing_order_.size() > max_observe_unanswered) {
            if (observing_.erase(observing_order_.front()))
                peer_->abandon(observing_order_.front());
            observing_order_.pop_front();
            if (!warned_unanswered_) {
                warned_unanswered_ = true;
                spdlog::warn("observe hook '{}' has not answered {} events; forgetting the "
                             "oldest (events are still sent)",
                             cfg_.name, max_observe_unanswered);
            }
        }
    }

    /// Denies every open filter question (stop()); observe events are forgotten.
    void fail_pending(const std::string& why) {
        std::vector<std::shared_ptr<asking>> open;
        for (auto& [id, a] : asking_)
            open.push_back(a);
        for (auto& a : open) {
            if (peer_) peer_->abandon(a->id);
            answer(a, [&](hook_verdict v) { return deny(std::move(v), why); });
        }
        if (peer_)
            for (auto id : observing_)
                peer_->abandon(id);
        observing_.clear();
        observing_order_.clear();
    }

    void run_observe(const std::string& payload) {
        ++running_;
        auto timer =
            std::make_shared<asio::steady_timer>(ex_, std::chrono::milliseconds(cfg_.timeout_ms));
        auto run = process::oneshot_run::start(
            ex_, reaper_, spec_, payload + "\n", max_answer_bytes,
            std::chrono::milliseconds(whole_.tools.kill_grace_ms),
            [this, timer](process::oneshot_outcome out) {
                timer->cancel();
                if (!out.spawn_error.empty())
                    spdlog::warn("observe hook '{}' could not start: {}", cfg_.name,
                                 out.spawn_error);
                else if (out.killed)
                    spdlog::warn("observe hook '{}' did not answer within {} ms; killed", cfg_.name,
                                 cfg_.timeout_ms);
                else if (!WIFEXITED(out.wait_status) || WEXITSTATUS(out.wait_status) != 0)
                    spdlog::warn("observe hook '{}' {}", cfg_.name,
                                 process::describe_wait_status(out.wait_status));
                --running_;
                if (!queued_.empty()) {
                    auto next = std::move(queued_.front());
                    queued_.pop_front();
                    run_observe(next);
                }
            });
        timer->async_wait([run](const std::error_code& ec) {
            if (!ec) run->kill();
        });
    }

    asio::any_io_executor ex_;
    process::child_reaper& reaper_;
    const config::hook_config& cfg_;
    const config::config& whole_;
    process::process_spec spec_;
    std::unique_ptr<process::rpc_peer> peer_;     ///< server mode only
    process::supervised_process* proc_ = nullptr; ///< the peer's child (server mode)
    std::unordered_map<std::uint64_t, std::shared_ptr<asking>> asking_;
    std::unordered_set<std::uint64_t> observing_;
    std::deque<std::uint64_t> observing_order_; ///< the same ids, oldest first
    bool warned_unanswered_ = false;
    std::deque<std::string> queued_;
    std::size_t running_ = 0;
    simdjson::dom::parser parser_; ///< one-shot answers
};

hook_set::hook_set(asio::any_io_executor ex, process::child_reaper& reaper,
                   const config::config& cfg) {
    for (const auto& h : cfg.hooks)
        hooks_.push_back(std::make_unique<hook_runner>(ex, reaper, h, cfg));
}

hook_set::~hook_set() = default;

void hook_set::start() {
    for (auto& h : hooks_)
        h->start();
}

void hook_set::stop(std::chrono::milliseconds grace, std::function<void()> done) {
    auto remaining = std::make_shared<std::size_t>(hooks_.size() + 1);
    auto finish = std::make_shared<std::function<void()>>(std::move(done));
    auto one_done = [remaining, finish] {
        if (--*remaining == 0) (*finish)();
    };
    for (auto& h : hooks_)
        h->stop(grace, one_done);
    one_done();
}

bool hook_set::has_filters(std::string_view phase, std::string_view tool_name) const {
    for (const auto& h : hooks_)
        if (h->cfg().kind == config::hook_kind::filter && h->applies(phase, tool_name)) return true;
    return false;
}

void hook_set::filter(std::string_view phase, std::string_view tool_name, std::string payload,
                      std::chrono::steady_clock::time_point deadline,
                      std::function<void(std::vector<hook_verdict>)> done) {
    // Runs the matching hooks one after another; each answer schedules the next ask.
    struct chain : std::enable_shared_from_this<chain> {
        std::vector<hook_runner*> matching;
        std::size_t next = 0;
        std::vector<hook_verdict> verdicts;
        std::string payload;
        std::chrono::steady_clock::time_point deadline;
        std::function<void(std::vector<hook_verdict>)> done;

        void step() {
            if (next == matching.size() || (!verdicts.empty() && !verdicts.back().allow)) {
                std::exchange(done, nullptr)(std::move(verdicts));
                return;
            }
            hook_runner* h = matching[next++];
            h->ask(payload, deadline, [self = shared_from_this()](hook_verdict v) {
                self->verdicts.push_back(std::move(v));
                self->step();
            });
        }
    };
    auto c = std::make_shared<chain>();
    for (auto& h : hooks_)
        if (h->cfg().kind == config::hook_kind::filter && h->applies(phase, tool_name))
            c->matching.push_back(h.get());
    c->payload = std::move(payload);
    c->deadline = deadline;
    c->done = std::move(done);
    c->step();
}

std::vector<std::string> hook_set::observe(std::string_view phase, std::string_view tool_name,
                                           const std::string& payload) {
    std::vector<std::string> names;
    for (auto& h : hooks_)
        if (h->cfg().kind == config::hook_kind::observe && h->applies(phase, tool_name)) {
            h->notify(payload);
            names.push_back(h->cfg().name);
        }
    return names;
}

bool hook_set::restart(std::string_view name) {
    for (auto& h : hooks_)
        if (h->cfg().name == name && h->is_server()) {
            h->restart();
            return true;
        }
    return false;
}

void hook_set::on_lifecycle(
    std::function<void(std::string_view, std::string_view, const std::string&)> fn) {
    for (auto& h : hooks_)
        h->lifecycle_ = fn;
}

void hook_set::append_status(std::string& out, bool& first) const {
    for (const auto& h : hooks_) {
        if (!h->is_server()) continue;
        if (!first) out.push_back(',');
        first = false;
        h->append_status(out);
    }
}

} // namespace meith::hooks
