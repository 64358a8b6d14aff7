// client_profile: one `[clients.NAME]` table made ready for the hot path (docs/protocol.md §23).
//
// A profile narrows what a client sees and may do: which tools (globs on the real names,
// `!` to leave out), under which caller, with which names and descriptions. meithd applies it
// on every path a tool is reached by (list, search, call, preview, approval, check_policy), so
// a tool hidden from a profile cannot be called through it by its real name, its shown name or
// `call_tool`. Overrides change only the name and the description: the capabilities, the
// annotations and the policy decision stay the tool's own.
#pragma once

#include "config/config.hpp"
#include "permissions/policy.hpp"

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace meith::permissions {

class client_profile {
  public:
    explicit client_profile(config::client_config cfg);
    /// What a connection whose hello named profile `name` has once a reload removed it: every
    /// tool hidden, saying so (fail closed).
    static client_profile removed(std::string name);

    const std::string& name() const { return cfg_.name; }
    /// The caller its frames act as, in place of their claim; nullopt: the claim's.
    std::optional<caller> mapped_caller() const { return caller_; }
    bool search() const { return cfg_.search; }
    const std::vector<std::string>& pinned() const { return cfg_.pinned; }
    const std::vector<std::string>& agents() const { return cfg_.agents; }

    /// Why the tool named `real_name` is out of this profile ("matches '!fs_delete*' in
    /// [clients.x] tools"), or nullopt when it is in.
    std::optional<std::string> hidden(std::string_view real_name) const;
    bool visible(std::string_view real_name) const { return !hidden(real_name); }

    /// Why MCP source `source`'s families (resources, prompts, completions, log messages) are
    /// out of this profile, or nullopt when they are in: by `sources` when the profile names
    /// them, else in when it shows one of the source's tools (`shows_a_tool`).
    std::optional<std::string> source_hidden(std::string_view source, bool shows_a_tool) const;
    /// Whether `sources` decides (then source_hidden needs no `shows_a_tool`).
    bool names_sources() const { return cfg_.sources.has_value(); }

    /// The real tool a client of this profile means by `shown`: the tool an override renamed
    /// to `shown`, else `shown` itself. (Whether that tool is visible is hidden()'s answer.)
    std::string_view real_name(std::string_view shown) const;
    /// The override of the tool named `real_name`, or null.
    const config::tool_override_config* override_of(std::string_view real_name) const;
    /// Whether it names or describes any tool otherwise (`[clients.NAME.overrides]`).
    bool has_overrides() const { return !cfg_.overrides.empty(); }
    /// The name a client of this profile sees the tool named `real_name` as.
    std::string_view shown_name(std::string_view real_name) const;

  private:
    config::client_config cfg_;
    bool removed_ = false;
    std::optional<caller> caller_;
    std::vector<std::string_view> include_, exclude_;         ///< into cfg_.tools, `!` dropped
    std::vector<std::string_view> source_in_, source_out_;    ///< into cfg_.sources, `!` dropped
    std::map<std::string, std::string, std::less<>> renamed_; ///< shown name -> real name
};

} // namespace meith::permissions
