#include "sandbox/protected_paths.hpp"

#include "platform/self.hpp"
#include "sandbox/sandbox.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <fstream>
#include <optional>
#include <set>
#include <string>

#include <sys/stat.h>

namespace meith::sandbox {

namespace fs = std::filesystem;

namespace {
/// The running executable and the sandbox's init program, canonical; those that exist.
const std::vector<fs::path>& own_programs() {
    static const std::vector<fs::path> programs = [] {
        std::vector<fs::path> out;
        for (const fs::path& p : {platform::executable_path(), init_program()}) {
            std::error_code ec;
            if (p.empty()) continue;
            const fs::path c = fs::canonical(p, ec);
            if (!ec) out.push_back(c);
        }
        return out;
    }();
    return programs;
}
} // namespace

namespace {

/// The folders strictly between `root` and `path` (`path` inside `root`), innermost first.
std::vector<fs::path> folders_between(const fs::path& root, const fs::path& path) {
    std::vector<fs::path> out;
    for (fs::path p = path.parent_path(); p != root && path_within(p, root) && p != p.root_path();
         p = p.parent_path())
        out.push_back(p);
    return out;
}

bool is_real_directory(const fs::path& p) {
    struct stat st {};
    return ::lstat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::string lower(std::string s) {
    for (char& c : s)
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

std::string trimmed(std::string_view s) {
    const auto b = s.find_first_not_of(" \t\r");
    if (b == std::string_view::npos) return {};
    const auto e = s.find_last_not_of(" \t\r");
    return std::string(s.substr(b, e - b + 1));
}

/// `core.hooksPath` of the repository config `config` (git-config(1): `[core]` then
/// `hooksPath = VALUE`, names case-insensitive, the value maybe quoted); the last one wins, as
/// in git. Includes are not followed.
std::optional<std::string> hooks_path_of(const fs::path& config) {
    std::ifstream in(config);
    std::string line, section;
    std::optional<std::string> found;
    while (std::getline(in, line)) {
        const std::string t = trimmed(line);
        if (t.empty() || t[0] == '#' || t[0] == ';') continue;
        if (t[0] == '[') {
            section = lower(trimmed(t.substr(1, t.find(']') - 1)));
            continue;
        }
        const auto eq = t.find('=');
        if (section != "core" || eq == std::string::npos) continue;
        if (lower(trimmed(t.substr(0, eq))) != "hookspath") continue;
        std::string value = trimmed(t.substr(eq + 1));
        if (value.size() >= 2 && value.front() == '"' && value.back() == '"')
            value = value.substr(1, value.size() - 2);
        found = value;
    }
    return found;
}

} // namespace

bool path_within(const fs::path& a, const fs::path& b) {
    const auto [mismatch, end] = std::mismatch(b.begin(), b.end(), a.begin(), a.end());
    (void)end;
    return mismatch == b.end();
}

fs::path canonical_or_normal(const fs::path& p) {
    std::error_code ec;
    fs::path c = fs::weakly_canonical(p, ec);
    return ec ? p.lexically_normal() : c;
}

protected_set protected_in_roots(const std::vector<fs::path>& roots,
                                 const config::sandbox_paths_config& paths, const fs::path& home,
                                 const fs::path& config_file) {
    std::vector<fs::path> lifts;
    for (const auto& w : paths.write)
        lifts.push_back(canonical_or_normal(w));
    std::set<fs::path> read_only, pinned;
    const fs::path home_c = home.empty() ? fs::path() : canonical_or_normal(home);
    const bool hooks_protected =
        std::find(paths.protect.begin(), paths.protect.end(), ".git/hooks") != paths.protect.end();
    for (const auto& raw : roots) {
        const fs::path root = canonical_or_normal(raw);
        const auto lifted = [&](const fs::path& p) {
            return std::any_of(lifts.begin(), lifts.end(), [&](const fs::path& w) {
                return w != root && path_within(w, root) && path_within(p, w);
            });
        };
        const auto protect = [&](const fs::path& p) {
            read_only.insert(p);
            for (auto& f : folders_between(root, p))
                pinned.insert(f);
        };
        const fs::path git = root / ".git";
        if (hooks_protected && is_real_directory(git)) {
            // A repository without its hooks folder (deleted, or made by a tool that makes
            // none): a tool could create .git/hooks/pre-commit, run by the next commit. The
            // empty folder git itself makes goes there first, to be mounted read-only.
            const fs::path hooks = git / "hooks";
            struct stat st {};
            if (::lstat(hooks.c_str(), &st) != 0 && errno == ENOENT && !lifted(hooks))
                ::mkdir(hooks.c_str(), 0755);
            // Hooks kept elsewhere (core.hooksPath: husky's .husky/_, a .githooks folder) run
            // the same way: that folder, when it is inside the root, is protected too.
            if (const auto value = hooks_path_of(git / "config"); value && !value->empty()) {
                const fs::path named(*value);
                const fs::path p = canonical_or_normal(named.is_absolute() ? named : root / named);
                if (p != root && path_within(p, root) && is_real_directory(p) && !lifted(p))
                    protect(p);
            }
        }
        for (const auto& name : paths.protect) {
            const fs::path p = (root / name).lexically_normal();
            struct stat st {};
            if (::lstat(p.c_str(), &st) != 0 || S_ISLNK(st.st_mode)) continue;
            if (lifted(p)) continue;
            protect(p);
        }
        if (!home_c.empty() && home_c != root && path_within(home_c, root))
            for (auto& f : folders_between(root, home_c))
                pinned.insert(f);
        // meithd's own config (--config, outside the home): what its sources may do is no
        // tool's to rewrite.
        if (!config_file.empty() && path_within(config_file, root) &&
            (home_c.empty() || !path_within(config_file, home_c)))
            protect(config_file);
        // meithd's own programs (a build tree in the project a tool may write): the running
        // meithd, and meith-sandbox-init, which a zygote runs with CAP_SYS_ADMIN in the
        // sandbox's user namespace before any run is confined (docs/protocol.md §15 "Zygote").
        for (const fs::path& program : own_programs())
            if (path_within(program, root)) protect(program);
    }
    protected_set out;
    out.read_only.assign(read_only.begin(), read_only.end());
    out.pinned.assign(pinned.begin(), pinned.end());
    // Outer folders first: a pin inside another is mounted on the outer one's clone.
    std::sort(out.pinned.begin(), out.pinned.end(), [](const fs::path& a, const fs::path& b) {
        return std::distance(a.begin(), a.end()) < std::distance(b.begin(), b.end());
    });
    return out;
}

} // namespace meith::sandbox
