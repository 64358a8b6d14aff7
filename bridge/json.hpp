// json: the JSON layer `meith` and the MCP bridge share — nlohmann's ordered JSON (frames keep
// their members' order, type first), accessors that tolerate absence and wrong types, and
// compact text that never throws on invalid UTF-8.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace meith::bridge {

using json = nlohmann::ordered_json;

/// The string member `key` of `obj`; nullopt when `obj` is no object or `key` no string.
std::optional<std::string> get_string(const json& obj, std::string_view key);
/// The member `key` of `obj`; nullptr when `obj` is no object or has no such member.
const json* get_field(const json& obj, std::string_view key);
/// Compact JSON text; invalid UTF-8 is replaced (U+FFFD) rather than thrown on.
std::string compact(const json& j);
/// compact(j) appended to `out`, serialized in place (no string of its own).
void append_compact(std::string& out, const json& j);

} // namespace meith::bridge
