#include "protocol/suggest.hpp"

#include <algorithm>
#include <tuple>

namespace meith::protocol {

std::size_t edit_distance(std::string_view a, std::string_view b) {
    std::vector<std::size_t> row(b.size() + 1);
    for (std::size_t j = 0; j <= b.size(); ++j)
        row[j] = j;
    for (std::size_t i = 1; i <= a.size(); ++i) {
        std::size_t diag = row[0];
        row[0] = i;
        for (std::size_t j = 1; j <= b.size(); ++j) {
            const std::size_t up = row[j];
            row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
            diag = up;
        }
    }
    return row[b.size()];
}

std::vector<std::string> closest_names(std::string_view word,
                                       std::span<const std::string> candidates, std::size_t limit) {
    std::vector<std::tuple<std::size_t, std::size_t, std::string>> scored; // distance, length
    const std::size_t allowed = std::max<std::size_t>(2, word.size() / 3);
    for (const std::string& c : candidates) {
        if (c == word) continue;
        std::size_t d = edit_distance(word, c);
        // "file" finds read_file: a part of a name counts as close.
        if (word.size() >= 3 && c.find(word) != std::string::npos) d = std::min<std::size_t>(d, 1);
        if (d <= allowed) scored.emplace_back(d, c.size(), c);
    }
    std::sort(scored.begin(), scored.end());
    scored.erase(std::unique(scored.begin(), scored.end()), scored.end());
    std::vector<std::string> out;
    for (auto& [d, length, name] : scored) {
        if (out.size() == limit) break;
        out.push_back(std::move(name));
    }
    return out;
}

} // namespace meith::protocol
