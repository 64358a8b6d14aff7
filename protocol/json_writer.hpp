// json_writer: appending JSON text to a std::string without a DOM, for the hot path.
//
// Server frames are built by appending into one reused buffer per connection; these helpers
// do the escaping (RFC 8259 §7). Raw JSON fragments (already-valid JSON text, e.g. tool
// arguments) are appended verbatim by the caller.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace meith::protocol {

/// Appends `s` as a JSON string literal (quotes included). Escapes `"`, `\` and control
/// characters (as \n, \t, ... or \u00XX); invalid UTF-8 bytes become U+FFFD so the output is
/// always valid JSON. Runs of plain bytes are appended in one go.
void append_json_string(std::string& out, std::string_view s);

/// Appends the decimal form of `v`.
void append_uint(std::string& out, std::uint64_t v);

/// Appends a JSON array of the strings in `items` (any range of string-like values).
template <class Range>
void append_json_string_array(std::string& out, const Range& items) {
    out += '[';
    bool first = true;
    for (const auto& item : items) {
        if (!first) out += ',';
        first = false;
        append_json_string(out, item);
    }
    out += ']';
}

/// Appends `v` with up to 3 decimals (e.g. durations in ms: 1.234).
void append_fixed3(std::string& out, double v);

/// Appends a duration of `nanoseconds` as milliseconds with 3 decimals, rounded to the
/// nearest microsecond ("1.234"); negative durations count as 0. Integer arithmetic only
/// (the audit line's durationMs, once per call).
void append_duration_ms(std::string& out, std::int64_t nanoseconds);

/// True when `s` is valid UTF-8 (RFC 3629: no overlongs, no surrogates, max U+10FFFF).
bool is_valid_utf8(std::string_view s);

/// The longest prefix of `text` of at most `max` bytes that does not split a UTF-8 character.
std::string_view cut_utf8(std::string_view text, std::size_t max);

/// The members of a JSON object (`"key":value,...`, no braces) appended to a string: how code
/// outside the frame encoders writes JSON (audit events' members, hook payloads), so none of
/// it places keys, commas or quotes by hand. A comma goes before each member unless the string
/// is empty or ends with '{' or '[' (so the string must not end with a comma). Keys are meith's own
/// names, written as given (not escaped); string values are escaped (append_json_string). For a
/// value written another way (redacted, a pre-encoded JSON fragment, a capability list), key()
/// returns the string to append it to.
class json_members {
  public:
    explicit json_members(std::string& out) : out_(out) {}

    /// Writes `"key":` (with the comma before it when needed); append exactly one value next.
    std::string& key(std::string_view name) {
        if (!out_.empty() && out_.back() != '{' && out_.back() != '[') out_.push_back(',');
        out_.push_back('"');
        out_.append(name);
        out_.append("\":");
        return out_;
    }
    json_members& string(std::string_view name, std::string_view value) {
        append_json_string(key(name), value);
        return *this;
    }
    /// The string, or null when absent.
    json_members& string_or_null(std::string_view name, std::optional<std::string_view> value) {
        if (value)
            append_json_string(key(name), *value);
        else
            key(name).append("null");
        return *this;
    }
    json_members& number(std::string_view name, std::uint64_t value) {
        append_uint(key(name), value);
        return *this;
    }
    json_members& boolean(std::string_view name, bool value) {
        key(name).append(value ? "true" : "false");
        return *this;
    }
    json_members& null(std::string_view name) {
        key(name).append("null");
        return *this;
    }
    /// `json` is a complete JSON value already (an object, array, number or literal).
    json_members& raw(std::string_view name, std::string_view json) {
        key(name).append(json);
        return *this;
    }

  private:
    std::string& out_;
};

} // namespace meith::protocol
