// The sandbox hints: what a refused call's error says about the sandbox that refused it, and
// the declaration that would allow it (sandbox/confinement.hpp: sandbox_hint; docs/protocol.md
// §15).
#include "sandbox/confinement.hpp"

#include <algorithm>
#include <cctype>
#include <initializer_list>
#include <string>
#include <string_view>

namespace meith::sandbox {

using permissions::capability;

namespace {

/// Case-insensitive search for any of `needles` (lower-case) in `text`.
bool mentions(std::string_view text, std::initializer_list<std::string_view> needles) {
    std::string lower(text);
    std::transform(lower.begin(), lower.end(), lower.begin(),
                   [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
    return std::any_of(needles.begin(), needles.end(),
                       [&](std::string_view n) { return lower.find(n) != std::string::npos; });
}

/// The program a shell could not run, from its message: dash's "SCRIPT: N: PROG: Permission
/// denied", bash's "SCRIPT: line N: PROG: Permission denied". Empty when there is none.
std::string shell_exec_refused(std::string_view text) {
    constexpr std::string_view denied = ": Permission denied";
    for (auto at = text.find(denied); at != std::string_view::npos;
         at = text.find(denied, at + 1)) {
        const auto line_start = text.rfind('\n', at);
        const std::string_view line =
            text.substr(line_start == std::string_view::npos ? 0 : line_start + 1,
                        at - (line_start == std::string_view::npos ? 0 : line_start + 1));
        // line: "SCRIPT: N: PROG" or "SCRIPT: line N: PROG"
        const auto prog_at = line.rfind(": ");
        if (prog_at == std::string_view::npos) continue;
        const auto where_at = line.rfind(": ", prog_at == 0 ? 0 : prog_at - 1);
        if (where_at == std::string_view::npos) continue;
        std::string_view where = line.substr(where_at + 2, prog_at - where_at - 2);
        if (where.starts_with("line ")) where.remove_prefix(5);
        if (where.empty() || !std::all_of(where.begin(), where.end(),
                                          [](char ch) { return ch >= '0' && ch <= '9'; }))
            continue;
        return std::string(line.substr(prog_at + 2));
    }
    return {};
}

} // namespace

std::string sandbox_hint(const confinement& c, std::string_view error_text) {
    if (!c.plan) return {}; // unconfined: whatever refused it, it was not meith's sandbox
    const bool lookup = mentions(error_text, {"eai_again", "enotfound", "getaddrinfo"});
    if (!lookup && !mentions(error_text, {"eacces", "eperm", "erofs", "permission denied",
                                          "operation not permitted", "read-only file system"}))
        return {};
    const auto has = [&](capability cap) { return (c.plan->capabilities & bit(cap)) != 0; };
    // A name that did not resolve is the sandbox's doing only where it cuts the network off.
    if (lookup && has(capability::accesses_network)) return {};
    const bool writes = has(capability::writes_files) || has(capability::destructive);
    std::string hint = "meith's sandbox may have refused this: ";
    if (!has(capability::accesses_network) &&
        mentions(error_text, {"connect", "socket", "getaddrinfo", "eai_again", "enotfound",
                              "fetch failed", "econnrefused", "network"})) {
        hint += "the source may not use the network; declare `accesses-network` on its tools "
                "(or in the source's `capabilities` table) to allow it";
    } else if (!c.plan->unix_sockets &&
               mentions(error_text, {"enoent", "eacces", "no such file"}) &&
               mentions(error_text, {"connect", "socket", ".sock", "unix"}) &&
               !mentions(error_text, {"econnrefused", "fetch failed", "getaddrinfo"})) {
        hint += "the source may not open Unix sockets; name the socket (or its folder) in "
                "`sandbox_paths.sockets` to let it connect there";
    } else if (const std::string prog = shell_exec_refused(error_text);
               !has(capability::starts_process) && !prog.empty()) {
        hint += "the source may not run other programs (its shell could not run `" + prog +
                "`); declare `starts-process`, or name the program in `sandbox_paths.exec`";
    } else if (!has(capability::starts_process) && mentions(error_text, {"spawn", "execve"})) {
        hint += "the source may not run other programs; declare `starts-process`, or name the "
                "program in `sandbox_paths.exec`";
    } else if (!writes) {
        hint += "the source may only read; declare `writes-files` on its tools (or in the "
                "source's `capabilities` table) to let it write under its cwd " +
                c.cwd.string() + " and `sandbox_paths.write`";
    } else if (!c.withheld.empty()) {
        hint += "writes are withheld from " + c.withheld.front() +
                " because it holds meithd's home; give the source a `cwd` (or "
                "`sandbox_paths.write` folder) outside the home";
    } else {
        hint += "the source may write only under its cwd " + c.cwd.string() +
                ", its temporary folder and `sandbox_paths.write`; add the folder there";
    }
    if (!c.profile.empty())
        hint += "; it runs in the sandbox profile \"" + c.profile +
                "\", which its tools' declarations do not widen: name a profile that allows it "
                "(`profile = [...]`, \"Profiles\") or add the path to `sandbox_paths`";
    hint += " (docs/protocol.md §15)";
    return hint;
}

} // namespace meith::sandbox
