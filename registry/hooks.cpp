#include "registry/hooks.hpp"

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

namespace meith::registry {

namespace {

constexpr std::size_t max_answer_bytes = 1024 * 1024;
constexpr std::size_t max_observe_running = 4;   ///< one-shot observe processes per hook
constexpr std::size_t max_observe_queued = 1024; ///< events waiting for one of them
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
    hook_runner(asio::any_io_executor ex, child_reaper& reaper, const config::hook_config& cfg,
                const config::config& whole)
        : ex_(ex), reaper_(reaper), cfg_(cfg),
          whole_(whole), spec_{"hook '" + cfg.name + "'", cfg.command, cfg.cwd,
                               child_environment(whole.tools.env_allow, cfg.env)} {
        if (cfg_.mode == config::exec_mode::server) {
            supervised_process::handlers h;
            h.on_spawn = [this] { proc_->mark_ready(); };
            h.on_line = [this](std::string_view line) { on_line(line); };
            h.on_exit = [this](const std::string& how) { fail_pending("exited: " + how); };
            h.on_lifecycle = [this](std::string_view event, const std::string& details) {
                if (lifecycle_) lifecycle_(cfg_.name, event, details);
            };
            supervised_process::policy pol;
            pol.max_line_bytes = max_answer_bytes;
            proc_ = std::make_unique<supervised_process>(ex, reaper, spec_, pol, std::move(h));
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
    void ask(const std::string& payload, std::chrono::milliseconds budget,
             std::function<void(hook_verdict)> done) {
        hook_verdict v{cfg_.name, cfg_.phase, false, {}};
        const auto limit = std::min(budget, std::chrono::milliseconds(cfg_.timeout_ms));
        if (proc_)
            ask_server(payload, limit, std::move(v), std::move(done));
        else
            ask_oneshot(payload, limit, std::move(v), std::move(done));
    }

    /// Hands the event over; never waits for the answer.
    void notify(const std::string& payload) {
        if (proc_) {
            const auto id = ++next_id_;
            if (!proc_->send(request(id, payload)))
                spdlog::warn("observe hook '{}' is not running or not reading; event dropped",
                             cfg_.name);
            else
                remember_observed(id);
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
        out += R"({"name":)";
        protocol::append_json_string(out, cfg_.name);
        out += R"(,"kind":"hook","state":")";
        out += to_string(proc_->state());
        out += R"(","pid":)";
        const auto pid = proc_->pid();
        out += pid ? std::to_string(*pid) : "null";
        out += R"(,"restarts":)" + std::to_string(proc_->restarts()) + R"(,"lastError":)";
        if (proc_->last_error().empty())
            out += "null";
        else
            protocol::append_json_string(out, proc_->last_error());
        out += R"(,"tools":0,"unanswered":)" + std::to_string(observing_.size()) + '}';
    }
    bool is_server() const { return proc_ != nullptr; }
    void restart() {
        if (proc_) proc_->restart();
    }
    std::function<void(std::string_view, std::string_view, const std::string&)> lifecycle_;

  private:
    struct pending {
        hook_verdict v;
        std::function<void(hook_verdict)> done;
        std::unique_ptr<asio::steady_timer> timer;
    };

    static std::string request(std::uint64_t id, const std::string& payload) {
        std::string r =
            R"({"jsonrpc":"2.0","id":)" + std::to_string(id) + R"(,"method":"hook","params":)";
        r += payload;
        r += "}\n";
        return r;
    }

    void ask_oneshot(const std::string& payload, std::chrono::milliseconds limit, hook_verdict v,
                     std::function<void(hook_verdict)> done) {
        struct state {
            bool answered = false;
            std::function<void(hook_verdict)> done;
            hook_verdict v;
            asio::steady_timer timer;
            std::shared_ptr<oneshot_run> run;
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
        st->run = oneshot_run::start(
            ex_, reaper_, spec_, payload + "\n", max_answer_bytes,
            std::chrono::milliseconds(whole_.tools.kill_grace_ms), [st, this](oneshot_outcome out) {
                if (st->answered) return;
                if (!out.spawn_error.empty())
                    return st->answer(deny(st->v, "could not start: " + out.spawn_error));
                if (out.out_overflow) return st->answer(deny(st->v, "wrote too much"));
                if (!WIFEXITED(out.wait_status) || WEXITSTATUS(out.wait_status) != 0)
                    return st->answer(deny(st->v, describe_wait_status(out.wait_status)));
                simdjson::dom::element answer;
                if (parser_.parse(out.out).get(answer) != simdjson::SUCCESS)
                    return st->answer(deny(st->v, "wrote an answer that is not JSON"));
                st->answer(read_answer(answer, st->v));
            });
        st->timer.expires_after(limit);
        st->timer.async_wait([st, limit](const std::error_code& ec) {
            if (ec || st->answered) return;
            st->run->kill();
            st->answer(deny(st->v, fmt::format("did not answer within {} ms", limit.count())));
        });
    }

    void ask_server(const std::string& payload, std::chrono::milliseconds limit, hook_verdict v,
                    std::function<void(hook_verdict)> done) {
        if (proc_->state() != process_state::ready)
            return done(deny(std::move(v),
                             "is not running (" + std::string(to_string(proc_->state())) +
                                 (proc_->last_error().empty() ? "" : ": " + proc_->last_error()) +
                                 ")"));
        const auto id = ++next_id_;
        if (!proc_->send(request(id, payload)))
            return done(deny(std::move(v), "is not reading its input"));
        auto timer = std::make_unique<asio::steady_timer>(ex_, limit);
        timer->async_wait([this, id, limit](const std::error_code& ec) {
            if (ec) return;
            finish(id, [limit](hook_verdict v) {
                return deny(std::move(v),
                            fmt::format("did not answer within {} ms", limit.count()));
            });
        });
        pending_.emplace(id, pending{std::move(v), std::move(done), std::move(timer)});
    }

    /// Completes pending request `id` (if still pending) with `make(verdict)`.
    template <typename F>
    void finish(std::uint64_t id, F make) {
        auto it = pending_.find(id);
        if (it == pending_.end()) return;
        pending p = std::move(it->second);
        pending_.erase(it);
        p.timer->cancel();
        p.done(make(std::move(p.v)));
    }

    /// Observe events sent and not answered yet. A hook that never answers would grow this
    /// without end: past `max_observe_unanswered` the oldest are forgotten (a late answer to
    /// one is then ignored like any unknown id).
    void remember_observed(std::uint64_t id) {
        observing_.insert(id);
        observing_order_.push_back(id);
        while (observing_order_.size() > max_observe_unanswered) {
            observing_.erase(observing_order_.front());
            observing_order_.pop_front();
            if (!warned_unanswered_) {
                warned_unanswered_ = true;
                spdlog::warn("observe hook '{}' has not answered {} events; forgetting the "
                             "oldest (events are still sent)",
                             cfg_.name, max_observe_unanswered);
            }
        }
    }

    void fail_pending(const std::string& why) {
        std::vector<std::uint64_t> ids;
        for (auto& [id, p] : pending_)
            ids.push_back(id);
        for (auto id : ids)
            finish(id, [&](hook_verdict v) { return deny(std::move(v), why); });
        observing_.clear();
        observing_order_.clear();
    }

    void on_line(std::string_view line) {
        simdjson::dom::element msg;
        std::uint64_t id = 0;
        if (parser_.parse(line.data(), line.size()).get(msg) != simdjson::SUCCESS ||
            msg.type() != simdjson::dom::element_type::OBJECT ||
            msg["id"].get_uint64().get(id) != simdjson::SUCCESS) {
            if (garbage_log_.allow())
                spdlog::warn("hook '{}' wrote a line that is not a JSON-RPC response (skipped){}",
                             cfg_.name, garbage_log_.suppressed());
            return;
        }
        if (observing_.erase(id)) {
            simdjson::dom::element err;
            if (msg["error"].get(err) == simdjson::SUCCESS)
                spdlog::warn("observe hook '{}' answered an error: {}", cfg_.name,
                             simdjson::minify(err));
            return;
        }
        simdjson::dom::element result, error;
        if (msg["result"].get(result) == simdjson::SUCCESS) {
            finish(id, [&](hook_verdict v) { return read_answer(result, std::move(v)); });
        } else if (msg["error"].get(error) == simdjson::SUCCESS) {
            std::string_view text = "error";
            if (error["message"].get_string().get(text) != simdjson::SUCCESS) text = "error";
            const std::string why = "answered an error: " + std::string(text);
            finish(id, [&](hook_verdict v) { return deny(std::move(v), why); });
        } else {
            finish(id, [](hook_verdict v) {
                return deny(std::move(v), "answered neither result nor error");
            });
        }
    }

    void run_observe(const std::string& payload) {
        ++running_;
        auto timer =
            std::make_shared<asio::steady_timer>(ex_, std::chrono::milliseconds(cfg_.timeout_ms));
        auto run = oneshot_run::start(
            ex_, reaper_, spec_, payload + "\n", max_answer_bytes,
            std::chrono::milliseconds(whole_.tools.kill_grace_ms),
            [this, timer](oneshot_outcome out) {
                timer->cancel();
                if (!out.spawn_error.empty())
                    spdlog::warn("observe hook '{}' could not start: {}", cfg_.name,
                                 out.spawn_error);
                else if (out.killed)
                    spdlog::warn("observe hook '{}' did not answer within {} ms; killed", cfg_.name,
                                 cfg_.timeout_ms);
                else if (!WIFEXITED(out.wait_status) || WEXITSTATUS(out.wait_status) != 0)
                    spdlog::warn("observe hook '{}' {}", cfg_.name,
                                 describe_wait_status(out.wait_status));
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
    child_reaper& reaper_;
    const config::hook_config& cfg_;
    const config::config& whole_;
    process_spec spec_;
    std::unique_ptr<supervised_process> proc_;
    std::unordered_map<std::uint64_t, pending> pending_;
    std::unordered_set<std::uint64_t> observing_;
    std::deque<std::uint64_t> observing_order_; ///< the same ids, oldest first
    bool warned_unanswered_ = false;
    std::deque<std::string> queued_;
    std::size_t running_ = 0;
    std::uint64_t next_id_ = 0;
    simdjson::dom::parser parser_;
    log_throttle garbage_log_;
};

hook_set::hook_set(asio::any_io_executor ex, child_reaper& reaper, const config::config& cfg) {
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
                      std::chrono::milliseconds budget,
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
            const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                deadline - std::chrono::steady_clock::now());
            h->ask(payload, std::max(left, std::chrono::milliseconds(1)),
                   [self = shared_from_this()](hook_verdict v) {
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
    c->deadline = std::chrono::steady_clock::now() + budget;
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

} // namespace meith::registry
