// profiles: the sandbox profiles a source may name (`profile = "browser"`, docs/protocol.md §15
// "Profiles"): what a server's *process* needs — the folders it writes, whether it runs other
// programs, whether it reaches the network — decided at the source, apart from what its tools
// may do for a caller (their capabilities, which feed only the policy). Data in one place.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace meith::config {

/// One named profile. Paths and values may say `{state}`: the source's own state folder
/// (source_state_dir). A source's profile is the union of the profiles it names.
struct sandbox_profile {
    std::string_view name;
    std::string_view summary; ///< one line, for docs and `meith sources NAME`
    /// The process capabilities (docs/protocol.md §5 names): `writes-files` makes its cwd
    /// writable, `starts-process` lets it run other programs, `accesses-network` lets it connect.
    std::vector<std::string_view> capabilities;
    /// Folders it writes whatever its capabilities, created owner-only when missing.
    std::vector<std::string_view> write;
    /// Folders of its own Unix sockets (sandbox_paths.sockets): gives it socket(AF_UNIX), its
    /// private socket places keep everyone else's out of reach.
    std::vector<std::string_view> sockets;
    /// Environment it starts with, unless the source's own `env` sets the name.
    std::vector<std::pair<std::string_view, std::string_view>> env;
};

/// Every profile, `default` first: the one a source whose tools declare nothing runs in.
const std::vector<sandbox_profile>& sandbox_profiles();

/// The profile named `name`, or null.
const sandbox_profile* find_sandbox_profile(std::string_view name);

/// "default", "node", ...: the names, quoted and comma-separated, for an error message.
std::string sandbox_profile_names();

} // namespace meith::config
