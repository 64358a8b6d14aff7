#include "sandbox/confinement.hpp"
#include "platform/self.hpp"
#include "sandbox/learn.hpp"
#include "sandbox/protected_paths.hpp"

#include "audit/redactor.hpp"
#include "config/paths.hpp"
#include "config/private_file.hpp"
#include "config/profiles.hpp"
#include "protocol/json_writer.hpp"
#include "secrets/store.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <functional>
#include <map>
#include <mutex>

#include <simdjson.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <set>

namespace meith::sandbox {

namespace fs = std::filesystem;
using permissions::capability;
using permissions::capability_set;

namespace {

fs::path& home_dir() {
    static fs::path home;
    return home;
}

fs::path& socket_path() {
    static fs::path socket;
    return socket;
}

fs::path& config_file_path() {
    static fs::path config;
    return config;
}

/// A folder of ours, 0700, not a symlink: made when missing, checked either way.
bool private_dir(const fs::path& dir) {
    ::mkdir(dir.c_str(), 0700);
    struct stat st {};
    return ::lstat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == ::geteuid() &&
           (st.st_mode & 077) == 0;
}

/// Where the tools' temporary folders live: $XDG_RUNTIME_DIR/mt (a tmpfs the user owns) when
/// it is set and ours, else /tmp/mt-<uid>; then one folder per home (8 hex digits of a hash of
/// its path), so two daemons never share one. Never in meithd's home: a tool that fills its
/// folder must not fill the disk the audit trail is written to. Short on purpose: a Unix
/// socket's path is at most 107 bytes (unix(7) sun_path), and programs put theirs in TMPDIR
/// (Chromium's SingletonSocket). Empty when none can be made.
fs::path tools_tmp_base() {
    fs::path base;
    const char* xdg = std::getenv("XDG_RUNTIME_DIR");
    struct stat st {};
    if (xdg != nullptr && fs::path(xdg).is_absolute() && ::stat(xdg, &st) == 0 &&
        S_ISDIR(st.st_mode) && st.st_uid == ::geteuid() && (st.st_mode & 077) == 0)
        base = fs::path(xdg) / "mt";
    else
        base = fs::temp_directory_path() / ("mt-" + std::to_string(::geteuid()));
    char id[9];
    std::snprintf(id, sizeof id, "%08x",
                  static_cast<unsigned>(std::hash<std::string>{}(home_dir().string())));
    for (const fs::path& dir : {base, base / id})
        if (!private_dir(dir)) return {};
    return base / id;
}

/// The child's temporary folder: <tools_tmp_base>/<id>, 0700, ours (not a symlink). The id is
/// the name itself when it is a short plain name (a source's: 1-16 of [a-z0-9_-]), else 16 hex
/// digits of a hash of it (a hook's free-text name, a long one); a `.name` file inside says
/// whose it is, and a folder that says another name is never shared (the start goes on without
/// a temporary folder, warned). Short whatever the name: at most 47 bytes to tmp/.
std::optional<fs::path> private_tmp(const std::string& name) {
    if (name.empty()) return std::nullopt;
    const fs::path base = tools_tmp_base();
    if (base.empty()) return std::nullopt;
    const bool plain =
        name.size() <= 16 && name != "." && name != ".." &&
        name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_-") == std::string::npos;
    std::string id = name;
    if (!plain) {
        char hex[17];
        std::snprintf(hex, sizeof hex, "%016zx", std::hash<std::string>{}(name));
        id = hex;
    }
    const fs::path dir = base / id;
    if (!private_dir(dir)) return std::nullopt;
    if (!plain) {
        // Whose it is: a hash is not a name, and two names must never share one folder.
        const fs::path marker = dir / ".name";
        const auto r = config::read_private_file(marker);
        if (r.st == config::private_file_read::status::ok && r.text != name) {
            spdlog::warn("'{}': its temporary folder {} belongs to '{}'", name, dir.string(),
                         r.text);
            return std::nullopt;
        }
        if (r.st != config::private_file_read::status::ok) config::write_private_file(marker, name);
    }
    return dir;
}

/// An empty file of ours (0400) to bind over hidden files; empty path when none.
fs::path empty_file() {
    const fs::path base = tools_tmp_base();
    if (base.empty()) return {};
    const fs::path file = base / ".empty";
    const int fd = ::open(file.c_str(), O_RDONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0400);
    if (fd < 0) return {};
    struct stat st {};
    const bool ok =
        ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size == 0 && st.st_uid == ::geteuid();
    ::close(fd);
    return ok ? file : fs::path();
}

/// The user's credential stores and the sockets of the user's other services (a session
/// bus, an agent, a terminal multiplexer, a container engine): hidden from every confined
/// child unless its `sandbox_paths.read` names them (docs/security.md).
std::vector<fs::path> credential_stores() {
    std::vector<fs::path> out;
    const char* home = std::getenv("HOME");
    if (home != nullptr && fs::path(home).is_absolute()) {
        const fs::path h = home;
        for (const char* rel : {".ssh",
                                ".config/meith-keys", // the key of meith's own secrets store
                                ".gnupg",
                                ".aws",
                                ".azure",
                                ".config/gcloud",
                                ".kube",
                                ".docker",
                                ".netrc",
                                ".git-credentials",
                                ".config/gh",
                                ".config/hub",
                                ".npmrc",
                                ".pypirc",
                                ".cargo/credentials.toml",
                                ".password-store",
                                ".vault-token",
                                ".local/share/keyrings",
                                ".pki",
                                ".mozilla",
                                ".config/google-chrome",
                                ".config/chromium",
                                ".config/BraveSoftware",
                                ".config/op",
                                ".claude.json",
                                ".config/meith"})
            out.push_back(h / rel);
    }
    // The key of meith's secrets store, wherever MEITH_SECRETS_KEY or XDG_CONFIG_HOME put it.
    if (const fs::path keys = secrets::key_dir(); !keys.empty()) out.push_back(keys);
    if (const char* xdg = std::getenv("XDG_RUNTIME_DIR"); xdg && fs::path(xdg).is_absolute())
        for (const char* rel :
             {"bus", "systemd", "gnupg", "keyring", "gcr", "openssh_agent", "docker.sock", "podman",
              "pulse", "pipewire-0", "wayland-0", "wayland-1"})
            out.push_back(fs::path(xdg) / rel);
    if (const char* agent = std::getenv("SSH_AUTH_SOCK"); agent && fs::path(agent).is_absolute())
        out.emplace_back(agent);
    out.push_back(fs::temp_directory_path() / ("tmux-" + std::to_string(::geteuid())));
    out.emplace_back("/tmp/.X11-unix"); // typing into an X client's window is a way out too
    out.emplace_back("/tmp/.ICE-unix");
    out.emplace_back("/run/docker.sock");
    out.emplace_back("/run/dbus/system_bus_socket");
    return out;
}

std::optional<fs::path> root_of(const std::string& config_json) {
    simdjson::dom::parser parser;
    std::string_view root;
    if (parser.parse(config_json).get_object()["root"].get_string().get(root) ==
            simdjson::SUCCESS &&
        !root.empty())
        return fs::path(root);
    return std::nullopt;
}

/// True when writing under `p` would reach meithd's home.
bool holds_home(const fs::path& p) {
    if (home_dir().empty()) return false;
    std::error_code ec;
    const fs::path a = fs::weakly_canonical(p, ec);
    const fs::path h = fs::weakly_canonical(home_dir(), ec);
    const auto [mismatch, end] = std::mismatch(a.begin(), a.end(), h.begin(), h.end());
    (void)end;
    return mismatch == a.end(); // `a` is `h` or one of its ancestors
}

} // namespace

void set_confinement_config(fs::path config_file) {
    std::error_code ec;
    const fs::path canonical = fs::weakly_canonical(config_file, ec);
    config_file_path() = ec ? fs::absolute(config_file).lexically_normal() : canonical;
}

void set_confinement_home(fs::path home, fs::path socket) {
    home_dir() = fs::absolute(home).lexically_normal();
    socket_path() = socket.empty() ? socket : fs::absolute(socket).lexically_normal();
}

fs::path tools_tmp_root() {
    return tools_tmp_base();
}

const fs::path& confinement_home() {
    return home_dir();
}

void apply_env(const confinement& c, std::vector<std::string>& env,
               const std::map<std::string, std::string>& own) {
    if (c.plan && c.plan->egress_port != 0) {
        // Behind the egress proxy: its address, whatever proxy meithd's environment named.
        std::erase_if(env, [](const std::string& e) {
            std::string name = e.substr(0, e.find('='));
            for (auto& ch : name)
                ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
            return name == "HTTP_PROXY" || name == "HTTPS_PROXY" || name == "ALL_PROXY" ||
                   name == "NO_PROXY";
        });
        for (auto& e : egress::proxy_environment(c.plan->egress_port))
            env.push_back(std::move(e));
    }
    // The profile's values replace what the daemon's environment passed on, never the
    // source's own `env`.
    for (const auto& item : c.profile_env) {
        const std::string& name = item.first; // a lambda may not capture a structured binding
        if (own.contains(name)) continue;     // (clang 14, the fuzz build)
        std::erase_if(env, [&](const std::string& e) {
            return e.size() > name.size() && e[name.size()] == '=' && e.starts_with(name);
        });
        env.push_back(name + "=" + item.second);
    }
    if (c.tmpdir_env.empty()) return;
    std::erase_if(env, [](const std::string& e) { return e.rfind("TMPDIR=", 0) == 0; });
    env.push_back(c.tmpdir_env);
}

namespace {

/// True when `cwd` is below meithd's home (not the home itself).
bool cwd_inside_home(const fs::path& cwd) {
    if (home_dir().empty()) return false;
    std::error_code ec;
    const fs::path h = fs::weakly_canonical(home_dir(), ec);
    const fs::path w = fs::weakly_canonical(cwd, ec);
    return w != h && path_within(w, h);
}

/// Says once per daemon which protections this kernel gives tools, and whether
/// meith-sandbox-init is there.
void log_kernel_once(const sandbox::kernel_support& kernel) {
    static std::once_flag logged;
    std::call_once(logged, [&] {
        if (kernel.landlock_abi > 0 && kernel.seccomp && kernel.namespaces)
            spdlog::info("tool sandbox: {}", sandbox::describe(kernel));
        else
            spdlog::warn("tool sandbox: {}; sources with sandbox = \"require\" will not start",
                         sandbox::describe(kernel));
        if (sandbox::init_program().empty())
            spdlog::warn("tool sandbox: meith-sandbox-init not found beside {} (or in "
                         "../libexec/meith): tools run without a PID namespace and may run "
                         "programs through the ELF loader; reinstall meith",
                         platform::executable_path().string());
    });
}

/// What no confined child sees: meithd's home and socket always (and the socket's own folder
/// when it is meith's), and the credential stores unless `paths.read` names them.
std::vector<fs::path> hidden_paths(const config::sandbox_paths_config& paths) {
    std::vector<fs::path> hidden;
    if (!home_dir().empty()) hidden.push_back(home_dir());
    if (!socket_path().empty()) {
        // The socket's own folder when it is meith's ($XDG_RUNTIME_DIR/meith): a socket
        // hidden by a mount over the file is uncovered when meithd makes it anew.
        hidden.push_back(socket_path());
        const fs::path dir = socket_path().parent_path();
        struct stat st {};
        if (dir.filename() == "meith" && ::lstat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode) &&
            st.st_uid == ::geteuid())
            hidden.push_back(dir);
    }
    for (const auto& store : credential_stores())
        if (std::none_of(paths.read.begin(), paths.read.end(), [&](const fs::path& p) {
                return path_within(p, store) || path_within(store, p);
            }))
            hidden.push_back(store);
    return hidden;
}

/// Warns at start that writes are withheld from a folder that holds meithd's home.
void warn_withheld(const std::string& name, const std::vector<std::string>& withheld) {
    if (withheld.empty()) return;
    spdlog::warn("'{}': {} holds meithd's home, so the sandbox withholds writes there; give it a "
                 "`cwd` (or `sandbox_paths.write` folder) outside the home (docs/protocol.md §15)",
                 name, withheld.front());
}

/// The plan's members of list_sources' "sandbox" object: fs, net, exec, ns, home, and the
/// writable folders left out because they hold meithd's home (`withheld`, shown when
/// non-empty).
void append_plan_status(std::string& out, const sandbox::plan& plan,
                        const std::vector<std::string>& withheld) {
    protocol::json_members m(out);
    m.string("fs", plan.fs).string("net", plan.net).string("exec", plan.exec);
    m.string("ns", plan.ns).string("home", plan.home).string("unix", plan.unix);
    m.string("limits", plan.limits);
    if (!plan.read_only.empty())
        protocol::append_json_string_array(m.key("protected"), plan.read_only);
    if (!withheld.empty()) protocol::append_json_string_array(m.key("writeWithheld"), withheld);
}

/// Where the confined program may be: its cwd, its host's root, its temporary folder and the
/// `sandbox_paths` folders (writable, readable, executable, sockets), what stays hidden and,
/// with namespaces, what stays read-only in its writable roots. Sets `c`'s cwd and TMPDIR.
/// Returns the writable folders left out because they hold meithd's home: such a folder is
/// writable only where a mount namespace hides the home inside it (and pins the folders down
/// to it); without one, or for the home itself, the rule is left out and the status says so.
std::vector<std::string> place(request& r, confinement& c, const std::string& name,
                               const config::sandbox_paths_config& paths, const fs::path& cwd,
                               const std::string& config_json, const kernel_support& kernel) {
    std::vector<std::string> withheld;
    const fs::path home = home_dir().empty() ? fs::path() : canonical_or_normal(home_dir());
    const auto writable = [&](const fs::path& p) -> std::optional<fs::path> {
        if (!holds_home(p) || (kernel.namespaces && canonical_or_normal(p) != home)) return p;
        withheld.push_back(p.string());
        return std::nullopt;
    };
    c.cwd = cwd;
    r.start_dir = cwd;
    if (auto w = writable(cwd)) r.cwd = *w;
    r.root = root_of(config_json);
    if (r.root && r.root->is_relative())
        r.root = (cwd / *r.root).lexically_normal(); // as the host sees it
    if (r.root) r.root = writable(*r.root);
    // Its own temporary folder; without one it is still confined, only with nowhere to write.
    if (auto tmp = private_tmp(name)) {
        r.tmp_dir = *tmp;
        c.tmpdir_env = "TMPDIR=" + tmp->string();
        // With namespaces, a size-bounded tmpfs of its own at tmp/tmp is its TMPDIR.
        if (kernel.namespaces && private_dir(*tmp / "tmp")) {
            r.tmp_mount = *tmp / "tmp";
            c.tmpdir_env = "TMPDIR=" + r.tmp_mount.string();
        }
    } else {
        spdlog::warn(
            "'{}': no private temporary folder could be made; it runs confined without one", name);
        r.tmp_dir = "/nonexistent";
    }
    // The folders its profile lets it write (its state folder), made owner-only when missing:
    // a write rule on a folder that does not exist would grant nothing, and the program's
    // first mkdir under a read-only parent would fail with ENOENT.
    for (const auto& p : c.profile_write) {
        if (auto why = config::ensure_private_dir(p, false)) {
            spdlog::warn("'{}': its profile's folder cannot be made: {}", name, *why);
            continue;
        }
        if (auto w = writable(p)) r.own.push_back(*w);
    }
    r.extra.read = paths.read;
    r.hidden = hidden_paths(paths);
    r.empty_file = empty_file();
    // In a sandbox profile its `sandbox_paths.write` folders are its own, writable whatever
    // its capabilities (the profile names the process's needs; the paths add to them).
    const bool profiled = !c.profile.empty();
    const bool writes =
        profiled ||
        (r.capabilities & (bit(capability::writes_files) | bit(capability::destructive))) != 0;
    for (const auto& p : paths.write) {
        // A folder it is to write that is not there yet is made for it (owner-only): a rule on
        // a missing path grants nothing, and the program's mkdir under its read-only parent
        // would fail. A file it is to write must exist.
        std::error_code ec;
        if (writes && !fs::exists(p, ec))
            if (auto why = config::ensure_private_dir(p, false))
                spdlog::warn("'{}': its sandbox_paths.write folder cannot be made: {}", name, *why);
        if (auto w = writable(p)) (profiled ? r.own : r.extra.write).push_back(*w);
    }
    r.extra.exec = paths.exec;
    r.extra.sockets = paths.sockets;
    for (const auto& s : c.profile_sockets)
        r.extra.sockets.emplace_back(s == "{tmp}" ? (r.tmp_mount.empty() ? r.tmp_dir : r.tmp_mount)
                                                  : fs::path(s));
    // The daemon's own socket places, private like /tmp and /run (a session bus, ssh-agent or
    // tmux socket may sit there when meithd's environment names another place).
    for (const char* var : {"XDG_RUNTIME_DIR", "TMPDIR", "TMUX_TMPDIR"})
        if (const char* v = std::getenv(var); v && fs::path(v).is_absolute() &&
                                              fs::path(v).lexically_normal() != "/tmp" &&
                                              fs::path(v).lexically_normal() != "/tmp/")
            r.private_places.emplace_back(v);
    // Every source's own folder lives under one root: private, so no source reads another's
    // (a browser's cookies are there); its own is bound back.
    if (!paths.state_dir.empty()) r.private_places.push_back(paths.state_dir.parent_path());
    // With the right to open Unix sockets, /tmp is private too: the socket right is what keeps
    // a tool off the sockets there (ssh-agent's, a session bus, X11's), and it has that right.
    if (!r.extra.sockets.empty()) r.private_places.emplace_back("/tmp");
    if (kernel.namespaces) {
        std::vector<fs::path> roots;
        if (!r.cwd.empty()) roots.push_back(r.cwd);
        if (r.root) roots.push_back(*r.root);
        roots.insert(roots.end(), r.extra.write.begin(), r.extra.write.end());
        roots.insert(roots.end(), r.own.begin(), r.own.end());
        auto kept = protected_in_roots(roots, paths, home_dir(), config_file_path());
        r.read_only = std::move(kept.read_only);
        r.pinned = std::move(kept.pinned);
    }
    return withheld;
}

/// The egress proxy's rules for a source's `network` table (docs/protocol.md §19); rules
/// config refused at load do not reach here.
std::shared_ptr<egress::proxy_options> egress_options(const config::network_config& net) {
    auto opts = std::make_shared<egress::proxy_options>();
    for (const auto& text : net.allow) {
        std::string why;
        if (auto rule = egress::parse_rule(text, why)) opts->rules.allow.push_back(*rule);
    }
    for (const auto& text : net.deny) {
        std::string why;
        if (auto rule = egress::parse_rule(text, why)) opts->rules.deny.push_back(*rule);
    }
    opts->rules.allow_private = net.allow_private;
    opts->rules.ask = net.ask;
    return opts;
}

/// The port of a `network.allow` rule for 127.0.0.1:PORT; nullopt for any other rule.
std::optional<std::uint16_t> loopback_port(std::string_view rule) {
    constexpr std::string_view prefix = "127.0.0.1:";
    if (!rule.starts_with(prefix)) return std::nullopt;
    const std::string_view digits = rule.substr(prefix.size());
    if (digits.empty() || digits.size() > 5 ||
        digits.find_first_not_of("0123456789") != std::string_view::npos)
        return std::nullopt;
    const unsigned long port = std::stoul(std::string(digits));
    if (port == 0 || port > 65535) return std::nullopt;
    return static_cast<std::uint16_t>(port);
}

/// The sandbox profile `name`'s process runs in (docs/protocol.md §15 "Profiles"): the
/// source's `profile`, else `default` when a tool of it declares nothing (`unknown`): it runs
/// confined, its tools stay `unknown` for the policy. None (its tools' union, the rule before
/// profiles) for a source whose tools all declare capabilities, and for hooks.
void apply_profile(confinement& c, const config::sandbox_paths_config& paths,
                   capability_set requested) {
    std::vector<std::string> names = paths.profile;
    if (names.empty()) {
        if ((requested & bit(capability::unknown)) == 0 || paths.state_dir.empty()) return;
        names = {"default"};
    }
    const std::string state = paths.state_dir.string();
    const auto fill = [&](std::string_view text) {
        std::string out(text);
        for (auto at = out.find("{state}"); at != std::string::npos; at = out.find("{state}", at))
            out.replace(at, 7, state);
        return out;
    };
    capability_set caps = 0;
    for (const auto& name : names) {
        const auto* p = config::find_sandbox_profile(name);
        if (p == nullptr) continue; // the config checked the names
        c.profile += (c.profile.empty() ? "" : ",") + name;
        for (const auto cap : p->capabilities) {
            const std::string one(cap);
            caps |= permissions::capability_set_from(std::span(&one, 1));
        }
        for (const auto w : p->write) {
            const fs::path path = fs::path(fill(w)).lexically_normal();
            if (std::find(c.profile_write.begin(), c.profile_write.end(), path) ==
                c.profile_write.end())
                c.profile_write.push_back(path);
        }
        for (const auto s : p->sockets)
            c.profile_sockets.push_back(fill(s)); // "{tmp}" is filled in by place()
        for (const auto& [k, v] : p->env)
            c.profile_env.emplace(std::string(k), fill(v)); // the first profile's value wins
    }
    // A `network` table names where the process may connect: it reaches them through the
    // egress proxy whatever the profiles say (docs/protocol.md §19).
    if (paths.network) caps |= bit(capability::accesses_network);
    c.process_capabilities = caps != 0 ? caps : bit(capability::read_only);
}

/// A learning run (`meith sources learn`, docs/protocol.md §15 "Learned profiles"): the
/// process may write under the user's home, run programs and reach the network, while every
/// fact is recorded; it still never sees meithd's home, its socket, the credential stores or
/// the socket places (a socket it connects to is recorded, not reached), and protected paths
/// stay read-only. Its profile's environment is kept, so it learns what it will run as.
void apply_learning(confinement& c) {
    c.profile = "learning";
    c.process_capabilities = bit(capability::writes_files) | bit(capability::starts_process) |
                             bit(capability::accesses_network);
    if (const char* home = std::getenv("HOME"); home != nullptr && fs::path(home).is_absolute())
        c.profile_write.emplace_back(home);
    c.profile_sockets.emplace_back("{tmp}"); // socket(AF_UNIX), with the places private
}

} // namespace

