// host_source: a tool host subprocess speaking NDJSON on stdin/stdout (PROTOCOL.md §7).
//
// One long-running child per source. Requests carry numeric string ids; responses and events
// are matched to requests strictly by id, so calls of many clients share one host and a late
// response to an abandoned call is dropped. The child is supervised: its exit is noticed via
// SIGCHLD, calls in flight fail with TOOL_FAILED, and it is restarted with exponential
// backoff until it crashes too often within a window, when the source is marked failed.
#include "protocol/framing.hpp"
#include "protocol/json_writer.hpp"
#include "registry/registry.hpp"
#include "registry/subprocess.hpp"

#include <charconv>
#include <csignal>
#include <deque>
#include <unordered_map>

#include <asio/write.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace meith::registry {

namespace {

using protocol::append_json_string;
using protocol::error_code;
using protocol::tool_result;
using clock = std::chrono::steady_clock;

constexpr auto first_backoff = std::chrono::milliseconds(200);
constexpr auto max_backoff = std::chrono::milliseconds(10000);
constexpr std::size_t crash_limit = 5;                 // exits within the window ...
constexpr auto crash_window = std::chrono::seconds(60); // ... that mark the source failed
constexpr std::size_t max_log_line = 16 * 1024;

std::string cut_for_log(std::string_view s) {
    if (s.size() <= 200) return std::string(s);
    return fmt::format("{}… ({} bytes)", s.substr(0, 200), s.size());
}

/// Finds `"id":"123"` near the start of a frame that was too large to parse.
std::optional<std::uint64_t> id_from_prefix(std::string_view prefix) {
    const auto key = prefix.find(R"("id":")");
    if (key == std::string_view::npos) return std::nullopt;
    const char* first = prefix.data() + key + 6;
    std::uint64_t id = 0;
    auto [ptr, ec] = std::from_chars(first, prefix.data() + prefix.size(), id);
    if (ec != std::errc{} || ptr == prefix.data() + prefix.size() || *ptr != '"') return std::nullopt;
    return id;
}

class host_source;

/// One launch of the child: its process, pipes and buffers. Handlers hold it by shared_ptr
/// and check `owner`, which the source clears when it retires the instance.
struct instance {
    instance(asio::any_io_executor ex, const child_process::options& opts, std::size_t max_line)
        : child(ex, opts), out_framer(max_line), err_framer(max_log_line) {}
    child_process child;
    protocol::line_framer out_framer;
    protocol::line_framer err_framer;
    std::string outbound;
    std::string writing;
    bool write_active = false;
    host_source* owner = nullptr;
};

class host_source final : public tool_source {
  public:
    host_source(asio::any_io_executor ex, child_reaper& reaper, const config::source_config& cfg,
                const config::config& whole)
        : ex_(std::move(ex)), reaper_(reaper), cfg_(cfg), whole_(whole), restart_timer_(ex_),
          start_timer_(ex_), stop_timer_(ex_) {}

    ~host_source() override {
        if (inst_) {
            inst_->owner = nullptr;
            inst_->child.signal_group(SIGKILL);
        }
    }

    const std::string& name() const override { return cfg_.name; }
    source_state state() const override { return state_; }

    void start(source_events events) override {
        events_ = std::move(events);
        launch();
    }

    void execute(const call_ptr& c, const tool& t) override {
        switch (state_) {
        case source_state::ready: send_execute(c, t); return;
        case source_state::starting:
        case source_state::restarting: {
            // Wait for the host within the call's own timeout (§7).
            waiting_.emplace_back(c, &t);
            c->on_abandon([this, raw = c.get()] {
                std::erase_if(waiting_, [raw](const auto& w) { return w.first.get() == raw; });
            });
            return;
        }
        case source_state::failed:
        case source_state::stopped:
            c->resolve(tool_result::failure(
                error_code::tool_failed,
                fmt::format("tool host '{}' is {}: {}", cfg_.name, to_string(state_),
                            last_error_.empty() ? "not running" : last_error_)));
            return;
        }
    }

