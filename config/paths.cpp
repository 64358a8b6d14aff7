#include "config/paths.hpp"

#include <cctype>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <system_error>
#include <vector>

#include <fmt/format.h>
#include <pwd.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

namespace meith::config {

namespace {

namespace fs = std::filesystem;

std::optional<std::string> env_value(const char* name) {
    const char* v = std::getenv(name);
    if (v == nullptr || *v == '\0') return std::nullopt;
    return std::string(v);
}

/// $HOME, else the passwd entry of the effective user.
std::optional<fs::path> user_home() {
    if (auto home = env_value("HOME")) return fs::path(*home);
    std::vector<char> buf(16384);
    passwd pw{};
    passwd* found = nullptr;
    if (getpwuid_r(geteuid(), &pw, buf.data(), buf.size(), &found) == 0 && found != nullptr &&
        found->pw_dir != nullptr && *found->pw_dir != '\0')
        return fs::path(found->pw_dir);
    return std::nullopt;
}

fs::path make_absolute(const fs::path& p) {
    std::error_code ec;
    fs::path abs = fs::absolute(p, ec);
    return ec ? p : abs;
}

/// Quotes `p` for a shell command line when it holds anything but plain path characters.
std::string shell_quoted(const fs::path& p) {
    const std::string s = p.string();
    const bool plain =
        !s.empty() && s.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                          "abcdefghijklmnopqrstuvwxyz"
                                          "0123456789/._-+,:@%=") == std::string::npos;
    if (plain) return s;
    std::string out = "'";
    for (char c : s) {
        if (c == '\'')
            out += "'\\''";
        else
            out += c;
    }
    out += '\'';
    return out;
}

} // namespace

fs::path expand_tilde(const fs::path& p) {
    const std::string& s = p.native();
    if (s.empty() || s[0] != '~') return p;
    if (s.size() > 1 && s[1] != '/') return p; // "~user" is not expanded
    const auto home = user_home();
    if (!home) return p;
    if (s.size() <= 2) return *home; // "~" or "~/"
    return *home / s.substr(2);
}

fs::path source_state_dir(const std::string& name) {
    fs::path base;
    if (const char* v = std::getenv("XDG_STATE_HOME"); v && *v == '/')
        base = v;
    else if (const auto home = user_home())
        base = *home / ".local" / "state";
    else
        return {};
    return base / "meith" / "sources" / name;
}

std::string expand_home_in_word(const std::string& word) {
    const auto home = user_home();
    if (!home) return word;
    const std::string h = home->string();
    std::string out;
    std::size_t i = 0;
    if (word == "~" || word.starts_with("~/")) {
        out = h;
        i = 1;
    }
    while (i < word.size()) {
        const auto at = word.find('$', i);
        if (at == std::string::npos) break;
        out.append(word, i, at - i);
        if (word.compare(at, 7, "${HOME}") == 0) {
            out += h;
            i = at + 7;
            continue;
        }
        const bool name_ends =
            at + 5 >= word.size() ||
            !(std::isalnum(static_cast<unsigned char>(word[at + 5])) || word[at + 5] == '_');
        if (word.compare(at, 5, "$HOME") == 0 && name_ends) {
            out += h;
            i = at + 5;
            continue;
        }
        out += '$';
        i = at + 1;
    }
    if (i < word.size()) out.append(word, i, std::string::npos);
    return out;
}

fs::path resolve_home(const std::optional<fs::path>& flag) {
    if (flag && !flag->empty()) return make_absolute(expand_tilde(*flag));
    if (auto env = env_value("MEITH_HOME")) return make_absolute(expand_tilde(*env));
    const auto home = user_home();
    return make_absolute(home ? *home / ".meith" : fs::path(".meith"));
}

bool is_default_home(const fs::path& home) {
    const auto user = user_home();
    if (!user) return false;
    const auto canon = [](const fs::path& p) {
        std::error_code ec;
        fs::path c = fs::weakly_canonical(make_absolute(p), ec);
        if (ec) c = make_absolute(p).lexically_normal();
        return c.has_filename() ? c : c.parent_path(); // "/h/.meith/" is "/h/.meith"
    };
    return canon(home) == canon(*user / ".meith");
}

fs::path resolve_socket_path(const std::optional<fs::path>& flag,
                             const std::optional<fs::path>& from_config, const fs::path& home) {
    if (flag && !flag->empty()) return make_absolute(expand_tilde(*flag));
    if (from_config && !from_config->empty()) return make_absolute(expand_tilde(*from_config));
    // The XDG spec says a relative XDG_RUNTIME_DIR is invalid and must be ignored. The runtime
    // folder's socket is the default home's: a daemon of another home (--home, MEITH_HOME)
    // listens in its home, so two homes never share a socket (`meith --home NEW` must not
    // reach the default home's daemon).
    if (auto xdg = env_value("XDG_RUNTIME_DIR");
        xdg && fs::path(*xdg).is_absolute() && is_default_home(home))
        return fs::path(*xdg) / "meith" / "meithd.sock";
    return make_absolute(home / "meithd.sock");
}

std::optional<std::string> ensure_private_dir(const fs::path& dir, bool allow_sticky) {
    if (dir.empty()) return std::string("empty directory path");
    const fs::path target = make_absolute(dir);

    // Create missing components one by one so that every folder we make gets 0700, not
    // whatever the umask would leave of create_directories' 0777.
    fs::path prefix;
    for (const auto& part : target) {
        prefix /= part;
        if (part.empty() || prefix == prefix.root_path()) continue;
        struct stat st {};
        if (::stat(prefix.c_str(), &st) == 0) continue;
        if (errno != ENOENT)
            return fmt::format("cannot access {}: {}", prefix.string(), std::strerror(errno));
        if (::mkdir(prefix.c_str(), 0700) != 0) {
            if (errno == EEXIST) continue; // created concurrently
            return fmt::format("cannot create {}: {}", prefix.string(), std::strerror(errno));
        }
        ::chmod(prefix.c_str(), 0700); // the umask may have taken owner bits away
    }

    struct stat st {};
    if (::stat(target.c_str(), &st) != 0)
        return fmt::format("cannot access {}: {}", target.string(), std::strerror(errno));
    if (!S_ISDIR(st.st_mode)) return fmt::format("{} is not a directory", target.string());

    const uid_t me = geteuid();
    const auto mode = static_cast<unsigned>(st.st_mode & 07777);
    const bool shared_writable = (mode & 022) != 0;
    const bool sticky = (mode & S_ISVTX) != 0;
    // A sticky shared folder such as /tmp is fine whoever owns it: nobody can remove or
    // replace the entries we create in it (docs/protocol.md §1).
    if (allow_sticky && sticky) return std::nullopt;
    if (st.st_uid != me)
        return fmt::format("{} is owned by uid {}, not you (uid {}): run `chown {} {}` or choose "
                           "another --home",
                           target.string(), st.st_uid, me, me, shell_quoted(target));

    if (shared_writable)
        return fmt::format("{} is writable by group or others (mode {:04o}): run `chmod 700 {}`",
                           target.string(), mode, shell_quoted(target));
    return std::nullopt;
}

} // namespace meith::config
