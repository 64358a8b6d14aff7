// exec_source: tools that are plain programs (docs/protocol.md §7 "exec tool").
//
// One-shot mode runs the command per call in its own process group: {"args":…} on stdin, one
// JSON object from stdout ({"result"} / {"error"} / {"pending"}), exit status ≠ 0 is a failure
// even after a valid answer (with the last stderr lines, redacted, in details). Timeout and
// cancel end the whole group: SIGTERM, then SIGKILL after tools.kill_grace_ms.
// Server mode keeps one supervised process speaking JSON-RPC 2.0 lines (a child_source, as
// tool hosts and MCP servers are); requests are multiplexed and matched strictly by id, so a
// late answer to an abandoned call is dropped.
#include "audit/redactor.hpp"
#include "process/confined_spec.hpp"
#include "process/rpc_peer.hpp"
#include "process/supervisor.hpp"
#include "protocol/json_writer.hpp"
#include "sandbox/confinement.hpp"
#include "sources/child_source.hpp"
#include "sources/egress_events.hpp"
#include "sources/factory.hpp"
#include "sources/mcp_wire.hpp"

#include <sys/wait.h>
#include <unordered_set>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace meith::sources {

namespace {

using protocol::append_json_string;
using protocol::error_code;
using protocol::tool_result;

/// Reads a one-shot answer object: {"result":…} | {"error":"…"} | {"pending":{…}}.
tool_result read_oneshot_answer(simdjson::dom::element answer) {
    simdjson::dom::object obj;
    if (answer.get_object().get(obj) != simdjson::SUCCESS)
        return tool_result::failure(error_code::tool_failed,
                                    "the tool's answer is not a JSON object");
    simdjson::dom::element v;
    if (obj["result"].get(v) == simdjson::SUCCESS) return protocol::normalize_value(v);
    if (obj["error"].get(v) == simdjson::SUCCESS) {
        std::string_view text;
        if (v.get_string().get(text) == simdjson::SUCCESS)
            return tool_result::failure(error_code::tool_failed, std::string(text));
        return tool_result::failure(error_code::tool_failed, "the tool failed",
                                    simdjson::minify(v));
    }
    if (obj["pending"].get(v) == simdjson::SUCCESS) {
        std::string_view message = "the tool needs an external step before it can finish";
        if (v["message"].get_string().get(message) != simdjson::SUCCESS)
            message = "the tool needs an external step before it can finish";
        std::string details = "{";
        protocol::json_members(details).raw("pending", simdjson::minify(v));
        details += '}';
        return tool_result::failure(error_code::tool_failed, std::string(message),
                                    std::move(details));
    }
    return tool_result::failure(error_code::tool_failed,
                                "the tool's answer has none of result, error, pending");
}

/// A failed run's details: its wait status, its last stderr lines (redacted) and, when it
/// printed something that is not an answer, the start of it (`stdout_excerpt`, a JSON string)
/// and how many bytes it printed.
std::string stderr_details(int wait_status, const std::vector<std::string>& tail,
                           std::string_view stdout_excerpt = {}, std::size_t stdout_bytes = 0) {
    const auto& redactor = audit::default_redactor();
    std::string d = "{";
    protocol::json_members m(d);
    m.string("status", process::describe_wait_status(wait_status));
    m.key("stderr").push_back('[');
    for (std::size_t i = 0; i < tail.size(); ++i) {
        if (i) d += ',';
        append_json_string(d, redactor.redact_text(tail[i]));
    }
    d += ']';
    if (!stdout_excerpt.empty())
        m.raw("stdout", stdout_excerpt).number("stdoutBytes", stdout_bytes);
    d += '}';
    return d;
}

/// Bytes of a tool's output quoted in a failure message.
constexpr std::size_t excerpt_bytes = 200;

/// The start of `text` as a JSON string for a message: redacted (a window past the cut, so a
/// secret that straddles it is still recognised), cut to `excerpt_bytes` on a UTF-8 boundary
/// with "..." when there is more, control characters escaped, invalid bytes as U+FFFD.
std::string quoted_excerpt(std::string_view text) {
    std::string redacted =
        audit::default_redactor().redact_text(text.substr(0, excerpt_bytes + 4096));
    const bool cut = redacted.size() > excerpt_bytes || text.size() > excerpt_bytes + 4096;
    if (redacted.size() > excerpt_bytes) {
        std::size_t n = excerpt_bytes;
        while (n > 0 && (static_cast<unsigned char>(redacted[n]) & 0xC0) == 0x80)
            --n;
        redacted.resize(n);
    }
    if (cut) redacted += "...";
    std::string out;
    append_json_string(out, redacted);
    return out;
}

/// The last stderr line with something on it, if any.
const std::string* last_stderr_line(const std::vector<std::string>& tail) {
    for (auto it = tail.rbegin(); it != tail.rend(); ++it)
        if (it->find_first_not_of(" \t\r") != std::string::npos) return &*it;
    return nullptr;
}

/// The exec tool's one definition, as its config declares it.
tools::tool_definition declared_tool(const config::source_config& cfg) {
    const auto& t = *cfg.tool;
    tools::tool_definition d;
    d.name = t.name;
    d.description = t.description;
    d.input_schema_json =
        t.input_schema_json.empty() ? R"({"type":"object"})" : t.input_schema_json;
    d.capabilities = t.capabilities;
    d.timeout_ms = t.timeout_ms;
    return d;
}

permissions::capability_set declared_caps(const config::source_config& cfg) {
    return permissions::capability_set_from(cfg.tool ? cfg.tool->capabilities
                                                     : std::vector<std::string>{});
}

/// One-shot mode: a process per call, no child between calls.
class exec_oneshot_source final : public tools::tool_source {
  public:
    std::string_view kind() const override { return "exec"; }
    exec_oneshot_source(asio::any_io_executor ex, process::child_reaper& reaper,
                        const config::source_config& cfg, const config::config& whole)
        : ex_(std::move(ex)), reaper_(reaper), cfg_(cfg), whole_(whole),
          // Confined to its one tool's declared capabilities (PROTOCOL.md §13).
          conf_(sandbox::confine(cfg.name, cfg.sandbox, cfg.sandbox_paths, declared_caps(cfg),
                                 cfg.command, cfg.cwd)),
          spec_(process::confined_spec("exec tool '" + cfg.name + "'", cfg.command, cfg.cwd,
                                       whole.tools.env_allow, cfg.env, &conf_)) {}

