// pem_filter: pem_block_filter (audit/redactor.hpp), the stateful line filter that redacts a
// private key's body lines on a tool's stderr, which no single-line rule recognises.
#include "audit/redactor.hpp"

#include <cctype>
#include <string_view>

namespace meith::audit {

namespace {
bool pem_begin(std::string_view line) {
    const auto at = line.find("-----BEGIN ");
    return at != std::string_view::npos && line.find("-----", at + 11) != std::string_view::npos;
}
bool pem_end(std::string_view line) {
    const auto at = line.find("-----END ");
    return at != std::string_view::npos && line.find("-----", at + 9) != std::string_view::npos;
}
/// Base64 body lines, empty lines and RFC 1421 headers ("Proc-Type: 4,ENCRYPTED").
bool pem_inner(std::string_view line) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' '))
        line.remove_suffix(1);
    if (line.empty()) return true;
    if (const auto colon = line.find(": "); colon != std::string_view::npos && colon > 0) {
        for (char c : line.substr(0, colon))
            if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-') return false;
        return true;
    }
    for (char c : line)
        if (!std::isalnum(static_cast<unsigned char>(c)) && c != '+' && c != '/' && c != '=')
            return false;
    return true;
}
} // namespace

std::string_view pem_block_filter::filter(std::string_view line) {
    static constexpr std::string_view redacted = "[REDACTED: PEM block line]";
    if (inside_) {
        if (pem_end(line)) {
            inside_ = false;
            return redacted;
        }
        if (pem_inner(line)) return redacted;
        // Not PEM any more: an unterminated block ends here. The line may begin the next
        // block (a key cut short, then another), so it is looked at as any other line.
        inside_ = false;
    }
    if (!pem_begin(line)) return line;
    inside_ = !pem_end(line); // a one-line block ends where it starts
    return redacted;
}

} // namespace meith::audit
