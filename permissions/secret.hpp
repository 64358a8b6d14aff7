// secret: random identifiers and secrets, and comparing them without leaking timing.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace meith::permissions {

/// `bytes` bytes from the OS CSPRNG (getrandom(2)), as 2×`bytes` lower-case hex digits.
/// Throws std::system_error when the kernel gives no randomness.
std::string random_hex(std::size_t bytes);

/// Compares in time that depends only on the lengths, not on where the strings differ.
bool constant_time_equal(std::string_view a, std::string_view b);

} // namespace meith::permissions
