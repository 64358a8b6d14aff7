// host_source: a tool host subprocess speaking NDJSON on stdin/stdout (docs/protocol.md §7).
//
// One long-running child per source, spoken to through an rpc_peer (dialect tool_host):
// requests carry numeric string ids; responses and events are matched strictly by id, so calls
// of many clients share one host and a late response to an abandoned call is dropped. The
// child is supervised: its exit is noticed via SIGCHLD, calls in flight fail with TOOL_FAILED,
// and it is restarted with exponential backoff until it crashes too often within a window,
// when the source is marked failed.
#include "audit/redactor.hpp"
#include "process/rpc_peer.hpp"
#include "process/subprocess.hpp"
#include "process/supervisor.hpp"
#include "protocol/json_writer.hpp"
#include "sandbox/confinement.hpp"
#include "schema/validator.hpp"
#include "sources/child_source.hpp"
#include "sources/declared_capabilities.hpp"
#include "sources/factory.hpp"
#include "sources/host_methods.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace meith::sources {

namespace {

using protocol::error_code;
using protocol::tool_result;

class host_source final : public child_source {
  public:
    host_source(asio::any_io_executor ex, process::child_reaper& reaper,
                const config::source_config& cfg, const config::config& whole)
        : child_source(ex, reaper, cfg, whole, "tool host '" + cfg.name + "'", "host",
                       cfg.config_json, sandbox::started_with(cfg), process::rpc_dialect::tool_host,
                       default_policy(cfg, whole)),
          ex_(std::move(ex)), methods_(ex_, peer_, state_json_) {}

    std::string capabilities_hint(std::string_view remote_name) const override {
        return fmt::format("tool host '{}' declares no capabilities for '{}': declare them in "
                           "its schema, or add `capabilities = {{ \"{}\" = [\"read-only\"] }}` "
                           "(what it really does) to its [[sources]] entry "
                           "(docs/configuration.md)",
                           cfg_.name, remote_name, remote_name);
    }

    void start(tools::source_events events) override {
        methods_.set_alive(weak_from_this()); // owned by a shared_ptr by now
        child_source::start(std::move(events));
    }

    std::vector<std::string> tags() const override { return methods_.tags(); }
    std::vector<std::string> required_tags() const override { return methods_.required_tags(); }

    void tags_for_models(std::string models_json,
                         std::function<void(std::vector<std::string>)> done) override {
        std::string params;
        protocol::json_members(params).raw("config", cfg_.config_json).raw("models", models_json);
        call_optional(
            "get_tags", std::move(params),
            [this, alive = weak_from_this(), done = std::move(done)](std::optional<std::string> v) {
                if (alive.expired()) return done({});
                done(v ? string_array(*v) : methods_.tags());
            });
    }

    void call_optional(std::string_view method, std::string params_members,
                       std::function<void(std::optional<std::string>)> done) override {
        if (state() != tools::source_state::ready) {
            done(std::nullopt);
            return;
        }
        methods_.call(method, std::move(params_members), std::move(done));
    }

  private:
    enum class request_kind { config_schema, init, schemas, execute };

    void on_spawn() override {
        methods_.reset(); // a new process: what the last one had is forgotten
        cancel_answered_.reset();
        ++spawns_;
        // First the host's config schema, if it has one: a config that does not match fails
        // the source before init (docs/protocol.md §13).
        send_request(request_kind::config_schema, "get_config_schema", "{}", nullptr);
    }

    void on_child_exit() override { tool_count_ = 0; }
    std::size_t tool_count() const override { return tool_count_; }

    void append_status(std::string& out) const override {
        // Optional methods the running host has; null until probed (docs/protocol.md §13).
        methods_.append_status(out);
        // Whether it answered a cancel with ok:true; null until one was sent (§16).
        protocol::json_members m(out);
        if (cancel_answered_)
            m.boolean("cancel", *cancel_answered_);
        else
            m.null("cancel");
    }

    // ---- requests ---------------------------------------------------------------------------

    std::optional<std::uint64_t> send_request(request_kind kind, std::string_view method,
                                              std::string_view params, tools::call_ptr c) {
        process::rpc_peer::callbacks cb;
        // The call is held by the peer's pending entry until it is answered, fails or is
        // abandoned (forgotten: a late answer is then dropped).
        cb.on_message = [this, kind, c](simdjson::dom::object msg, bool final) {
            on_message(kind, c, msg, final);
        };
        cb.on_failure = [this, c](process::rpc_failure failure, const std::string& how) {
            if (!c) return;
            c->resolve(request_failed(failure, how));
        };
        auto id = peer_.request(method, params, std::move(cb));
        if (!id && c)
            // No child, or it stopped reading: fail now rather than at the timeout.
            c->resolve(tool_result::failure(
                error_code::tool_failed,
                fmt::format("tool host '{}' is not accepting requests", cfg_.name)));
        return id;
    }

