// tool_source: where tools come from (docs/protocol.md §7) — built-in, tool host, exec, MCP.
//
// A source starts asynchronously, reports its tools (or its failure) to the registry through
// `source_events`, runs calls, and stops. All methods run on the I/O thread.
#pragma once

#include "egress/connection.hpp"
#include "process/process_state.hpp"
#include "tools/call.hpp"

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace meith::schema {
class lazy_validator; // schema/validator.hpp
} // namespace meith::schema

namespace meith::tools {

class tool_source;

/// A registered tool. Immutable once registered; calls hold it by shared_ptr, so a source
/// that re-registers after a restart never pulls a tool out from under a running call, and the
/// tool holds its source, so a source removed by a config reload outlives the calls that use it
/// (a stopped source fails them; it is never freed under them).
struct tool {
    std::string name;        ///< registry-wide name (source prefix applied)
    std::string remote_name; ///< name the source knows it by
    std::string description;
    std::string input_schema_json; ///< JSON Schema text; empty for text-payload tools
    /// More descriptor members, as JSON members without braces (`"title":"…","annotations":{…}`),
    /// appended to the ToolDescriptor after `inputSchema`; empty = none (docs/protocol.md §7, MCP).
    std::string extra_descriptor_json;
    permissions::capability_set capabilities = 0;
    std::optional<std::uint64_t> timeout_ms;
    /// "" for tools taking an arguments object; "text" for text-payload (custom/freeform)
    /// tools, whose arguments are one string (PROTOCOL.md §11, docs/protocol.md §13).
    std::string payload_kind;
    std::string payload_format_json; ///< a text-payload tool's `format` (JSON), or empty
    /// An MCP tool with `execution.taskSupport: "required"`: called as a task (MCP 2025-11-25
    /// basic/utilities/tasks; docs/protocol.md §17).
    bool task_required = false;
    /// Its definition differs from the one a person accepted (or it is new under
    /// `[tools] quarantine_new`): listed, never callable (docs/protocol.md §22).
    bool quarantined = false;
    std::shared_ptr<tool_source> source;
    /// Checks a call's arguments (compiled at the first call for a definition from its pin);
    /// null: accepts any object.
    std::shared_ptr<const schema::lazy_validator> validator;
};

/// How long an optional host method may take before its fallback is used.
inline constexpr std::chrono::seconds optional_method_timeout{5};

/// Lifecycle of a source, as `meith sources` shows it: the one enum a supervised child has too
/// (process/process_state.hpp), so a child source's state is its child's.
using source_state = process::process_state;

/// Tool definition as a source reports it (before prefixing and schema compilation).
struct tool_definition {
    std::string name;
    std::string description;
    std::string input_schema_json;
    std::vector<std::string> capabilities; ///< empty: unknown
    std::optional<std::uint64_t> timeout_ms;
    /// Extra ToolDescriptor members, JSON members without braces; empty = none (see `tool`).
    std::string extra_descriptor_json;
    std::string payload_kind;        ///< see `tool`
    std::string payload_format_json; ///< see `tool`
    bool task_required = false;      ///< see `tool`
    /// From its pin (tool_pins::definitions_of): its schema compiled when its source listed it,
    /// so it is compiled again only at its first call, not as it registers.
    bool from_pin = false;
};

/// Callbacks from a source to the registry.
struct source_events {
    /// The source (re)started and offers these tools; replaces its previous set. Returns an
    /// error message when the set cannot be registered (a name clash).
    std::function<std::optional<std::string>(tool_source&, std::vector<tool_definition>)>
        registered;
    /// The first start attempt finished (ok or not): counts toward readiness.
    std::function<void(tool_source&)> settled;
    /// Lifecycle transitions worth an audit line: "source_start", "source_exit", ... with a
    /// short JSON object of details.
    std::function<void(tool_source&, std::string_view event, std::string_view details_json)>
        lifecycle;
    /// What the source's tools look like changed without new tools (a host's tags learned).
    std::function<void(tool_source&)> descriptors_changed;
    /// An MCP server's notification beyond tools (resources/updated, resources and prompts
    /// list_changed, message) with its params object, for the gateway (docs/protocol.md §17).
    std::function<void(tool_source&, std::string_view method, std::string_view params_json)>
        mcp_notification;
    /// The source's egress proxy met a target no rule decides and its network table says
    /// `ask` (docs/protocol.md §19): `reply` gets a person's answer, a session allowance, or a
    /// refusal. `owner` is the call the connection belongs to, when it is known.
    std::function<void(tool_source&, const egress::connection_record&, call_ptr owner,
                       egress::ask_reply reply)>
        egress_ask;
    /// The source's accepted definitions from the pins (tool_pins::definitions_of): what an
    /// on-demand source lists before it runs. Empty when none are pinned (or no pins kept).
    std::function<std::vector<tool_definition>(tool_source&)> pinned;
    /// The tool registered now under `t`'s name when it is still this source's (a listing
    /// since may have replaced, quarantined or dropped it), else null: a call that waited for
    /// an on-demand source's start goes to the tool as its process lists it.
    std::function<std::shared_ptr<const tool>(const tool& t)> current;
};

/// What an MCP source offers beyond tools (docs/protocol.md §17): requests forwarded to its
/// server unchanged. Sources of other kinds have none.
class mcp_peer {
  public:
    virtual ~mcp_peer() = default;
    /// Whether the server's initialize result declared `capability`: "resources",
    /// "resources.subscribe", "prompts", "completions" or "logging". False until initialized.
    virtual bool offers(std::string_view capability) const = 0;
    /// Sends request `method` with `params_json` (an object) and hands `done` the server's
    /// answer unchanged; an error answer (-32603) when it is not running, fails to send or
    /// exits first. Runs `done` exactly once, maybe before returning.
    virtual void forward(std::string_view method, std::string params_json,
                         std::function<void(mcp_answer)> done) = 0;
    /// The capabilities reading a resource, getting a prompt or asking for a completion of
    /// this source has, for the permission decision (`resource_capabilities`, default
    /// read-only; docs/configuration.md).
    virtual permissions::capability_set resource_capabilities() const = 0;
};

/// Sources are owned by shared_ptr (the registry, and every tool they registered).
class tool_source : public std::enable_shared_from_this<tool_source> {
  public:
    virtual ~tool_source() = default;
    virtual const std::string& name() const = 0;
    /// Prepended to the name of every tool the source offers (its own config's `prefix`).
    virtual const std::string& prefix() const {
        static const std::string none;
        return none;
    }
    virtual source_state state() const = 0;
    /// Its kind as `meith sources` and ToolDescriptors name it: builtin, host, exec, mcp.
    virtual std::string_view kind() const { return {}; }
    /// Starts asynchronously; reports through `events`.
    virtual void start(source_events events) = 0;
    /// Runs `c` against tool `t` of this source; must end in `c->resolve` unless abandoned.
    virtual void execute(const call_ptr& c, const tool& t) = 0;
    /// Stops the source (children get SIGTERM, then SIGKILL after `kill_grace`); `done` runs
    /// once everything is reaped.
    virtual void stop(std::chrono::milliseconds kill_grace, std::function<void()> done) = 0;

