// definitions: a quarantined tool's changed definition as a person reads it (docs/protocol.md
// §22), for `meith tools accept` and `meith approve`.
#pragma once

#include "cli/session.hpp"

#include <string>

namespace meith::cli {

/// Prints what changed in quarantined tool `name` (an accept_tool preview's `tool_definition`
/// reply): whether it is new or changed since when, then a line diff ("- " accepted,
/// "+ " new) of its description, input schema, other members and capabilities. Text from
/// the tool is sanitized (no terminal escapes).
void print_definition_diff(const std::string& name, const json& diff);

} // namespace meith::cli
