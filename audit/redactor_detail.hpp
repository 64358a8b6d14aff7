// redactor_detail: what the redactor's rules (redactor.cpp) and its summary writer
// (summary.cpp) share. Internal to audit/.
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <string_view>

namespace meith::audit::detail {

/// What a secret is replaced with.
inline constexpr std::string_view redacted_text = "[REDACTED]";

/// Every value rule needs one of these bytes somewhere in a match ('-', '_', ':', '=', '@' as
/// separators, a space or tab after an auth scheme word, 'A' of AWS ids and AIza keys, 'J' of
/// a JWT's "eyJ"): a string without any cannot be rewritten and skips the automaton.
inline constexpr auto value_rule_trigger = [] {
    std::array<bool, 256> t{};
    for (unsigned char c : std::string_view("-_:=@ \tAJ"))
        t[c] = true;
    return t;
}();

/// Bytes of a long string's summary that are redacted beyond the max_string_chars kept (at
/// most 4 bytes each): a secret that starts in the kept part and is cut by this window is
/// still caught by its rule (token rules match a prefix, a PEM block runs to the end), unless
/// it is a JWT over 4 KiB, whose kept part would then show its header and claims, never
/// its signature. Prose costs the rules ~25 ns a byte (docs/benchmarks.md (e)), so this bounds
/// the summary of any string to ~130 µs.
inline constexpr std::size_t redaction_margin_bytes = 4096;

/// True when `key` names a secret (docs/protocol.md §6: compared lower-cased without
/// `_ - . space`); remembered per thread for the keys that repeat.
bool secret_key(std::string_view key);

/// Characters of UTF-8 text, counted as the bytes that do not continue a sequence.
std::size_t utf8_lead_bytes(std::string_view s);

/// Number of bytes of the UTF-8 sequence starting at s[i], or 1 for an invalid byte.
std::size_t utf8_sequence_length(std::string_view s, std::size_t i);

/// False when no value rule can match `text` (redactor.cpp tells how it decides without the
/// automaton): most strings skip RE2.
bool may_match(std::string_view text);

/// `text` with the exact secrets and then every value rule applied in order, none skipped (no
/// may_match, no automaton, no key-word test): what may_match's false promises changes
/// nothing. For tests and the fuzzer; compiles its own rules at the first call.
std::string redact_by_every_rule(std::string_view text);

} // namespace meith::audit::detail
