// server_store: meith's store of the npm packages `meith import` pins
// ($XDG_DATA_HOME/meith/servers/NAME, docs/bring-your-servers.md) and the meithd.toml it
// changes; shared by `meith import` and `meith sources update`.
#pragma once

#include "cli/options.hpp"

#include <filesystem>
#include <optional>
#include <string>
#include <sys/types.h>

namespace meith::cli::credentials {

/// The meithd.toml `meith import` and `meith sources update` change: the running daemon's
/// (config.json's configPath), else HOME/meithd.toml.
std::filesystem::path target_config(const options& opts);

/// Where the package of source `name` is installed: $XDG_DATA_HOME/meith/servers/NAME, else
/// ~/.local/share/meith/servers/NAME.
std::filesystem::path package_dir(const std::string& name);

/// What npm says of `spec` ("@scope/name@1.2.3", "name@latest"): a version and the bin to run,
/// relative to the package's folder. From npm's cache when it can (--prefer-offline).
struct package_info {
    std::string version;
    std::string bin;
};
/// nullopt, with `why` in words, when npm is missing, knows no such package, or the package
/// has no program to run.
std::optional<package_info> npm_view(const std::string& spec, std::string& why);

/// Starts `npm install` of `package` ("NAME@VERSION") into `dir`: exact version, a lock file
/// with integrity hashes, no install scripts (a server's postinstall runs nothing on this
/// machine). Its pid; npm's messages go to stderr.
pid_t start_install(const std::string& package, const std::filesystem::path& dir);

/// Waits for the install `pid`: true when npm exited 0.
bool install_succeeded(pid_t pid);

} // namespace meith::cli::credentials
