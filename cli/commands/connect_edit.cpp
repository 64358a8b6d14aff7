// connect_edit: client configs pointed at `meith mcp` (cli/commands/connect_edit.hpp).
#include "cli/commands/connect_edit.hpp"

#include "protocol/json_writer.hpp"

#include <nlohmann/json.hpp>

namespace meith::cli {

namespace {

using ojson = nlohmann::ordered_json;

std::string_view servers_key(client_format f) {
    return f == client_format::vscode ? "servers" : "mcpServers";
}

std::vector<std::string_view> lines_of(std::string_view text) {
    std::vector<std::string_view> out;
    for (std::size_t i = 0; i < text.size();) {
        const auto nl = text.find('\n', i);
        const auto end = nl == std::string_view::npos ? text.size() : nl + 1;
        out.push_back(text.substr(i, end - i));
        i = end;
    }
    return out;
}

std::string_view trimmed(std::string_view l) {
    while (!l.empty() && (l.front() == ' ' || l.front() == '\t'))
        l.remove_prefix(1);
    while (!l.empty() && (l.back() == '\n' || l.back() == '\r' || l.back() == ' '))
        l.remove_suffix(1);
    return l;
}

/// A TOML table header's dotted name ("mcp_servers.x" for "[mcp_servers.x]"), or empty.
std::string_view header_of(std::string_view line) {
    const auto l = trimmed(line);
    if (l.size() < 3 || l.front() != '[' || l.starts_with("[[")) return {};
    const auto close = l.find(']');
    if (close == std::string_view::npos) return {};
    return trimmed(l.substr(1, close - 1));
}

std::string toml_string(std::string_view s) {
    std::string out;
    protocol::append_json_string(out, s);
    return out;
}

std::optional<std::string> connected_toml(std::string_view text,
                                          const std::vector<std::string>& command) {
    std::string out;
    bool skipping = false;
    for (const auto line : lines_of(text)) {
        const auto h = header_of(line);
        if (!h.empty()) skipping = h == "mcp_servers" || h.starts_with("mcp_servers.");
        if (!skipping) out += line;
    }
    while (out.size() >= 2 && out.ends_with("\n\n"))
        out.pop_back();
    if (!out.empty() && !out.ends_with("\n")) out += '\n';
    if (!out.empty()) out += '\n';
    out += "[mcp_servers.meith]\ncommand = " + toml_string(command.front()) + "\nargs = [";
    for (std::size_t i = 1; i < command.size(); ++i)
        out += (i > 1 ? ", " : "") + toml_string(command[i]);
    out += "]\n";
    return out;
}

ojson parse_json(std::string_view text) {
    if (trimmed(text).empty()) return ojson::object();
    return ojson::parse(text, nullptr, false, true); // comments allowed (VS Code)
}

} // namespace

std::optional<std::string> connected_config(std::string_view text, client_format format,
                                            bool typed_entries,
                                            const std::vector<std::string>& command,
                                            std::string& why) {
    if (command.empty()) {
        why = "no command to run";
        return std::nullopt;
    }
    if (format == client_format::codex) return connected_toml(text, command);
    ojson doc = parse_json(text);
    if (doc.is_discarded() || !doc.is_object()) {
        why = "not a JSON object; fix or move the file first";
        return std::nullopt;
    }
    ojson entry = ojson::object();
    if (typed_entries) entry["type"] = "stdio";
    entry["command"] = command.front();
    entry["args"] = ojson(std::vector<std::string>(command.begin() + 1, command.end()));
    doc[std::string(servers_key(format))] = ojson{{"meith", entry}};
    return doc.dump(2) + "\n";
}

std::vector<std::string> server_names(std::string_view text, client_format format) {
    std::vector<std::string> out;
    if (format == client_format::codex) {
        for (const auto line : lines_of(text)) {
            const auto h = header_of(line);
            if (!h.starts_with("mcp_servers.")) continue;
            std::string name(h.substr(12));
            if (name.find('.') != std::string::npos) continue; // a subtable (.env)
            if (name.size() >= 2 && name.front() == '"') name = name.substr(1, name.size() - 2);
            out.push_back(std::move(name));
        }
        return out;
    }
    const ojson doc = parse_json(text);
    if (doc.is_discarded() || !doc.is_object()) return out;
    const auto it = doc.find(std::string(servers_key(format)));
    if (it == doc.end() || !it->is_object()) return out;
    for (const auto& [name, entry] : it->items())
        out.push_back(name);
    return out;
}

bool is_connected(std::string_view text, client_format format) {
    if (format == client_format::codex) {
        for (const auto line : lines_of(text))
            if (header_of(line) == "mcp_servers.meith") return true;
        return false;
    }
    const ojson doc = parse_json(text);
    if (doc.is_discarded() || !doc.is_object()) return false;
    const auto it = doc.find(std::string(servers_key(format)));
    if (it == doc.end() || !it->is_object() || !it->contains("meith")) return false;
    const auto& e = (*it)["meith"];
    return e.is_object() && e.contains("args") && e["args"].is_array() && !e["args"].empty() &&
           e["args"][0] == "mcp";
}

} // namespace meith::cli
