// clients: the MCP clients meith knows and their config files (cli/clients.hpp).
#include "cli/clients.hpp"

#include "cli/errors.hpp"

#include <array>
#include <cstdlib>

#include <fmt/core.h>

namespace meith::cli {

namespace fs = std::filesystem;

namespace {

constexpr std::array<client_info, 7> clients{{
    {"claude-code", "Claude Code", client_format::mcp_servers, true},
    {"claude-desktop", "Claude Desktop", client_format::mcp_servers, false},
    {"cursor", "Cursor", client_format::mcp_servers, false},
    {"vscode", "VS Code", client_format::vscode, true},
    {"codex", "Codex", client_format::codex, false},
    {"gemini", "Gemini CLI", client_format::mcp_servers, false},
    {"windsurf", "Windsurf", client_format::mcp_servers, false},
}};

fs::path home_or_root() {
    const char* h = std::getenv("HOME");
    return h && *h ? fs::path(h) : fs::path("/");
}

fs::path config_home() {
    if (const char* v = std::getenv("XDG_CONFIG_HOME"); v && *v == '/') return v;
    return home_or_root() / ".config";
}

} // namespace

std::span<const client_info> known_clients() {
    return clients;
}

const client_info& client_named(std::string_view name) {
    for (const auto& c : clients)
        if (c.name == name) return c;
    std::string names;
    for (const auto& c : clients)
        names += (names.empty() ? "" : ", ") + std::string(c.name);
    throw usage_error(fmt::format("unknown client '{}': one of {}", name, names));
}

std::vector<fs::path> client_files(const client_info& c) {
    const fs::path home = home_or_root();
    std::error_code ec;
    fs::path here = fs::current_path(ec);
    if (ec) here = home;
    // Sources: each client's MCP documentation (docs/bring-your-servers.md cites them).
    if (c.name == "claude-code") return {home / ".claude.json", here / ".mcp.json"};
    if (c.name == "claude-desktop")
#if defined(__APPLE__)
        return {home / "Library" / "Application Support" / "Claude" / "claude_desktop_config.json"};
#else
        return {config_home() / "Claude" / "claude_desktop_config.json"};
#endif
    if (c.name == "cursor") return {home / ".cursor" / "mcp.json", here / ".cursor" / "mcp.json"};
    if (c.name == "vscode")
        return {config_home() / "Code" / "User" / "mcp.json", here / ".vscode" / "mcp.json"};
    if (c.name == "codex") {
        const char* ch = std::getenv("CODEX_HOME");
        return {(ch && *ch ? fs::path(ch) : home / ".codex") / "config.toml"};
    }
    if (c.name == "gemini")
        return {home / ".gemini" / "settings.json", here / ".gemini" / "settings.json"};
    return {home / ".codeium" / "windsurf" / "mcp_config.json"}; // windsurf
}

fs::path client_user_file(const client_info& c) {
    return client_files(c).front();
}

} // namespace meith::cli
