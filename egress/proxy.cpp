// proxy: HTTP CONNECT, absolute-form HTTP and SOCKS5 on Asio coroutines (see proxy.hpp).
#include "egress/proxy.hpp"

#include "egress/address.hpp"
#include "egress/request.hpp"
#include "egress/resolver.hpp"

#include <asio/co_spawn.hpp>
#include <asio/connect.hpp>
#include <asio/experimental/as_tuple.hpp>
#include <asio/experimental/awaitable_operators.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/posix/stream_descriptor.hpp>
#include <asio/read.hpp>
#include <asio/steady_timer.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/write.hpp>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <exception>
#include <optional>
#include <unordered_set>

#include <sys/resource.h>

namespace meith::egress {

namespace {

using asio::awaitable;
using asio::ip::tcp;
constexpr auto nothrow = asio::experimental::as_tuple(asio::use_awaitable);
constexpr std::size_t max_head = 16 * 1024;

/// "10", "0.3": a duration in seconds for messages.
std::string seconds_text(std::chrono::milliseconds d) {
    return fmt::format("{:g}", static_cast<double>(d.count()) / 1000.0);
}

/// The connection limit of a source: `configured`, and never more than an eighth of meithd's
/// descriptor limit (a connection holds two), so one source cannot take what every source needs.
std::size_t connection_limit(std::size_t configured) {
    rlimit l{};
    if (::getrlimit(RLIMIT_NOFILE, &l) != 0 || l.rlim_cur == RLIM_INFINITY) return configured;
    return std::min<std::size_t>(
        configured, std::max<std::size_t>(16, static_cast<std::size_t>(l.rlim_cur / 8)));
}

/// Connections past a source's limit that are read (for their target) and refused with a reason;
/// beyond these they are closed at once.
constexpr std::size_t max_refusing = 16;
/// How long a connection past the limit may take to say what it wants.
constexpr std::chrono::seconds refusing_read_timeout{5};

std::string rule_text_for(const std::string& host, std::uint16_t port) {
    const bool v6 = host.find(':') != std::string::npos;
    return fmt::format("{}{}{}:{}", v6 ? "[" : "", host, v6 ? "]" : "", port);
}

class proxy_impl final : public proxy {
  public:
    proxy_impl(asio::any_io_executor ex, int fd, proxy_options opts)
        : ex_(ex), acceptor_(ex), opts_(std::move(opts)),
          budget_(opts_.budget ? opts_.budget : std::make_shared<source_budget>()),
          limit_(connection_limit(opts_.max_connections)) {
        std::error_code ec;
        acceptor_.assign(tcp::v4(), fd, ec);
    }

    void run() {
        asio::co_spawn(ex_, accept_loop(std::static_pointer_cast<proxy_impl>(shared_from_this())),
                       [](const std::exception_ptr& e) {
                           if (e) spdlog::error("egress proxy: stopped accepting on an error");
                       });
    }

    void stop() override {
        std::error_code ec;
        acceptor_.close(ec);
        stopped_ = true;
        // The process that opened them is gone: its connections close, whatever they wait for
        // (a request, a lookup, a person, the dial, the relay); each still ends in its record.
        for (conn* c : conns_) {
            c->client.close(ec);
            c->upstream.close(ec);
            if (c->cancel_wait) c->cancel_wait();
        }
    }

  private:
    /// A connection counted in its source's budget (`open`, or `refusing` past the limit) until
    /// its coroutine's frame is gone, however it ends (an exception included, or never started).
    struct active_guard {
        std::shared_ptr<proxy_impl> self;
        std::atomic<std::size_t>* counter = nullptr;
        active_guard(std::shared_ptr<proxy_impl> p, bool over)
            : self(std::move(p)), counter(over ? &self->budget_->refusing : &self->budget_->open) {
            ++*counter;
        }
        active_guard(active_guard&& o) noexcept
            : self(std::move(o.self)), counter(std::exchange(o.counter, nullptr)) {}
        active_guard(const active_guard&) = delete;
        active_guard& operator=(const active_guard&) = delete;
        active_guard& operator=(active_guard&&) = delete;
        ~active_guard() {
            if (self && counter) --*counter;
        }
        bool over() const { return counter == &self->budget_->refusing; }
    };