    const std::string& name() const override { return cfg_.name; }
    const std::string& prefix() const override { return cfg_.prefix; }

    tools::source_state state() const override {
        if (conf_.refusal || failed_) return tools::source_state::failed;
        return stopped_ ? tools::source_state::stopped : tools::source_state::ready;
    }

    void start(tools::source_events events) override {
        events_ = std::move(events);
        std::vector<tools::tool_definition> defs;
        defs.push_back(declared_tool(cfg_));
        if (events_.registered(*this, std::move(defs))) {
            stopped_ = true;
        } else if (conf_.refusal) {
            spdlog::error("exec tool '{}' not started: {}", cfg_.name, *conf_.refusal);
            last_error_ = *conf_.refusal;
        }
        events_.settled(*this);
    }

    void execute(const tools::call_ptr& c, const tools::tool&) override {
        if (conf_.refusal) {
            c->resolve(tool_result::failure(
                error_code::tool_failed,
                fmt::format("exec tool '{}' is not run: {}", cfg_.name, *conf_.refusal)));
            return;
        }
        std::string input = "{";
        protocol::json_members(input).raw("args", c->args_json);
        input += "}\n";
        const std::size_t cap = whole_.limits.max_result_bytes + 64 * 1024; // answer envelope
        auto self = std::static_pointer_cast<exec_oneshot_source>(shared_from_this());
        auto slot = std::make_shared<std::shared_ptr<process::oneshot_run>>();
        // Behind the egress proxy, each run's connections are this call's (§19).
        process::process_spec with_egress;
        const process::process_spec* spec = &spec_;
        if (conf_.egress && spec_.egress) {
            with_egress = spec_;
            auto opts = std::make_shared<egress::proxy_options>(*conf_.egress);
            bind_egress_events(*opts, self, events_,
                               [weak = std::weak_ptr<tools::call>(c)] { return weak.lock(); });
            with_egress.egress = std::move(opts);
            spec = &with_egress;
        }
        auto run = process::oneshot_run::start(
            ex_, reaper_, *spec, std::move(input), cap,
            std::chrono::milliseconds(whole_.tools.kill_grace_ms),
            // The run holds its source: a source removed by a reload lives until it is reaped.
            [self, slot, weak = std::weak_ptr<tools::call>(c)](process::oneshot_outcome out) {
                self->runs_.erase(*slot);
                slot->reset();
                if (auto c = weak.lock(); c && !c->resolved() && !c->tool_done())
                    c->resolve(self->stopped_
                                   ? tool_result::failure(
                                         error_code::tool_failed,
                                         fmt::format("exec tool '{}' was stopped (removed by a "
                                                     "config reload, or the daemon is shutting "
                                                     "down) while the call was running",
                                                     self->cfg_.name))
                                   : self->result_of(out));
                if (self->runs_.empty() && self->stop_done_)
                    std::exchange(self->stop_done_, nullptr)();
            });
        *slot = run;
        runs_.insert(run);
        // Timeout and cancel end the whole process group (SIGTERM, then SIGKILL).
        c->on_abandon([run] { run->kill(); });
    }

