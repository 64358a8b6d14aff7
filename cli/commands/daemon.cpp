// status, tools, sources and policy check: one request each after hello, answered within
// reply_timeout (`sources restart` waits longer: the daemon answers once the source is
// restarting).
#include "cli/commands.hpp"
#include "cli/commands/sources.hpp"

#include "cli/errors.hpp"
#include "cli/help.hpp"
#include "cli/session.hpp"
#include "cli/table.hpp"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <string_view>
#include <vector>

#include <fmt/core.h>

namespace meith::cli {

namespace {

/// The tools; `hidden`, when given, gets how many the connection's client profile hides.
json list_tools(session& s, std::uint64_t* hidden = nullptr) {
    const std::string id = s.ids.next();
    s.conn.send_frame(protocol::encode_list_tools(id));
    json reply = await_reply(s.conn, id, "tools_list");
    const json* tools = get_field(reply, "tools");
    if (tools == nullptr || !tools->is_array()) {
        throw cli_error(exit_error, "protocol error: tools_list without a \"tools\" array");
    }
    if (const json* h = get_field(reply, "hidden"); hidden && h && h->is_number_unsigned())
        *hidden = h->get<std::uint64_t>();
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

bool is_unavailable(const json& tool) {
    const json* a = get_field(tool, "available");
    return a != nullptr && a->is_boolean() && !a->get<bool>();
}

namespace fs = std::filesystem;

/// What is wrong with the daemon `s` reached that its answers do not show: its home is gone
/// (removed under it, so the audit log cannot be written and every call fails).
std::optional<std::string> home_problem(const session& s) {
    std::error_code ec;
    if (fs::exists(s.where.home, ec) || ec) return std::nullopt;
    return fmt::format("its home {} is gone (removed while meithd ran?): the audit log, lock and "
                       "runtime record lived there, so every call fails with \"the audit log "
                       "cannot be written\". Restart it: meith restart",
                       display_path(s.where.home));
}

} // namespace

int run_status(const options& opts) {
    session s = open_session(opts);
    const std::optional<std::string> problem = home_problem(s);
    const json tools = list_tools(s);
    std::size_t allowed = 0, unavailable = 0;
    for (const json& t : tools) {
        if (get_string(t, "permission") == "allow") ++allowed;
        if (is_unavailable(t)) ++unavailable;
    }
    const json sources = list_sources(s);
    std::vector<std::string> failed, restarting;
    for (const json* src : sources_down(sources))
        (get_string(*src, "state") == "failed" ? failed : restarting)
            .push_back(sanitize(get_string(*src, "name").value_or("?"), false));

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
                   {"unavailable", unavailable}}},
                 {"sources",
                  {{"total", sources.size()}, {"failed", failed}, {"restarting", restarting}}}};
        if (problem) out["problem"] = *problem;
        fmt::print("{}\n", pretty(out));
        return problem ? exit_tool_failed : exit_ok;
    }
    if (problem)
        fmt::print("meithd is running, but broken: {}\n", *problem);
    else
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
    const auto joined = [](const std::vector<std::string>& names) {
        std::string out;
        for (const auto& n : names)
            out += (out.empty() ? "" : ", ") + n;
        return out;
    };
    std::string down;
    if (!failed.empty()) down += fmt::format("{} failed: {}", failed.size(), joined(failed));
    if (!restarting.empty())
        down += fmt::format("{}{} restarting: {}", down.empty() ? "" : "; ", restarting.size(),
                            joined(restarting));
    fmt::print("  sources:  {}{}\n", sources.size(),
               down.empty() ? std::string() : " (" + down + "; see meith sources)");
    return problem ? exit_tool_failed : exit_ok;
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

/// `meith tools --search WORDS` (docs/protocol.md §20): the best matches, best first.
int search_tools(const options& opts, session& s) {
    const std::string id = s.ids.next();
    s.conn.send_frame(compact(
        json{{"type", "list_tools"}, {"protocol", 1}, {"requestId", id}, {"query", *opts.search}}));
    const json reply = await_reply(s.conn, id, "tools_list");
    const json* found = get_field(reply, "tools");
    if (found == nullptr || !found->is_array())
        throw cli_error(exit_error, "protocol error: tools_list without a \"tools\" array");
    if (opts.json) {
        fmt::print("{}\n", pretty(*found));
        return exit_ok;
    }
    if (found->empty()) {
        fmt::print("no tool you may use matches '{}' (searched: names, titles, descriptions and "
                   "parameter names; `meith tools` lists them all)\n",
                   sanitize(*opts.search, false));
        return exit_ok;
    }
    std::vector<std::vector<std::string>> rows{
        {"#", "NAME", "PERMISSION", "SOURCE", "DESCRIPTION"}};
    std::size_t rank = 0;
    for (const json& t : *found)
        rows.push_back({std::to_string(++rank),
                        sanitize(get_string(t, "name").value_or("?"), false),
                        sanitize(get_string(t, "permission").value_or("?"), false),
                        sanitize(get_string(t, "source").value_or("-"), false),
                        sanitize(get_string(t, "description").value_or(""), false)});
    print_table(rows);
    return exit_ok;
}