    static awaitable<void> accept_loop(std::shared_ptr<proxy_impl> self) {
        // A failed accept (EMFILE, ENFILE, ENOBUFS, …) is tried again after a pause growing from
        // 50 ms to 5 s, logged; only the acceptor's closing (stop) ends the loop.
        std::chrono::milliseconds pause{0};
        asio::steady_timer timer(self->ex_);
        for (;;) {
            auto [ec, sock] = co_await self->acceptor_.async_accept(nothrow);
            if (!self->acceptor_.is_open() || ec == asio::error::operation_aborted) co_return;
            if (ec) {
                pause = std::clamp(pause * 2, std::chrono::milliseconds(50),
                                   std::chrono::milliseconds(5000));
                spdlog::warn("egress proxy: accepting a connection failed: {}; trying again in "
                             "{} ms",
                             ec.message(), pause.count());
                timer.expires_after(pause);
                co_await timer.async_wait(nothrow);
                continue;
            }
            if (pause.count() != 0) {
                spdlog::info("egress proxy: accepting connections again");
                pause = std::chrono::milliseconds(0);
            }
            // Past the source's limit a connection is read only for its target and refused with
            // the reason (audited); past a few of those it is closed at once.
            const bool over = self->budget_->open >= self->limit_;
            if (over && self->budget_->refusing >= max_refusing) {
                if (!self->warned_full_)
                    spdlog::warn("egress proxy: a source has {} proxied connections open, its "
                                 "limit, and {} more being refused: closing new ones at once",
                                 self->limit_, max_refusing);
                self->warned_full_ = true;
                std::error_code ignored;
                sock.close(ignored);
                continue;
            }
            self->warned_full_ = false;
            asio::co_spawn(self->ex_, serve(active_guard(self, over), std::move(sock)),
                           [](const std::exception_ptr& e) {
                               if (!e) return;
                               try {
                                   std::rethrow_exception(e);
                               } catch (const std::exception& x) {
                                   spdlog::error("egress proxy: a connection failed: {}", x.what());
                               } catch (...) {
                                   spdlog::error("egress proxy: a connection failed");
                               }
                           });
        }
    }

    struct conn {
        tcp::socket client;
        tcp::socket upstream;
        connection_record rec;
        std::array<char, max_head> buf{};
        std::size_t have = 0;
        std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
        bool over_limit = false; ///< accepted past the source's limit: refused once it asks
        std::function<void()> cancel_wait; ///< while waiting for a lookup or a person: ends it
    };

    /// `c` in conns_ (what stop() closes) for as long as it lives.
    struct registered {
        proxy_impl& self;
        conn& c;
        registered(proxy_impl& s, conn& cn) : self(s), c(cn) { self.conns_.insert(&c); }
        registered(const registered&) = delete;
        registered& operator=(const registered&) = delete;
        ~registered() { self.conns_.erase(&c); }
    };

    static awaitable<void> serve(active_guard guard, tcp::socket sock) {
        const std::shared_ptr<proxy_impl> self = guard.self;
        conn c{std::move(sock),
               tcp::socket(self->ex_),
               {},
               {},
               0,
               std::chrono::steady_clock::now(),
               false,
               {}};
        c.over_limit = guard.over();
        const registered in_set(*self, c);
        if (self->opts_.owner) c.rec.owner = self->opts_.owner();
        asio::steady_timer read_deadline(self->ex_);
        if (c.over_limit) { // it gets a few seconds to say what it wants, then is closed
            read_deadline.expires_after(refusing_read_timeout);
            read_deadline.async_wait([&c](const std::error_code& e) {
                if (!e) {
                    std::error_code ignored;
                    c.client.close(ignored);
                }
            });
        }
        if (!self->stopped_) co_await self->handle(c);
        read_deadline.cancel();
        if (self->stopped_ && c.rec.allowed && c.rec.reason.empty())
            c.rec.reason = "closed by meithd: the process that opened it exited";
        c.rec.duration = std::chrono::duration_cast<std::chrono::milliseconds>(
            std::chrono::steady_clock::now() - c.t0);
        if (!c.rec.host.empty() && self->opts_.on_closed) self->opts_.on_closed(c.rec);
    }

    awaitable<void> handle(conn& c) {
        if (opts_.forward_port != 0) { // a loopback forward: its target is fixed
            c.rec.protocol = "forward";
            c.rec.host = "127.0.0.1";
            c.rec.port = opts_.forward_port;
            if (co_await open_upstream(c)) co_await relay(c, 0);
            co_return;
        }
        auto [ec, n] = co_await c.client.async_read_some(asio::buffer(c.buf), nothrow);
        if (ec || n == 0) co_return;
        c.have = n;
        if (c.buf[0] == 0x05)
            co_await socks5(c);
        else
            co_await http(c);
    }

