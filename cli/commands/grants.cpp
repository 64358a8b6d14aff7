// grants: `meith grant`, `meith grants`, `meith revoke` (PROTOCOL.md §12, docs/protocol.md
// §14): standing permissions, made, listed and withdrawn by an approver
// (cli/commands/approver.hpp).
#include "cli/commands.hpp"
#include "cli/commands/approver.hpp"

#include "cli/errors.hpp"
#include "cli/session.hpp"
#include "cli/table.hpp"

#include <fmt/core.h>

namespace meith::cli {

int run_grant(const options& opts) {
    json caps = json::array();
    const std::string& list = opts.words.at(1);
    std::size_t start = 0;
    while (start <= list.size()) {
        const std::size_t comma = list.find(',', start);
        const std::string cap = trim(list.substr(start, comma - start));
        if (!cap.empty()) caps.push_back(cap);
        if (comma == std::string::npos) break;
        start = comma + 1;
    }
    if (caps.empty()) throw usage_error("grant needs capabilities, e.g. writes-files");
    json g = {{"capabilities", caps}};
    if (opts.tool) g["tool"] = *opts.tool;
    if (opts.caller_given) g["caller"] = opts.caller;
    if (opts.grant_session) g["sessionId"] = *opts.grant_session;
    if (opts.uses) g["uses"] = *opts.uses;
    if (opts.expires) g["expiresInMs"] = static_cast<std::uint64_t>(opts.expires->count()) * 1000;

    options as_cli = opts;
    as_cli.caller = "cli";
    session s = open_session(as_cli);
    become_approver(s);
    const std::string id = s.ids.next();
    s.conn.send_frame(
        compact(json{{"type", "grant"}, {"protocol", 1}, {"requestId", id}, {"grant", g}}));
    const json reply = await_reply(s.conn, id, "grant_result");
    if (opts.json) {
        fmt::print("{}\n", pretty(reply));
        return exit_ok;
    }
    fmt::print("granted {}: {} to {} for {}{}{}{}\n", text_of(reply, "grantId"),
               list_text(g, "capabilities"), opts.caller_given ? opts.caller : "every caller",
               opts.tool ? "tools " + sanitize(*opts.tool, false) : "every tool",
               opts.grant_session ? ", session " + sanitize(*opts.grant_session, false) : "",
               opts.uses ? fmt::format(", {} use(s)", *opts.uses) : "",
               opts.expires ? fmt::format(", {} s", opts.expires->count()) : "");
    return exit_ok;
}

int run_grants(const options& opts) {
    options as_cli = opts;
    as_cli.caller = "cli";
    session s = open_session(as_cli);
    bool approver = true;
    try {
        become_approver(s);
    } catch (const cli_error&) {
        approver = false; // not from a terminal, or no secret: this session's grants only
    }
    const std::string id = s.ids.next();
    s.conn.send_frame(compact(json{{"type", "list_grants"}, {"protocol", 1}, {"requestId", id}}));
    const json reply = await_reply(s.conn, id, "grants_list");
    if (opts.json) {
        fmt::print("{}\n", pretty(reply));
        return exit_ok;
    }
    if (!approver)
        fmt::print(stderr, "meith: not an approver here (no terminal, or approver.secret "
                           "unreadable): showing only grants for every session\n");
    const json* grants = get_field(reply, "grants");
    if (grants == nullptr || !grants->is_array() || grants->empty()) {
        fmt::print("no grants\n");
        return exit_ok;
    }
    std::vector<std::vector<std::string>> rows{
        {"GRANT", "CALLER", "SESSION", "TOOL", "USES", "EXPIRES", "CAPABILITIES"}};
    for (const json& g : *grants)
        rows.push_back({text_of(g, "grantId"), text_of(g, "caller", "any"),
                        text_of(g, "sessionId", "any"), text_of(g, "tool", "*"),
                        text_of(g, "usesLeft", "∞"), text_of(g, "expiresAt", "never"),
                        list_text(g, "capabilities")});
    print_table(rows);
    return exit_ok;
}

int run_revoke(const options& opts) {
    options as_cli = opts;
    as_cli.caller = "cli";
    session s = open_session(as_cli);
    become_approver(s);
    const std::string id = s.ids.next();
    s.conn.send_frame(compact(json{
        {"type", "revoke"}, {"protocol", 1}, {"requestId", id}, {"grantId", opts.words.at(1)}}));
    const json reply = await_reply(s.conn, id, "revoke_result", reply_timeout, exit_tool_failed);
    fmt::print("revoked {}\n", text_of(reply, "grantId"));
    return exit_ok;
}

} // namespace meith::cli
