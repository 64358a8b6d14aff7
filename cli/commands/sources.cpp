// sources, sources NAME, sources restart NAME, and what the other commands say about sources
// that are down (docs/protocol.md §7 list_sources): a failed source shows its whole error,
// the last lines of its program's stderr and where the daemon's log is; a restart and a reload
// wait for the outcome and exit 1 when a source failed (again).
#include "cli/commands/sources.hpp"
#include "cli/commands.hpp"

#include "cli/errors.hpp"
#include "cli/help.hpp"
#include "cli/table.hpp"

#include <algorithm>
#include <ctime>
#include <thread>

#include <fmt/core.h>

namespace meith::cli {

namespace {

/// How long `sources restart` and `reload` wait for the outcome unless --timeout-ms says.
constexpr std::chrono::seconds settle_timeout{60};

std::string text(const json& src, std::string_view key, std::string_view fallback = "-") {
    return sanitize(get_string(src, key).value_or(std::string(fallback)), false);
}

/// A non-negative integer field as text; "-" when absent, null or not an integer.
std::string count_text(const json& obj, std::string_view key) {
    const json* v = get_field(obj, key);
    if (v == nullptr || !v->is_number_integer()) return "-";
    return v->is_number_unsigned() ? std::to_string(v->get<unsigned long long>())
                                   : std::to_string(v->get<long long>());
}

std::vector<std::string> stderr_lines(const json& src) {
    std::vector<std::string> out;
    if (const json* e = get_field(src, "stderr"); e && e->is_array())
        for (const json& line : *e)
            if (line.is_string()) out.push_back(sanitize(line.get<std::string>(), false));
    return out;
}

/// "on demand, stops after N ms without calls" for an on-demand source, else "".
std::string start_text(const json& src) {
    if (text(src, "start", "") != "on-demand") return "";
    return fmt::format("on demand, stops after {} ms without calls", count_text(src, "idleStopMs"));
}

bool settled(const std::string& state) {
    return state == "ready" || state == "failed" || state == "stopped" || state == "idle";
}

/// The full error of a source that is not ready, wrapped, with where to read more.
void print_problem(const json& src) {
    const std::string name = text(src, "name", "?");
    const std::size_t width = output_width();
    fmt::print("{}\n", wrap(fmt::format("{} ({}): {}", name, text(src, "state", "?"),
                                        text(src, "lastError", "no error recorded")),
                            width, "  "));
    if (!stderr_lines(src).empty()) fmt::print("  its last stderr lines: meith sources {}\n", name);
}

/// `meith sources NAME`: one source in full.
int describe_source(const options& opts, const json& sources, const std::string& name,
                    const daemon_location& where) {
    const json* src = nullptr;
    std::vector<std::string> names;
    for (const json& s : sources) {
        const auto n = get_string(s, "name");
        if (n == name) src = &s;
        if (n) names.push_back(sanitize(*n, false));
    }
    if (src == nullptr)
        throw cli_error(exit_tool_failed, fmt::format("no source '{}'{}", sanitize(name, false),
                                                      did_you_mean(closest_names(name, names))));
    if (opts.json) {
        fmt::print("{}\n", pretty(*src));
        return exit_ok;
    }
    const std::size_t width = output_width();
    fmt::print("{}: {}, {}\n", text(*src, "name"), text(*src, "kind"), text(*src, "state"));
    fmt::print("  pid:         {}\n", count_text(*src, "pid"));
    fmt::print("  restarts:    {}\n", count_text(*src, "restarts"));
    fmt::print("  tools:       {}\n", count_text(*src, "tools"));
    if (const json* mode = get_field(*src, "instancesMode"); mode != nullptr && mode->is_string()) {
        // One process per session or client (docs/configuration.md "Instances").
        const json* list = get_field(*src, "instances");
        const std::size_t n = list != nullptr && list->is_array() ? list->size() : 0;
        fmt::print("  instances:   {}, {} running of at most {}\n",
                   sanitize(mode->get<std::string>(), false), n, count_text(*src, "maxInstances"));
        for (std::size_t i = 0; i < n; ++i) {
            const json& inst = (*list)[i];
            const std::string agent = text(inst, "agent", "");
            fmt::print("    {}: {}, pid {}{}\n", text(inst, "key"), text(inst, "state"),
                       count_text(inst, "pid"),
                       agent.empty() ? "" : fmt::format(", agent {}", agent));
        }
    }
    if (start_text(*src) != "") fmt::print("  start:       {}\n", start_text(*src));
    if (text(*src, "kind") == "mcp") // the MCP revision negotiated with this server (§17)
        fmt::print("  protocol:    MCP {}\n",
                   get_string(*src, "protocolVersion").value_or("(not negotiated yet)"));
    if (const json* remote = get_field(*src, "remote"); remote != nullptr && remote->is_object()) {
        // A remote server (§18): where it is, and whether meith holds a grant for it.
        fmt::print("  url:         {}\n", sanitize(remote->value("url", "?"), false));
        if (remote->value("loggedIn", false)) {
            const auto left = remote->value("expiresAt", std::int64_t{0}) -
                              static_cast<std::int64_t>(std::time(nullptr));
            fmt::print("  login:       OAuth grant held{}\n",
                       remote->value("expiresAt", std::int64_t{0}) == 0 ? ""
                       : left > 0
                           ? fmt::format(" (token valid for {} s more; refreshed as needed)", left)
                           : std::string(" (token expired; refreshed at the next call)"));
        } else {
            fmt::print("  login:       none (`meith login {}` if the server asks for OAuth)\n",
                       text(*src, "name"));
        }
        // A call refused for want of a scope (403 insufficient_scope): what a new login asks.
        if (const json* ch = get_field(*remote, "challenge");
            ch != nullptr && ch->is_object() && ch->value("error", "") == "insufficient_scope")
            fmt::print("  step-up:     the server asks for the scope \"{}\" (`meith login {}` "
                       "asks for it)\n",
                       sanitize(ch->value("scope", ""), false), text(*src, "name"));
    }
    fmt::print("  sandbox:     {}\n", wrap(sandbox_text(*src), width - 15, "               "));
    if (const json* sb = get_field(*src, "sandbox"); sb != nullptr && sb->is_object()) {
        // Read-only inside its writable roots (docs/protocol.md §15, protected paths).
        if (const json* p = get_field(*sb, "protected"); p != nullptr && p->is_array()) {
            std::string list;
            for (const json& each : *p)
                if (each.is_string())
                    list += (list.empty() ? "" : ", ") + sanitize(each.get<std::string>(), false);
            if (!list.empty())
                fmt::print("  read-only:   {}\n", wrap(list, width - 15, "               "));
        }
    }
    if (auto err = get_string(*src, "lastError"))
        fmt::print("  last error:  {}\n",
                   wrap(sanitize(*err, false), width - 15, "               "));
    // What its sandbox may have refused, read off its last error and stderr (§15).
    if (auto hint = get_string(*src, "sandboxHint"))
        fmt::print("  hint:        {}\n",
                   wrap(sanitize(*hint, false), width - 15, "               "));
    const auto lines = stderr_lines(*src);
    if (lines.empty()) {
        fmt::print("  stderr:      nothing kept\n");
    } else {
        fmt::print("  stderr (its last {} lines, redacted):\n", lines.size());
        for (const auto& line : lines)
            fmt::print("    {}\n", line);
    }
    fmt::print("  daemon log:  {}\n", log_hint(where));
    return exit_ok;
}

} // namespace

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

std::string sandbox_text(const json& src) {
    const json* sb = get_field(src, "sandbox");
    if (sb == nullptr || !sb->is_object()) return "-";
    if (get_string(*sb, "mode") == "off") return "off (sandbox = \"off\")";
    if (auto why = get_string(*sb, "unconfined")) return "none: " + sanitize(*why, false);
    std::vector<std::string> may;
    if (const json* caps = get_field(*sb, "capabilities"); caps && caps->is_array())
        for (const json& c : *caps) {
            if (c == "writes-files" || c == "destructive") {
                if (std::find(may.begin(), may.end(), "writes") == may.end())
                    may.push_back("writes");
            } else if (c == "accesses-network") {
                may.push_back("network");
            } else if (c == "starts-process") {
                may.push_back("runs programs");
            }
        }
    std::string out = "confined: ";
    if (may.empty()) out += "read-only";
    for (std::size_t i = 0; i < may.size(); ++i)
        out += (i ? ", " : "") + may[i];
    if (auto profile = get_string(*sb, "profile"))
        out += " (profile " + sanitize(*profile, false) + ")";
    if (const json* w = get_field(*sb, "writeWithheld"); w && w->is_array() && !w->empty())
        out += "; not in " +
               sanitize(w->front().is_string() ? w->front().get<std::string>() : "?", false) +
               " (meithd's home)";
    return out;
}

std::vector<const json*> sources_down(const json& sources) {
    std::vector<const json*> out;
    for (const json& src : sources) {
        const std::string state = get_string(src, "state").value_or("");
        if (state == "failed" || state == "restarting") out.push_back(&src);
    }
    return out;
}

json await_settled(session& s, const std::vector<std::string>& names,
                   std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
        json sources = list_sources(s);
        bool all = true;
        for (const json& src : sources)
            if (std::find(names.begin(), names.end(), get_string(src, "name").value_or("")) !=
                    names.end() &&
                !settled(get_string(src, "state").value_or("")))
                all = false;
        if (all || std::chrono::steady_clock::now() >= deadline) return sources;
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
}

int report_settled(const json& sources, const std::vector<std::string>& names,
                   const daemon_location& where, std::chrono::milliseconds waited, bool again) {
    int status = exit_ok;
    for (const json& src : sources) {
        const std::string name = get_string(src, "name").value_or("");
        if (std::find(names.begin(), names.end(), name) == names.end()) continue;
        const std::string state = get_string(src, "state").value_or("?");
        if (state == "ready") continue;
        status = exit_tool_failed;
        if (settled(state)) {
            fmt::print(stderr, "meith: source '{}' {}: {}\n", sanitize(name, false),
                       state == "failed" ? (again ? "failed again" : "failed") : "is " + state,
                       text(src, "lastError", "no error recorded"));
        } else {
            fmt::print(stderr, "meith: source '{}' is still {} after {} s\n", sanitize(name, false),
                       state, waited.count() / 1000);
        }
        if (!stderr_lines(src).empty())
            fmt::print(stderr, "  its last stderr lines: meith sources {}\n",
                       sanitize(name, false));
        fmt::print(stderr, "  the daemon's log: {}\n", log_hint(where));
    }
    return status;
}

std::chrono::milliseconds settle_wait(const options& opts) {
    return opts.timeout_ms ? std::chrono::milliseconds(*opts.timeout_ms)
                           : std::chrono::milliseconds(settle_timeout);
}

int run_sources(const options& opts) {
    session s = open_session(opts);
    const json sources = list_sources(s);
    if (opts.words.size() > 1) return describe_source(opts, sources, opts.words[1], s.where);
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
        rows.push_back({text(src, "name", "?"), text(src, "kind", "?"), text(src, "state", "?"),
                        count_text(src, "pid"), count_text(src, "restarts"),
                        count_text(src, "tools"), sandbox_text(src), text(src, "lastError")});
    }
    print_table(rows);
    const auto down = sources_down(sources);
    if (!down.empty()) {
        fmt::print("\n");
        for (const json* src : down)
            print_problem(*src);
        fmt::print("the daemon's log: {}\n", log_hint(s.where));
    }
    return exit_ok;
}

