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

/// The width tables and wrapped text use: the terminal's when standard output is one (at least
/// 40 columns), else $COLUMNS when set (at least 40), else table_width.
std::size_t output_width();

/// Prints `rows` (the first is the header) as aligned columns; the last column is cut so a
/// line stays within output_width() (but gets at least min_last_width).
void print_table(const std::vector<std::vector<std::string>>& rows);

/// `text` broken at spaces into lines of at most `width` columns (a longer word stands on a
/// line of its own), every line after the first starting with `indent`; joined with "\n".
std::string wrap(std::string_view text, std::size_t width, std::string_view indent);

} // namespace meith::cli
