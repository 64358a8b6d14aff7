// json_minify: a parsed JSON value written back as compact JSON text, into a caller's buffer.
//
// simdjson::minify(element) builds its text in a std::vector<char> that grows a byte at a time
// from empty, then copies it into a new string: five to seven allocations for a small argument
// object, on every call. This appends to a string the caller keeps (or reserves once), with
// the same number formatting (simdjson's own shortest round-trip doubles) and string escaping
// as protocol::append_json_string (RFC 8259 §7).
#pragma once

#include <string>

#include <simdjson.h>

namespace meith::protocol {

/// Appends `value` to `out` as compact JSON text. Never throws but std::bad_alloc; recursion
/// depth is that of the parsed value (bounded by the parser's max_depth).
void append_minified(std::string& out, simdjson::dom::element value);

/// `value` as compact JSON text, in one string grown from a first guess of `reserve` bytes.
inline std::string minified(simdjson::dom::element value, std::size_t reserve = 128) {
    std::string out;
    out.reserve(reserve);
    append_minified(out, value);
    return out;
}

} // namespace meith::protocol
