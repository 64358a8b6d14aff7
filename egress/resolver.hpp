// resolver: the egress proxy's name lookups (docs/protocol.md §19): per source, off the I/O
// thread, with a deadline the waiting side keeps (issue 40, item 7). Asio's resolver runs
// getaddrinfo on one thread per io_context: every source's names queue behind one slow answer,
// and destroying the resolver joins a blocked lookup. Instead each lookup runs on a thread of its
// own, detached; it leaves its answer in a shared `lookup` and writes a byte to a socket pair,
// which the waiting connection reads (nothing is posted to an I/O context from that thread, so it
// may outlive the proxy and the context). The connection races that byte against its deadline;
// the caller counts the lookups in flight and refuses past its limit.
#pragma once

#include <asio/ip/address.hpp>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace meith::egress {

/// Blocking: `host`'s addresses (IPv4 and IPv6, in getaddrinfo's order; AI_ADDRCONFIG, `port`
/// as the service), or an empty list when it has none or the lookup fails. With
/// MEITH_EGRESS_TEST_HOSTS set (a test switch: getent-free resolution of test names) that file
/// replaces DNS: its "NAME ADDRESS [wait=PATH] [delay=MS]" lines give NAME (compared as
/// normal_host gives it) its ADDRESSes, unparsable ones skipped; `wait=PATH` makes the lookup
/// block until PATH exists (two minutes at most), `delay=MS` makes it take MS milliseconds (a
/// slow resolver, on the thread that resolves). A name the file lacks has no addresses then.
std::vector<asio::ip::address> resolve_blocking(const std::string& host, std::uint16_t port);

/// One lookup's answer, shared by its thread and the connection waiting for it. Thread-safe.
class lookup {
  public:
    lookup() = default;
    lookup(const lookup&) = delete;
    lookup& operator=(const lookup&) = delete;
    ~lookup();

    /// The addresses (empty when the name has none) once the thread has left them, moved out
    /// (call it once); nullopt while the lookup runs.
    std::optional<std::vector<asio::ip::address>> take();

  private:
    friend std::shared_ptr<lookup> start_lookup(const std::string&, std::uint16_t,
                                                std::shared_ptr<std::atomic<std::size_t>>, int&,
                                                std::string&);
    std::mutex m_;
    bool done_ = false;
    std::vector<asio::ip::address> addrs_;
    int notify_fd_ = -1; ///< the thread's end of the socket pair
};

/// Starts resolve_blocking(`host`, `port`) on a detached thread of its own. `in_flight` is
/// incremented now and decremented when the thread ends (it keeps `in_flight` alive until then;
/// getaddrinfo cannot be interrupted, so that may be long after the caller gave up). Returns the
/// lookup and sets `wake_fd` to the waiting end of a socket pair (close-on-exec, the caller's to
/// close), which becomes readable (one byte) once take() has the answer. When the socket pair or
/// the thread cannot be made: null, nothing left open, `in_flight` as it was, and `why` says so
/// ("name resolution of HOST could not start: CAUSE").
std::shared_ptr<lookup> start_lookup(const std::string& host, std::uint16_t port,
                                     std::shared_ptr<std::atomic<std::size_t>> in_flight,
                                     int& wake_fd, std::string& why);

} // namespace meith::egress