    void send_execute(const tools::call_ptr& c, const tools::tool& t) override {
        params_.assign("{");
        protocol::json_members m(params_);
        m.string("tool_name", t.remote_name);
        if (t.payload_kind == "text")
            // A text-payload tool: the string goes as `payload` (docs/protocol.md §13).
            m.raw("payload", c->args_json).string("payload_kind", "text");
        else
            m.raw("arguments", c->args_json);
        m.raw("state", state_json_);
        params_.push_back('}');
        const auto id = send_request(request_kind::execute, "execute_tool", params_, c);
        // A call that ends without the tool's answer (cancel, timeout, disconnect, shutdown)
        // forgets its id, so a late answer is dropped, and tells the host to stop the work
        // (docs/protocol.md §16).
        if (id)
            c->on_abandon([this, id = *id, raw = c.get()] {
                peer_.abandon(id);
                send_cancel(id, tools::cancel_reason(raw->end()));
            });
    }

    /// `cancel` for execute_tool request `id`. Its answer says whether this host stops work:
    /// ok:true (it knows the method) or ok:false (MethodNotFound, or it could not), shown in
    /// list_sources as "cancel"; nothing else follows from it.
    void send_cancel(std::uint64_t id, std::string_view reason) {
        std::string params = "{";
        protocol::json_members(params).string("id", std::to_string(id)).string("reason", reason);
        params += '}';
        process::rpc_peer::callbacks cb;
        cb.on_message = [this, generation = spawns_](simdjson::dom::object msg, bool final) {
            bool ok = false;
            if (final && generation == spawns_ && msg["ok"].get_bool().get(ok) == simdjson::SUCCESS)
                cancel_answered_ = ok;
        };
        peer_.request("cancel", params, std::move(cb));
    }

    void on_message(request_kind kind, const tools::call_ptr& c, simdjson::dom::object msg,
                    bool final) {
        if (!final) {
            simdjson::dom::element event;
            std::string_view type;
            if (msg["event"].get(event) != simdjson::SUCCESS ||
                event["type"].get_string().get(type) != simdjson::SUCCESS) {
                spdlog::warn("tool host '{}': event without a string type (skipped)", cfg_.name);
                return;
            }
            if (c) c->emit(simdjson::minify(event));
            return;
        }
        const bool ok = msg["ok"].get_bool().value_unsafe(); // the peer checked it is there
        if (kind == request_kind::config_schema) {
            check_config(ok, msg);
            return;
        }
        simdjson::dom::element result;
        if (ok && msg["result"].get(result) == simdjson::SUCCESS) {
            simdjson::dom::element state;
            if (result["state"].get(state) == simdjson::SUCCESS && state.is_object())
                state_json_ = simdjson::minify(state);
        }
        if (!ok) {
            on_error_response(kind, c, msg);
            return;
        }
        simdjson::dom::element value;
        const bool has_value = result["value"].get(value) == simdjson::SUCCESS;
        switch (kind) {
        case request_kind::config_schema:
            return; // handled above
        case request_kind::init: {
            std::string params = "{";
            protocol::json_members(params).raw("state", state_json_);
            params += '}';
            send_request(request_kind::schemas, "get_tool_schemas", params, nullptr);
            return;
        }
        case request_kind::schemas:
            on_schemas(has_value ? value : simdjson::dom::element{}, has_value);
            return;
        case request_kind::execute:
            if (c) c->resolve(execute_result(has_value, value));
            return;
        }
    }

