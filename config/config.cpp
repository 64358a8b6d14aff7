#include "config/config.hpp"

#include "egress/rules.hpp"

#include <limits>

#include "config/paths.hpp"
#include "config/toml_checker.hpp"
#include "protocol/suggest.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <exception>
#include <initializer_list>
#include <sstream>
#include <string_view>
#include <system_error>
#include <utility>

#include <fcntl.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <toml++/toml.h>
#include <unistd.h>

namespace meith::config {

namespace {

namespace fs = std::filesystem;
using namespace std::string_view_literals;

constexpr std::array source_kind_names{"host"sv, "exec"sv, "mcp"sv};
constexpr std::array exec_mode_names{"oneshot"sv, "server"sv};
constexpr std::array start_mode_names{"eager"sv, "on-demand"sv};
constexpr std::array instance_mode_names{"shared"sv, "per-client"sv, "per-session"sv};
constexpr std::array hook_kind_names{"filter"sv, "observe"sv};
constexpr std::array filter_phases{"before_execution"sv, "after_execution"sv};
constexpr std::array observe_phases{"session_start"sv, "session_end"sv, "before_execution"sv,
                                    "after_execution"sv};
constexpr std::array fsync_names{"never"sv, "always"sv, "interval"sv};
constexpr std::array on_failure_names{"fail_closed"sv, "continue"sv};
constexpr std::array caller_names{"cli"sv, "plugin"sv};
constexpr std::array decision_names{"allow"sv, "deny"sv, "ask"sv};
using detail::checker;
using detail::index_of;
using detail::quoted_list;
using detail::scope;

using detail::assign;
using detail::check_tmpdir;
using detail::parse_profile;
using detail::parse_sandbox;

void parse_socket(checker& c, const scope& s, config& cfg) {
    c.check_keys(s, {"path"});
    if (auto p = c.read_path(s, "path")) cfg.socket_path = std::move(*p);
}

void parse_limits(checker& c, const scope& s, limits_config& l) {
    c.check_keys(s, {"max_frame_bytes", "max_result_bytes", "max_timeout_ms", "max_connections",
                     "max_calls_in_flight_per_connection", "max_outbound_bytes", "idle_timeout_ms",
                     "write_stall_ms", "rates"});
    assign(l.max_frame_bytes, c.read_uint(s, "max_frame_bytes", 1024));
    assign(l.max_result_bytes, c.read_uint(s, "max_result_bytes"));
    assign(l.max_timeout_ms, c.read_uint(s, "max_timeout_ms", 1, max_call_timeout_ms));
    assign(l.max_connections, c.read_uint(s, "max_connections", 1));
    assign(l.max_calls_in_flight_per_connection,
           c.read_uint(s, "max_calls_in_flight_per_connection", 1));
    assign(l.max_outbound_bytes, c.read_uint(s, "max_outbound_bytes"));
    assign(l.idle_timeout_ms, c.read_uint(s, "idle_timeout_ms", 0, max_idle_timeout_ms));
    assign(l.write_stall_ms, c.read_uint(s, "write_stall_ms", 1, max_grace_ms));
    static constexpr std::array scopes{"caller"sv, "session"sv};
    for (const auto* t : c.read_table_array(s, "rates")) {
        const scope r{*t, "[[limits.rates]]"};
        c.check_keys(r, {"caller", "tool", "capability", "calls", "per_s", "scope"});
        rate_limit_config rate;
        if (auto i = c.read_enum(r, "caller", caller_names))
            rate.caller = std::string(caller_names[*i]);
        assign(rate.tool, c.read_string(r, "tool", true));
        if (auto i = c.read_enum(r, "capability", detail::capability_names))
            rate.capability = std::string(detail::capability_names[*i]);
        if (c.require(r, "calls")) assign(rate.calls, c.read_uint(r, "calls", 1, 1'000'000));
        assign(rate.per_s, c.read_uint(r, "per_s", 1, 86'400));
        if (auto i = c.read_enum(r, "scope", scopes)) rate.per_session = *i == 1;
        l.rates.push_back(std::move(rate));
    }
}

void parse_tools(checker& c, const scope& s, tools_config& t) {
    c.check_keys(s, {"default_timeout_ms", "shutdown_grace_ms", "kill_grace_ms", "env_allow",
                     "quarantine_new"});
    assign(t.quarantine_new, c.read_bool(s, "quarantine_new"));
    assign(t.env_allow, c.read_string_array(s, "env_allow", false, true));
    assign(t.default_timeout_ms, c.read_uint(s, "default_timeout_ms", 1, max_call_timeout_ms));
    assign(t.shutdown_grace_ms, c.read_uint(s, "shutdown_grace_ms", 0, max_grace_ms));
    assign(t.kill_grace_ms, c.read_uint(s, "kill_grace_ms", 0, max_grace_ms));
}

void parse_audit(checker& c, const scope& s, audit_config& a) {
    c.check_keys(s, {"enabled", "path", "max_bytes", "keep", "fsync", "on_failure"});
    assign(a.enabled, c.read_bool(s, "enabled"));
    if (auto p = c.read_path(s, "path")) a.path = std::move(*p);
    assign(a.max_bytes, c.read_uint(s, "max_bytes"));
    assign(a.keep, c.read_uint(s, "keep"));
    if (auto i = c.read_enum(s, "fsync", fsync_names))
        a.fsync = std::array{fsync_policy::never, fsync_policy::always, fsync_policy::interval}[*i];
    if (auto i = c.read_enum(s, "on_failure", on_failure_names))
        a.on_failure =
            *i == 0 ? audit_failure_policy::fail_closed : audit_failure_policy::keep_going;
}

caller_policy_config parse_caller(checker& c, const scope& s) {
    c.check_keys(s, {"allow", "deny", "ask"});
    caller_policy_config p{{"read-only", "accesses-network"}, {}, {}};
    assign(p.allow, c.read_capabilities(s, "allow"));
    assign(p.deny, c.read_capabilities(s, "deny"));
    assign(p.ask, c.read_capabilities(s, "ask"));
    return p;
}

void parse_permissions(checker& c, const scope& s, permissions_config& p) {
    c.check_keys(s, {"callers", "rules", "persist_grants"});
    assign(p.persist_grants, c.read_bool(s, "persist_grants"));
    if (const auto* callers = c.read_table(s, "callers")) {
        for (auto&& [k, v] : *callers) {
            const std::string_view name = k.str();
            if (!index_of(caller_names, name)) {
                c.fail(k.source(), fmt::format("[permissions.callers.{}]: only the callers \"cli\" "
                                               "and \"plugin\" can be configured (other claimed "
                                               "callers are treated as \"plugin\")",
                                               name));
                continue;
            }
            const std::string table_name = fmt::format("[permissions.callers.{}]", name);
            const auto* t = v.as_table();
            if (t == nullptr) {
                c.type_error(v, table_name, "a table");
                continue;
            }
            auto parsed = parse_caller(c, scope{*t, table_name});
            (name == "cli" ? p.cli : p.plugin) = std::move(parsed);
        }
    }
    for (const auto* t : c.read_table_array(s, "rules")) {
        const scope r{*t, "[[permissions.rules]]"};
        c.check_keys(r, {"tool", "caller", "decision"});
        permission_rule_config rule;
        if (c.require(r, "tool")) assign(rule.tool, c.read_string(r, "tool", true));
        if (auto i = c.read_enum(r, "caller", caller_names))
            rule.caller = std::string(caller_names[*i]);
        if (c.require(r, "decision")) {
            if (auto i = c.read_enum(r, "decision", decision_names)) {
                rule.allow = *i == 0;
                rule.ask = *i == 2;
            }
        }
        p.rules.push_back(std::move(rule));
    }
}

/// `command`, `cwd` and `env`, shared by sources and hooks.
void parse_process(checker& c, const scope& s, std::vector<std::string>& command, fs::path& cwd,
                   std::map<std::string, std::string>& env, bool needs_command = true) {
    if (!needs_command) {
        if (const auto* cmd = s.table.get("command"))
            c.fail(cmd->source(), fmt::format("{} has a `url`: a remote MCP server has no "
                                              "`command` (remove one of the two)",
                                              s.name));
    } else if (c.require(s, "command")) {
        if (auto cmd = c.read_string_array(s, "command", true, false)) {
            if ((*cmd)[0].empty())
                c.fail(s.table.get("command")->source(),
                       fmt::format("the program in {} must not be empty",
                                   checker::label(s, "command")));
            else if ((*cmd)[0].find("${secret:") != std::string::npos)
                c.fail(s.table.get("command")->source(),
                       fmt::format("the program in {} names a secret: a secret may stand for "
                                   "an argument (\"${{secret:NAME}}\"), not for the program",
                                   checker::label(s, "command")));
            else
                command = std::move(*cmd);
            // "~/bin/server", "$HOME/.local/bin/x": as a shell, or a client's config, would.
            for (auto& word : command)
                word = expand_home_in_word(word);
        }
    }
    cwd = c.base_dir();
    assign(cwd, c.read_path(s, "cwd"));
    assign(env, c.read_env(s, "env"));
}

/// `network = { allow = [...], deny = [...], allow_private = bool, ask = bool }`: each rule
/// checked as the proxy reads it (egress/rules.hpp).
network_config parse_network(checker& c, const scope& s) {
    network_config n;
    c.check_keys(s, {"allow", "deny", "allow_private", "ask"});
    for (auto [key, list] : {std::pair{"allow"sv, &n.allow}, std::pair{"deny"sv, &n.deny}}) {
        auto rules = c.read_string_array(s, key, false, true);
        if (!rules) continue;
        for (const auto& r : *rules) {
            std::string why;
            if (!egress::parse_rule(r, why)) {
                c.fail(s.table.get(key)->source(),
                       fmt::format("\"{}\" in {}.{}: {}", r, s.name, key, why));
                continue;
            }
            list->push_back(r);
        }
    }
    assign(n.allow_private, c.read_bool(s, "allow_private"));
    assign(n.ask, c.read_bool(s, "ask"));
    return n;
}

/// A remote MCP source's keys (docs/configuration.md, "Remote MCP servers"): `url` and the
/// keys that only make sense with it.
std::optional<exec_tool_config> parse_exec_tool(checker& c, const scope& s) {
    c.check_keys(s, {"name", "description", "capabilities", "input_schema", "timeout_ms"});
    exec_tool_config t;
    bool ok = c.require(s, "name");
    if (ok) {
        auto name = c.read_string(s, "name", true);
        ok = name.has_value();
        assign(t.name, std::move(name));
    }
    assign(t.description, c.read_string(s, "description", false));
    assign(t.capabilities, c.read_capabilities(s, "capabilities"));
    assign(t.input_schema_json, c.read_json_table(s, "input_schema"));
    if (auto v = c.read_uint(s, "timeout_ms", 1, max_call_timeout_ms)) t.timeout_ms = *v;
    if (!ok) return std::nullopt;
    return t;
}

bool valid_source_name(std::string_view name) {
    // "." and ".." would name folders other than its own (its temporary folder is HOME/tmp/NAME).
    return !name.empty() && name != "." && name != ".." &&
           std::all_of(name.begin(), name.end(), [](char ch) {
               return (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') ||
                      (ch >= '0' && ch <= '9') || ch == '_' || ch == '.' || ch == '-';
           });
}

/// A source's `name`: letters, digits, '_', '.' and '-', unique in the file; names the scope
/// `s` in later messages.
void parse_source_name(checker& c, const toml::table& t, scope& s,
                       std::map<std::string, std::string>& first_seen, source_config& src) {
    if (c.require(s, "name")) {
        if (auto name = c.read_string(s, "name", true)) {
            const auto& where = t.get("name")->source();
            if (!valid_source_name(*name)) {
                c.fail(where, fmt::format("source name \"{}\" may only use letters, digits, "
                                          "'_', '.' and '-' (and is not . or ..)",
                                          *name));
            } else if (auto [it, fresh] = first_seen.emplace(*name, c.where(where)); !fresh) {
                c.fail(where, fmt::format("duplicate source name \"{}\" (first defined at {})",
                                          *name, it->second));
            } else {
                s.name = fmt::format("source '{}'", *name);
            }
            src.name = std::move(*name);
        }
    }
}

/// The keys of MCP sources only (an error naming the key on any other kind), a remote
/// server's `url` and what goes with it, and the `network` table of a source meithd runs.
void parse_mcp_keys(checker& c, const toml::table& t, const scope& s,
                    std::optional<source_kind> kind, source_config& src) {
    // Keys of MCP sources only: an error naming the key on any other kind.
    auto mcp_only = [&](const char* key) {
        const auto* node = t.get(key);
        if (node == nullptr || !kind || *kind == source_kind::mcp) return true;
        c.fail(node->source(),
               fmt::format("'{}' in {} is only for MCP sources (kind = \"mcp\")", key, s.name));
        return false;
    };
    if (mcp_only("trust_annotations"))
        assign(src.trust_annotations, c.read_bool(s, "trust_annotations"));
    if (mcp_only("resource_capabilities"))
        assign(src.resource_capabilities, c.read_capabilities(s, "resource_capabilities"));
    if (mcp_only("forward_roots")) assign(src.forward_roots, c.read_bool(s, "forward_roots"));
    if (mcp_only("url")) detail::parse_remote(c, s, t, src);
    if (const auto* net = c.read_table(s, "network")) {
        if (t.get("url") != nullptr)
            c.fail(t.get("network")->source(),
                   fmt::format("'network' in {} is for sources meithd runs; a remote MCP "
                               "server's requests are checked by `allow_private_network`",
                               s.name));
        else
            src.sandbox_paths.network =
                parse_network(c, scope{*net, fmt::format("the network table of {}", s.name)});
    }
}

/// A host's or MCP server's per-tool tables: `capabilities` and `timeout_ms`, keyed by tool.
void parse_tool_tables(checker& c, const toml::table& t, const scope& s,
                       std::optional<source_kind> kind, source_config& src) {
    // An exec source has one tool, described in its `tool` table: per-tool tables keyed by
    // name are a host's or MCP server's. Taken silently, they left the tool `unknown`.
    auto not_exec = [&](const char* key, const char* example) {
        const auto* node = t.get(key);
        if (node == nullptr || kind != source_kind::exec) return true;
        c.fail(node->source(),
               fmt::format("'{}' in {} is a host's or MCP server's per-tool table; an exec "
                           "source's one tool takes it in its `tool` table: `tool = {{ {} }}` "
                           "(or a `tool.{} = …` line)",
                           key, s.name, example, key));
        return false;
    };
    if (const auto* caps = not_exec("capabilities", "capabilities = [...]")
                               ? c.read_table(s, "capabilities")
                               : nullptr) {
        for (auto&& [k, v] : *caps) {
            auto names = c.capabilities_of(
                v, fmt::format("the capabilities of tool '{}' in {}", k.str(), s.name));
            if (names) src.capabilities.emplace(std::string(k.str()), std::move(*names));
        }
    }
    if (const auto* timeouts =
            not_exec("timeout_ms", "timeout_ms = 5000") ? c.read_table(s, "timeout_ms") : nullptr) {
        for (auto&& [k, v] : *timeouts) {
            auto ms =
                c.uint_of(v, fmt::format("the timeout_ms of tool '{}' in {}", k.str(), s.name), 1,
                          max_call_timeout_ms);
            if (ms) src.timeout_ms.emplace(std::string(k.str()), *ms);
        }
    }
}

/// An exec source's one tool (`tool`), which no other kind takes.
void parse_exec_tool_table(checker& c, const toml::table& t, const scope& s,
                           std::optional<source_kind> kind, source_config& src) {
    const auto* tool = t.get("tool");
    if (tool != nullptr && kind && *kind != source_kind::exec) {
        c.fail(tool->source(),
               fmt::format("'tool' in {} is only for exec sources; {} lists its own tools", s.name,
                           *kind == source_kind::mcp ? "an MCP server" : "a host"));
    } else if (kind == source_kind::exec && c.require(s, "tool")) {
        if (const auto* tt = c.read_table(s, "tool"))
            src.tool = parse_exec_tool(c, scope{*tt, fmt::format("the tool of {}", s.name)});
    }
}

/// `start` and `idle_stop_ms` (docs/configuration.md "Starting on demand").
void parse_start(checker& c, const toml::table& t, const scope& s, source_config& src) {
    if (auto i = c.read_enum(s, "start", start_mode_names)) src.on_demand = *i == 1;
    if (const auto* idle = t.get("idle_stop_ms"); idle != nullptr && !src.on_demand) {
        c.fail(idle->source(),
               fmt::format("'idle_stop_ms' in {} applies to sources that start on demand; add "
                           "start = \"on-demand\" or remove it",
                           s.name));
        return;
    }
    assign(src.idle_stop_ms, c.read_uint(s, "idle_stop_ms", 1, 24 * max_grace_ms)); // a day
}

/// `instances`, `max_instances`, `instance_grace_ms` (docs/configuration.md "Instances").
void parse_instances(checker& c, const toml::table& t, const scope& s,
                     std::optional<source_kind> kind, source_config& src) {
    if (auto i = c.read_enum(s, "instances", instance_mode_names))
        src.instances = static_cast<instance_mode>(*i);
    const auto* mode = t.get("instances");
    if (mode != nullptr && src.instances != instance_mode::shared &&
        (kind == source_kind::exec || t.get("url") != nullptr)) {
        c.fail(mode->source(),
               fmt::format("'instances' in {} is for tool hosts and MCP servers over stdio; {} "
                           "runs no process of its own per client",
                           s.name, kind == source_kind::exec ? "an exec tool" : "a remote server"));
        return;
    }
    for (const char* key : {"max_instances", "instance_grace_ms"})
        if (const auto* v = t.get(key); v != nullptr && src.instances == instance_mode::shared) {
            c.fail(v->source(), fmt::format("'{}' in {} applies to instances = \"per-client\" or "
                                            "\"per-session\"; add one or remove it",
                                            key, s.name));
            return;
        }
    assign(src.max_instances, c.read_uint(s, "max_instances", 1, 256));
    assign(src.instance_grace_ms, c.read_uint(s, "instance_grace_ms", 0, max_grace_ms));
}

void parse_sources(checker& c, const scope& root, std::vector<source_config>& out) {
    std::map<std::string, std::string> first_seen; // name -> where
    for (const auto* t : c.read_table_array(root, "sources")) {
        source_config src;
        scope s{*t, "[[sources]]"};
        parse_source_name(c, *t, s, first_seen, src);
        c.check_keys(s, {"name",
                         "kind",
                         "mode",
                         "command",
                         "cwd",
                         "env",
                         "config",
                         "capabilities",
                         "timeout_ms",
                         "prefix",
                         "start_timeout_ms",
                         "tool",
                         "trust_annotations",
                         "resource_capabilities",
                         "forward_roots",
                         "url",
                         "headers",
                         "allow_private_network",
                         "ca_file",
                         "oauth",
                         "network",
                         "sandbox",
                         "sandbox_paths",
                         "profile",
                         "enabled",
                         "start",
                         "idle_stop_ms",
                         "instances",
                         "max_instances",
                         "instance_grace_ms"});
        parse_sandbox(c, s, src.sandbox, src.sandbox_paths);
        parse_profile(c, s, src.sandbox_paths);
        src.sandbox_paths.state_dir = source_state_dir(src.name);

        std::optional<source_kind> kind;
        if (c.require(s, "kind")) {
            if (auto i = c.read_enum(s, "kind", source_kind_names))
                kind = static_cast<source_kind>(*i);
        }
        if (kind) src.kind = *kind;

        if (const auto* mode = t->get("mode");
            mode != nullptr && kind && *kind != source_kind::exec) {
            c.fail(mode->source(),
                   fmt::format("'mode' in {} is only for exec sources (kind = \"exec\")", s.name));
        } else if (auto i = c.read_enum(s, "mode", exec_mode_names)) {
            src.mode = *i == 0 ? exec_mode::oneshot : exec_mode::server;
        }

        const bool remote = t->get("url") != nullptr && kind == source_kind::mcp;
        parse_process(c, s, src.command, src.cwd, src.env, !remote);
        check_tmpdir(c, *t, s, src);
        if (const auto* init = t->get("config"); init != nullptr && kind == source_kind::mcp)
            c.fail(init->source(),
                   fmt::format("'config' in {} is only for tool hosts (kind = \"host\"); pass an "
                               "MCP server its settings in `command` or `env`",
                               s.name));
        else
            assign(src.config_json, c.read_json_table(s, "config"));
        parse_mcp_keys(c, *t, s, kind, src);
        parse_tool_tables(c, *t, s, kind, src);
        assign(src.prefix, c.read_string(s, "prefix", false));
        assign(src.start_timeout_ms, c.read_uint(s, "start_timeout_ms", 1, max_grace_ms));
        assign(src.enabled, c.read_bool(s, "enabled"));
        parse_start(c, *t, s, src);
        parse_instances(c, *t, s, kind, src);

        parse_exec_tool_table(c, *t, s, kind, src);
        out.push_back(std::move(src));
    }
}

void parse_hooks(checker& c, const scope& root, std::vector<hook_config>& out) {
    std::map<std::string, std::string> first_seen;
    for (const auto* t : c.read_table_array(root, "hooks")) {
        hook_config hook;
        scope s{*t, "[[hooks]]"};
        if (c.require(s, "name")) {
            if (auto name = c.read_string(s, "name", true)) {
                const auto& where = t->get("name")->source();
                if (auto [it, fresh] = first_seen.emplace(*name, c.where(where)); !fresh)
                    c.fail(where, fmt::format("duplicate hook name \"{}\" (first defined at {})",
                                              *name, it->second));
                else
                    s.name = fmt::format("hook '{}'", *name);
                hook.name = std::move(*name);
            }
        }
        c.check_keys(s, {"name", "kind", "mode", "phase", "command", "cwd", "env", "tools",
                         "timeout_ms", "capabilities", "sandbox", "sandbox_paths"});
        hook.capabilities = c.read_capabilities(s, "capabilities");
        parse_sandbox(c, s, hook.sandbox, hook.sandbox_paths);

        bool kind_ok = true;
        if (s.table.contains("kind")) {
            auto i = c.read_enum(s, "kind", hook_kind_names);
            kind_ok = i.has_value();
            if (i) hook.kind = *i == 0 ? hook_kind::filter : hook_kind::observe;
        }
        if (auto i = c.read_enum(s, "mode", exec_mode_names))
            hook.mode = *i == 0 ? exec_mode::oneshot : exec_mode::server;
        if (c.require(s, "phase") && kind_ok) {
            const auto* phase = t->get("phase");
            const auto* text = phase->as_string();
            if (hook.kind == hook_kind::filter && text != nullptr &&
                !index_of(filter_phases, text->get()) && index_of(observe_phases, text->get())) {
                c.fail(phase->source(),
                       fmt::format("{} is a filter hook, which runs at \"before_execution\" or "
                                   "\"after_execution\"; phase \"{}\" needs kind = \"observe\"",
                                   s.name, text->get()));
            } else if (hook.kind == hook_kind::filter) {
                if (auto i = c.read_enum(s, "phase", filter_phases))
                    hook.phase = std::string(filter_phases[*i]);
            } else if (auto i = c.read_enum(s, "phase", observe_phases)) {
                hook.phase = std::string(observe_phases[*i]);
            }
        }
        parse_process(c, s, hook.command, hook.cwd, hook.env);
        assign(hook.tools, c.read_string_array(s, "tools", false, true));
        assign(hook.timeout_ms, c.read_uint(s, "timeout_ms", 1, max_grace_ms));
        out.push_back(std::move(hook));
    }
}

/// [sandbox] protected_paths: relative names without `..`, each checked.
std::optional<std::vector<std::string>> parse_protected(checker& c, const scope& s) {
    c.check_keys(s, {"protected_paths"});
    auto names = c.read_string_array(s, "protected_paths", false, true);
    if (!names) return std::nullopt;
    for (const auto& n : *names) {
        const fs::path p(n);
        const bool dotdot =
            std::any_of(p.begin(), p.end(), [](const fs::path& part) { return part == ".."; });
        if (p.is_absolute() || dotdot || n.front() == '~') {
            c.fail(s.table.get("protected_paths")->source(),
                   fmt::format("'{}' in [sandbox] protected_paths must be relative to a writable "
                               "root, without '..' (e.g. \".git/hooks\")",
                               n));
            return std::nullopt;
        }
    }
    return names;
}

config parse_document(checker& c, const toml::table& root) {
    config cfg;
    const scope s{root, ""};
    c.check_keys(s, {"socket", "limits", "tools", "audit", "permissions", "sandbox", "sources",
                     "hooks", "clients"});
    if (const auto* t = c.read_table(s, "socket")) parse_socket(c, scope{*t, "[socket]"}, cfg);
    if (const auto* t = c.read_table(s, "limits"))
        parse_limits(c, scope{*t, "[limits]"}, cfg.limits);
    if (const auto* t = c.read_table(s, "tools")) parse_tools(c, scope{*t, "[tools]"}, cfg.tools);
    if (const auto* t = c.read_table(s, "audit")) parse_audit(c, scope{*t, "[audit]"}, cfg.audit);
    if (const auto* t = c.read_table(s, "permissions"))
        parse_permissions(c, scope{*t, "[permissions]"}, cfg.permissions);
    parse_sources(c, s, cfg.sources);
    parse_hooks(c, s, cfg.hooks);
    detail::parse_clients(c, s, cfg.clients);
    if (const auto* t = c.read_table(s, "sandbox")) {
        if (auto names = parse_protected(c, scope{*t, "[sandbox]"})) {
            for (auto& src : cfg.sources)
                src.sandbox_paths.protect = *names;
            for (auto& hook : cfg.hooks)
                hook.sandbox_paths.protect = *names;
        }
    }
    // §5: the outbound queue must hold at least one full result.
    cfg.limits.max_outbound_bytes =
        std::max(cfg.limits.max_outbound_bytes, cfg.limits.max_result_bytes);
    return cfg;
}

std::optional<std::string> read_whole_file(const fs::path& file, std::string& error) {
    const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        error = std::strerror(errno);
        return std::nullopt;
    }
    std::string text;
    char buf[65536];
    for (;;) {
        const ssize_t n = ::read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            error = std::strerror(errno);
            ::close(fd);
            return std::nullopt;
        }
        if (n == 0) break;
        text.append(buf, static_cast<std::size_t>(n));
    }
    ::close(fd);
    return text;
}

} // namespace

std::string_view to_string(source_kind k) {
    return source_kind_names[static_cast<std::size_t>(k)];
}

load_result parse_config(std::string_view toml_text, const std::string& display_name,
                         const std::filesystem::path& base_dir) {
    try {
        std::error_code ec;
        fs::path base = fs::absolute(base_dir, ec);
        if (ec) base = base_dir;
        checker c(display_name, base.lexically_normal());

        toml::table root;
        try {
            root = toml::parse(toml_text, std::string_view(display_name));
        } catch (const toml::parse_error& e) {
            return {std::nullopt, config_error{c.where(e.source()), std::string(e.description())}};
        }
        config cfg = parse_document(c, root);
        if (c.failed()) return {std::nullopt, c.error()};
        return {std::move(cfg), std::nullopt};
    } catch (const std::exception& e) { // e.g. bad_alloc: the promise is "never throws"
        return {std::nullopt,
                config_error{display_name, fmt::format("internal error: {}", e.what())}};
    }
}

load_result load_config(const std::filesystem::path& file) {
    std::string error;
    auto text = read_whole_file(file, error);
    if (!text)
        return {std::nullopt,
                config_error{{}, fmt::format("cannot read {}: {}", file.string(), error)}};
    std::error_code ec;
    fs::path abs = fs::absolute(file, ec);
    if (ec) abs = file;
    load_result r = parse_config(*text, file.string(), abs.parent_path());
    if (r.value) r.value->source_file = abs.lexically_normal();
    return r;
}

} // namespace meith::config
