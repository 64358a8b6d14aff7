// learn: learning runs in progress, and the profile a record asks for (see the header).
#include "sandbox/learn.hpp"

#include "protocol/json_writer.hpp"

#include <algorithm>
#include <map>
#include <set>

namespace meith::sandbox {

namespace fs = std::filesystem;

namespace {

std::map<std::string, fs::path>& learning() {
    static std::map<std::string, fs::path> m;
    return m;
}

bool inside_dir(const fs::path& p, const fs::path& dir) {
    if (dir.empty()) return false;
    auto [d, q] = std::mismatch(dir.begin(), dir.end(), p.begin(), p.end());
    return d == dir.end() || (std::next(d) == dir.end() && d->empty());
}

fs::path canonical_or_same(const fs::path& p) {
    std::error_code ec;
    fs::path c = fs::weakly_canonical(p, ec);
    return ec ? p.lexically_normal() : c;
}

/// The folders no profile key opens (private places, kernel views), or that every profile
/// already lets it write.
bool not_proposed(const fs::path& p, const learn_context& ctx) {
    for (const char* dir : {"/proc", "/dev", "/sys", "/run"})
        if (inside_dir(p, dir)) return true;
    return inside_dir(p, ctx.state_dir) || inside_dir(p, ctx.tmp_root);
}

/// The TOML array of `items`: ["a", "b"].
std::string toml_array(const std::vector<std::string>& items) {
    std::string out = "[";
    for (std::size_t i = 0; i < items.size(); ++i) {
        if (i != 0) out += ", ";
        protocol::append_json_string(out, items[i]); // a TOML basic string is the same text
    }
    return out + "]";
}

/// Writes become folders (the one a path was written in), then the folders inside another are
/// dropped; a write straight into the home or a top folder stays that one file. An existing
/// folder that is an ancestor of another written path is left out first (`mkdir -p`).
std::vector<std::string> write_roots(const std::set<fs::path>& written,
                                     const std::vector<std::string>& kept,
                                     const learn_context& ctx) {
    std::set<fs::path> roots(kept.begin(), kept.end());
    for (const auto& p : written) {
        const auto next = written.upper_bound(p);
        std::error_code ec;
        if (next != written.end() && inside_dir(*next, p) && fs::is_directory(p, ec)) continue;
        const fs::path dir = p.parent_path();
        const bool broad = dir == ctx.home || std::distance(dir.begin(), dir.end()) <= 2;
        roots.insert(broad ? p : dir);
    }
    std::vector<std::string> out;
    for (const auto& r : roots)
        if (std::none_of(roots.begin(), roots.end(),
                         [&](const fs::path& other) { return other != r && inside_dir(r, other); }))
            out.push_back(r.string());
    return out;
}

/// `a` with the items of `b` it lacks, in order.
std::vector<std::string> joined(std::vector<std::string> a, const std::set<std::string>& b) {
    for (const auto& item : b)
        if (std::find(a.begin(), a.end(), item) == a.end()) a.push_back(item);
    return a;
}

bool loopback(std::string_view address) {
    return address.starts_with("127.") || address.starts_with("[::1]") ||
           address.starts_with("[::ffff:127.");
}

} // namespace

const std::vector<std::string>& learning_protected_paths() {
    static const std::vector<std::string> paths{".config/systemd",   ".local/share/systemd",
                                                ".config/autostart", ".config/environment.d",
                                                ".pam_environment",  ".xprofile",
                                                ".xsessionrc",       ".xinitrc",
                                                ".gitconfig",        ".config/git",
                                                ".local/bin",        "bin"};
    return paths;
}

void start_learning(const std::string& source, fs::path record) {
    learning()[source] = std::move(record);
}

void stop_learning(const std::string& source) {
    learning().erase(source);
}

std::optional<fs::path> learning_record(const std::string& source) {
    const auto it = learning().find(source);
    if (it == learning().end()) return std::nullopt;
    return it->second;
}

// Stays whole (~60 lines): one pass over the record's lines, sorting each fact into its key.
learned_profile summarize(std::string_view record, const learn_context& ctx) {
    learned_profile out;
    out.profile = ctx.profile.empty() ? std::vector<std::string>{"default"} : ctx.profile;
    out.new_profile = ctx.profile.empty();
    out.read = ctx.read;
    out.network_deny = ctx.network_deny;
    out.allow_private = ctx.allow_private;
    out.ask = ctx.ask;
    std::set<fs::path> known_programs;
    for (const auto& p : ctx.programs)
        known_programs.insert(canonical_or_same(p));
    std::set<fs::path> written;
    std::set<std::string> programs, sockets, names, addresses, notes;
    while (!record.empty()) {
        const std::size_t end = record.find('\n');
        const std::string_view line = record.substr(0, end);
        record.remove_prefix(end == std::string_view::npos ? record.size() : end + 1);
        if (line == "! truncated") out.truncated = true;
        if (line.size() < 3 || line[1] != ' ') continue;
        ++out.lines;
        const std::string value(line.substr(2));
        switch (line[0]) {
        case 'w': {
            const fs::path p = fs::path(value).lexically_normal();
            if (!p.is_absolute() || not_proposed(p, ctx)) continue;
            if (const auto it =
                    std::find_if(ctx.protected_paths.begin(), ctx.protected_paths.end(),
                                 [&](const fs::path& guarded) { return inside_dir(p, guarded); });
                it != ctx.protected_paths.end()) {
                notes.insert("it tried to write in " + it->string() +
                             ", which stays read-only (a protected path)");
                continue;
            }
            written.insert(p);
            break;
        }
        case 'x': {
            // A lookup along PATH tries execve in every folder: only what is there ran.
            std::error_code ec;
            const fs::path p = canonical_or_same(value);
            if (fs::is_regular_file(p, ec) && !known_programs.contains(p) &&
                p.filename() != "meith-sandbox-init")
                programs.insert(p.string());
            break;
        }
        case 'u':
            if (value.starts_with("@"))
                notes.insert("it connected to the abstract socket " + value +
                             ", which no profile opens (Landlock scopes them out)");
            else if (!inside_dir(fs::path(value), ctx.tmp_root))
                sockets.insert(fs::path(value).lexically_normal().string());
            break;
        case 'n':
            addresses.insert(value);
            break;
        case 'd':
            if (value != "localhost") names.insert(value);
            break;
        default:
            --out.lines;
        }
    }
    out.write = write_roots(written, ctx.write, ctx);
    out.exec = joined(ctx.exec, programs);
    out.sockets = joined(ctx.sockets, sockets);
    std::set<std::string> rules = names;
    for (const auto& a : addresses) {
        if (loopback(a)) {
            out.allow_private = true;
            rules.insert(a.starts_with("[") ? a : "127.0.0.1" + a.substr(a.rfind(':')));
        } else if (names.empty()) {
            rules.insert(a);
        }
    }
    out.network = joined(ctx.network_allow, rules);
    out.notes.assign(notes.begin(), notes.end());
    return out;
}

std::vector<std::pair<std::string, std::string>> learned_profile::toml_keys() const {
    std::vector<std::pair<std::string, std::string>> keys;
    if (new_profile) keys.emplace_back("profile", toml_array(profile));
    std::string paths;
    for (const auto& [name, list] : {std::pair{"read", &read}, std::pair{"write", &write},
                                     std::pair{"exec", &exec}, std::pair{"sockets", &sockets}})
        if (!list->empty())
            paths += std::string(paths.empty() ? "" : ", ") + name + " = " + toml_array(*list);
    if (!paths.empty()) keys.emplace_back("sandbox_paths", "{ " + paths + " }");
    if (!network.empty() || !network_deny.empty())
        keys.emplace_back(
            "network",
            "{ allow = " + toml_array(network) +
                (network_deny.empty() ? std::string() : ", deny = " + toml_array(network_deny)) +
                (allow_private ? ", allow_private = true" : "") + (ask ? ", ask = true" : "") +
                " }");
    return keys;
}

std::string learned_profile::json() const {
    std::string out = "{";
    protocol::json_members m(out);
    protocol::append_json_string_array(m.key("profile"), profile);
    protocol::append_json_string_array(m.key("write"), write);
    protocol::append_json_string_array(m.key("exec"), exec);
    protocol::append_json_string_array(m.key("sockets"), sockets);
    protocol::append_json_string_array(m.key("network"), network);
    m.boolean("allowPrivate", allow_private);
    protocol::append_json_string_array(m.key("notes"), notes);
    m.boolean("truncated", truncated).number("lines", lines);
    return out + "}";
}

} // namespace meith::sandbox