    /// Reads until the buffer holds `want` bytes; false at EOF or an error.
    static awaitable<bool> fill(conn& c, std::size_t want) {
        while (c.have < want) {
            if (want > c.buf.size()) co_return false;
            auto [ec, n] = co_await c.client.async_read_some(
                asio::buffer(c.buf.data() + c.have, c.buf.size() - c.have), nothrow);
            if (ec || n == 0) co_return false;
            c.have += n;
        }
        co_return true;
    }

    static awaitable<void> reply(conn& c, std::string_view bytes) {
        co_await asio::async_write(c.client, asio::buffer(bytes.data(), bytes.size()), nothrow);
    }

    // ---- SOCKS5 (RFC 1928) ------------------------------------------------------------------

    awaitable<void> socks5(conn& c) {
        c.rec.protocol = "socks5";
        if (!co_await fill(c, 2) || !co_await fill(c, 2 + static_cast<unsigned char>(c.buf[1])))
            co_return;
        const std::size_t greeting = 2 + static_cast<unsigned char>(c.buf[1]);
        co_await reply(c, std::string_view("\x05\x00", 2)); // no authentication
        socks5_request q;
        for (;;) {
            q = parse_socks5_request(std::string_view(c.buf.data(), c.have).substr(greeting));
            if (q.st != socks5_request::state::incomplete) break;
            if (!co_await fill(c, greeting + q.size)) co_return;
        }
        const auto answer = [](unsigned char code) {
            return std::string{'\x05', static_cast<char>(code), '\x00', '\x01', 0, 0, 0, 0, 0, 0};
        };
        if (q.st == socks5_request::state::bad) {
            if (!q.target.shown.empty()) { // a host that is none: refused and audited
                c.rec.host = q.target.shown;
                c.rec.port = q.target.port;
                c.rec.reason = q.why;
                refuse(c.rec);
            }
            co_await reply(c, answer(q.reply));
            co_return;
        }
        c.rec.host = q.target.host;
        c.rec.port = q.target.port;
        if (q.command != 1) { // only CONNECT
            c.rec.reason = "only SOCKS5 CONNECT is supported";
            co_await reply(c, answer(7));
            co_return;
        }
        if (!co_await open_upstream(c)) {
            co_await reply(c, answer(2));
            co_return;
        }
        co_await reply(c, answer(0));
        co_await relay(c, greeting + q.size);
    }

    // ---- HTTP: CONNECT and absolute-form requests --------------------------------------------

    awaitable<void> http(conn& c) {
        std::string_view head(c.buf.data(), c.have);
        while (head.find("\r\n\r\n") == std::string_view::npos) {
            if (c.have >= c.buf.size()) {
                co_await reply(
                    c, "HTTP/1.1 431 Request Header Fields Too Large\r\nConnection: close\r\n\r\n");
                co_return;
            }
            if (!co_await fill(c, c.have + 1)) co_return;
            head = std::string_view(c.buf.data(), c.have);
        }
        const http_head h = parse_http_head(head);
        c.rec.protocol = h.protocol;
        if (!h.why.empty()) {
            if (!h.target.shown.empty()) { // a host that is none: refused and audited
                c.rec.host = h.target.shown;
                c.rec.port = h.target.port;
                c.rec.reason = h.why;
                refuse(c.rec);
            }
            const std::string body = h.why + "\n";
            co_await reply(c, fmt::format("HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\n"
                                          "Content-Length: {}\r\nConnection: close\r\n\r\n{}",
                                          body.size(), body));
            co_return;
        }
        c.rec.host = h.target.host;
        c.rec.port = h.target.port;
        if (!co_await open_upstream(c)) {
            const std::string body =
                c.rec.reason + (c.rec.suggestion.empty() ? "" : "; " + c.rec.suggestion) + "\n";
            co_await reply(c, fmt::format("HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\n"
                                          "Content-Length: {}\r\nConnection: close\r\n\r\n{}",
                                          body.size(), body));
            co_return;
        }
        if (h.protocol == "connect") {
            co_await reply(c, "HTTP/1.1 200 Connection established\r\n\r\n");
            co_await relay(c, h.head_end);
        } else {
            // The request to the origin: its path, then the rest as the process sent it.
            std::string first = fmt::format("{} {} {}\r\n", h.method, h.path, h.version);
            auto [ec, n] = co_await asio::async_write(c.upstream, asio::buffer(first), nothrow);
            (void)n;
            if (ec) co_return;
            c.rec.bytes_sent += first.size();
            co_await relay(c, h.line_end);
        }
    }

    // ---- the decision and the dial -----------------------------------------------------------

