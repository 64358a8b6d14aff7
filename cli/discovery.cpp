#include "cli/discovery.hpp"

#include "cli/errors.hpp"

#include <cstdlib>
#include <fstream>
#include <sstream>

#include <fmt/core.h>
#include <nlohmann/json.hpp>
#include <pwd.h>
#include <unistd.h>

namespace meith::cli {

namespace {

std::optional<std::string> env(const char* name) {
    const char* v = std::getenv(name);
    if (v == nullptr || *v == '\0') return std::nullopt;
    return std::string(v);
}

std::filesystem::path user_home() {
    if (auto h = env("HOME")) return *h;
    if (const passwd* pw = ::getpwuid(::getuid()); pw != nullptr && pw->pw_dir != nullptr) {
        return pw->pw_dir;
    }
    throw cli_error(exit_error, "cannot find the home folder: HOME is not set");
}

struct instance_record {
    std::optional<std::filesystem::path> socket;
    std::optional<long> pid;
    std::optional<std::filesystem::path> audit;
    std::optional<std::string> log;
    std::optional<std::filesystem::path> config;
};

/// Reads config.json; a missing file is an empty record, an unreadable one an error message.
instance_record read_instance(const std::filesystem::path& file, std::string* error) {
    instance_record rec;
    std::ifstream in(file, std::ios::binary);
    if (!in) return rec;
    std::stringstream text;
    text << in.rdbuf();
    nlohmann::json j = nlohmann::json::parse(text.str(), nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
        if (error != nullptr) *error = j.is_discarded() ? "is not valid JSON" : "is not an object";
        return rec;
    }
    if (auto it = j.find("socketPath"); it != j.end() && it->is_string()) {
        std::filesystem::path p = it->get<std::string>();
        if (!p.empty()) rec.socket = p.is_absolute() ? p : file.parent_path() / p;
    }
    if (auto it = j.find("auditPath"); it != j.end() && it->is_string()) {
        std::filesystem::path p = it->get<std::string>();
        if (!p.empty()) rec.audit = p.is_absolute() ? p : file.parent_path() / p;
    }
    if (auto it = j.find("pid"); it != j.end() && it->is_number_integer()) {
        rec.pid = it->get<long>();
    }
    if (auto it = j.find("log"); it != j.end() && it->is_string()) rec.log = it->get<std::string>();
    if (auto it = j.find("configPath"); it != j.end() && it->is_string())
        rec.config = it->get<std::string>();
    return rec;
}

} // namespace

bool is_default_home(const std::filesystem::path& home) {
    std::error_code ec;
    const auto canon = [&](const std::filesystem::path& p) {
        auto c = std::filesystem::weakly_canonical(std::filesystem::absolute(p, ec), ec);
        if (ec) c = p.lexically_normal();
        return c.has_filename() ? c : c.parent_path(); // "/h/.meith/" is "/h/.meith"
    };
    return canon(home) == canon(user_home() / ".meith");
}

std::filesystem::path resolve_home(const std::optional<std::filesystem::path>& home_flag) {
    if (home_flag && !home_flag->empty()) return *home_flag;
    if (auto h = env("MEITH_HOME")) return *h;
    return user_home() / ".meith";
}

std::string log_hint(const daemon_location& where) {
    if (!where.log || *where.log == "stderr") return "meithd's standard error";
    if (*where.log == "journal") return "journalctl --user -u meithd";
    return display_path(*where.log);
}

std::string display_path(const std::filesystem::path& path) {
    const std::string s = path.string();
    const char* h = std::getenv("HOME");
    if (h == nullptr || *h == '\0') return s;
    std::string home = h;
    while (home.size() > 1 && home.back() == '/')
        home.pop_back();
    if (s.size() > home.size() && s.compare(0, home.size(), home) == 0 && s[home.size()] == '/') {
        return "~" + s.substr(home.size());
    }
    return s;
}

daemon_location locate_daemon(const std::optional<std::filesystem::path>& socket_flag,
                              const std::optional<std::filesystem::path>& home_flag) {
    daemon_location loc;
    loc.home = resolve_home(home_flag);
    const std::filesystem::path record_file = loc.home / "config.json";
    std::string error;
    instance_record rec = read_instance(record_file, &error);

    if (socket_flag && !socket_flag->empty()) {
        loc.socket = *socket_flag;
        // The pid only means something if the record describes the socket we were pointed at.
        if (rec.socket && rec.socket->lexically_normal() == loc.socket.lexically_normal()) {
            loc.pid = rec.pid;
            loc.log = rec.log;
        }
        return loc;
    }
    if (!error.empty()) {
        throw cli_error(exit_error,
                        fmt::format("cannot read socketPath: {} {}; pass --socket PATH or "
                                    "restart meithd",
                                    display_path(record_file), error));
    }
    if (!rec.socket) {
        // No record yet: a socket-activated daemon writes it only once systemd started it on a
        // first connection. Try where a daemon listens by default (config/paths.hpp's rule,
        // without a config): for the default home $XDG_RUNTIME_DIR/meith/meithd.sock, for
        // another home (--home, MEITH_HOME) or without XDG_RUNTIME_DIR HOME/meithd.sock — so
        // that `meith --home NEW` never reaches the default home's daemon.
        auto runtime = env("XDG_RUNTIME_DIR");
        loc.socket =
            runtime && std::filesystem::path(*runtime).is_absolute() && is_default_home(loc.home)
                ? std::filesystem::path(*runtime) / "meith" / "meithd.sock"
                : loc.home / "meithd.sock";
        return loc;
    }
    loc.socket = *rec.socket;
    loc.pid = rec.pid;
    loc.log = rec.log;
    loc.config = rec.config;
    loc.from_record = true;
    return loc;
}

std::filesystem::path locate_audit_log(const std::optional<std::filesystem::path>& file_flag,
                                       const std::optional<std::filesystem::path>& home_flag) {
    if (file_flag && !file_flag->empty()) return *file_flag;
    const std::filesystem::path home = resolve_home(home_flag);
    const std::filesystem::path record_file = home / "config.json";
    std::string error;
    const instance_record rec = read_instance(record_file, &error);
    if (!error.empty()) {
        fmt::print(stderr, "meith: ignoring {}: {}\n", display_path(record_file), error);
    }
    return rec.audit ? *rec.audit : home / "audit.jsonl";
}

} // namespace meith::cli