    /// Manual restart (`meith sources restart`): clears a failed state and starts again.
    virtual void restart() {}
    /// Works out its sandbox again (a learning run began or ended: docs/protocol.md §15
    /// "Learned profiles") and restarts in it. False for a source that runs no process.
    virtual bool confine_again() { return false; }

    /// A client's session (connection) ended: a source run per session or per client stops
    /// what was that session's (sources/instance_pool.hpp). Others ignore it.
    virtual void session_ended(std::string_view session) { (void)session; }

    /// The registry took the source's tools back (a source earlier in the config lists one of
    /// their names): stop it and stay `failed` with `why` as its last error until restart().
    virtual void fail(std::string why) { (void)why; }

    /// Asks the source's optional method `method` (a tool host's format_tool_call_preview,
    /// format_tool_result, to_display_format, get_tags, ...; docs/protocol.md §13) with
    /// `params_members` (JSON object members without braces; the source adds its `state`).
    /// `done` gets the answer's `value` as JSON text, or nullopt when the source lacks the
    /// method (learned once per start: no round trip then), is not running, answered ok:false
    /// or did not answer within `optional_method_timeout`. Runs `done` exactly once, maybe
    /// before returning. Sources other than tool hosts lack every method.
    virtual void call_optional(std::string_view method, std::string params_members,
                               std::function<void(std::optional<std::string>)> done) {
        (void)method;
        (void)params_members;
        done(std::nullopt);
    }

    /// Tags every tool of this source carries: a host's get_tags({config, models: []}), learned
    /// when it starts (docs/protocol.md §13). Empty for other sources.
    virtual std::vector<std::string> tags() const { return {}; }
    /// The host's required_tags(): a list_tools that names `tags` leaves the source's tools
    /// out unless all of these are among them. Empty for other sources.
    virtual std::vector<std::string> required_tags() const { return {}; }
    /// get_tags for `models_json` (a JSON array): `done` gets the tags (the learned ones when the
    /// host lacks the method or fails). Runs `done` exactly once.
    virtual void tags_for_models(std::string models_json,
                                 std::function<void(std::vector<std::string>)> done) {
        (void)models_json;
        done(tags());
    }

    /// Status for `meith sources`: {"name","kind","state","pid","restarts","lastError"}.
    virtual std::string status_json() const = 0;
    /// What this source's sandbox says about a failed call whose error reads `error_text`
    /// (sandbox/confinement.hpp: sandbox_hint); empty when it is not a refusal or the source
    /// runs unconfined. The registry appends it to the call's error message.
    /// How to declare the capabilities of a tool it lists as `unknown` (its name as the source
    /// knows it), for the refusal a caller reads; empty when the kind has nothing to say.
    virtual std::string capabilities_hint(std::string_view remote_name) const {
        (void)remote_name;
        return {};
    }
    /// The source's MCP families beyond tools, or null (every kind but `mcp`).
    virtual mcp_peer* mcp() { return nullptr; }
    virtual std::string sandbox_hint(std::string_view error_text) const {
        (void)error_text;
        return {};
    }
};

} // namespace meith::tools
