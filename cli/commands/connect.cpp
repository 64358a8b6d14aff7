// connect: `meith connect CLIENT [--undo]` and `meith clients` (docs/bring-your-servers.md).
//
// Connecting rewrites the client's own config (its user-scope file, cli/clients.hpp) so that
// its servers are one entry, `meith`, running `meith mcp` (with `--client PROFILE` when one is
// given): the servers it ran itself now come through meith. The change is shown as a diff and
// made on "y" at a terminal or with --yes. The file as it was is kept, byte for byte, in
// $XDG_STATE_HOME/meith/connect/CLIENT/, and `--undo` puts it back: exactly the old bytes, or
// no file when there was none. An undo after the file was changed again by hand refuses
// without --yes (the edit would be lost; the current file is then kept beside the backup).
#include "cli/commands.hpp"
#include "cli/commands/connect_edit.hpp"

#include "cli/changes.hpp"
#include "cli/clients.hpp"
#include "cli/discovery.hpp"
#include "cli/errors.hpp"
#include "cli/table.hpp"
#include "platform/self.hpp"

#include <cstdlib>
#include <fstream>
#include <sstream>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

namespace meith::cli {

namespace fs = std::filesystem;

namespace {

void write_bytes(const fs::path& p, const std::string& bytes) {
    std::error_code ec;
    fs::create_directories(p.parent_path(), ec);
    const fs::path tmp = p.string() + ".meith-tmp";
    {
        std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
        out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
        if (!out) throw cli_error(exit_error, fmt::format("cannot write {}", tmp.string()));
    }
    // The old file's mode stays (a client's config may be 0600: it can hold tokens).
    if (fs::exists(p, ec)) fs::permissions(tmp, fs::status(p, ec).permissions(), ec);
    fs::rename(tmp, p, ec);
    if (ec)
        throw cli_error(exit_error, fmt::format("cannot replace {}: {}", p.string(), ec.message()));
}

/// Where connect keeps what it needs to undo itself for `client`.
fs::path state_dir(const client_info& client) {
    fs::path base;
    if (const char* v = std::getenv("XDG_STATE_HOME"); v && *v == '/')
        base = v;
    else
        base = fs::path(std::getenv("HOME") ? std::getenv("HOME") : "/") / ".local" / "state";
    return base / "meith" / "connect" / std::string(client.name);
}

/// `meith mcp` as the client runs it: this meith by absolute path.
std::vector<std::string> meith_command(const options& opts) {
    fs::path self = platform::executable_path();
    if (self.empty()) self = "meith";
    std::vector<std::string> cmd{self.string(), "mcp"};
    if (opts.home) {
        cmd.push_back("--home");
        cmd.push_back(fs::absolute(*opts.home).string());
    }
    if (opts.client) {
        cmd.push_back("--client");
        cmd.push_back(*opts.client);
    }
    return cmd;
}

int undo(const options& opts, const client_info& client, const fs::path& file) {
    const fs::path dir = state_dir(client);
    const auto record_text = read_whole_file(dir / "record.json");
    if (!record_text)
        throw cli_error(exit_error, fmt::format("{} was not connected by meith (no record in {})",
                                                client.display, display_path(dir)));
    const auto record = nlohmann::json::parse(*record_text, nullptr, false);
    if (!record.is_object() || !record.contains("existed") || !record.contains("connected"))
        throw cli_error(exit_error, fmt::format("{}/record.json is damaged", display_path(dir)));
    const auto now = read_whole_file(file);
    const std::string connected = record["connected"].get<std::string>();
    if (now.value_or("") != connected && !opts.yes)
        throw cli_error(exit_error,
                        fmt::format("{} changed since `meith connect {}`: undoing would lose "
                                    "that change. Give --yes to put the old file back anyway "
                                    "(the current one is kept as {}.meith-undone)",
                                    display_path(file), client.name, display_path(file)));
    if (now && *now != connected) write_bytes(file.string() + ".meith-undone", *now);
    std::error_code ec;
    if (record["existed"] == true) {
        const auto original = read_whole_file(dir / "original");
        if (!original)
            throw cli_error(exit_error,
                            fmt::format("the backup {}/original is missing", display_path(dir)));
        if (opts.dry_run) {
            fmt::print("{}", unified_diff(now.value_or(""), *original, file));
            return exit_ok;
        }
        write_bytes(file, *original);
    } else {
        if (opts.dry_run) {
            fmt::print("would remove {} (meith connect made it)\n", display_path(file));
            return exit_ok;
        }
        fs::remove(file, ec);
    }
    fs::remove_all(dir, ec);
    fmt::print("{}: {} is as it was before `meith connect`\n", client.display, display_path(file));
    return exit_ok;
}

} // namespace

int run_connect(const options& opts) {
    const client_info& client = client_named(opts.words.at(1));
    const fs::path file = client_user_file(client);
    if (opts.undo) return undo(opts, client, file);

    const fs::path dir = state_dir(client);
    if (fs::exists(dir / "record.json"))
        throw cli_error(exit_error,
                        fmt::format("{} is connected already (meith connect {} --undo first to "
                                    "connect it again)",
                                    client.display, client.name));
    const auto before = read_whole_file(file);
    std::string why;
    const auto after = connected_config(before.value_or(""), client.format, client.typed_entries,
                                        meith_command(opts), why);
    if (!after) throw cli_error(exit_error, fmt::format("{}: {}", display_path(file), why));
    fmt::print("{}", unified_diff(before.value_or(""), *after, file));
    const auto servers = server_names(before.value_or(""), client.format);
    if (!servers.empty())
        fmt::print("{}'s servers ({}) then come through meith: import them first (meith import "
                   "--client {}) if meith does not run them yet.\n",
                   client.display, fmt::format("{}", fmt::join(servers, ", ")), client.name);
    if (opts.dry_run) return exit_ok;
    if (!change_approved(opts.yes, fmt::format("Rewrite {}?", display_path(file)))) return exit_ok;
    // The backup first: an interrupted connect leaves the old file and its copy.
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (before) write_bytes(dir / "original", *before);
    nlohmann::json record{
        {"file", file.string()}, {"existed", before.has_value()}, {"connected", *after}};
    write_bytes(file, *after);
    write_bytes(dir / "record.json", record.dump(2) + "\n");
    fmt::print("{} now runs its MCP servers through `meith mcp` ({}). Undo: meith connect {} "
               "--undo\n",
               client.display, display_path(file), client.name);
    return exit_ok;
}

int run_clients(const options& opts) {
    std::vector<std::vector<std::string>> rows{{"CLIENT", "CONFIG", "SERVERS", "CONNECTED"}};
    nlohmann::ordered_json out = nlohmann::ordered_json::array();
    for (const auto& c : known_clients()) {
        const fs::path file = client_user_file(c);
        const auto text = read_whole_file(file);
        const auto names = text ? server_names(*text, c.format) : std::vector<std::string>{};
        const bool connected =
            fs::exists(state_dir(c) / "record.json") || (text && is_connected(*text, c.format));
        const std::string found = text ? display_path(file) : "-";
        rows.push_back({std::string(c.name), found, text ? std::to_string(names.size()) : "-",
                        connected ? "yes" : "no"});
        out.push_back({{"client", c.name},
                       {"file", file.string()},
                       {"exists", text.has_value()},
                       {"servers", names},
                       {"connected", connected}});
    }
    if (opts.json) {
        fmt::print("{}\n", out.dump(2));
        return exit_ok;
    }
    print_table(rows);
    return exit_ok;
}

} // namespace meith::cli
