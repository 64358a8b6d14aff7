// declared_capabilities: a tool's entry in its source's `capabilities` table
// (docs/configuration.md "Sources"), where a key may be a glob over the source's tool names
// (`"browser_*" = ["controls-browser"]`, fnmatch(3) syntax: `*`, `?`, `[...]`).
#pragma once

#include "config/config.hpp"

#include <string>
#include <string_view>
#include <vector>

namespace meith::sources {

/// The capabilities `cfg`'s table gives tool `name` (its unprefixed name): the key equal to the
/// name, else the longest glob key that matches it (the most specific; equal lengths: the first
/// in the table's order, which is by key). Null when no key covers it.
const std::vector<std::string>* declared_capabilities(const config::source_config& cfg,
                                                      std::string_view name);

} // namespace meith::sources
