// reload: what a config reload changes, as data (docs/configuration.md "Reloading").
//
// `plan_reload` compares the running config with the next one and says, without touching
// anything, which sections are replaced in place, which need a restart to apply, and which
// sources are added, removed, replaced (their table changed) or kept. The daemon applies the
// plan (server.cpp); `append_reload_reply` writes the `config_reloaded` reply's members. Pure
// functions, unit-tested.
#pragma once

#include "config/config.hpp"
#include "registry/registry.hpp"

#include <filesystem>
#include <functional>
#include <memory>
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

/// The members of a successful `config_reloaded` reply:
/// `"ok":true,"file":…,"changed":[…],"sources":{"added","removed","replaced","restarted"},
/// "needsRestart":[…]`; `restarted` are the kept sources that were failed and restarted.
void append_reload_reply(std::string& out, const std::optional<std::filesystem::path>& file,
                         const reload_plan& plan, const std::vector<std::string>& restarted);

/// Makes a source from its table (sources/factory.hpp, with the daemon's context).
using source_maker =
    std::function<std::shared_ptr<tools::tool_source>(const config::source_config&)>;

/// Applies `plan` to the running config `cfg` and to `reg`: the sections replaced in place are
/// assigned (persist_grants excepted: it applies at the next start), removed sources stopped,
/// added and replaced ones started from `next`'s tables, kept ones that had failed restarted.
/// `cfg.sources` becomes `next.sources`. Returns the restarted sources' names.
std::vector<std::string> apply_reload(const reload_plan& plan, config::config& cfg,
                                      config::config&& next, registry::registry& reg,
                                      const source_maker& make_source);

/// A person's "allow always" for an egress target (docs/protocol.md §19): `rule` joins source
/// `source`'s network.allow in the config `file` and in the running config `cfg` (so a reload
/// of the unchanged file keeps the source running). Audited as egress_rule_added. Returns why
/// it could not be kept.
std::optional<std::string> keep_egress_rule(const std::optional<std::filesystem::path>& file,
                                            config::config& cfg, registry::registry& reg,
                                            std::string_view source, std::string_view rule);

} // namespace meith::daemon