    void stop(std::chrono::milliseconds kill_grace, std::function<void()> done) override {
        state_ = source_state::stopped;
        restart_timer_.cancel();
        start_timer_.cancel();
        fail_waiting("the daemon is shutting down");
        if (!inst_ || inst_->child.exited()) {
            done();
            return;
        }
        stop_done_ = std::move(done);
        inst_->child.close_stdin(); // a well-behaved host exits on EOF
        inst_->child.signal_group(SIGTERM);
        stop_timer_.expires_after(kill_grace);
        stop_timer_.async_wait([inst = inst_](const std::error_code& ec) {
            if (!ec) inst->child.signal_group(SIGKILL);
        });
    }

    std::string status_json() const override {
        std::string out = R"({"name":)";
        append_json_string(out, cfg_.name);
        out += R"(,"kind":"host","state":")";
        out += to_string(state_);
        out += R"(","pid":)";
        out += inst_ && !inst_->child.exited() ? std::to_string(inst_->child.pid()) : "null";
        out += R"(,"restarts":)";
        out += std::to_string(restarts_);
        out += R"(,"lastError":)";
        if (last_error_.empty()) out += "null";
        else append_json_string(out, last_error_);
        out += R"(,"tools":)";
        out += std::to_string(tool_count_);
        out += '}';
        return out;
    }

  private:
    enum class request_kind { init, schemas, execute };
    struct pending_request {
        request_kind kind;
        call_ptr c;
    };

    // ---- lifecycle ------------------------------------------------------------------------

    void launch() {
        ready_ = false;
        child_process::options opts;
        opts.argv = cfg_.command;
        opts.cwd = cfg_.cwd;
        opts.env = child_environment(default_env_allow_list(), cfg_.env);
        const std::size_t max_line = whole_.limits.max_result_bytes + 1024 * 1024;
        try {
            inst_ = std::make_shared<instance>(ex_, opts, max_line);
        } catch (const std::exception& e) {
            inst_.reset();
            last_error_ = e.what();
            spdlog::error("tool host '{}': {}", cfg_.name, last_error_);
            lifecycle("source_exit", fmt::format(R"("pid":null,"status":{})", json_str(last_error_)));
            after_exit();
            return;
        }
        inst_->owner = this;
        const pid_t pid = inst_->child.pid();
        spdlog::info("tool host '{}' started (pid {})", cfg_.name, pid);
        lifecycle("source_start", fmt::format(R"("pid":{})", pid));
        reaper_.watch(pid, [inst = inst_](int status) {
            inst->child.mark_exited();
            if (inst->owner) inst->owner->on_exit(inst, status);
        });
        read_stdout(inst_);
        read_stderr(inst_);

        start_timer_.expires_after(std::chrono::milliseconds(cfg_.start_timeout_ms));
        start_timer_.async_wait([this, inst = inst_](const std::error_code& ec) {
            if (ec || inst != inst_ || ready_) return;
            last_error_ = fmt::format("did not register its tools within {} ms (start_timeout_ms)",
                                      cfg_.start_timeout_ms);
            spdlog::error("tool host '{}' {}", cfg_.name, last_error_);
            inst->child.signal_group(SIGKILL);
        });

        std::string params = R"({"config":)";
        params += cfg_.config_json;
        params += '}';
        send_request(request_kind::init, "init", params, nullptr);
    }

    void on_exit(const std::shared_ptr<instance>& inst, int status) {
        if (inst != inst_) return;
        const std::string how = describe_wait_status(status);
        spdlog::log(state_ == source_state::stopped ? spdlog::level::info : spdlog::level::warn,
                    "tool host '{}' (pid {}) {}", cfg_.name, inst->child.pid(), how);
        lifecycle("source_exit", fmt::format(R"("pid":{},"status":{})", inst->child.pid(), json_str(how)));
        inst->owner = nullptr;
        inst_.reset();
        ready_ = false;
        tool_count_ = 0;
        // Calls in flight fail at once: the child is gone, no answer will come.
        auto pending = std::move(pending_);
        pending_.clear();
        for (auto& [id, p] : pending)
            if (p.c)
                p.c->resolve(tool_result::failure(
                    error_code::tool_failed,
                    fmt::format("tool host '{}' {} while the call was running", cfg_.name, how)));
        if (state_ == source_state::stopped) {
            stop_timer_.cancel();
            if (stop_done_) std::exchange(stop_done_, nullptr)();
            return;
        }
        if (last_error_.empty() || state_ == source_state::ready) last_error_ = "tool host " + how;
        after_exit();
    }

    /// Decides between restart with backoff and marking the source failed.
    void after_exit() {
        const auto now = clock::now();
        exits_.push_back(now);
        while (!exits_.empty() && now - exits_.front() > crash_window) exits_.pop_front();
        settle();
        if (state_ == source_state::stopped) return;
        if (exits_.size() >= crash_limit) {
            state_ = source_state::failed;
            last_error_ = fmt::format("crashed {} times within {} s; last: {}", exits_.size(),
                                      crash_window.count(), last_error_);
            spdlog::error("tool host '{}' marked failed: {}", cfg_.name, last_error_);
            lifecycle("source_failed", fmt::format(R"("reason":{})", json_str(last_error_)));
            fail_waiting(last_error_);
            return;
        }
        state_ = source_state::restarting;
        auto delay = first_backoff * (1 << std::min<std::size_t>(consecutive_failures_, 6));
        if (delay > max_backoff) delay = max_backoff;
        ++consecutive_failures_;
        ++restarts_;
        lifecycle("source_restart",
                  fmt::format(R"("attempt":{},"delayMs":{})", restarts_, delay.count()));
        restart_timer_.expires_after(delay);
        restart_timer_.async_wait([this](const std::error_code& ec) {
            if (!ec && state_ == source_state::restarting) launch();
        });
    }

    void became_ready() {
        ready_ = true;
        start_timer_.cancel();
        state_ = source_state::ready;
        consecutive_failures_ = 0;
        last_error_.clear();
        settle();
        auto waiting = std::move(waiting_);
        waiting_.clear();
        for (auto& [c, t] : waiting)
            if (!c->resolved()) send_execute(c, *t);
    }

    void settle() {
        if (!settled_) {
            settled_ = true;
            if (events_.settled) events_.settled(*this);
        }
    }

    void fail_waiting(const std::string& why) {
        auto waiting = std::move(waiting_);
        waiting_.clear();
        for (auto& [c, t] : waiting)
            c->resolve(tool_result::failure(error_code::tool_failed,
                                            fmt::format("tool host '{}': {}", cfg_.name, why)));
    }

    void lifecycle(std::string_view event, const std::string& details) {
        if (events_.lifecycle) events_.lifecycle(*this, event, details);
    }

    static std::string json_str(std::string_view s) {
        std::string out;
        append_json_string(out, s);
        return out;
    }

    // ---- requests ---------------------------------------------------------------------------

    std::uint64_t send_request(request_kind kind, std::string_view method, std::string_view params,
                               call_ptr c) {
        const std::uint64_t id = ++next_id_;
        std::string& out = inst_->outbound;
        out.append(R"({"v":1,"id":")");
        protocol::append_uint(out, id);
        out.append(R"(","method":")");
        out.append(method);
        out.append(R"(","params":)");
        out.append(params);
        out.append("}\n");
        pending_.emplace(id, pending_request{kind, std::move(c)});
        flush(inst_);
        return id;
    }

    void send_execute(const call_ptr& c, const tool& t) {
        if (!inst_) { // exited between ready and now
            waiting_.emplace_back(c, &t);
            return;
        }
        params_.clear();
        params_.append(R"({"tool_name":)");
        append_json_string(params_, t.remote_name);
        params_.append(R"(,"arguments":)");
        params_.append(c->args_json);
        params_.append(R"(,"state":)");
        params_.append(state_json_);
        params_.push_back('}');
        const auto id = send_request(request_kind::execute, "execute_tool", params_, c);
        // A cancelled or timed-out call forgets its id: a late answer is then dropped.
        c->on_abandon([this, id] { pending_.erase(id); });
    }

    void flush(const std::shared_ptr<instance>& inst) {
        if (inst->write_active || inst->outbound.empty()) return;
        inst->write_active = true;
        inst->writing.swap(inst->outbound);
        asio::async_write(inst->child.stdin_pipe(), asio::buffer(inst->writing),
                          [this, inst](const std::error_code& ec, std::size_t) {
                              inst->write_active = false;
                              inst->writing.clear();
                              if (!inst->owner) return;
                              if (ec) {
                                  // EPIPE and friends: the exit handler will fail the calls.
                                  inst->outbound.clear();
                                  return;
                              }
                              flush(inst);
                          });
    }

    // ---- reading ----------------------------------------------------------------------------

    void read_stdout(const std::shared_ptr<instance>& inst) {
        auto buf = inst->out_framer.prepare();
        inst->child.stdout_pipe().async_read_some(
            asio::buffer(buf.data(), buf.size()), [inst](const std::error_code& ec, std::size_t n) {
                if (ec || !inst->owner) return; // EOF: the exit is reported by the reaper
                inst->out_framer.commit(n);
                for (;;) {
                    const auto st = inst->out_framer.next();
                    if (st == protocol::line_framer::status::need_more) break;
                    if (!inst->owner) return;
                    if (st == protocol::line_framer::status::oversized)
                        inst->owner->on_oversized(inst->out_framer);
                    else
                        inst->owner->on_line(inst->out_framer.line());
                }
                if (inst->owner) inst->owner->read_stdout(inst);
            });
    }

    void read_stderr(const std::shared_ptr<instance>& inst) {
        auto buf = inst->err_framer.prepare();
        inst->child.stderr_pipe().async_read_some(
            asio::buffer(buf.data(), buf.size()), [inst](const std::error_code& ec, std::size_t n) {
                if (ec || !inst->owner) return;
                inst->err_framer.commit(n);
                for (;;) {
                    const auto st = inst->err_framer.next();
                    if (st == protocol::line_framer::status::need_more) break;
                    const auto& name = inst->owner->cfg_.name;
                    if (st == protocol::line_framer::status::oversized)
                        spdlog::info("[{}] (a stderr line of {} bytes was cut)", name,
                                     inst->err_framer.dropped_bytes());
                    else
                        spdlog::info("[{}] {}", name, inst->err_framer.line());
                }
                inst->owner->read_stderr(inst);
            });
    }

    void on_oversized(const protocol::line_framer& framer) {
        const auto id = id_from_prefix(framer.oversized_prefix());
        spdlog::warn("tool host '{}' wrote a line of {} bytes, over the limit; dropped", cfg_.name,
                     framer.dropped_bytes());
        if (!id) return;
        auto it = pending_.find(*id);
        if (it == pending_.end() || !it->second.c) return;
        auto c = std::move(it->second.c);
        pending_.erase(it);
        c->resolve(tool_result::failure(
            error_code::tool_failed,
            fmt::format("the tool's result is over limits.max_result_bytes ({} bytes)",
                        whole_.limits.max_result_bytes)));
    }

    void on_line(std::string_view line) {
        simdjson::dom::element root;
        simdjson::dom::object msg;
        if (parser_.parse(line.data(), line.size(), false).get(root) != simdjson::SUCCESS ||
            root.get_object().get(msg) != simdjson::SUCCESS) {
            spdlog::warn("tool host '{}' wrote a line that is not a protocol frame (skipped): {}",
                         cfg_.name, cut_for_log(line));
            return;
        }
        std::string_view id_text;
        std::uint64_t id = 0;
        if (msg["id"].get_string().get(id_text) != simdjson::SUCCESS ||
            std::from_chars(id_text.data(), id_text.data() + id_text.size(), id).ec != std::errc{}) {
            spdlog::warn("tool host '{}' wrote a frame without a known id (skipped): {}", cfg_.name,
                         cut_for_log(line));
            return;
        }
        auto it = pending_.find(id);
        if (it == pending_.end()) {
            spdlog::debug("tool host '{}': dropped a message for id {} (no longer in flight)",
                          cfg_.name, id);
            return;
        }

        simdjson::dom::element event;
        if (msg["event"].get(event) == simdjson::SUCCESS) {
            std::string_view type;
            if (event["type"].get_string().get(type) != simdjson::SUCCESS) {
                spdlog::warn("tool host '{}': event without a string type (skipped)", cfg_.name);
                return;
            }
            if (it->second.c) it->second.c->emit(simdjson::minify(event));
            return;
        }

        bool ok = false;
        if (msg["ok"].get_bool().get(ok) != simdjson::SUCCESS) {
            spdlog::warn("tool host '{}': frame for id {} has neither event nor ok (skipped)",
                         cfg_.name, id);
            return;
        }
        pending_request req = std::move(it->second);
        pending_.erase(it);

        simdjson::dom::element result;
        if (ok && msg["result"].get(result) == simdjson::SUCCESS) {
            simdjson::dom::element state;
            if (result["state"].get(state) == simdjson::SUCCESS && state.is_object())
                state_json_ = simdjson::minify(state);
        }
        if (!ok) {
            on_error_response(req, msg);
            return;
        }
        simdjson::dom::element value;
        const bool has_value = result["value"].get(value) == simdjson::SUCCESS;
        switch (req.kind) {
        case request_kind::init:
            send_request(request_kind::schemas, "get_tool_schemas",
                         R"({"state":)" + state_json_ + "}", nullptr);
            return;
        case request_kind::schemas: on_schemas(has_value ? value : simdjson::dom::element{}, has_value); return;
        case request_kind::execute:
            if (req.c) req.c->resolve(execute_result(has_value, value));
            return;
        }
    }

    tool_result execute_result(bool has_value, simdjson::dom::element value) {
        if (!has_value) return tool_result::failure(error_code::tool_failed, "tool host response has no result.value");
        simdjson::dom::object obj;
        bool success = false;
        if (value.get_object().get(obj) == simdjson::SUCCESS &&
            obj["success"].get_bool().get(success) == simdjson::SUCCESS) {
            if (success) {
                simdjson::dom::element inner;
                if (obj["result"].get(inner) != simdjson::SUCCESS)
                    return tool_result::success("null");
                return protocol::normalize_value(inner);
            }
            std::string_view message = "the tool failed";
            simdjson::dom::element err;
            if (obj["error"].get(err) == simdjson::SUCCESS) {
                if (err.is_string()) message = err.get_string().value_unsafe();
                else return tool_result::failure(error_code::tool_failed, "the tool failed",
                                                 simdjson::minify(err));
            }
            return tool_result::failure(error_code::tool_failed, std::string(message));
        }
        return protocol::normalize_value(value);
    }

    void on_error_response(const pending_request& req, simdjson::dom::object msg) {
        std::string_view type = "Error", detail = "tool host error";
        std::string_view stack;
        simdjson::dom::object err;
        if (msg["error"].get_object().get(err) == simdjson::SUCCESS) {
            // Missing fields keep their defaults.
            if (err["type"].get_string().get(type) != simdjson::SUCCESS) type = "Error";
            if (err["detail"].get_string().get(detail) != simdjson::SUCCESS) detail = "tool host error";
            if (err["stack"].get_string().get(stack) != simdjson::SUCCESS) stack = {};
        }
        if (!stack.empty()) spdlog::warn("tool host '{}' error stack: {}", cfg_.name, stack);
        if (req.kind == request_kind::execute) {
            if (!req.c) return;
            std::string details = R"({"type":)";
            append_json_string(details, type);
            details += R"(,"detail":)";
            append_json_string(details, detail);
            details += '}';
            req.c->resolve(tool_result::failure(error_code::tool_failed,
                                                fmt::format("{}: {}", type, detail), details));
            return;
        }
        start_failed(fmt::format("{} failed: {}: {}",
                                 req.kind == request_kind::init ? "init" : "get_tool_schemas", type,
                                 detail));
    }

    void start_failed(std::string why) {
        last_error_ = std::move(why);
        spdlog::error("tool host '{}': {}", cfg_.name, last_error_);
        if (inst_) inst_->child.signal_group(SIGKILL); // the exit handler restarts it
    }

    void on_schemas(simdjson::dom::element value, bool has_value) {
        simdjson::dom::array list;
        if (!has_value || value.get_array().get(list) != simdjson::SUCCESS) {
            start_failed("get_tool_schemas did not return an array");
            return;
        }
        std::vector<tool_definition> defs;
        for (auto item : list) {
            auto def = schema_to_definition(item);
            if (def) defs.push_back(std::move(*def));
        }
        const std::size_t count = defs.size();
        if (auto err = events_.registered(*this, std::move(defs))) {
            last_error_ = *err;
            spdlog::error("tool host '{}': {}", cfg_.name, *err);
            state_ = source_state::failed;
            lifecycle("source_failed", fmt::format(R"("reason":{})", json_str(*err)));
            if (inst_) inst_->child.signal_group(SIGKILL);
            settle();
            fail_waiting(*err);
            return;
        }
        tool_count_ = count;
        became_ready();
    }

    std::optional<tool_definition> schema_to_definition(simdjson::dom::element item) {
        tool_definition d;
        std::string_view type, text;
        simdjson::dom::element fn = item;
        if (item["type"].get_string().get(type) != simdjson::SUCCESS) type = "function";
        if (type == "function") {
            if (item["function"].get(fn) != simdjson::SUCCESS) fn = item;
            simdjson::dom::element params;
            if (fn["parameters"].get(params) == simdjson::SUCCESS && params.is_object())
                d.input_schema_json = simdjson::minify(params);
            else
                d.input_schema_json = R"({"type":"object"})";
        } else if (type != "custom") {
            spdlog::warn("tool host '{}': schema of type '{}' skipped", cfg_.name, type);
            return std::nullopt;
        }
        if (fn["name"].get_string().get(text) != simdjson::SUCCESS || text.empty()) {
            spdlog::warn("tool host '{}': a schema without a name was skipped", cfg_.name);
            return std::nullopt;
        }
        d.name = std::string(text);
        if (fn["description"].get_string().get(text) == simdjson::SUCCESS) d.description = std::string(text);
        simdjson::dom::array caps;
        if (item["capabilities"].get_array().get(caps) == simdjson::SUCCESS) {
            for (auto cap : caps)
                if (cap.get_string().get(text) == simdjson::SUCCESS) d.capabilities.emplace_back(text);
        } else if (auto it = cfg_.capabilities.find(d.name); it != cfg_.capabilities.end()) {
            d.capabilities = it->second;
        }
        if (auto it = cfg_.timeout_ms.find(d.name); it != cfg_.timeout_ms.end()) {
            d.timeout_ms = it->second;
        } else {
            std::uint64_t ms = 0;
            if (item["timeoutMs"].get_uint64().get(ms) == simdjson::SUCCESS && ms > 0) d.timeout_ms = ms;
        }
        return d;
    }

    asio::any_io_executor ex_;
    child_reaper& reaper_;
    const config::source_config& cfg_;
    const config::config& whole_;
    source_events events_;
    std::shared_ptr<instance> inst_;
    asio::steady_timer restart_timer_;
    asio::steady_timer start_timer_;
    asio::steady_timer stop_timer_;
    std::function<void()> stop_done_;
    source_state state_ = source_state::starting;
    bool ready_ = false;
    bool settled_ = false;
    std::unordered_map<std::uint64_t, pending_request> pending_;
    std::deque<std::pair<call_ptr, const tool*>> waiting_;
    std::deque<clock::time_point> exits_;
    std::size_t consecutive_failures_ = 0;
    std::size_t restarts_ = 0;
    std::size_t tool_count_ = 0;
    std::uint64_t next_id_ = 0;
    std::string state_json_ = "{}";
    std::string last_error_;
    std::string params_;
    simdjson::dom::parser parser_;
};

} // namespace

std::unique_ptr<tool_source> make_host_source(asio::any_io_executor ex, child_reaper& reaper,
                                              const config::source_config& cfg,
                                              const config::config& whole) {
    return std::make_unique<host_source>(std::move(ex), reaper, cfg, whole);
}

} // namespace meith::registry
