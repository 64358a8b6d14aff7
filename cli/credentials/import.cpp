// `meith import PATH | --client NAME`: the MCP servers another client runs, brought under meith
// (docs/bring-your-servers.md). Runs in meith-credentials: the credentials it finds go to the
// secret store (cli/credentials/secret.cpp), never to meithd.toml.
//
// For each entry: a source named after the server, its tools prefixed with that name (so two
// servers' tools never clash: Claude Code does the same, `mcp__NAME__TOOL`), its credentials
// replaced by `${secret:SOURCE.KEY}`, a state folder as its cwd (not meithd's home), and an
// `npx -y PACKAGE` launch pinned: the package installed once into meith's server store with npm
// (a lock file, integrity hashes, no install scripts) and run with node directly. The change is
// shown as a diff of meithd.toml and applied on "y" at a terminal, or with --yes.
#include "cli/credentials/credentials.hpp"
#include "cli/credentials/server_store.hpp"

#include "cli/changes.hpp"
#include "cli/clients.hpp"
#include "cli/discovery.hpp"
#include "cli/errors.hpp"
#include "cli/process.hpp"
#include "config/import.hpp"
#include "config/paths.hpp"
#include "config/private_file.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <fmt/core.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>
#include <sys/wait.h>
#include <unistd.h>

