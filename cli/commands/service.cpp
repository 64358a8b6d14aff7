// `meith service install|uninstall|status`: meithd as a user service without root
// (docs/protocol.md §12) — systemd user units on Linux, a launchd agent on macOS. `--dry-run`
// prints the files it would write and the commands it would run, and changes nothing.
#include "cli/autostart.hpp"
#include "cli/commands.hpp"
#include "cli/discovery.hpp"
#include "cli/errors.hpp"
#include "cli/process.hpp"
#include "cli/service_files.hpp"

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>
#include <unistd.h>
#include <vector>

#include <fmt/core.h>

namespace meith::cli {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view launchd_label = "dev.meith.meithd";

struct file_to_write {
    fs::path path;
    std::string text;
};

/// What one subcommand does, planned first so --dry-run can print it instead.
struct plan {
    std::vector<file_to_write> writes;
    std::vector<fs::path> removals;
    std::vector<std::vector<std::string>> commands;
    /// Commands whose failure is expected (disabling what may not be enabled).
    std::vector<std::vector<std::string>> best_effort;
};

fs::path env_path(const char* name) {
    const char* v = std::getenv(name);
    return v && *v ? fs::path(v) : fs::path();
}

fs::path user_home_dir() {
    fs::path h = env_path("HOME");
    if (h.empty()) throw cli_error(exit_error, "HOME is not set");
    return h;
}

bool use_launchd(const options& opts) {
    if (opts.manager) return *opts.manager == "launchd";
#if defined(__APPLE__)
    return true;
#else
    return false;
#endif
}

/// `~/.config/systemd/user` (XDG_CONFIG_HOME respected): where user units live.
fs::path systemd_unit_dir() {
    fs::path config = env_path("XDG_CONFIG_HOME");
    if (config.empty()) config = user_home_dir() / ".config";
    return config / "systemd" / "user";
}

fs::path launchd_plist_path() {
    return user_home_dir() / "Library" / "LaunchAgents" / (std::string(launchd_label) + ".plist");
}

/// The meithd the service runs: next to this meith, else from PATH. Absolute, or an error.
fs::path service_meithd() {
    fs::path p = sibling_meithd();
    if (!p.is_absolute())
        throw cli_error(exit_error,
                        "cannot find meithd next to meith or in PATH; install it first");
    return p;
}

/// --home for the service when this command names a home that is not the default.
std::optional<fs::path> service_home(const options& opts) {
    if (opts.home) return fs::absolute(*opts.home);
    if (fs::path h = env_path("MEITH_HOME"); !h.empty()) return fs::absolute(h);
    return std::nullopt;
}

/// A systemd command-line word (systemd.syntax(7)): quoted when it has spaces or quotes.
std::string unit_word(const std::string& s) {
    if (s.find_first_of(" \t\"'\\%$") == std::string::npos) return s;
    std::string out = "\"";
    for (char c : s) {
        if (c == '"' || c == '\\') out += '\\';
        if (c == '%') out += '%'; // %% is a literal %
        if (c == '$') out += '$'; // $$ is a literal $
        out += c;
    }
    return out + "\"";
}

std::string replace_all(std::string text, std::string_view from, std::string_view to) {
    for (std::size_t at = text.find(from); at != std::string::npos;
         at = text.find(from, at + to.size()))
        text.replace(at, from.size(), to);
    return text;
}

std::string written_by() {
    return fmt::format("# Written by `meith service install` (meith {}); `meith service "
                       "uninstall` removes it.\n",
                       MEITH_VERSION);
}

std::string systemd_service_text(const options& opts) {
    std::string exec = "ExecStart=" + unit_word(service_meithd().string());
    if (auto home = service_home(opts)) exec += " --home " + unit_word(home->string());
    return written_by() + replace_all(std::string(service_files::systemd_service),
                                      "ExecStart=/usr/bin/meithd", exec);
}

/// `text` with & < > escaped, for a plist <string>.
std::string xml_text(const std::string& text) {
    std::string out;
    for (char c : text) {
        if (c == '&')
            out += "&amp;";
        else if (c == '<')
            out += "&lt;";
        else if (c == '>')
            out += "&gt;";
        else
            out += c;
    }
    return out;
}

std::string launchd_plist_text(const options& opts) {
    const std::string home = xml_text(user_home_dir().string());
    std::string text = replace_all(std::string(service_files::launchd_plist),
                                   "<string>__HOME__/.local/bin/meithd</string>",
                                   "<string>" + xml_text(service_meithd().string()) + "</string>");
    if (auto h = service_home(opts))
        text = replace_all(text, "    <!-- options such as the config file go here",
                           "    <string>--home</string>\n    <string>" + xml_text(h->string()) +
                               "</string>\n    <!-- options such as the config file go here");
    return replace_all(text, "__HOME__", home);
}

std::string launchd_domain() {
    return fmt::format("gui/{}", ::getuid());
}

std::string quoted(const std::vector<std::string>& argv) {
    std::string out;
    for (const auto& a : argv) {
        if (!out.empty()) out += ' ';
        out += a.find_first_of(" \t'\"") == std::string::npos ? a : "'" + a + "'";
    }
    return out;
}

/// Prints (--dry-run) or carries out `p`; a failing command ends it with cli_error.
int carry_out(const plan& p, const options& opts, std::string_view what) {
    if (opts.dry_run) {
        fmt::print("# meith service {} --dry-run: nothing is changed\n", what);
        for (const auto& w : p.writes)
            fmt::print("write {} (mode 0644):\n{}{}", w.path.string(), w.text,
                       w.text.ends_with('\n') ? "" : "\n");
        for (const auto& r : p.removals)
            fmt::print("remove {}\n", r.string());
        for (const auto& c : p.best_effort)
            fmt::print("run: {}   (failure ignored)\n", quoted(c));
        for (const auto& c : p.commands)
            fmt::print("run: {}\n", quoted(c));
        return exit_ok;
    }
    for (const auto& c : p.best_effort)
        run_program(c, output::discard);
    for (const auto& w : p.writes) {
        std::error_code ec;
        fs::create_directories(w.path.parent_path(), ec);
        const fs::path tmp = fs::path(w.path).concat(".tmp");
        {
            std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
            out << w.text;
            if (!out.flush())
                throw cli_error(exit_error, fmt::format("cannot write {}", w.path.string()));
        }
        fs::permissions(tmp, fs::perms(0644), ec);
        fs::rename(tmp, w.path, ec);
        if (ec)
            throw cli_error(exit_error,
                            fmt::format("cannot write {}: {}", w.path.string(), ec.message()));
        fmt::print("wrote {}\n", display_path(w.path));
    }
    for (const auto& r : p.removals) {
        std::error_code ec;
        if (fs::remove(r, ec)) fmt::print("removed {}\n", display_path(r));
    }
    for (const auto& c : p.commands) {
        const int status = run_program(c);
        if (status != 0)
            throw cli_error(exit_error,
                            fmt::format("`{}` failed (exit {}){}", quoted(c), status,
                                        c[0] == "systemctl"
                                            ? "; is a user manager running? (systemctl --user "
                                              "needs a login session; see --dry-run)"
                                            : ""));
    }
    return exit_ok;
}

} // namespace

