// table: aligned text columns for the table output of tools, sources and audit.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace meith::cli {

/// A table line stays within this many columns (the last column is cut to fit).
inline constexpr std::size_t table_width = 100;
/// The last column (description, error, request) gets at least this many columns.
inline constexpr std::size_t min_last_width = 20;

/// Display columns of UTF-8 text, counting one per code point (no East Asian width).
std::size_t columns(std::string_view s);

/// Cuts `s` to at most `width` columns, ending in "…" when cut; never splits a code point.
std::string truncate(const std::string& s, std::size_t width);

/// `s` padded with spaces to `width` columns.
std::string pad(const std::string& s, std::size_t width);

/// Prints `rows` (the first is the header) as aligned columns; the last column is cut so a
/// line stays within table_width (but gets at least min_last_width).
void print_table(const std::vector<std::vector<std::string>>& rows);

} // namespace meith::cli