    awaitable<bool> open_upstream(conn& c) {
        auto& r = c.rec;
        if (c.over_limit) {
            r.reason = fmt::format("the source already has {} proxied connections open, its limit; "
                                   "refused until one of them closes",
                                   limit_);
            refuse(r);
            co_return false;
        }
        std::error_code ec;
        const auto literal = asio::ip::make_address(r.host, ec);
        const bool is_literal = !ec;
        bool denied = false;
        const rule* decided = opts_.rules.decide(r.host, r.port, denied);
        if (decided && is_literal && !denied && !decided->literal)
            decided = nullptr; // names do not allow IPs
        if (denied) {
            r.rule = decided->text;
            r.reason =
                fmt::format("{}:{} is denied by the rule \"{}\"", r.host, r.port, decided->text);
            refuse(r);
            co_return false;
        }
        rule asked; // a person's answer stands for a rule naming exactly this target
        if (decided == nullptr && opts_.rules.ask && opts_.ask) {
            const ask_verdict verdict = co_await ask_person(c);
            if (!verdict.allow) {
                r.reason = verdict.why;
                r.suggestion = verdict.suggestion;
                refuse(r);
                co_return false;
            }
            asked.text = verdict.why;
            asked.host = r.host;
            asked.port = r.port;
            asked.literal = is_literal;
            decided = &asked;
        }
        if (decided == nullptr) {
            r.reason = is_literal ? fmt::format("{} is an IP address no rule lists", r.host)
                                  : fmt::format("no rule allows {}:{}", r.host, r.port);
            r.suggestion = fmt::format("add \"{}\" to the source's network.allow",
                                       rule_text_for(r.host, r.port));
            refuse(r);
            co_return false;
        }
        r.rule = decided->text;
        std::vector<asio::ip::address> addrs;
        if (is_literal) {
            addrs.push_back(literal);
        } else {
            std::string why;
            addrs = co_await lookup(c, why);
            if (!why.empty()) {
                r.reason = why;
                refuse(r);
                co_return false;
            }
        }
        if (stopped_) co_return false;
        if (addrs.empty()) {
            r.reason = fmt::format("{} does not resolve", r.host);
            refuse(r);
            co_return false;
        }
        std::string refused_kind;
        for (const auto& a : addrs) {
            const tcp::endpoint ep(a, r.port);
            // A rule naming this very address is explicit; a name's answer must be public, and
            // not this machine's own (a service bound to 0.0.0.0 answers there).
            if (!opts_.rules.allow_private && !(is_literal && decided->literal)) {
                const auto kind = special_address_kind(ep.data());
                if (!kind.empty()) {
                    refused_kind =
                        fmt::format("{} resolves to {}, a {} address", r.host, a.to_string(), kind);
                    continue;
                }
                if (is_own_address(ep.data())) {
                    refused_kind = fmt::format("{} resolves to {}, an address of this machine",
                                               r.host, a.to_string());
                    continue;
                }
            }
            asio::steady_timer timer(ex_, opts_.connect_timeout);
            timer.async_wait([&c](const std::error_code& e) {
                if (!e) {
                    std::error_code ignored;
                    c.upstream.close(ignored);
                }
            });
            auto [cec] = co_await c.upstream.async_connect(ep, nothrow);
            timer.cancel();
            if (stopped_) co_return false;
            if (!cec) {
                r.address = a.to_string();
                r.allowed = true;
                co_return true;
            }
            std::error_code ignored;
            c.upstream.close(ignored);
            r.reason =
                fmt::format("{} ({}) did not answer: {}", r.host, a.to_string(), cec.message());
        }
        if (!refused_kind.empty()) {
            r.reason = refused_kind;
            r.suggestion =
                "set network.allow_private = true if the source means to reach its own network";
            refuse(r);
        }
        co_return false;
    }

    /// `c.rec.host`'s addresses, looked up on a thread of its own (start_lookup), or `why` it
    /// has none: the source's lookups are all taken, the deadline passed, the proxy stopped.
    awaitable<std::vector<asio::ip::address>> lookup(conn& c, std::string& why) {
        const auto& r = c.rec;
        if (budget_->lookups >= opts_.max_lookups) {
            why = fmt::format("the source already has {} name lookups pending (a slow resolver?); "
                              "{} was not looked up",
                              opts_.max_lookups, r.host);
            co_return std::vector<asio::ip::address>{};
        }
        int wake_fd = -1;
        const auto st = start_lookup(
            r.host, r.port, std::shared_ptr<std::atomic<std::size_t>>(budget_, &budget_->lookups),
            wake_fd, why);
        if (!st) co_return std::vector<asio::ip::address>{};
        asio::posix::stream_descriptor wake(ex_, wake_fd);
        asio::steady_timer deadline(ex_, opts_.resolve_timeout);
        c.cancel_wait = [&wake, &deadline] {
            std::error_code ignored;
            wake.cancel(ignored);
            deadline.cancel();
        };
        char byte = 0;
        using namespace asio::experimental::awaitable_operators;
        co_await (wake.async_read_some(asio::buffer(&byte, 1), nothrow) ||
                  deadline.async_wait(nothrow));
        c.cancel_wait = nullptr;
        if (auto addrs = st->take()) co_return std::move(*addrs);
        why = stopped_ ? "closed by meithd: the process that opened it exited"
                       : fmt::format("name resolution of {} took longer than {} s", r.host,
                                     seconds_text(opts_.resolve_timeout));
        co_return std::vector<asio::ip::address>{};
    }