/// Whether a systemd user manager answers (`systemctl --user show-environment`, bounded to
/// 5 s); why not when it does not (the first line of systemctl's error).
std::optional<std::string> no_user_manager() {
    if (!in_path("systemctl")) return "systemctl is not installed";
    const auto r =
        run_program_capturing({"systemctl", "--user", "show-environment"},
                              std::chrono::steady_clock::now() + std::chrono::seconds(5));
    if (r.status == 0) return std::nullopt;
    std::string why = r.err.substr(0, r.err.find('\n'));
    if (why.empty()) why = fmt::format("systemctl --user exited with status {}", r.status);
    return why;
}

int run_service_install(const options& opts) {
    plan p;
    if (use_launchd(opts)) {
        if (opts.socket_activated)
            throw usage_error("--socket-activated is for systemd; the launchd agent starts at "
                              "login (RunAtLoad) and binds its own socket");
        const fs::path plist = launchd_plist_path();
        p.writes.push_back({plist, launchd_plist_text(opts)});
        std::error_code ec;
        if (!opts.dry_run) fs::create_directories(user_home_dir() / "Library" / "Logs", ec);
        // Re-installing replaces a loaded agent.
        p.best_effort.push_back(
            {"launchctl", "bootout", launchd_domain() + "/" + std::string(launchd_label)});
        p.commands.push_back({"launchctl", "bootstrap", launchd_domain(), plist.string()});
        return carry_out(p, opts, "install");
    }
    // Checked before anything is written: without a user manager the unit would never run.
    if (const auto why = no_user_manager()) {
        const std::string advice = fmt::format(
            "no systemd user manager answers here ({}).\nYou do not need the service: any meith "
            "command starts meithd when none runs (auto-start), and it keeps running. To have "
            "it start at login, run `meith service install` in a login session that has a user "
            "manager (`loginctl enable-linger $USER` keeps one running).",
            *why);
        if (!opts.dry_run) throw cli_error(exit_error, advice + "\nNothing was written.");
        fmt::print("# note: {}\n", advice.substr(0, advice.find('\n')));
    }
    const fs::path dir = systemd_unit_dir();
    p.writes.push_back({dir / "meithd.service", systemd_service_text(opts)});
    if (opts.socket_activated) {
        // Another home's daemon listens in its home, never on the default home's socket
        // (docs/configuration.md [socket]): the socket unit listens where meith looks.
        std::string socket_unit(service_files::systemd_socket);
        if (auto home = service_home(opts); home && !is_default_home(*home))
            socket_unit =
                replace_all(socket_unit, "ListenStream=%t/meith/meithd.sock",
                            "ListenStream=" + unit_word((*home / "meithd.sock").string()));
        p.writes.push_back({dir / "meithd.socket", written_by() + socket_unit});
    } else {
        // Installing without --socket-activated after with: the socket unit goes.
        std::error_code ec;
        if (fs::exists(dir / "meithd.socket", ec)) {
            p.best_effort.push_back({"systemctl", "--user", "disable", "--now", "meithd.socket"});
            p.removals.push_back(dir / "meithd.socket");
        }
    }
    p.commands.push_back({"systemctl", "--user", "daemon-reload"});
    p.commands.push_back({"systemctl", "--user", "enable", "--now",
                          opts.socket_activated ? "meithd.socket" : "meithd.service"});
    const int status = carry_out(p, opts, "install");
    if (!opts.dry_run)
        fmt::print("{}; `meith status` connects to it, `journalctl --user -u meithd` shows its "
                   "log\n",
                   opts.socket_activated
                       ? "meithd.socket is listening: meithd starts on the first connection"
                       : "meithd.service is running and starts at login");
    return status;
}

