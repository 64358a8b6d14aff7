// connection: what one connection through the egress proxy comes to, and a person's answer for
// one no rule decided (docs/protocol.md §19): plain data, apart from the Asio proxy, so that
// whoever only reads these (the tool-source interface, the audit) does not include it.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace meith::egress {

/// One connection through the proxy, as the audit line gives it.
struct connection_record {
    std::string protocol; ///< "connect" (HTTP CONNECT), "http", "socks5"
    std::string host;     ///< as asked (lower-case)
    std::uint16_t port = 0;
    std::string address; ///< the address dialled, empty when none was
    bool allowed = false;
    std::string rule;       ///< the rule that allowed or denied it; empty when none matched
    std::string reason;     ///< a refusal in words
    std::string suggestion; ///< for a refusal no rule decided: the rule that would allow it
    std::uint64_t bytes_sent = 0, bytes_received = 0; ///< process -> host, host -> process
    std::chrono::milliseconds duration{0};
    /// What proxy_options::owner returned when the connection was accepted (who it belongs to,
    /// the embedder's own, kept to the connection's end); empty without that callback.
    std::shared_ptr<const void> owner;
};

/// A person's answer about a target no rule decided (rule_set::ask).
struct ask_verdict {
    bool allow = false;
    std::string why;        ///< allowed: how, as the audit line's rule; refused: why, in words
    std::string suggestion; ///< refused: the rule that would allow it, when one would
};

/// Hands the answer for one held connection back to the proxy; call it once (later calls are
/// ignored). Safe to call after the proxy stopped.
using ask_reply = std::function<void(ask_verdict)>;

} // namespace meith::egress