    /// Holds the connection until `opts_.ask` answers (or `ask_timeout` passes: refused).
    awaitable<ask_verdict> ask_person(conn& c) {
        const connection_record& r = c.rec;
        struct pending {
            explicit pending(asio::any_io_executor ex) : wake(ex) {}
            asio::steady_timer wake;
            std::optional<ask_verdict> verdict;
        };
        auto p = std::make_shared<pending>(ex_);
        p->wake.expires_after(opts_.ask_timeout);
        opts_.ask(r, [weak = std::weak_ptr<pending>(p)](ask_verdict v) {
            auto held = weak.lock();
            if (!held || held->verdict) return;
            held->verdict = std::move(v);
            held->wake.cancel();
        });
        c.cancel_wait = [&p] { p->wake.cancel(); };
        if (!p->verdict) co_await p->wake.async_wait(nothrow);
        c.cancel_wait = nullptr;
        if (p->verdict) co_return std::move(*p->verdict);
        if (stopped_)
            co_return ask_verdict{false, "closed by meithd: the process that opened it exited", {}};
        co_return ask_verdict{
            false,
            fmt::format("nobody answered within {} s", opts_.ask_timeout.count() / 1000),
            {}};
    }

    void refuse(connection_record& r) {
        r.allowed = false;
        // Once stopped, its process is gone: there is nobody to tell, only the record.
        if (opts_.on_refused && !stopped_) opts_.on_refused(r);
    }

    // ---- the relay -----------------------------------------------------------------------------

    static awaitable<void> pump(tcp::socket& from, tcp::socket& to, std::uint64_t& count) {
        std::array<char, 65536> buf;
        for (;;) {
            auto [ec, n] = co_await from.async_read_some(asio::buffer(buf), nothrow);
            if (ec || n == 0) break;
            auto [wec, wn] = co_await asio::async_write(to, asio::buffer(buf.data(), n), nothrow);
            (void)wn;
            if (wec) break;
            count += n;
        }
        std::error_code ignored;
        to.shutdown(tcp::socket::shutdown_send, ignored);
    }

    awaitable<void> relay(conn& c, std::size_t consumed) {
        // What the process sent after the request, before the tunnel was up.
        if (c.have > consumed) {
            auto [ec, n] = co_await asio::async_write(
                c.upstream, asio::buffer(c.buf.data() + consumed, c.have - consumed), nothrow);
            if (ec) co_return;
            c.rec.bytes_sent += n;
        }
        using namespace asio::experimental::awaitable_operators;
        co_await (pump(c.client, c.upstream, c.rec.bytes_sent) &&
                  pump(c.upstream, c.client, c.rec.bytes_received));
    }

    asio::any_io_executor ex_;
    tcp::acceptor acceptor_;
    proxy_options opts_;
    std::shared_ptr<source_budget> budget_; ///< shared with the source's other proxies
    std::size_t limit_;                     ///< connections open per source
    bool stopped_ = false;
    bool warned_full_ = false;
    std::unordered_set<conn*> conns_; ///< every connection being served (stop closes them)
};

} // namespace

std::shared_ptr<proxy> proxy::start(asio::any_io_executor ex, int listener_fd, proxy_options opts) {
    auto p = std::make_shared<proxy_impl>(std::move(ex), listener_fd, std::move(opts));
    p->run();
    return p;
}

std::vector<std::string> proxy_environment(std::uint16_t port) {
    const std::string http = fmt::format("http://127.0.0.1:{}", port);
    const std::string socks = fmt::format("socks5h://127.0.0.1:{}", port);
    return {
        "HTTP_PROXY=" + http,  "HTTPS_PROXY=" + http, "ALL_PROXY=" + socks, "http_proxy=" + http,
        "https_proxy=" + http, "all_proxy=" + socks,  "NO_PROXY=",          "no_proxy="};
}

} // namespace meith::egress
