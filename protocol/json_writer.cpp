#include "protocol/json_writer.hpp"

#include <array>
#include <charconv>
#include <cmath>
#include <cstring>

namespace meith::protocol {

namespace {

// 0 = copy as is, 1 = needs escaping (ASCII), 2 = non-ASCII (validate UTF-8 sequence).
constexpr std::array<std::uint8_t, 256> make_class_table() {
    std::array<std::uint8_t, 256> t{};
    for (int c = 0; c < 0x20; ++c)
        t[c] = 1;
    t['"'] = 1;
    t['\\'] = 1;
    t[0x7f] = 0;
    for (int c = 0x80; c < 0x100; ++c)
        t[c] = 2;
    return t;
}
constexpr auto class_table = make_class_table();

/// Length of the valid UTF-8 sequence starting at s[i], or 0 if invalid.
std::size_t utf8_sequence_length(std::string_view s, std::size_t i) {
    const auto b0 = static_cast<unsigned char>(s[i]);
    std::size_t len;
    unsigned char lo = 0x80, hi = 0xBF;
    if (b0 >= 0xC2 && b0 <= 0xDF) {
        len = 2;
    } else if (b0 >= 0xE0 && b0 <= 0xEF) {
        len = 3;
        if (b0 == 0xE0)
            lo = 0xA0; // no overlongs
        else if (b0 == 0xED)
            hi = 0x9F; // no surrogates
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
        len = 4;
        if (b0 == 0xF0)
            lo = 0x90;
        else if (b0 == 0xF4)
            hi = 0x8F; // max U+10FFFF
    } else {
        return 0;
    }
    if (i + len > s.size()) return 0;
    const auto b1 = static_cast<unsigned char>(s[i + 1]);
    if (b1 < lo || b1 > hi) return 0;
    for (std::size_t k = 2; k < len; ++k) {
        const auto b = static_cast<unsigned char>(s[i + k]);
        if (b < 0x80 || b > 0xBF) return 0;
    }
    return len;
}

/// True when none of the 8 bytes of `w` needs attention: no control byte (< 0x20), no '"', no
/// '\\' and no byte >= 0x80. (SWAR "has zero/less-than byte" tests; a false "not plain" only
/// sends the word to the byte loop, a false "plain" cannot happen.)
inline bool word_is_plain(std::uint64_t w) {
    constexpr std::uint64_t ones = 0x0101010101010101ull;
    constexpr std::uint64_t high = 0x8080808080808080ull;
    const auto has_zero = [](std::uint64_t v) { return (v - ones) & ~v & high; };
    const std::uint64_t control = (w - ones * 0x20) & ~w & high;
    return (control | has_zero(w ^ (ones * '"')) | has_zero(w ^ (ones * '\\')) | (w & high)) == 0;
}

} // namespace

void append_json_string(std::string& out, std::string_view s) {
    static constexpr char hex[] = "0123456789abcdef";
    out.push_back('"');
    std::size_t run_start = 0;
    std::size_t i = 0;
    const std::size_t n = s.size();
    while (i < n) {
        // Eight plain bytes at a time (most text): one load and a few word operations.
        if (i + 8 <= n) {
            std::uint64_t w;
            std::memcpy(&w, s.data() + i, 8);
            if (word_is_plain(w)) {
                i += 8;
                continue;
            }
        }
        const auto c = static_cast<unsigned char>(s[i]);
        const auto cls = class_table[c];
        if (cls == 0) {
            ++i;
            continue;
        }
        if (cls == 2) {
            if (const auto len = utf8_sequence_length(s, i)) {
                i += len;
                continue;
            }
        }
        out.append(s.data() + run_start, i - run_start);
        if (cls == 2) {
            out.append("\xEF\xBF\xBD"); // U+FFFD for an invalid byte
        } else {
            switch (c) {
            case '"':
                out.append("\\\"");
                break;
            case '\\':
                out.append("\\\\");
                break;
            case '\n':
                out.append("\\n");
                break;
            case '\r':
                out.append("\\r");
                break;
            case '\t':
                out.append("\\t");
                break;
            case '\b':
                out.append("\\b");
                break;
            case '\f':
                out.append("\\f");
                break;
            default:
                out.append("\\u00");
                out.push_back(hex[c >> 4]);
                out.push_back(hex[c & 0xF]);
            }
        }
        ++i;
        run_start = i;
    }
    out.append(s.data() + run_start, n - run_start);
    out.push_back('"');
}

void append_uint(std::string& out, std::uint64_t v) {
    char buf[24];
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
    (void)ec;
    out.append(buf, end);
}

void append_fixed3(std::string& out, double v) {
    if (!std::isfinite(v)) {
        out.append("null");
        return;
    }
    char buf[64];
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed, 3);
    if (ec != std::errc{}) {
        out.append("null");
        return;
    }
    out.append(buf, end);
}

void append_duration_ms(std::string& out, std::int64_t nanoseconds) {
    const std::uint64_t us =
        nanoseconds > 0 ? (static_cast<std::uint64_t>(nanoseconds) + 500) / 1000 : 0;
    append_uint(out, us / 1000);
    const auto frac = static_cast<unsigned>(us % 1000);
    const char digits[] = {'.', static_cast<char>('0' + frac / 100),
                           static_cast<char>('0' + frac / 10 % 10),
                           static_cast<char>('0' + frac % 10)};
    out.append(digits, sizeof digits);
}

bool is_valid_utf8(std::string_view s) {
    for (std::size_t i = 0; i < s.size();) {
        if (static_cast<unsigned char>(s[i]) < 0x80) {
            ++i;
            continue;
        }
        const auto len = utf8_sequence_length(s, i);
        if (len == 0) return false;
        i += len;
    }
    return true;
}

std::string_view cut_utf8(std::string_view text, std::size_t max) {
    if (text.size() <= max) return text;
    std::size_t end = max;
    // Back up over continuation bytes (10xxxxxx) to the start of the cut character.
    while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80)
        --end;
    return text.substr(0, end);
}

} // namespace meith::protocol
