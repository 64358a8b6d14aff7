// suggest: "did you mean" for names a person typed — the CLI's unknown commands and tools,
// the config's unknown keys. Standard library only (meith::protocol_core).
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace meith::protocol {

/// Levenshtein distance between `a` and `b` (insertions, deletions and substitutions of one
/// byte each cost 1). O(|a|·|b|) time, O(|b|) memory.
std::size_t edit_distance(std::string_view a, std::string_view b);

/// The names among `candidates` closest to `word` (edit distance at most 2, or at most a third
/// of the word's length for long words, or `word` of 3+ bytes a substring of them), best first
/// (distance, then length), at most `limit`; never `word` itself.
std::vector<std::string> closest_names(std::string_view word,
                                       std::span<const std::string> candidates,
                                       std::size_t limit = 3);

} // namespace meith::protocol
