// approver: what `meith approve`, `meith grant`, `grants`, `revoke` and `tools accept` share —
// the approver_hello that makes a connection an approver's (PROTOCOL.md §12) and how a
// request's members are shown (sanitized for a terminal).
#pragma once

#include "cli/session.hpp"

#include <string>
#include <string_view>

namespace meith::cli {

/// Sends approver_hello with the secret in HOME/approver.secret; returns the
/// approver_hello_result. Throws cli_error with meithd's reason when refused, or when the
/// secret cannot be read (it says where it should be).
json become_approver(session& s);

/// Member `key` of `obj` as terminal-safe text: a string as is, other JSON compact; `fallback`
/// when it is absent or null.
std::string text_of(const json& obj, std::string_view key, std::string fallback = "-");

/// An array member as "a, b, c" (terminal-safe); "-" when absent or empty.
std::string list_text(const json& obj, std::string_view key);

/// `s` without leading and trailing blanks (and a trailing CR).
std::string trim(std::string s);

} // namespace meith::cli
