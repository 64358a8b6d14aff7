#include "protocol/top_level_scan.hpp"

namespace meith::protocol {

namespace {

bool is_space(char ch) {
    return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r';
}

} // namespace

top_level_scanner::top_level_scanner(std::initializer_list<std::string_view> keys, duplicates dup)
    : last_wins_(dup == duplicates::last_wins) {
    for (auto k : keys)
        if (key_count_ < max_keys && k.size() <= max_key_bytes) keys_[key_count_++] = k;
}

void top_level_scanner::reset() {
    for (auto& v : values_) {
        v.k = value::kind::absent;
        v.text.clear();
    }
    found_ = 0;
    state_ = state::before;
    escape_ = nested_string_ = value_escaped_ = value_too_long_ = key_escaped_ = false;
    depth_ = key_len_ = 0;
    current_ = -1;
}

void top_level_scanner::capture(char ch) {
    if (current_ < 0 || value_too_long_) return;
    auto& text = values_[static_cast<std::size_t>(current_)].text;
    if (text.size() == max_value_bytes) {
        value_too_long_ = true;
        return;
    }
    text.push_back(ch);
}

void top_level_scanner::finish_value(value::kind k) {
    if (current_ < 0) return;
    auto& v = values_[static_cast<std::size_t>(current_)];
    v.k = value_too_long_ ? value::kind::other : k;
    if (v.k == value::kind::other) v.text.clear();
    current_ = -1;
    // With the first occurrence winning, nothing after the last wanted key can change a value.
    if (!last_wins_ && ++found_ == key_count_) state_ = state::done;
}

void top_level_scanner::select_value() {
    current_ = -1;
    if (!key_escaped_ && key_len_ <= max_key_bytes) {
        const std::string_view key(key_.data(), key_len_);
        for (std::size_t i = 0; i < key_count_; ++i)
            if (keys_[i] == key && (last_wins_ || values_[i].k == value::kind::absent)) {
                values_[i].k = value::kind::absent;
                values_[i].text.clear();
                current_ = static_cast<int>(i);
                break;
            }
    }
    value_escaped_ = value_too_long_ = false;
}

top_level_scanner::value::kind top_level_scanner::literal_kind() const {
    if (current_ < 0) return value::kind::other;
    const auto& text = values_[static_cast<std::size_t>(current_)].text;
    const bool number = !text.empty() && (text[0] == '-' || (text[0] >= '0' && text[0] <= '9'));
    return number ? value::kind::number : value::kind::other;
}

void top_level_scanner::nested_char(char ch) {
    if (nested_string_) {
        if (escape_)
            escape_ = false;
        else if (ch == '\\')
            escape_ = true;
        else if (ch == '"')
            nested_string_ = false;
    } else if (ch == '"') {
        nested_string_ = true;
    } else if (ch == '{' || ch == '[') {
        ++depth_;
    } else if ((ch == '}' || ch == ']') && --depth_ == 0) {
        finish_value(value::kind::other);
        if (state_ != state::done) state_ = state::after_value;
    }
}

// Stays whole (~90 lines): one byte-at-a-time state machine; a state per function would add a
// call per byte on the hot path of an oversized frame.
void top_level_scanner::feed(std::string_view bytes) {
    for (const char ch : bytes) {
        switch (state_) {
        case state::done:
            return;
        case state::before:
            if (is_space(ch)) break;
            state_ = ch == '{' ? state::expect_key : state::done;
            break;
        case state::expect_key:
            if (is_space(ch)) break;
            if (ch == '"') {
                state_ = state::in_key;
                key_len_ = 0;
                key_escaped_ = false;
            } else {
                state_ = state::done; // '}' ends the object; anything else is not JSON
            }
            break;
        case state::in_key:
            if (escape_) {
                escape_ = false;
            } else if (ch == '\\') {
                escape_ = key_escaped_ = true;
            } else if (ch == '"') {
                state_ = state::expect_colon;
            } else if (key_len_ <= max_key_bytes) {
                if (key_len_ < max_key_bytes) key_[key_len_] = ch;
                ++key_len_;
            }
            break;
        case state::expect_colon:
            if (is_space(ch)) break;
            if (ch != ':') {
                state_ = state::done;
                break;
            }
            select_value();
            state_ = state::before_value;
            break;
        case state::before_value:
            if (is_space(ch)) break;
            if (ch == '"') {
                state_ = state::in_string;
            } else if (ch == '{' || ch == '[') {
                depth_ = 1;
                nested_string_ = false;
                state_ = state::in_nested;
            } else {
                state_ = state::in_literal;
                capture(ch);
            }
            break;
        case state::in_string:
            if (escape_) {
                escape_ = false;
                capture(ch);
            } else if (ch == '\\') {
                escape_ = value_escaped_ = true;
                capture(ch);
            } else if (ch == '"') {
                finish_value(value_escaped_ ? value::kind::other : value::kind::string);
                if (state_ != state::done) state_ = state::after_value;
            } else {
                capture(ch);
            }
            break;
        case state::in_literal:
            if (ch == ',' || ch == '}' || is_space(ch)) {
                finish_value(literal_kind());
                if (state_ == state::done) break;
                state_ = ch == ','   ? state::expect_key
                         : ch == '}' ? state::done
                                     : state::after_value;
            } else {
                capture(ch);
            }
            break;
        case state::in_nested:
            nested_char(ch);
            break;
        case state::after_value:
            if (is_space(ch)) break;
            state_ = ch == ',' ? state::expect_key : state::done;
            break;
        }
    }
}

} // namespace meith::protocol