    /// One-shot children still running are ended (their calls fail as on the source's exit);
    /// `done` runs once every one of them is reaped.
    void stop(std::chrono::milliseconds, std::function<void()> done) override {
        stopped_ = true;
        if (runs_.empty()) {
            done();
            return;
        }
        stop_done_ = std::move(done);
        for (auto& run :
             std::vector<std::shared_ptr<process::oneshot_run>>(runs_.begin(), runs_.end()))
            run->kill();
    }

    bool confine_again() override {
        // The next run starts in it; runs in flight finish as they began.
        conf_ = sandbox::confine(cfg_.name, cfg_.sandbox, cfg_.sandbox_paths, declared_caps(cfg_),
                                 cfg_.command, cfg_.cwd);
        spec_ = process::confined_spec("exec tool '" + cfg_.name + "'", cfg_.command, cfg_.cwd,
                                       whole_.tools.env_allow, cfg_.env, &conf_);
        return true;
    }

    void restart() override {
        if (!failed_) return;
        failed_ = false; // its tool was taken back: offer it again
        last_error_.clear();
        start(events_);
    }

    void fail(std::string why) override {
        failed_ = true;
        last_error_ = std::move(why);
    }

    std::string sandbox_hint(std::string_view error_text) const override {
        return sandbox::sandbox_hint(conf_, error_text);
    }

    std::string status_json() const override {
        std::string out = "{";
        protocol::json_members m(out);
        m.string("name", cfg_.name)
            .string("kind", "exec-oneshot")
            .string("state", to_string(state()));
        m.null("pid").number("restarts", 0);
        if (last_error_.empty())
            m.null("lastError");
        else
            m.string("lastError", last_error_);
        m.number("tools", 1);
        m.key("sandbox").push_back('{');
        out += conf_.status_members;
        out += '}';
        protocol::append_json_string_array(m.key("stderr"), last_stderr_);
        out += '}';
        return out;
    }

  private:
    tool_result result_of(const process::oneshot_outcome& out) {
        if (!out.spawn_error.empty()) {
            last_error_ = out.spawn_error;
            return tool_result::failure(error_code::tool_failed, out.spawn_error);
        }
        if (out.out_overflow)
            return tool_result::failure(
                error_code::tool_failed,
                fmt::format("the tool's output is over limits.max_result_bytes ({} bytes)",
                            whole_.limits.max_result_bytes));
        const bool exit_ok = WIFEXITED(out.wait_status) && WEXITSTATUS(out.wait_status) == 0;
        if (!exit_ok) {
            last_error_ = process::describe_wait_status(out.wait_status);
            last_stderr_.clear(); // the last failed run's, redacted (`meith sources NAME`)
            for (const auto& line : out.stderr_tail)
                last_stderr_.push_back(audit::default_redactor().redact_text(line));
            return tool_result::failure(error_code::tool_failed,
                                        fmt::format("exec tool '{}' {}", cfg_.name, last_error_),
                                        stderr_details(out.wait_status, out.stderr_tail));
        }
        // Exited 0 from here on. A caller gets what the tool did print, cut and redacted,
        // plus the stderr tail in details as for a non-zero exit.
        simdjson::dom::element answer;
        if (out.out.find_first_not_of(" \t\r\n") == std::string::npos) {
            std::string message = "the tool wrote no answer on stdout (it " +
                                  process::describe_wait_status(out.wait_status);
            if (const auto* line = last_stderr_line(out.stderr_tail))
                message += "; last stderr line: " + quoted_excerpt(*line) + ")";
            else
                message += " and wrote nothing on stderr)";
            return tool_result::failure(error_code::tool_failed, std::move(message),
                                        stderr_details(out.wait_status, out.stderr_tail));
        }
        if (parser_.parse(out.out).get(answer) != simdjson::SUCCESS) {
            const std::string excerpt = quoted_excerpt(out.out);
            spdlog::warn("exec tool '{}' wrote an answer that is not one JSON object: {} ({} "
                         "bytes)",
                         cfg_.name, excerpt, out.out.size());
            return tool_result::failure(
                error_code::tool_failed,
                fmt::format("the tool's answer is not one JSON object; it printed: {} ({} bytes)",
                            excerpt, out.out.size()),
                stderr_details(out.wait_status, out.stderr_tail, excerpt, out.out.size()));
        }
        return read_oneshot_answer(answer);
    }

