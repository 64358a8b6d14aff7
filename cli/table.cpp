#include "cli/table.hpp"

#include <algorithm>

#include <fmt/core.h>

namespace meith::cli {

std::size_t columns(std::string_view s) {
    return static_cast<std::size_t>(
        std::count_if(s.begin(), s.end(), [](char c) { return (c & 0xC0) != 0x80; }));
}

std::string truncate(const std::string& s, std::size_t width) {
    if (columns(s) <= width) return s;
    if (width == 0) return {};
    std::size_t keep = width - 1, seen = 0, i = 0;
    for (; i < s.size(); ++i) {
        if ((s[i] & 0xC0) != 0x80) {
            if (seen == keep) break;
            ++seen;
        }
    }
    return s.substr(0, i) + "…";
}

std::string pad(const std::string& s, std::size_t width) {
    const std::size_t c = columns(s);
    return c >= width ? s : s + std::string(width - c, ' ');
}

void print_table(const std::vector<std::vector<std::string>>& rows) {
    if (rows.empty()) return;
    const std::size_t n = rows.front().size();
    std::vector<std::size_t> widths(n - 1, 0);
    for (const auto& r : rows) {
        for (std::size_t c = 0; c + 1 < n; ++c) {
            widths[c] = std::max(widths[c], columns(r[c]));
        }
    }
    std::size_t used = 0;
    for (std::size_t w : widths)
        used += w + 2;
    const std::size_t last_width =
        used + min_last_width < table_width ? table_width - used : min_last_width;

    for (const auto& r : rows) {
        std::string line;
        for (std::size_t c = 0; c + 1 < n; ++c)
            line += pad(r[c], widths[c] + 2);
        line += truncate(r[n - 1], last_width);
        while (!line.empty() && line.back() == ' ')
            line.pop_back();
        fmt::print("{}\n", line);
    }
}

} // namespace meith::cli