    tool_result execute_result(bool has_value, simdjson::dom::element value) {
        if (!has_value)
            return tool_result::failure(error_code::tool_failed,
                                        "tool host response has no result.value");
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
                if (err.is_string())
                    message = err.get_string().value_unsafe();
                else
                    return tool_result::failure(error_code::tool_failed, "the tool failed",
                                                simdjson::minify(err));
            }
            return tool_result::failure(error_code::tool_failed, std::string(message));
        }
        return protocol::normalize_value(value);
    }

    void on_error_response(request_kind kind, const tools::call_ptr& c, simdjson::dom::object msg) {
        std::string_view type = "Error", detail = "tool host error";
        std::string_view stack;
        simdjson::dom::object err;
        if (msg["error"].get_object().get(err) == simdjson::SUCCESS) {
            // Missing fields keep their defaults.
            if (err["type"].get_string().get(type) != simdjson::SUCCESS) type = "Error";
            if (err["detail"].get_string().get(detail) != simdjson::SUCCESS)
                detail = "tool host error";
            if (err["stack"].get_string().get(stack) != simdjson::SUCCESS) stack = {};
        }
        if (!stack.empty())
            spdlog::warn("tool host '{}' error stack: {}", cfg_.name,
                         audit::default_redactor().redact_text(stack));
        if (kind == request_kind::execute) {
            if (!c) return;
            std::string details = "{";
            protocol::json_members(details).string("type", type).string("detail", detail);
            details += '}';
            c->resolve(tool_result::failure(error_code::tool_failed,
                                            fmt::format("{}: {}", type, detail), details));
            return;
        }
        start_failed(fmt::format("{} failed: {}: {}",
                                 kind == request_kind::init ? "init" : "get_tool_schemas", type,
                                 detail));
    }

    void start_failed(std::string why) { proc_.fail_start(std::move(why)); }

    /// The answer to get_config_schema at start: a schema the source's `config` table fails
    /// fails the source for good (a restart cannot fix a config); no schema (the host lacks the
    /// method, or answered anything but an object) goes on to init.
    void check_config(bool ok, simdjson::dom::object msg) {
        simdjson::dom::element schema;
        if (ok && msg["result"]["value"].get(schema) == simdjson::SUCCESS && schema.is_object()) {
            auto compiled = schema::schema_validator::compile(simdjson::minify(schema));
            if (compiled.error) {
                spdlog::warn("tool host '{}': its config schema is not usable ({}); not checked",
                             cfg_.name, *compiled.error);
            } else if (compiled.validator) {
                simdjson::dom::parser parser;
                simdjson::dom::element config;
                if (parser.parse(cfg_.config_json).get(config) == simdjson::SUCCESS) {
                    if (auto err = compiled.validator->validate(
                            config, "config does not match the host's get_config_schema")) {
                        proc_.fail_permanently(std::move(*err));
                        return;
                    }
                }
            }
        }
        std::string params = "{";
        protocol::json_members(params).raw("config", cfg_.config_json);
        params += '}';
        send_request(request_kind::init, "init", params, nullptr);
    }

    void on_schemas(simdjson::dom::element value, bool has_value) {
        simdjson::dom::array list;
        if (!has_value || value.get_array().get(list) != simdjson::SUCCESS) {
            start_failed("get_tool_schemas did not return an array");
            return;
        }
        std::vector<tools::tool_definition> defs;
        for (auto item : list) {
            auto def = schema_to_definition(item);
            if (def) defs.push_back(std::move(*def));
        }
        if (reconfine(defs)) return;
        const std::size_t count = defs.size();
        if (auto err = events_.registered(*this, std::move(defs))) {
            proc_.fail_permanently(*err);
            return;
        }
        tool_count_ = count;
        became_ready();
        methods_.probe(cfg_.config_json, [this] {
            if (events_.descriptors_changed) events_.descriptors_changed(*this);
        });
    }

    /// PROTOCOL.md §13: the host runs confined to the union of its tools' capabilities. When
    /// the tools it listed need another sandbox than the one it runs in, it is restarted under
    /// theirs before they are registered (true: restarting; the next listing registers).
    std::optional<tools::tool_definition> schema_to_definition(simdjson::dom::element item) {
        tools::tool_definition d;
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
        } else if (type == "custom") {
            // A text-payload (freeform) tool: its arguments are one string (docs/protocol.md §13).
            d.payload_kind = "text";
            simdjson::dom::element format;
            if (item["format"].get(format) == simdjson::SUCCESS && format.is_object())
                d.payload_format_json = simdjson::minify(format);
        } else {
            spdlog::warn("tool host '{}': schema of type '{}' skipped", cfg_.name, type);
            return std::nullopt;
        }
        if (fn["name"].get_string().get(text) != simdjson::SUCCESS || text.empty()) {
            spdlog::warn("tool host '{}': a schema without a name was skipped", cfg_.name);
            return std::nullopt;
        }
        d.name = std::string(text);
        if (fn["description"].get_string().get(text) == simdjson::SUCCESS)
            d.description = std::string(text);
        simdjson::dom::array caps;
        if (item["capabilities"].get_array().get(caps) == simdjson::SUCCESS) {
            for (auto cap : caps)
                if (cap.get_string().get(text) == simdjson::SUCCESS)
                    d.capabilities.emplace_back(text);
        } else if (const auto* declared = declared_capabilities(cfg_, d.name)) {
            d.capabilities = *declared;
        }
        if (auto it = cfg_.timeout_ms.find(d.name); it != cfg_.timeout_ms.end()) {
            d.timeout_ms = it->second;
        } else {
            std::uint64_t ms = 0;
            if (item["timeoutMs"].get_uint64().get(ms) == simdjson::SUCCESS && ms > 0)
                d.timeout_ms = ms;
        }
        return d;
    }

    asio::any_io_executor ex_;
    std::size_t tool_count_ = 0;
    std::string state_json_ = "{}";
    std::string params_;
    host_methods methods_;                ///< the optional methods of the running host (§13)
    std::uint64_t spawns_ = 0;            ///< processes started: a stale cancel answer is ignored
    std::optional<bool> cancel_answered_; ///< this process's answer to a cancel (§16)
};

} // namespace

std::shared_ptr<tools::tool_source> make_host_source(asio::any_io_executor ex,
                                                     process::child_reaper& reaper,
                                                     const config::source_config& cfg,
                                                     const config::config& whole) {
    return std::make_shared<host_source>(std::move(ex), reaper, cfg, whole);
}

} // namespace meith::sources
