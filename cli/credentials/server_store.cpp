#include "cli/credentials/server_store.hpp"

#include "cli/changes.hpp"
#include "cli/discovery.hpp"
#include "cli/process.hpp"
#include "config/import.hpp"

#include <cstdlib>
#include <fstream>

#include <fmt/core.h>
#include <nlohmann/json.hpp>
#include <sys/wait.h>

namespace meith::cli::credentials {

namespace fs = std::filesystem;

fs::path target_config(const options& opts) {
    const auto where = locate_daemon(opts.socket, opts.home);
    if (where.config) return *where.config;
    return where.home / "meithd.toml";
}

fs::path package_dir(const std::string& name) {
    fs::path base;
    if (const char* v = std::getenv("XDG_DATA_HOME"); v && *v == '/') {
        base = v;
    } else {
        const char* h = std::getenv("HOME");
        base = fs::path(h && *h ? h : "/") / ".local" / "share";
    }
    return base / "meith" / "servers" / name;
}

std::optional<package_info> npm_view(const std::string& spec, std::string& why) {
    if (!in_path("npm")) {
        why = "npm is not installed (Debian: apt install npm)";
        return std::nullopt;
    }
    std::string err;
    const std::string out = capture_stdout(
        {"npm", "view", "--json", "--prefer-offline", spec, "name", "version", "bin"}, err);
    auto j = nlohmann::json::parse(out, nullptr, false);
    if (j.is_array() && !j.empty()) j = j.back(); // a range: the newest version matching
    if (!err.empty() || !j.is_object() || !j.contains("version")) {
        why = fmt::format("npm knows no package {}{}", spec, err.empty() ? "" : ": " + err);
        return std::nullopt;
    }
    package_info info;
    info.version = j["version"].get<std::string>();
    const std::string name = j.value("name", config::import::package_name(spec));
    const auto& bin = j.contains("bin") ? j["bin"] : nlohmann::json();
    if (bin.is_string()) {
        info.bin = bin.get<std::string>();
    } else if (bin.is_object() && !bin.empty()) {
        // The bin named after the package (its last part), else the only one, else the first.
        const std::string last = name.substr(name.rfind('/') + 1);
        info.bin = bin.contains(last) ? bin[last].get<std::string>()
                                      : bin.begin().value().get<std::string>();
    } else {
        why = fmt::format("{} has no program to run (no \"bin\" in its package.json)", spec);
        return std::nullopt;
    }
    return info;
}

pid_t start_install(const std::string& package, const fs::path& dir) {
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (!fs::exists(dir / "package.json"))
        std::ofstream(dir / "package.json") << "{\"private\":true}\n";
    return start_program({"npm", "install", "--prefix", dir.string(), "--save-exact",
                          "--ignore-scripts", "--no-audit", "--no-fund", "--prefer-offline",
                          "--loglevel=error", package},
                         output::to_stderr);
}

bool install_succeeded(pid_t pid) {
    int status = 0;
    return pid > 0 && ::waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
           WEXITSTATUS(status) == 0;
}

} // namespace meith::cli::credentials