namespace {

/// `meith tools --format F --tag T`: the listing in a provider's format and/or only what the
/// tags enable (docs/protocol.md §13). Null when it was printed as meithd sent it (a provider's
/// format, for handing to its API).
std::optional<json> list_tools_filtered(const options& opts, session& s) {
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
        fmt::print("{}\n", pretty(*listed));
        return std::nullopt;
    }
    return *listed;
}

/// The tools as a table. A source that is down: its tools keep their rows, marked with why
/// (calls to them fail at once); one that never listed any is named below the table.
void print_tools_table(const json& tools, const json& sources, std::uint64_t hidden,
                       const options& opts) {
    const auto down = sources_down(sources);
    const auto why_down = [&](const std::string& source) -> std::optional<std::string> {
        for (const json* src : down)
            if (get_string(*src, "name") == source)
                return fmt::format("unavailable: source '{}' is {}: {}", sanitize(source, false),
                                   sanitize(get_string(*src, "state").value_or("?"), false),
                                   sanitize(get_string(*src, "lastError").value_or("-"), false));
        return std::nullopt;
    };
    if (tools.empty()) fmt::print("no tools\n");
    std::vector<std::vector<std::string>> rows{
        {"NAME", "PERMISSION", "CAPABILITIES", "SOURCE", "DESCRIPTION"}};
    for (const json& t : tools) {
        std::string name = sanitize(get_string(t, "name").value_or("?"), false);
        const std::string source = get_string(t, "source").value_or("-");
        std::string description = sanitize(get_string(t, "description").value_or(""), false);
        if (is_unavailable(t)) {
            name += " (unavailable)";
            description = why_down(source).value_or("unavailable: its source is down");
        }
        const json* held = get_field(t, "quarantined");
        const bool quarantined = held != nullptr && held->is_boolean() && held->get<bool>();
        if (quarantined)
            description = "quarantined: its definition changed; see it and accept it with "
                          "`meith tools accept " +
                          name + "`";
        rows.push_back({std::move(name),
                        quarantined ? std::string("quarantined")
                                    : sanitize(get_string(t, "permission").value_or("?"), false),
                        sanitize(capabilities_text(t), false), sanitize(source, false),
                        std::move(description)});
    }
    if (!tools.empty()) print_table(rows);
    if (hidden > 0 && opts.client)
        fmt::print("{} more tool{} hidden by client profile {}; `meith policy check TOOL --client "
                   "{}` says why\n",
                   hidden, hidden == 1 ? " is" : "s are", sanitize(*opts.client, false),
                   sanitize(*opts.client, false));
    for (const json* src : down) {
        const std::string name = get_string(*src, "name").value_or("?");
        const bool listed = std::any_of(tools.begin(), tools.end(), [&](const json& t) {
            return get_string(t, "source") == name;
        });
        if (listed) continue;
        fmt::print(
            "{}\n  meith sources {} shows why\n",
            wrap(fmt::format("source '{}' is {} and lists no tools: {}", sanitize(name, false),
                             sanitize(get_string(*src, "state").value_or("?"), false),
                             sanitize(get_string(*src, "lastError").value_or("-"), false)),
                 output_width(), "  "),
            sanitize(name, false));
    }
}

} // namespace

int run_tools(const options& opts) {
    session s = open_session(opts);
    if (opts.search) {
        if (opts.search->empty())
            throw usage_error("--search needs WORDS, e.g. --search 'read a file'");
        if (opts.words.size() > 1 || opts.format || !opts.tags.empty())
            throw usage_error("--search takes no NAME, --format or --tag");
        return search_tools(opts, s);
    }
    if (opts.words.size() > 1) {
        if (opts.format || !opts.tags.empty())
            throw usage_error("describe one tool without --format or --tag");
        return describe_tool(opts, s, list_tools(s), opts.words[1]);
    }
    json tools;
    std::uint64_t hidden = 0;
    if (opts.format || !opts.tags.empty()) {
        auto listed = list_tools_filtered(opts, s);
        if (!listed) return exit_ok;
        tools = std::move(*listed);
    } else {
        tools = list_tools(s, &hidden);
    }
    if (opts.json) {
        fmt::print("{}\n", pretty(tools));
        return exit_ok;
    }
    print_tools_table(tools, list_sources(s), hidden, opts);
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
    // The sources it started: wait (bounded) for each to be ready or fail, and say which failed.
    std::vector<std::string> started;
    if (const json* src = get_field(reply, "sources"); src != nullptr && src->is_object())
        for (const char* key : {"added", "replaced", "restarted"})
            if (const json* arr = get_field(*src, key); arr && arr->is_array())
                for (const json& n : *arr)
                    if (n.is_string()) started.push_back(n.get<std::string>());
    if (started.empty()) return exit_ok;
    const auto wait = settle_wait(opts);
    return report_settled(await_settled(s, started, wait), started, s.where, wait, false);
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

    const auto profile = get_string(reply, "client");
    fmt::print("{} for caller {}{}: {}\n",
               sanitize(get_string(reply, "toolName").value_or(tool), false),
               sanitize(get_string(reply, "caller").value_or(opts.caller), false),
               profile ? " through client profile " + sanitize(*profile, false) : "", *decision);
    if (const auto original = get_string(reply, "originalName"))
        fmt::print("  tool: {} (the profile shows it under the name asked for)\n",
                   sanitize(*original, false));
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