int run_source_restart(const options& opts) {
    const std::string& name = opts.words.at(2);
    session s = open_session(opts);
    const std::string id = s.ids.next();
    s.conn.send_frame(protocol::encode_restart_source(id, name, opts.caller));
    // A refusal (unknown source, a source that cannot be restarted) is an error frame: exit 1.
    const auto timeout = settle_wait(opts);
    const auto t0 = std::chrono::steady_clock::now();
    const json reply = await_reply(s.conn, id, "source_restarted", timeout, exit_tool_failed);
    const std::string restarted = get_string(reply, "name").value_or(name);
    // Then the outcome: ready, or failed again and why (bounded by the same timeout).
    const auto left = timeout - std::chrono::duration_cast<std::chrono::milliseconds>(
                                    std::chrono::steady_clock::now() - t0);
    const json sources =
        await_settled(s, {restarted}, std::max(left, std::chrono::milliseconds(0)));
    if (const int status = report_settled(sources, {restarted}, s.where, timeout, true);
        status != exit_ok)
        return status;
    for (const json& src : sources)
        if (get_string(src, "name") == restarted)
            fmt::print("restarted source '{}': ready, {} tools\n", sanitize(restarted, false),
                       count_text(src, "tools"));
    return exit_ok;
}

} // namespace meith::cli
