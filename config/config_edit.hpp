// config_edit: the changes meithd makes to the user's config file when a person asks — an
// "allow always" at `meith approve` for an egress target (docs/protocol.md §19) adds the target
// to the source's `network.allow`; `meith sources learn NAME --write` sets the keys of the
// profile it learned (§15 "Learned profiles"). The file is edited as text (comments, order and
// layout kept), parsed again to check the rule landed where meant, and replaced whole (same mode),
// so a crash leaves the old file or the new one.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace meith::config {

/// `text` (a meithd.toml) with `rule` added to the `network.allow` of the `[[sources]]` entry
/// named `source`: first in an existing `allow` array, else as a new `allow` key of its
/// `network` table. Returns the new text, or nullopt with `why` in words (no such source, no
/// `network` table, a layout this cannot edit safely). A rule already listed is no change.
std::optional<std::string> with_network_allow_rule(std::string_view text, std::string_view source,
                                                   std::string_view rule, std::string& why);

/// Applies with_network_allow_rule to `file` (a symlink is followed): written to a temporary
/// file beside the target with the target's mode, fsynced, renamed over it. Returns an error
/// in words, or nullopt when the rule is in the file now.
std::optional<std::string> add_network_allow_rule(const std::filesystem::path& file,
                                                  std::string_view source, std::string_view rule);

/// `text` with each of `keys` (name, TOML value text) set in the `[[sources]]` entry named
/// `source`: a key it has is replaced where it stands (its comment lines kept), a new one is
/// a line after the entry's last key. Refused (nullopt, `why`) for a key written as a table of
/// its own (`[sources.network]`), or when the result would not read back with those values.
std::optional<std::string>
with_source_keys(std::string_view text, std::string_view source,
                 const std::vector<std::pair<std::string, std::string>>& keys, std::string& why);

/// Applies with_source_keys to `file` as add_network_allow_rule does. An error in words.
std::optional<std::string>
set_source_keys(const std::filesystem::path& file, std::string_view source,
                const std::vector<std::pair<std::string, std::string>>& keys);

} // namespace meith::config