namespace meith::cli::credentials {

namespace fs = std::filesystem;
namespace im = config::import;

namespace {

/// One imported entry: its plan, the secrets it needs kept, the package it pins.
struct planned {
    im::source_plan plan;
    std::vector<std::pair<std::string, std::string>> secrets; ///< name, value
    std::optional<std::string> package;                       ///< "PKG@VERSION" to install
    fs::path package_dir;                                     ///< where it is installed
    std::string problem; ///< why the entry was not turned into a source
};

std::string secret_ref(const std::string& name) {
    return "${secret:" + name + "}";
}

planned plan_entry(const im::server_entry& e, const std::string& origin) {
    planned out;
    auto& p = out.plan;
    p.name = im::source_name(e.name);
    p.prefix = p.name + "_";
    p.off_reason = e.off_reason;
    p.comments.push_back(
        fmt::format("Imported by `meith import` from {} (\"{}\").", display_path(origin), e.name));
    const auto keep = [&](const std::string& key, const std::string& value) {
        const std::string name = (p.name + "." + key).substr(0, 64); // secrets::valid_name
        out.secrets.emplace_back(name, value);
        return secret_ref(name);
    };
    if (!e.url.empty()) {
        p.url = e.url;
        if (p.url.starts_with("http://")) {
            // Plain http only to a server of this machine or its network (docs/configuration.md
            // "Remote MCP servers"); meith sends no token over it elsewhere.
            const std::string host = p.url.substr(7, p.url.find_first_of(":/", 7) - 7);
            if (host == "localhost" || host.starts_with("127.") || host == "[::1]" ||
                host.starts_with("10.") || host.starts_with("192.168."))
                p.allow_private_network = true;
            else if (p.off_reason.empty())
                p.off_reason = "its url is plain http:// to another machine; meith sends "
                               "tokens only over https://";
        }
        for (const auto& [k, v] : e.headers)
            p.headers[k] = im::holds_credential(k, v) ? keep(k, v) : v;
        return out;
    }
    p.command = e.command;
    for (const auto& [k, v] : e.env)
        p.env[k] = im::holds_credential(k, v) ? keep(k, v) : v;
    // A state folder of its own: not meithd's home, which the sandbox hides, nor wherever
    // meithd happened to start.
    p.cwd = e.cwd ? *e.cwd : config::source_state_dir(p.name).string();
    if (p.off_reason.empty())
        if (auto run = im::launcher_of(e.command)) {
            std::string why;
            const auto info = npm_view(run->package, why);
            if (!info) {
                out.problem = why;
                return out;
            }
            const std::string name = im::package_name(run->package);
            p.profile = im::profile_for_package(name);
            // A browser is its agent's: one per session, as each client started its own.
            p.per_session =
                std::find(p.profile.begin(), p.profile.end(), "browser") != p.profile.end();
            out.package = name + "@" + info->version;
            out.package_dir = package_dir(p.name);
            const fs::path bin = out.package_dir / "node_modules" / name / info->bin;
            p.command = {"node", bin.lexically_normal().string()};
            p.command.insert(p.command.end(), run->args.begin(), run->args.end());
            for (const auto& arg : im::browser_args_for_package(name))
                if (std::find(p.command.begin(), p.command.end(), arg) == p.command.end())
                    p.command.push_back(arg);
        }
    // A database URL with its password, a token on the command line: kept as secrets too.
    std::map<std::string, std::string> kept_arguments; // value -> its ${secret:...}
    for (std::size_t i = 1; i < p.command.size(); ++i)
        if (im::argument_holds_credential(p.command[i])) {
            const std::string value = p.command[i];
            p.command[i] = keep("arg" + std::to_string(i), value);
            kept_arguments.emplace(value, p.command[i]);
        }
    if (out.package) {
        // The command as it was, with its secrets as the references that replace them: the
        // comment must not be the one place the password is left in meithd.toml.
        std::string was;
        for (const auto& word : e.command) {
            const auto kept = kept_arguments.find(word);
            was += (was.empty() ? "" : " ") + (kept == kept_arguments.end() ? word : kept->second);
        }
        p.comments.push_back(fmt::format("Pinned: {} from npm, installed in {} (was: {}).",
                                         *out.package, display_path(out.package_dir), was));
    }
    return out;
}

std::string paths_text(const std::vector<fs::path>& paths) {
    std::string out;
    for (const auto& p : paths)
        out += (out.empty() ? "" : ", ") + display_path(p);
    return out;
}

} // namespace

int import_servers(const options& opts) {
    std::vector<fs::path> files;
    if (opts.client) {
        const auto& client = client_named(*opts.client);
        for (const auto& f : client_files(client))
            if (fs::exists(f)) files.push_back(f);
        if (files.empty())
            throw cli_error(exit_error,
                            fmt::format("no config of {} found (looked at {})", client.display,
                                        paths_text(client_files(client))));
    } else if (opts.words.size() > 1) {
        files.push_back(opts.words[1]);
    } else {
        throw usage_error("name a config file (meith import .mcp.json) or a client "
                          "(meith import --client claude-code)");
    }

    const fs::path target = target_config(opts);
    const std::string before = read_whole_file(target).value_or("");
    std::string after = before;
    std::vector<planned> plans;
    std::set<std::string> names;
    for (const auto& file : files) {
        const auto text = read_whole_file(file);
        if (!text) throw cli_error(exit_error, fmt::format("cannot read {}", file.string()));
        std::string why;
        const bool toml = file.extension() == ".toml";
        const auto entries = im::read_client_config(*text, toml, why);
        if (entries.empty() && !why.empty())
            throw cli_error(exit_error, fmt::format("{}: {}", file.string(), why));
        for (const auto& e : entries) {
            planned p = plan_entry(e, fs::absolute(file).string());
            if (!names.insert(p.plan.name).second) continue; // one per name
            if (!p.problem.empty()) {
                fmt::print(stderr, "meith import: {} not imported: {}\n", e.name, p.problem);
                continue;
            }
            const std::string entry = im::source_toml(p.plan);
            // Imported before as it is now: nothing to change.
            if (im::source_entry_text(after, p.plan.name) == entry ||
                after.find(entry) != std::string::npos)
                continue;
            bool replaced = false;
            after = im::with_source_entry(after, p.plan.name, entry, replaced);
            plans.push_back(std::move(p));
        }
    }

    if (plans.empty()) {
        fmt::print("{} already has every server of {}: nothing to change\n", display_path(target),
                   paths_text(files));
        return exit_ok;
    }
    fmt::print("{}", unified_diff(before, after, target));
    std::size_t kept = 0;
    for (const auto& p : plans)
        kept += p.secrets.size();
    if (kept > 0)
        fmt::print("{} value{} that look{} like credentials go{} to the secret store (meith "
                   "secret list), not to {}.\n",
                   kept, kept == 1 ? "" : "s", kept == 1 ? "s" : "", kept == 1 ? "es" : "",
                   display_path(target));
    if (opts.dry_run) return exit_ok;
    if (!change_approved(opts.yes, fmt::format("Write this to {}?", display_path(target))))
        return exit_ok;

    // Secrets and packages first: the config then never names what is not there.
    const auto home = resolve_home(opts.home);
    if (auto err = config::ensure_private_dir(target.parent_path(), false))
        throw cli_error(exit_error, *err);
    // The packages install side by side (npm waits on the network more than on the CPU).
    std::vector<std::pair<pid_t, const planned*>> installs;
    for (const auto& p : plans)
        if (p.package) installs.emplace_back(start_install(*p.package, p.package_dir), &p);
    std::string failed;
    for (const auto& [pid, p] : installs) {
        if (!install_succeeded(pid))
            failed += fmt::format("\n  {} into {}", *p->package, display_path(p->package_dir));
    }
    if (!failed.empty())
        throw cli_error(exit_error, "npm could not install" + failed +
                                        "\n(its messages are above); nothing was changed");
    for (const auto& p : plans) {
        for (const auto& [name, value] : p.secrets)
            store_secret(home, name, value);
        std::error_code ec;
        if (!p.plan.cwd.empty()) fs::create_directories(p.plan.cwd, ec);
    }
    if (!config::write_private_file(target, after))
        throw cli_error(exit_error, fmt::format("cannot write {}", target.string()));
    const auto off = static_cast<std::size_t>(std::count_if(
        plans.begin(), plans.end(), [](const planned& p) { return !p.plan.off_reason.empty(); }));
    const std::size_t on = plans.size() - off;
    fmt::print("{} written: {} source{} imported{}. `meith reload` (or the next start of meithd) "
               "runs them.\n",
               display_path(target), on, on == 1 ? "" : "s",
               off == 0 ? std::string()
                        : fmt::format(", {} written switched off (see the comments)", off));
    return exit_ok;
}

} // namespace meith::cli::credentials
