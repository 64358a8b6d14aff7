// approvals_internal: helpers the approval service's files share (approvals.cpp, grant_file.cpp).
#pragma once

#include "approvals/approvals.hpp"
#include "protocol/json_writer.hpp"

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

namespace meith::approvals::detail {

/// Milliseconds since the Unix epoch.
inline std::int64_t epoch_ms(permissions::wall_clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}

/// `v` as a JSON number, or `null`.
inline void append_optional_uint(std::string& out, const std::optional<std::uint64_t>& v) {
    if (v)
        protocol::append_uint(out, *v);
    else
        out += "null";
}

} // namespace meith::approvals::detail
