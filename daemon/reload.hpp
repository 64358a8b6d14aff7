// reload: what a config reload changes, as data (docs/configuration.md "Reloading").
//
// `plan_reload` compares the running config with the next one and says, without touching
// anything, which sections are replaced in place, which need a restart to apply, and which
// sources are added, removed, replaced (their table changed) or kept. The daemon applies the
// plan (server.cpp); `append_reload_reply` writes the `config_reloaded` reply's members. Pure
// functions, unit-tested.
#pragma once

#include "config/config.hpp"

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace meith::daemon {

struct reload_plan {
    bool limits = false;      ///< [limits] replaced in place
    bool tools = false;       ///< [tools] replaced in place
    bool permissions = false; ///< [permissions] replaced (persist_grants excepted)
    bool clients = false;     ///< [clients] replaced in place
    /// Sections that differ but apply only at the next start: "socket", "audit", "hooks",
    /// "permissions.persist_grants" (where grants are kept is settled when they are read).
    std::vector<std::string> needs_restart;
    std::vector<std::string> added;    ///< sources only in the next config, in its order
    std::vector<std::string> removed;  ///< sources only in the running config, in its order
    std::vector<std::string> replaced; ///< sources in both whose table changed, in next's order
    std::vector<std::string> kept;     ///< sources in both, unchanged (a failed one restarts)

    /// The "changed" list of the reply: "limits", "tools", "permissions", "clients", "sources".
    std::vector<std::string> changed() const;
};

/// Compares `running` with `next`. Pure: nothing is applied.
reload_plan plan_reload(const config::config& running, const config::config& next);

/// The members of a successful `config_reloaded` reply (after `"ok":`):
/// `true,"file":…,"changed":[…],"sources":{"added","removed","replaced","restarted"},
/// "needsRestart":[…]`; `restarted` are the kept sources that were failed and restarted.
void append_reload_reply(std::string& out, const std::optional<std::filesystem::path>& file,
                         const reload_plan& plan, const std::vector<std::string>& restarted);

} // namespace meith::daemon