    asio::any_io_executor ex_;
    process::child_reaper& reaper_;
    const config::source_config cfg_; ///< a copy: a config reload replaces the daemon's
    const config::config& whole_;
    sandbox::confinement conf_;
    process::process_spec spec_;
    tools::source_events events_;
    std::string last_error_;
    std::vector<std::string> last_stderr_; ///< of the last run that failed
    bool failed_ = false;                  ///< the registry took its tool back (fail())
    bool stopped_ = false;
    /// One-shot children running now; stop() ends them and waits for them.
    std::unordered_set<std::shared_ptr<process::oneshot_run>> runs_;
    std::function<void()> stop_done_;
    simdjson::dom::parser parser_; ///< one-shot answers
};

/// Server mode: one supervised child, JSON-RPC 2.0 `execute` requests.
class exec_server_source final : public child_source {
  public:
    exec_server_source(asio::any_io_executor ex, process::child_reaper& reaper,
                       const config::source_config& cfg, const config::config& whole)
        : child_source(std::move(ex), reaper, cfg, whole, "exec tool '" + cfg.name + "'",
                       "exec-server", "{}", declared_caps(cfg), process::rpc_dialect::jsonrpc,
                       default_policy(cfg, whole)) {}

  private:
    std::optional<std::string> before_start() override {
        std::vector<tools::tool_definition> defs;
        defs.push_back(declared_tool(cfg_));
        return events_.registered(*this, std::move(defs));
    }

    bool listed_before_start() const override { return true; } // its one declared tool
    void on_spawn() override { became_ready(); }               // JSON-RPC exec has no handshake
    std::size_t tool_count() const override { return 1; }

    void send_execute(const tools::call_ptr& c, const tools::tool&) override {
        std::string params = "{";
        protocol::json_members(params).raw("args", c->args_json);
        params += '}';
        process::rpc_peer::callbacks cb;
        cb.on_message = [c](simdjson::dom::object msg, bool) { on_reply(c, msg); };
        cb.on_failure = [this, c](process::rpc_failure failure, const std::string& how) {
            c->resolve(request_failed(failure, how));
        };
        const auto id = peer_.request("execute", params, std::move(cb));
        if (!id) {
            c->resolve(tool_result::failure(error_code::tool_failed,
                                            fmt::format("{} is not reading its input", label_)));
            return;
        }
        // A call that ends otherwise forgets its id (a late answer is dropped, never given to
        // the next call) and tells the server, in MCP's shape (docs/protocol.md §16).
        c->on_abandon([this, id = *id, raw = c.get()] {
            peer_.abandon(id);
            peer_.notify("notifications/cancelled",
                         mcp::cancelled_params(id, tools::cancel_reason(raw->end())));
        });
    }

    static void on_reply(const tools::call_ptr& c, simdjson::dom::object msg) {
        simdjson::dom::element result, error;
        if (msg["result"].get(result) == simdjson::SUCCESS) {
            c->resolve(protocol::normalize_value(result));
        } else if (msg["error"].get(error) == simdjson::SUCCESS) {
            c->resolve(process::rpc_wire::error_result(error, "the tool failed"));
        } else {
            c->resolve(tool_result::failure(error_code::tool_failed,
                                            "JSON-RPC response has neither result nor error"));
        }
    }
};

} // namespace

std::shared_ptr<tools::tool_source> make_exec_source(asio::any_io_executor ex,
                                                     process::child_reaper& reaper,
                                                     const config::source_config& cfg,
                                                     const config::config& whole) {
    if (cfg.mode == config::exec_mode::server)
        return std::make_shared<exec_server_source>(std::move(ex), reaper, cfg, whole);
    return std::make_shared<exec_oneshot_source>(std::move(ex), reaper, cfg, whole);
}

} // namespace meith::sources
