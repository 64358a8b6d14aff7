// permissions: who may call what (docs/protocol.md §5, §8).
//
// A `policy` is compiled once from the config and is immutable afterwards, so `decide` is a
// pure function, safe from any thread. Decision order (docs/protocol.md §5, §14; PROTOCOL.md
// §12): the first `[[permissions.rules]]` entry whose tool glob (and caller, when given)
// matches decides allow, deny or ask; otherwise a capability on the caller's `deny` list
// denies, one on its `ask` list asks, one on neither `allow` list is not allowed, and a tool
// whose every capability is allowed is allowed. A tool that declares no capability is treated
// as having `unknown`. Grants (grants.hpp) sit between deny and ask: `decide` says which
// capabilities a grant would have to cover (`needed`) and whether one may (`grantable`).
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

/// The set holding only `c`.
constexpr capability_set bit(capability c) {
    return static_cast<capability_set>(1u << static_cast<unsigned>(c));
}

/// Builds a set from wire names; unrecognised names count as `unknown`; an empty list gives
/// {unknown}.
capability_set capability_set_from(std::span<const std::string> names);

/// Wire names of the set, in enum order.
std::vector<std::string_view> capability_names(capability_set set);

/// Appends the set as a JSON array of its wire names (`["reads-files","writes-files"]`), as
/// descriptors, audit lines and list_sources carry it. Each set's JSON is rendered once.
void append_capabilities(std::string& out, capability_set caps);

/// A decision's three outcomes (PROTOCOL.md §12 adds `ask`).
enum class verdict : std::uint8_t { allow, deny, ask };

/// "allow", "deny" or "ask".
std::string_view to_string(verdict v);

/// The outcome of `decide`: `reason` names the rule or capability that decided, e.g.
/// "capability 'destructive' is denied for caller 'plugin'" or "rule 3 (tool 'fs_*') allows".
struct decision {
    bool allow = false; ///< allowed outright
    std::string reason;
    bool ask = false; ///< not allowed outright: a person may approve it (allow is false)
    /// The capabilities a grant must cover to let the call through (those not allowed
    /// outright); meaningful when `grantable`.
    capability_set needed = 0;
    /// A grant may decide: true for `ask` and for capabilities merely not on the allow list;
    /// false for an explicit deny (a rule or the caller's deny list), which no grant lifts.
    bool grantable = false;

    verdict outcome() const { return allow ? verdict::allow : ask ? verdict::ask : verdict::deny; }
};

/// Glob match as fnmatch(3) without flags: `*`, `?`, `[...]`.
bool glob_match(std::string_view pattern, std::string_view name);

class policy {
  public:
    /// Defaults of docs/protocol.md §5: read-only and accesses-network allowed to every caller,
    /// everything else denied, nothing asked; `[permissions.callers.X]` tables replace a
    /// caller's lists.
    explicit policy(const config::permissions_config& cfg = {});

    decision decide(std::string_view tool_name, capability_set caps, caller who) const;

  private:
    struct caller_lists {
        capability_set allow = 0;
        capability_set deny = 0;
        capability_set ask = 0;
    };
    std::array<caller_lists, 2> callers_;
    std::vector<config::permission_rule_config> rules_;
    // Every reason `decide` can give, rendered once here (decide runs for every call).
    std::vector<std::string> rule_reasons_;
    std::array<std::array<std::string, capability_count>, 2> denied_reasons_;
    std::array<std::array<std::string, capability_count>, 2> not_allowed_reasons_;
    std::array<std::array<std::string, capability_count>, 2> ask_reasons_;
    std::array<std::array<std::string, 1u << capability_count>, 2> allowed_reasons_;
};

} // namespace meith::permissions
