// status and tools: one request each after hello, answered within reply_timeout.
#include "cli/commands.hpp"

#include "cli/errors.hpp"
#include "cli/session.hpp"

#include <algorithm>
#include <array>
#include <vector>

#include <fmt/core.h>

namespace meith::cli {

namespace {

constexpr std::size_t table_width = 100;
constexpr std::size_t min_description_width = 20;

json list_tools(session& s) {
    const std::string id = s.conn.next_request_id();
    s.conn.send_frame(compact({{"type", "list_tools"}, {"requestId", id}}));
    json reply = await_reply(s.conn, id, "tools_list");
    const json* tools = get_field(reply, "tools");
    if (tools == nullptr || !tools->is_array()) {
        throw cli_error(exit_error, "protocol error: tools_list without a \"tools\" array");
    }
    return *tools;
}

/// Display columns of UTF-8 text, counting one per code point (no East Asian width).
std::size_t columns(std::string_view s) {
    return static_cast<std::size_t>(
        std::count_if(s.begin(), s.end(), [](char c) { return (c & 0xC0) != 0x80; }));
}

/// Cuts `s` to at most `width` columns, ending in "…" when cut; never splits a code point.
std::string truncate(const std::string& s, std::size_t width) {
    if (columns(s) <= width) return s;
    if (width == 0) return {};
    std::size_t keep = width - 1, seen = 0, i = 0;
    for (; i < s.size(); ++i) {
        if ((s[i] & 0xC0) != 0x80) {
            if (seen == keep) break;
            ++seen;
        }
    }
    return s.substr(0, i) + "…";
}

std::string pad(const std::string& s, std::size_t width) {
    const std::size_t c = columns(s);
    return c >= width ? s : s + std::string(width - c, ' ');
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

} // namespace

int run_status(const options& opts) {
    session s = open_session(opts.socket, opts.home, opts.caller);
    const json tools = list_tools(s);
    std::size_t allowed = 0;
    for (const json& t : tools) {
        if (get_string(t, "permission") == "allow") ++allowed;
    }

    const json* server = get_field(s.hello, "server");
    const std::string name = server ? get_string(*server, "name").value_or("?") : "?";
    const std::string version = server ? get_string(*server, "version").value_or("?") : "?";
    std::string protocol = "?";
    if (const json* p = get_field(s.hello, "protocol"); p && p->is_number_integer()) {
        protocol = std::to_string(p->get<long long>());
    }

    fmt::print("meithd is running\n");
    fmt::print("  socket:   {}\n", s.where.socket.string());
    fmt::print("  server:   {} {} (protocol {})\n", sanitize(name, false), sanitize(version, false),
               protocol);
    if (s.where.pid) fmt::print("  pid:      {}\n", *s.where.pid);
    fmt::print("  session:  {}\n", sanitize(get_string(s.hello, "sessionId").value_or("?"), false));
    fmt::print("  caller:   {}\n",
               sanitize(get_string(s.hello, "caller").value_or(opts.caller), false));
    fmt::print("  tools:    {} ({} allowed, {} denied)\n", tools.size(), allowed,
               tools.size() - allowed);
    return exit_ok;
}

int run_tools(const options& opts) {
    session s = open_session(opts.socket, opts.home, opts.caller);
    const json tools = list_tools(s);
    if (opts.json) {
        fmt::print("{}\n", pretty(tools));
        return exit_ok;
    }
    if (tools.empty()) {
        fmt::print("no tools\n");
        return exit_ok;
    }

    using row = std::array<std::string, 5>;
    std::vector<row> rows{{"NAME", "PERMISSION", "CAPABILITIES", "SOURCE", "DESCRIPTION"}};
    for (const json& t : tools) {
        rows.push_back({sanitize(get_string(t, "name").value_or("?"), false),
                        sanitize(get_string(t, "permission").value_or("?"), false),
                        sanitize(capabilities_text(t), false),
                        sanitize(get_string(t, "source").value_or("-"), false),
                        sanitize(get_string(t, "description").value_or(""), false)});
    }
    std::array<std::size_t, 4> widths{};
    for (const row& r : rows) {
        for (std::size_t c = 0; c < widths.size(); ++c) {
            widths[c] = std::max(widths[c], columns(r[c]));
        }
    }
    std::size_t used = 0;
    for (std::size_t w : widths)
        used += w + 2;
    const std::size_t description_width =
        used + min_description_width < table_width ? table_width - used : min_description_width;

    for (const row& r : rows) {
        std::string line;
        for (std::size_t c = 0; c < widths.size(); ++c)
            line += pad(r[c], widths[c] + 2);
        line += truncate(r[4], description_width);
        while (!line.empty() && line.back() == ' ')
            line.pop_back();
        fmt::print("{}\n", line);
    }
    return exit_ok;
}

} // namespace meith::cli