// Stays whole (~85 lines): the order of its checks is the rule (off, unknown capabilities, a
// cwd inside meithd's home, the program, the plan), each one ending the confinement with the
// status members it leaves; a cut would pass `c` and both closures to every piece.
confinement confine(const std::string& name, config::sandbox_mode mode,
                    const config::sandbox_paths_config& paths, capability_set capabilities,
                    const std::vector<std::string>& argv, const fs::path& cwd,
                    const std::string& config_json) {
    const auto& kernel = sandbox::detect();
    log_kernel_once(kernel);
    confinement c;
    c.capabilities = capabilities;
    if (mode != config::sandbox_mode::off) apply_profile(c, paths, capabilities);
    const auto record = mode != config::sandbox_mode::off ? learning_record(name) : std::nullopt;
    if (record) apply_learning(c);
    if (!c.profile.empty()) capabilities = c.process_capabilities; // the process's, not its tools'
    if (paths.profile.empty() && c.profile == "default")
        spdlog::info("'{}': a tool of it declares no capabilities, so it runs in the sandbox "
                     "profile \"default\": it reads, writes only {} and its TMPDIR, runs no "
                     "other program and reaches no network; name a profile (`profile`) or "
                     "declare its tools' capabilities to give it more (docs/protocol.md §15)",
                     name, paths.state_dir.string());
    protocol::json_members status(c.status_members);
    status.string("mode", mode == config::sandbox_mode::off       ? "off"
                          : mode == config::sandbox_mode::require ? "require"
                                                                  : "enforce");
    if (!c.profile.empty()) status.string("profile", c.profile);
    permissions::append_capabilities(status.key("capabilities"), capabilities);
    const auto unconfined = [&](std::string_view why) {
        status.string("fs", "none").string("net", "none").string("exec", "none");
        status.string("ns", "none").string("home", "readable").string("unconfined", why);
    };
    const bool egress_proxy = paths.network.has_value() && !record &&
                              (capabilities & bit(capability::accesses_network)) != 0;
    // A `network` table is a promise about where the process can connect: never kept by
    // running it unconfined (docs/protocol.md §19).
    const auto refuse_unconfined_network = [&](std::string_view why) {
        if (egress_proxy)
            c.refusal = "cannot start: it has a `network` table, which needs the sandbox, and " +
                        std::string(why);
    };
    if (mode == config::sandbox_mode::off) {
        unconfined("sandbox = \"off\"");
        refuse_unconfined_network("it has sandbox = \"off\"");
        return c;
    }
    if ((capabilities & bit(capability::unknown)) != 0) {
        unconfined("a tool has unknown capabilities");
        refuse_unconfined_network("a tool of it has unknown capabilities");
        spdlog::warn("'{}' runs unconfined: a tool of it has unknown capabilities; declare them "
                     "(a `capabilities` table, or for an MCP server `trust_annotations = true`) "
                     "to run it in a sandbox (docs/protocol.md §15)",
                     name);
        return c;
    }
    if (cwd_inside_home(cwd)) {
        // It could not even be entered: the sandbox hides the home from every tool. Said
        // now, not as a bare ENOENT from the start.
        unconfined("its cwd is inside meithd's home");
        c.refusal = "cannot start: its cwd " + cwd.string() +
                    " is inside meithd's home, which the sandbox hides from every tool; move the "
                    "tool's folder out of the home (docs/protocol.md §15)";
        return c;
    }
    sandbox::request r;
    r.capabilities = capabilities;
    auto program = argv.empty()
                       ? std::nullopt
                       : sandbox::resolve_program(argv[0], sandbox::program_search_path(), cwd);
    if (!program) {
        // Never started unconfined for want of a path: the start fails, saying why.
        unconfined("the program was not found");
        c.refusal = "cannot start: program '" + (argv.empty() ? std::string() : argv[0]) +
                    "' not found (looked up in PATH, or from its cwd " + cwd.string() + ")";
        return c;
    }
    r.program = *program;
    for (std::size_t i = 1; i < argv.size(); ++i)
        if (!argv[i].empty() && argv[i][0] == '/') r.given.emplace_back(argv[i]);
    // While learning the home is writable: the places that start programs at the next login
    // or commit stay read-only there, as the protected paths do (those that exist).
    config::sandbox_paths_config learning_paths;
    if (record) {
        learning_paths = paths;
        for (const auto& rel : learning_protected_paths())
            learning_paths.protect.emplace_back(rel);
    }
    const std::vector<std::string> withheld =
        place(r, c, name, record ? learning_paths : paths, cwd, config_json, kernel);
    r.egress_proxy = egress_proxy;
    r.egress_port = egress::proxy_port;
    // A rule for a port on 127.0.0.1 is a loopback forward too: the process connects to it
    // directly, not through the proxy (docs/protocol.md §19 "Loopback ports").
    if (egress_proxy)
        for (const auto& rule : paths.network->allow)
            if (auto port = loopback_port(rule)) r.loopback_forwards.push_back(*port);
    if (record) r.record = *record;
    if (egress_proxy) c.egress = egress_options(*paths.network);
    try {
        c.plan = sandbox::prepare(r, kernel);
    } catch (const std::exception& e) {
        unconfined(e.what());
        if (mode == config::sandbox_mode::require || egress_proxy) c.refusal = e.what();
        return c;
    }
    if ((capabilities & (bit(capability::writes_files) | bit(capability::destructive))) != 0)
        c.withheld = withheld;
    warn_withheld(name, c.withheld);
    append_plan_status(c.status_members, *c.plan, c.withheld);
    if (!c.plan->complete && mode == config::sandbox_mode::require)
        c.refusal = "sandbox = \"require\", but this kernel offers " + sandbox::describe(kernel);
    return c;
}

} // namespace meith::sandbox