int run_service_uninstall(const options& opts) {
    if (opts.socket_activated)
        throw usage_error("'service uninstall' does not take --socket-activated");
    plan p;
    if (use_launchd(opts)) {
        p.best_effort.push_back(
            {"launchctl", "bootout", launchd_domain() + "/" + std::string(launchd_label)});
        p.removals.push_back(launchd_plist_path());
        return carry_out(p, opts, "uninstall");
    }
    const fs::path dir = systemd_unit_dir();
    p.best_effort.push_back(
        {"systemctl", "--user", "disable", "--now", "meithd.socket", "meithd.service"});
    p.removals.push_back(dir / "meithd.socket");
    p.removals.push_back(dir / "meithd.service");
    p.commands.push_back({"systemctl", "--user", "daemon-reload"});
    return carry_out(p, opts, "uninstall");
}

int run_service_status(const options& opts) {
    if (opts.socket_activated)
        throw usage_error("'service status' does not take --socket-activated");
    std::error_code ec;
    std::vector<std::string> manager_cmd;
    if (use_launchd(opts)) {
        const fs::path plist = launchd_plist_path();
        fmt::print("manager:  launchd (agent {} in {})\n", launchd_label, launchd_domain());
        fmt::print("plist:    {} {}\n", display_path(plist),
                   fs::exists(plist, ec) ? "(installed)" : "(not installed)");
        manager_cmd = {"launchctl", "print", launchd_domain() + "/" + std::string(launchd_label)};
    } else {
        const fs::path dir = systemd_unit_dir();
        fmt::print("manager:  systemd (user units in {})\n", display_path(dir));
        for (const char* unit : {"meithd.service", "meithd.socket"})
            fmt::print("{:<9} {}\n", std::string(unit).substr(7) + ":",
                       fs::exists(dir / unit, ec) ? display_path(dir / unit) + " (installed)"
                                                  : std::string("not installed"));
        manager_cmd = {"systemctl", "--user",        "--no-pager",
                       "status",    "meithd.socket", "meithd.service"};
    }
    // Whether a daemon answers, without starting one.
    options probe = opts;
    probe.no_autostart = true;
    try {
        daemon_connection c = connect_daemon(probe);
        fmt::print("daemon:   answering on {}{}\n", c.where.socket.string(),
                   c.where.pid ? fmt::format(" (pid {})", *c.where.pid) : "");
    } catch (const std::exception&) {
        fmt::print("daemon:   not answering\n");
    }
    if (opts.dry_run) {
        fmt::print("run: {}\n", quoted(manager_cmd));
        return exit_ok;
    }
    if (in_path(manager_cmd[0])) {
        std::fflush(stdout);
        run_program(manager_cmd); // its own exit status says "inactive"; not ours to fail on
    }
    return exit_ok;
}

} // namespace meith::cli
