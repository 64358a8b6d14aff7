// status, tools, sources and policy check: one request each after hello, answered within
// reply_timeout (`sources restart` waits longer: the daemon answers once the source is
// restarting).
#include "cli/commands.hpp"

#include "cli/errors.hpp"
#include "cli/help.hpp"
#include "cli/session.hpp"
#include "cli/table.hpp"

#include <algorithm>
#include <chrono>
#include <string_view>
#include <vector>

#include <fmt/core.h>

namespace meith::cli {

namespace {

/// How long `sources restart` waits for source_restarted unless --timeout-ms says otherwise.
constexpr std::chrono::seconds restart_timeout{60};

json list_tools(session& s) {
    const std::string id = s.ids.next();
    s.conn.send_frame(protocol::encode_list_tools(id));
    json reply = await_reply(s.conn, id, "tools_list");
    const json* tools = get_field(reply, "tools");
    if (tools == nullptr || !tools->is_array()) {
        throw cli_error(exit_error, "protocol error: tools_list without a \"tools\" array");
    }
    return *tools;
}

std::string capabilities_text(const json& tool) {
    std::string out;
    if (const json* caps = get_field(tool, "capabilities"); caps && caps->is_array()) {
        for (const json& c : *caps) {
            if (!c.is_string()) continue;
            if (!out.empty()) out += ",";
            out += c.get<std::string>();
        }
    }
    return out.empty() ? "-" : out;
}

/// A non-negative integer field as text; "-" when absent, null or not an integer.
std::string count_text(const json& obj, std::string_view key) {
    const json* v = get_field(obj, key);
    if (v == nullptr || !v->is_number_integer()) return "-";
    return v->is_number_unsigned() ? std::to_string(v->get<unsigned long long>())
                                   : std::to_string(v->get<long long>());
}

bool is_unavailable(const json& tool) {
    const json* a = get_field(tool, "available");
    return a != nullptr && a->is_boolean() && !a->get<bool>();
}

json list_sources(session& s) {
    const std::string id = s.ids.next();
    s.conn.send_frame(protocol::encode_list_sources(id));
    json reply = await_reply(s.conn, id, "sources_list");
    const json* sources = get_field(reply, "sources");
    if (sources == nullptr || !sources->is_array()) {
        throw cli_error(exit_error, "protocol error: sources_list without a \"sources\" array");
    }
    return *sources;
}

} // namespace

int run_status(const options& opts) {
    session s = open_session(opts);
    const json tools = list_tools(s);
    std::size_t allowed = 0, unavailable = 0;
    for (const json& t : tools) {
        if (get_string(t, "permission") == "allow") ++allowed;
        if (is_unavailable(t)) ++unavailable;
    }

    const json* server = get_field(s.hello, "server");
    const std::string name = server ? get_string(*server, "name").value_or("?") : "?";
    const std::string version = server ? get_string(*server, "version").value_or("?") : "?";
    std::string protocol = "?";
    if (const json* p = get_field(s.hello, "protocol"); p && p->is_number_integer()) {
        protocol = std::to_string(p->get<long long>());
    }

    if (opts.json) {
        json out{{"running", true},
                 {"socket", s.where.socket.string()},
                 {"server", server ? *server : json(nullptr)},
                 {"protocol",
                  get_field(s.hello, "protocol") ? *get_field(s.hello, "protocol") : json(nullptr)},
                 {"pid", s.where.pid ? json(*s.where.pid) : json(nullptr)},
                 {"sessionId", get_string(s.hello, "sessionId").value_or("")},
                 {"caller", get_string(s.hello, "caller").value_or(opts.caller)},
                 {"tools",
                  {{"total", tools.size()},
                   {"allowed", allowed},
                   {"denied", tools.size() - allowed},
                   {"unavailable", unavailable}}}};
        fmt::print("{}\n", pretty(out));
        return exit_ok;
    }
    fmt::print("meithd is running\n");
    fmt::print("  socket:   {}\n", s.where.socket.string());
    fmt::print("  server:   {} {} (protocol {})\n", sanitize(name, false), sanitize(version, false),
               protocol);
    if (s.where.pid) fmt::print("  pid:      {}\n", *s.where.pid);
    fmt::print("  session:  {}\n", sanitize(get_string(s.hello, "sessionId").value_or("?"), false));
    fmt::print("  caller:   {}\n",
               sanitize(get_string(s.hello, "caller").value_or(opts.caller), false));
    fmt::print("  tools:    {} ({} allowed, {} denied{})\n", tools.size(), allowed,
               tools.size() - allowed,
               unavailable > 0 ? fmt::format(", {} unavailable", unavailable) : "");
    return exit_ok;
}

namespace {

/// `meith tools NAME`: one tool as a person reads it.
int describe_tool(const options& opts, session& s, const json& tools, const std::string& name) {
    const json* tool = nullptr;
    std::vector<std::string> names;
    for (const json& t : tools) {
        const auto n = get_string(t, "name");
        if (n == name) tool = &t;
        if (n) names.push_back(sanitize(*n, false));
    }
    if (tool == nullptr)
        throw cli_error(exit_tool_failed, fmt::format("no tool '{}'{}", sanitize(name, false),
                                                      did_you_mean(closest_names(name, names))));
    if (opts.json) {
        fmt::print("{}\n", pretty(*tool));
        return exit_ok;
    }
    const auto field = [&](std::string_view key) {
        return sanitize(get_string(*tool, key).value_or("-"), false);
    };
    fmt::print("{}{}\n", field("name"),
               is_unavailable(*tool) ? " (unavailable: its source is "
                                       "down; meith sources)"
                                     : "");
    if (auto d = get_string(*tool, "description")) fmt::print("\n{}\n\n", sanitize(*d, true));
    fmt::print("  source:        {}\n", field("source"));
    fmt::print("  capabilities:  {}\n", sanitize(capabilities_text(*tool), false));
    fmt::print("  permission:    {} for caller {}\n", field("permission"), opts.caller);
    // Why: the same decision `meith policy check` explains.
    try {
        const std::string id = s.ids.next();
        s.conn.send_frame(protocol::encode_check_policy(id, name, opts.caller));
        const json reply = await_reply(s.conn, id, "policy_decision");
        if (auto reason = get_string(reply, "reason"))
            fmt::print("                 {}\n", sanitize(*reason, false));
    } catch (const cli_error&) {
    }
    if (const json* t = get_field(*tool, "timeoutMs"); t && t->is_number_integer())
        fmt::print("  timeout:       {} ms\n", t->get<long long>());
    if (const json* tags = get_field(*tool, "tags"); tags && tags->is_array() && !tags->empty())
        fmt::print("  tags:          {}\n", sanitize(compact(*tags), false));
    if (auto kind = get_string(*tool, "payloadKind"))
        fmt::print(
            "  payload:       {} text{} (meith call {} --text FILE)\n", sanitize(*kind, false),
            get_string(*tool, "format") ? " in " + field("format") : std::string(), field("name"));
    if (const json* schema = get_field(*tool, "inputSchema"); schema && !schema->is_null())
        fmt::print("  input schema:\n{}\n",
                   schema->dump(2, ' ', false, json::error_handler_t::replace));
    return exit_ok;
}

} // namespace

int run_tools(const options& opts) {
    session s = open_session(opts);
    if (opts.words.size() > 1) {
        if (opts.format || !opts.tags.empty())
            throw usage_error("describe one tool without --format or --tag");
        return describe_tool(opts, s, list_tools(s), opts.words[1]);
    }
    json tools;
    if (opts.format || !opts.tags.empty()) {
        // docs/protocol.md §13: a provider's format, and/or only what these tags enable.
        const std::string id = s.ids.next();
        json frame{{"type", "list_tools"}, {"protocol", 1}, {"requestId", id}};
        if (opts.format) frame["format"] = *opts.format;
        if (!opts.tags.empty()) frame["tags"] = opts.tags;
        s.conn.send_frame(compact(frame));
        json reply = await_reply(s.conn, id, "tools_list");
        const json* listed = get_field(reply, "tools");
        if (listed == nullptr || !listed->is_array())
            throw cli_error(exit_error, "protocol error: tools_list without a \"tools\" array");
        if (opts.format && *opts.format != "meith") {
            // For handing to the provider's API: the JSON array as meithd sent it.
            fmt::print("{}\n", pretty(*listed));
            return exit_ok;
        }
        tools = *listed;
    } else {
        tools = list_tools(s);
    }
    if (opts.json) {
        fmt::print("{}\n", pretty(tools));
        return exit_ok;
    }
    if (tools.empty()) {
        fmt::print("no tools\n");
        return exit_ok;
    }

    // A tool of a failed source keeps its row, marked: calls to it fail at once.
    std::vector<std::vector<std::string>> rows{
        {"NAME", "PERMISSION", "CAPABILITIES", "SOURCE", "DESCRIPTION"}};
    for (const json& t : tools) {
        std::string name = sanitize(get_string(t, "name").value_or("?"), false);
        if (is_unavailable(t)) name += " (unavailable)";
        rows.push_back({std::move(name), sanitize(get_string(t, "permission").value_or("?"), false),
                        sanitize(capabilities_text(t), false),
                        sanitize(get_string(t, "source").value_or("-"), false),
                        sanitize(get_string(t, "description").value_or(""), false)});
    }
    print_table(rows);
    return exit_ok;
}

/// A source's sandbox in a word or two (docs/protocol.md §15): "-" (runs nothing), "off",
/// "none" (unconfined: unknown capabilities, ...), else what is confined: "fs,net,exec".
std::string sandbox_text(const json& src) {
    const json* sb = get_field(src, "sandbox");
    if (sb == nullptr || !sb->is_object()) return "-";
    if (get_string(*sb, "mode") == "off") return "off";
    if (get_field(*sb, "unconfined") != nullptr) return "none";
    std::string out;
    const auto add = [&](const char* word, bool confined) {
        if (!confined) return;
        if (!out.empty()) out += ',';
        out += word;
    };
    add("fs", get_string(*sb, "fs").value_or("none").rfind("landlock", 0) == 0);
    add("net", get_string(*sb, "net") == "seccomp");
    add("exec", get_string(*sb, "exec") == "landlock");
    return out.empty() ? "none" : out;
}

int run_sources(const options& opts) {
    session s = open_session(opts);
    const json sources = list_sources(s);
    if (opts.json) {
        fmt::print("{}\n", pretty(sources));
        return exit_ok;
    }
    if (sources.empty()) {
        fmt::print("no sources\n");
        return exit_ok;
    }
    std::vector<std::vector<std::string>> rows{
        {"NAME", "KIND", "STATE", "PID", "RESTARTS", "TOOLS", "SANDBOX", "LAST ERROR"}};
    for (const json& src : sources) {
        rows.push_back({sanitize(get_string(src, "name").value_or("?"), false),
                        sanitize(get_string(src, "kind").value_or("?"), false),
                        sanitize(get_string(src, "state").value_or("?"), false),
                        count_text(src, "pid"), count_text(src, "restarts"),
                        count_text(src, "tools"), sandbox_text(src),
                        sanitize(get_string(src, "lastError").value_or("-"), false)});
    }
    print_table(rows);
    return exit_ok;
}

int run_source_restart(const options& opts) {
    const std::string& name = opts.words.at(2);
    session s = open_session(opts);
    const std::string id = s.ids.next();
    s.conn.send_frame(protocol::encode_restart_source(id, name, opts.caller));
    // A refusal (unknown source, a source that cannot be restarted) is an error frame: exit 1.
    const auto timeout = opts.timeout_ms ? std::chrono::milliseconds(*opts.timeout_ms)
                                         : std::chrono::milliseconds(restart_timeout);
    const json reply = await_reply(s.conn, id, "source_restarted", timeout, exit_tool_failed);
    fmt::print("restarted source '{}'\n",
               sanitize(get_string(reply, "name").value_or(name), false));
    return exit_ok;
}

int run_reload(const options& opts) {
    session s = open_session(opts);
    const std::string id = s.ids.next();
    s.conn.send_frame(protocol::encode_reload_config(id, opts.caller));
    const json reply = await_reply(s.conn, id, "config_reloaded", reply_timeout, exit_tool_failed);
    const json* ok = get_field(reply, "ok");
    if (ok == nullptr || !ok->is_boolean())
        throw cli_error(exit_error, "protocol error: config_reloaded without a boolean \"ok\"");
    if (opts.json) {
        fmt::print("{}\n", pretty(reply));
        return ok->get<bool>() ? exit_ok : exit_tool_failed;
    }
    const std::string file =
        sanitize(get_string(reply, "file").value_or("(built-in defaults)"), false);
    if (!ok->get<bool>()) {
        fmt::print(stderr, "meith: reload refused, the running config stays: {}\n",
                   sanitize(get_string(reply, "error").value_or("?"), false));
        return exit_tool_failed;
    }
    auto words = [](const json* arr) {
        std::string out;
        if (arr == nullptr || !arr->is_array()) return out;
        for (const json& w : *arr)
            if (w.is_string())
                out += (out.empty() ? "" : ", ") + sanitize(w.get<std::string>(), false);
        return out;
    };
    const std::string changed = words(get_field(reply, "changed"));
    fmt::print("reloaded {}: {}\n", file, changed.empty() ? "no changes" : "changed " + changed);
    if (const json* src = get_field(reply, "sources"); src != nullptr && src->is_object())
        for (const char* key : {"added", "removed", "replaced", "restarted"})
            if (auto names = words(get_field(*src, key)); !names.empty())
                fmt::print("  sources {}: {}\n", key, names);
    if (auto later = words(get_field(reply, "needsRestart")); !later.empty())
        fmt::print("  not applied until meithd restarts: {}\n", later);
    return exit_ok;
}

int run_policy_check(const options& opts) {
    const std::string& tool = opts.words.at(2);
    session s = open_session(opts);
    const std::string id = s.ids.next();
    s.conn.send_frame(protocol::encode_check_policy(id, tool, opts.caller));
    const json reply = await_reply(s.conn, id, "policy_decision");
    const auto decision = get_string(reply, "decision");
    if (decision != "allow" && decision != "deny" && decision != "ask") {
        throw cli_error(exit_error, "protocol error: policy_decision without \"decision\" "
                                    "allow, deny or ask");
    }
    const int status = decision == "allow" ? exit_ok : exit_tool_failed;
    if (opts.json) {
        fmt::print("{}\n", pretty(reply));
        return status;
    }

    fmt::print("{} for caller {}: {}\n",
               sanitize(get_string(reply, "toolName").value_or(tool), false),
               sanitize(get_string(reply, "caller").value_or(opts.caller), false), *decision);
    const json* known = get_field(reply, "known");
    if (known != nullptr && known->is_boolean() && !known->get<bool>()) {
        fmt::print("  unknown tool\n");
    } else if (const json* caps = get_field(reply, "capabilities"); caps && caps->is_array()) {
        const std::string text = capabilities_text(reply);
        fmt::print("  capabilities: {}\n", text == "-" ? "none" : sanitize(text, false));
    } else {
        fmt::print("  capabilities: none declared\n");
    }
    if (auto reason = get_string(reply, "reason")) {
        fmt::print("  reason: {}\n", sanitize(*reason, false));
    }
    if (decision == "ask")
        fmt::print("  the call is held until a person answers in `meith approve` (denied at once "
                   "when no approver is connected)\n");
    else if (const json* g = get_field(reply, "grantable");
             decision == "deny" && g && g->is_boolean() && g->get<bool>())
        fmt::print("  a grant (`meith grant`) can let it through\n");
    std::string hooks;
    if (const json* h = get_field(reply, "filterHooks"); h && h->is_array()) {
        for (const json& phase : *h) {
            if (!phase.is_string()) continue;
            if (!hooks.empty()) hooks += ", ";
            hooks += sanitize(phase.get<std::string>(), false);
        }
    }
    if (!hooks.empty()) fmt::print("  filter hooks still asked: {}\n", hooks);
    return status;
}

} // namespace meith::cli
