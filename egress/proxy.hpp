// proxy: the egress proxy meithd runs for a confined process whose source has a `network`
// table (docs/protocol.md §19). The process lives in a network namespace with only loopback;
// the sandbox opens a listening socket on 127.0.0.1 there and hands it to meithd, which
// serves it here, outside the namespace. Each connection speaks HTTP `CONNECT host:port`, an
// absolute-form HTTP request (`GET http://host/path`), or SOCKS5 `CONNECT` (RFC 1928, no
// authentication, names resolved here: `socks5h`). A target is allowed only when a rule names
// it; the proxy resolves the name itself, drops loopback, private, link-local and metadata
// results (unless the rules allow private addresses), and dials an address it checked, so a
// name that resolves to 127.0.0.1 is refused like the literal. IP literals pass only when a
// rule lists that address. Every connection ends in one record (for the audit line); a refused
// one also goes to `on_refused` as it happens (for the caller's sandbox_violation event).
// I/O-thread only.
#pragma once

#include "egress/connection.hpp"
#include "egress/rules.hpp"

#include <asio/any_io_executor.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace meith::egress {

/// What the proxies of one source share (proxy_options::budget). Thread-safe.
struct source_budget {
    std::atomic<std::size_t> open{0};     ///< connections being served
    std::atomic<std::size_t> refusing{0}; ///< connections past the limit, being refused
    std::atomic<std::size_t> lookups{0};  ///< name lookups whose thread has not ended
};

struct proxy_options {
    rule_set rules;
    std::function<void(const connection_record&)> on_refused;
    std::function<void(const connection_record&)> on_closed;
    /// With rules.ask: a connection to `record.host`:`record.port` that no rule decided waits
    /// for `reply` (or `ask_timeout`, then refused). Unset: refused as without ask.
    std::function<void(const connection_record&, ask_reply)> ask;
    /// Called as each connection is accepted, before a byte is read: whose it is, for the
    /// record's `owner` (a connection outlives the moment that decided it).
    std::function<std::shared_ptr<const void>()> owner;
    std::chrono::milliseconds ask_timeout{300000};
    /// Connections open at once per source (those of all its processes): past it a new one
    /// is refused with the reason, and audited. Never more than an eighth of meithd's
    /// RLIMIT_NOFILE (each holds two descriptors).
    std::size_t max_connections = 256;
    std::chrono::milliseconds connect_timeout{10000};
    /// A name's lookup that takes longer is refused ("name resolution of X took longer than
    /// 10 s"); the lookup's thread runs on (getaddrinfo cannot be interrupted) and holds one
    /// of the source's `max_lookups` until it ends.
    std::chrono::milliseconds resolve_timeout{10000};
    /// Lookups in flight per source; past it a name is refused at once.
    std::size_t max_lookups = 16;
    /// The source's count of connections open and lookups in flight, shared by every copy of
    /// these options: one source's processes (an exec tool's runs each get a copy) share
    /// `max_connections` and `max_lookups`. Null: a budget of this proxy's own.
    std::shared_ptr<source_budget> budget = std::make_shared<source_budget>();
    /// Non-zero: a loopback forward (docs/protocol.md §19 "Loopback ports"), not a proxy.
    /// Every connection is to 127.0.0.1:`forward_port` outside the namespace, read no request
    /// from, decided by the same rules (a rule naming 127.0.0.1:PORT and allow_private) and
    /// audited with protocol "forward".
    std::uint16_t forward_port = 0;
};

class proxy : public std::enable_shared_from_this<proxy> {
  public:
    /// Serves `listener_fd`, a listening TCP socket (taken over: closed by stop or the end).
    static std::shared_ptr<proxy> start(asio::any_io_executor ex, int listener_fd,
                                        proxy_options opts);
    virtual ~proxy() = default;
    /// Stops accepting and closes every connection it serves (its process exited; child_process
    /// calls it when the child is reaped): each still ends in its record, an open tunnel's with
    /// the reason "closed by meithd: the process that opened it exited".
    virtual void stop() = 0;
};

/// The environment a process behind the proxy on 127.0.0.1:`port` gets: HTTP_PROXY,
/// HTTPS_PROXY, ALL_PROXY (socks5h), their lower-case forms, and an empty NO_PROXY.
std::vector<std::string> proxy_environment(std::uint16_t port);

/// The port the sandbox listens on inside the namespace.
inline constexpr std::uint16_t proxy_port = 3128;

} // namespace meith::egress
