#include "cli/table.hpp"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <string_view>
#include <sys/ioctl.h>
#include <unistd.h>

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

std::size_t output_width() {
    winsize ws{};
    if (::isatty(STDOUT_FILENO) && ::ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col >= 40)
        return ws.ws_col;
    if (const char* env = std::getenv("COLUMNS")) {
        const std::string_view text(env);
        std::size_t n = 0;
        const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
        if (ec == std::errc() && end == text.data() + text.size() && n >= 40) return n;
    }
    return table_width;
}

std::string wrap(std::string_view text, std::size_t width, std::string_view indent) {
    std::string out, line;
    const auto flush = [&] {
        if (!out.empty()) {
            out += '\n';
            out += indent;
        }
        out += line;
        line.clear();
    };
    const std::size_t room = width > columns(indent) + 10 ? width - columns(indent) : 10;
    std::size_t i = 0;
    while (i < text.size()) {
        const std::size_t space = text.find(' ', i);
        const std::string_view word =
            text.substr(i, space == std::string_view::npos ? std::string_view::npos : space - i);
        i = space == std::string_view::npos ? text.size() : space + 1;
        if (word.empty()) continue;
        if (!line.empty() && columns(line) + 1 + columns(word) > room) flush();
        if (!line.empty()) line += ' ';
        line += word;
    }
    if (!line.empty() || out.empty()) flush();
    return out;
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
    const std::size_t width = output_width();
    const std::size_t last_width = used + min_last_width < width ? width - used : min_last_width;

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
