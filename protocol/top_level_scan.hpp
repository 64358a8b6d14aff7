// top_level_scan: the values of chosen top-level members of one JSON object that is too long to
// parse, found in one pass over its bytes as they stream past, in constant memory.
//
// A line over the frame limit is dropped unparsed (framing.hpp), but its request id must still
// be found to fail the right request: `{"result":{"id":"other"},…2 MiB…,"id":7}` (the official
// MCP SDKs write "id" after "result") belongs to request 7, not to whichever id comes first in
// the text. The scanner tracks nesting and strings, so only members of the outermost object
// count. Keys are compared as written (a key spelled with an escape matches nothing). Which of
// a key's duplicates counts is the reader's choice, to agree with the parser the text would
// otherwise meet: the first (simdjson's dom lookup) or the last (a loop over the fields, as
// frame_decoder's). Not thread-safe.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

namespace meith::protocol {

class top_level_scanner {
  public:
    static constexpr std::size_t max_keys = 4;
    static constexpr std::size_t max_key_bytes = 16;
    /// A captured value longer than this is reported as `other`.
    static constexpr std::size_t max_value_bytes = 512;

    /// What a wanted member's value was.
    struct value {
        enum class kind : std::uint8_t {
            absent, ///< the member did not appear (or not before the scan ended)
            string, ///< a string without escapes: `text` holds its bytes, without the quotes
            number, ///< a number (or other bare literal starting with '-' or a digit): its text
            other,  ///< an object, array, true/false/null, or a string with an escape or too long
        };
        kind k = kind::absent;
        std::string text;
    };

    enum class duplicates : std::uint8_t { first_wins, last_wins };

    /// `keys`: up to `max_keys` member names of at most `max_key_bytes` each (longer ones are
    /// ignored).
    explicit top_level_scanner(std::initializer_list<std::string_view> keys,
                               duplicates dup = duplicates::first_wins);

    /// Forgets everything seen: the next `feed` starts a new object.
    void reset();
    /// Scans the next bytes of the text. Stops early (ignores the rest) once every wanted
    /// member was found, the outermost object closed, or the text is not a JSON object.
    void feed(std::string_view bytes);

    /// The value of `keys[i]` (as given to the constructor); `absent` for an index past them.
    const value& get(std::size_t i) const {
        static const value none;
        return i < key_count_ ? values_[i] : none;
    }

  private:
    enum class state : std::uint8_t {
        before,       ///< white space before the opening '{'
        expect_key,   ///< after '{' or ',': a key or '}'
        in_key,       ///< inside a key's quotes
        expect_colon, ///< after a key
        before_value, ///< after ':'
        in_string,    ///< inside a top-level string value
        in_literal,   ///< a number, true, false or null
        in_nested,    ///< inside an object or array value (depth_ > 0)
        after_value,  ///< after a value: ',' or '}'
        done,         ///< nothing more to learn
    };

    void finish_value(value::kind k);
    void capture(char ch);
    /// At a key's ':': the value slot it fills (current_ = -1 when it is not wanted, or
    /// already filled under first_wins).
    void select_value();
    /// The kind of the literal just ended: a number when it starts like one.
    value::kind literal_kind() const;
    /// One character inside a nested object or array (skipped, strings and depth tracked).
    void nested_char(char ch);

    std::array<std::string, max_keys> keys_;
    std::size_t key_count_ = 0;
    std::array<value, max_keys> values_;
    std::size_t found_ = 0;
    bool last_wins_ = false;

    state state_ = state::before;
    bool escape_ = false;         ///< the last byte was a backslash inside a string
    bool nested_string_ = false;  ///< in_nested: inside a string
    bool value_escaped_ = false;  ///< the current string value had an escape
    bool value_too_long_ = false; ///< the current value passed max_value_bytes
    std::size_t depth_ = 0;       ///< in_nested: open objects and arrays
    std::array<char, max_key_bytes + 1> key_{};
    std::size_t key_len_ = 0;  ///< bytes of the current key (max_key_bytes + 1: too long)
    bool key_escaped_ = false; ///< the current key had an escape
    int current_ = -1;         ///< index of the wanted key whose value is being read, or -1
};

} // namespace meith::protocol
