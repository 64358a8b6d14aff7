// `meith sources update NAME`: moves a source `meith import` pinned to the newest version of its
// npm package (docs/bring-your-servers.md "Updating"). Shows the version change and the diff of
// meithd.toml, installs the new version into the source's folder of the server store (npm, a
// lock file, no install scripts) on "y" or --yes, and rewrites the entry. What the new version's
// tools say is checked by meithd when it lists them after `meith reload`: a tool whose
// definition changed is quarantined until a person accepts the diff (docs/protocol.md §22).
#include "cli/credentials/credentials.hpp"
#include "cli/credentials/server_store.hpp"

#include "cli/changes.hpp"
#include "cli/discovery.hpp"
#include "cli/errors.hpp"
#include "config/import.hpp"
#include "config/paths.hpp"
#include "config/private_file.hpp"

#include <regex>

#include <fmt/core.h>

namespace meith::cli::credentials {

namespace fs = std::filesystem;
namespace im = config::import;

namespace {

/// What `meith import` wrote above a pinned entry:
/// "# Pinned: PACKAGE@VERSION from npm, installed in DIR (was: …)."
struct pin {
    std::string package, version;
    fs::path dir; ///< where it is installed, as the line says (the command runs from there)
};

std::optional<pin> pin_of(const std::string& entry) {
    static const std::regex line(
        R"(# Pinned: (@?[^@\s]+)@(\S+) from npm, installed in (.+?) \(was: )");
    std::smatch m;
    if (!std::regex_search(entry, m, line)) return std::nullopt;
    return pin{m[1].str(), m[2].str(), config::expand_tilde(fs::path(m[3].str()))};
}

/// `text` with every `from` replaced by `to`.
std::string replaced_all(std::string text, const std::string& from, const std::string& to) {
    for (auto at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
        text.replace(at, from.size(), to);
    return text;
}

} // namespace

int update_source(const options& opts) {
    const std::string& name = opts.words.at(2);
    const fs::path target = target_config(opts);
    const std::string before = read_whole_file(target).value_or("");
    const auto entry = im::source_entry_text(before, name);
    if (!entry)
        throw cli_error(exit_error, fmt::format("{} has no source named '{}' (meith sources "
                                                "lists them)",
                                                display_path(target), name));
    const auto current = pin_of(*entry);
    if (!current)
        throw cli_error(exit_error,
                        fmt::format("'{}' was not pinned by `meith import` (its entry has no "
                                    "\"# Pinned:\" line): change its command by hand, or import "
                                    "its client's config again",
                                    name));
    std::string why;
    const auto now = npm_view(current->package + "@" + current->version, why);
    const auto newest = npm_view(current->package + "@latest", why);
    if (!now || !newest)
        throw cli_error(exit_error, "cannot ask npm about " + current->package + ": " + why);
    if (newest->version == current->version) {
        fmt::print("{}: {} is at its newest version, {}: nothing to change\n", name,
                   current->package, current->version);
        return exit_ok;
    }
    // The pin's version, and the program's path when the new version moved its bin.
    const std::string old_spec = current->package + "@" + current->version;
    const std::string new_spec = current->package + "@" + newest->version;
    std::string updated = replaced_all(*entry, "Pinned: " + old_spec, "Pinned: " + new_spec);
    const std::string module_dir = "node_modules/" + current->package + "/";
    if (now->bin != newest->bin)
        updated = replaced_all(updated, module_dir + fs::path(now->bin).lexically_normal().string(),
                               module_dir + fs::path(newest->bin).lexically_normal().string());
    bool was_there = false;
    const std::string after = im::with_source_entry(before, name, updated, was_there);

    fmt::print("{}: {} {} -> {} (npm)\n", name, current->package, current->version,
               newest->version);
    fmt::print("{}", unified_diff(before, after, target));
    if (opts.dry_run) return exit_ok;
    if (!change_approved(opts.yes, fmt::format("Install {} and write this to {}?", new_spec,
                                               display_path(target))))
        return exit_ok;
    // Installed beside the live folder and swapped in just before the config is written: a
    // running server that restarts meanwhile finds the version its entry names.
    const fs::path dir = current->dir;
    const fs::path staged = dir.string() + ".new";
    const fs::path old = dir.string() + ".old";
    std::error_code ec;
    fs::remove_all(staged, ec);
    if (!install_succeeded(start_install(new_spec, staged))) {
        fs::remove_all(staged, ec);
        throw cli_error(exit_error,
                        fmt::format("npm could not install {} (its messages are above); {} and "
                                    "{} were not changed",
                                    new_spec, display_path(dir), display_path(target)));
    }
    fs::remove_all(old, ec);
    fs::rename(dir, old, ec);
    if (!ec) fs::rename(staged, dir, ec);
    if (ec || !config::write_private_file(target, after)) {
        // Put the old version back: the entry still names it.
        std::error_code undo;
        fs::remove_all(dir, undo);
        fs::rename(old, dir, undo);
        throw cli_error(exit_error,
                        fmt::format("cannot switch {} to {}{}; nothing was changed",
                                    display_path(dir), new_spec, ec ? ": " + ec.message() : ""));
    }
    fs::remove_all(old, ec);
    fmt::print("{} written: {} runs {}. `meith reload` starts it; a tool whose definition changed "
               "is held until you accept it (`meith tools` marks it quarantined, `meith tools "
               "accept TOOL` shows the change).\n",
               display_path(target), name, new_spec);
    return exit_ok;
}

} // namespace meith::cli::credentials
