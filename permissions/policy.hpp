// permissions: who may call what (docs/protocol.md §5, §8).
//
// A `policy` is compiled once from the config and is immutable afterwards, so `decide` is a
// pure function, safe from any thread. Decision order: the first `[[permissions.rules]]` entry
// whose tool glob (and caller, when given) matches decides; otherwise every capability of the
// tool must be allowed for the caller and none denied (deny wins). A tool that declares no
// capability is treated as having `unknown`.
#pragma once

#include "config/config.hpp"

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace meith::permissions {

/// The two effective callers a socket peer can be (docs/protocol.md §5).
enum class caller : std::uint8_t { cli, plugin };

std::string_view to_string(caller c);

/// Maps a claimed `clientInfo.caller` to the effective caller: "cli" -> cli, "plugin" -> plugin,
/// anything else (renderer, agent, internal, empty, ...) -> plugin, the least trusted.
caller caller_from_claim(std::string_view claim);

/// Capabilities of docs/protocol.md §5 plus `unknown` for tools that declare none.
enum class capability : std::uint8_t {
    read_only,
    writes_files,
    controls_browser,
    starts_process,
    accesses_network,
    destructive,
    unknown,
};
inline constexpr std::size_t capability_count = 7;

std::string_view to_string(capability c);

/// Parses the wire name ("read-only", "writes-files", ...); nullopt for anything else.
std::optional<capability> capability_from_string(std::string_view name);

/// A set of capabilities as a bit mask (bit i = capability i).
using capability_set = std::uint8_t;

/// Builds a set from wire names; unrecognised names count as `unknown`; an empty list gives
/// {unknown}.
capability_set capability_set_from(std::span<const std::string> names);

/// Wire names of the set, in enum order.
std::vector<std::string_view> capability_names(capability_set set);

/// The outcome of `decide`: `reason` names the rule or capability that decided, e.g.
/// "capability 'destructive' is denied for caller 'plugin'" or "rule 3 (tool 'fs_*') allows".
struct decision {
    bool allow = false;
    std::string reason;
};

/// Glob match as fnmatch(3) without flags: `*`, `?`, `[...]`.
bool glob_match(std::string_view pattern, std::string_view name);

class policy {
  public:
    /// Defaults of docs/protocol.md §5: read-only and accesses-network allowed to every caller,
    /// everything else denied; `[permissions.callers.X]` tables replace a caller's lists.
    explicit policy(const config::permissions_config& cfg = {});

    decision decide(std::string_view tool_name, capability_set caps, caller who) const;

  private:
    struct caller_lists {
        capability_set allow = 0;
        capability_set deny = 0;
    };
    std::array<caller_lists, 2> callers_;
    std::vector<config::permission_rule_config> rules_;
    // Every reason `decide` can give, rendered once here (decide runs for every call).
    std::vector<std::string> rule_reasons_;
    std::array<std::array<std::string, capability_count>, 2> denied_reasons_;
    std::array<std::array<std::string, capability_count>, 2> not_allowed_reasons_;
    std::array<std::array<std::string, 1u << capability_count>, 2> allowed_reasons_;
};

} // namespace meith::permissions
