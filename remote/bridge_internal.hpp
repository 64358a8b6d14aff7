// bridge_internal: what remote/bridge.cpp (the pipe to meithd, the grant, the end) and
// remote/bridge_http.cpp (requests to the server, its streams) share. Not a public header.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace meith::remote::bridge_detail {

inline std::int64_t unix_now() {
    return static_cast<std::int64_t>(std::time(nullptr));
}

inline void log(const std::string& line) {
    // stderr goes to meithd's log (redacted there); never a token here.
    std::fprintf(stderr, "%s\n", line.c_str());
}

inline bool starts_with_ci(std::string_view s, std::string_view p) {
    if (s.size() < p.size()) return false;
    for (std::size_t i = 0; i < p.size(); ++i)
        if (std::tolower(static_cast<unsigned char>(s[i])) != p[i]) return false;
    return true;
}

inline std::chrono::milliseconds backoff(int attempt) {
    return std::chrono::milliseconds(std::min(250 << std::min(attempt, 6), 8000));
}

/// How long to wait before opening a cut stream again: the server's `retry:` (SSE
/// "reconnection time", MCP transports: "the client MUST respect the retry field") when it
/// sent one, between 100 ms (a server that says 0 and ends each stream at once must not have
/// meith reconnect in a tight loop) and 30 s (as Retry-After), else `otherwise`.
inline std::chrono::milliseconds reconnect_wait(std::optional<long> retry_ms,
                                                std::chrono::milliseconds otherwise) {
    if (!retry_ms) return otherwise;
    return std::chrono::milliseconds(std::clamp<long>(*retry_ms, 100, 30000));
}

/// Whether the space-separated scope list `held` has every scope of `wanted` (RFC 6749 §3.3).
inline bool covers(std::string_view held, std::string_view wanted) {
    auto words = [](std::string_view s) {
        std::vector<std::string_view> out;
        for (std::size_t i = 0; i < s.size();) {
            const auto sp = s.find(' ', i);
            const auto w = s.substr(i, sp == std::string_view::npos ? s.npos : sp - i);
            if (!w.empty()) out.push_back(w);
            if (sp == std::string_view::npos) break;
            i = sp + 1;
        }
        return out;
    };
    const auto have = words(held);
    for (auto w : words(wanted))
        if (std::find(have.begin(), have.end(), w) == have.end()) return false;
    return true;
}

/// A value that may go in a header line as is: printable ASCII, no CR/LF.
inline bool header_safe(std::string_view v) {
    return std::all_of(v.begin(), v.end(), [](char c) { return c >= 0x20 && c < 0x7f; });
}

} // namespace meith::remote::bridge_detail
