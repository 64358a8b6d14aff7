// Unit tests of egress rules and the egress proxy (egress/, docs/protocol.md §19).
#include "egress/address.hpp"
#include "egress/proxy.hpp"
#include "egress/request.hpp"
#include "egress/rules.hpp"

#include "test_skip.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/post.hpp>
#include <asio/write.hpp>
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <thread>

using namespace meith::egress;

namespace unit_egress_test { // one namespace per file: the tests build as unity batches

namespace {

rule_set rules(std::vector<std::string> allow, std::vector<std::string> deny = {}) {
    rule_set s;
    for (const auto& t : allow) {
        std::string why;
        auto r = parse_rule(t, why);
        INFO(t << ": " << why);
        REQUIRE(r);
        s.allow.push_back(*r);
    }
    for (const auto& t : deny) {
        std::string why;
        auto r = parse_rule(t, why);
        REQUIRE(r);
        s.deny.push_back(*r);
    }
    return s;
}

std::string decided(const rule_set& s, std::string_view host, std::uint16_t port) {
    bool denied = false;
    const rule* r = s.decide(host, port, denied);
    if (r == nullptr) return "none";
    return (denied ? "deny " : "allow ") + r->text;
}

} // namespace

TEST_CASE("egress rules: names, ports, wildcards, any, IP literals", "[egress]") {
    const auto s =
        rules({"api.github.com:443", "*.npmjs.org", "*:8080", "203.0.113.7", "[2001:db8::1]:443"},
              {"evil.npmjs.org"});
    CHECK(decided(s, "api.github.com", 443) == "allow api.github.com:443");
    CHECK(decided(s, "api.github.com", 80) == "none");
    CHECK(decided(s, "registry.npmjs.org", 443) == "allow *.npmjs.org");
    CHECK(decided(s, "a.b.npmjs.org", 1) == "allow *.npmjs.org");
    CHECK(decided(s, "npmjs.org", 443) == "none"); // the wildcard is for subdomains only
    CHECK(decided(s, "xnpmjs.org", 443) == "none");
    CHECK(decided(s, "evil.npmjs.org", 443) == "deny evil.npmjs.org"); // deny wins
    CHECK(decided(s, "anything.example", 8080) == "allow *:8080");
    CHECK(decided(s, "203.0.113.7", 22) == "allow 203.0.113.7");
    CHECK(decided(s, "2001:db8::1", 443) == "allow [2001:db8::1]:443");
}

TEST_CASE("egress rules: names are normalised, bad rules say why", "[egress]") {
    CHECK(normal_host("API.GitHub.com.") == "api.github.com");
    CHECK(normal_host("[::1]") == "::1");
    std::string why;
    CHECK_FALSE(parse_rule("api.github.com:0", why));
    CHECK_THAT(why, Catch::Contains("1-65535"));
    CHECK_FALSE(parse_rule("api.github.com:99999", why));
    CHECK_FALSE(parse_rule("2001:db8::1", why));
    CHECK_THAT(why, Catch::Contains("brackets"));
    CHECK_FALSE(parse_rule("*.*.example.com", why));
    CHECK_FALSE(parse_rule("exa mple.com", why));
    CHECK_FALSE(parse_rule("[::1", why));
    const auto r = parse_rule("Example.COM:443", why);
    REQUIRE(r);
    CHECK(r->host == "example.com");
    CHECK(r->port == 443);
    CHECK(parse_rule("host:*", why)->port == 0);
}

// ---- the proxy end to end: what a confined process can make of a host (issue 40) -------------

namespace {

using asio::ip::tcp;

/// A temporary MEITH_EGRESS_TEST_HOSTS file (the proxy's DNS for these tests).
struct test_hosts_file {
    std::string path;
    explicit test_hosts_file(const std::string& lines) {
        char name[] = "/tmp/meith-egress-hosts-XXXXXX";
        const int fd = ::mkstemp(name);
        REQUIRE(fd >= 0);
        REQUIRE(::write(fd, lines.data(), lines.size()) == static_cast<ssize_t>(lines.size()));
        ::close(fd);
        path = name;
        ::setenv("MEITH_EGRESS_TEST_HOSTS", path.c_str(), 1);
    }
    ~test_hosts_file() {
        ::unsetenv("MEITH_EGRESS_TEST_HOSTS");
        ::unlink(path.c_str());
    }
};

/// A proxy on 127.0.0.1:<ephemeral>, served on a thread of its own; records every connection.
struct proxy_run {
    asio::io_context ioc;
    std::shared_ptr<proxy> p;
    std::uint16_t port = 0;
    std::mutex m;
    std::vector<connection_record> closed;
    std::atomic<int> asked{0};
    std::thread t;

    explicit proxy_run(rule_set rules, const std::function<void(proxy_options&)>& tweak = {}) {
        tcp::acceptor a(ioc, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
        port = a.local_endpoint().port();
        proxy_options opts;
        opts.rules = std::move(rules);
        opts.connect_timeout = std::chrono::milliseconds(500);
        opts.ask_timeout = std::chrono::milliseconds(200);
        opts.on_closed = [this](const connection_record& r) {
            std::lock_guard lock(m);
            closed.push_back(r);
        };
        opts.ask = [this](const connection_record&, ask_reply reply) {
            ++asked;
            reply({false, "test: nobody", {}});
        };
        if (tweak) tweak(opts);
        p = proxy::start(ioc.get_executor(), a.release(), std::move(opts));
        t = std::thread([this] { ioc.run(); });
    }
    ~proxy_run() {
        asio::post(ioc, [this] { p->stop(); });
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        ioc.stop();
        t.join();
    }

    /// Sends `bytes` on a new connection and returns what came back within a second (or up to
    /// `enough` bytes), then closes and waits for the connection's record.
    std::pair<std::string, connection_record> exchange(std::string_view bytes,
                                                       std::size_t enough = 1 << 16) {
        const std::size_t before = count();
        asio::io_context cio;
        tcp::socket s(cio);
        s.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
        timeval tv{1, 0};
        ::setsockopt(s.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        asio::write(s, asio::buffer(bytes.data(), bytes.size()));
        std::string got;
        char buf[4096];
        while (got.size() < enough) {
            const auto n = ::recv(s.native_handle(), buf, sizeof buf, 0);
            if (n <= 0) break;
            got.append(buf, static_cast<std::size_t>(n));
        }
        s.close();
        for (int i = 0; i < 300 && count() == before; ++i)
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        std::lock_guard lock(m);
        return {got, closed.size() > before ? closed.back() : connection_record{}};
    }

    std::size_t count() {
        std::lock_guard lock(m);
        return closed.size();
    }
};

std::string socks5_domain(std::string_view host, std::uint16_t port) {
    std::string out("\x05\x01\x00\x05\x01\x00\x03", 7);
    out += static_cast<char>(host.size());
    out += host;
    out += static_cast<char>(port >> 8);
    out += static_cast<char>(port & 0xff);
    return out;
}

/// An IPv4 address of one of this machine's interfaces that the special-address table calls
/// public (what a wildcard's name could resolve to); empty when there is none.
std::string own_public_ipv4() {
    ifaddrs* list = nullptr;
    if (::getifaddrs(&list) != 0) return {};
    std::string found;
    for (auto* i = list; i != nullptr && found.empty(); i = i->ifa_next)
        if (i->ifa_addr != nullptr && i->ifa_addr->sa_family == AF_INET &&
            (i->ifa_flags & IFF_LOOPBACK) == 0 && special_address_kind(i->ifa_addr).empty()) {
            char text[INET_ADDRSTRLEN];
            ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr, text,
                        sizeof text);
            found = text;
        }
    ::freeifaddrs(list);
    return found;
}

using namespace std::string_literals;

} // namespace

TEST_CASE("egress proxy: a NUL byte in the host is refused, not matched as a subdomain",
          "[egress]") {
    test_hosts_file hosts("evil.test 203.0.113.9\n");
    SECTION("CONNECT under an allowed wildcard") {
        proxy_run run(rules({"*.allowed.test"}));
        auto [got, rec] = run.exchange("CONNECT evil.test\0.allowed.test:443 HTTP/1.1\r\n\r\n"s);
        CHECK_THAT(got, Catch::StartsWith("HTTP/1.1 400"));
        CHECK_THAT(got, Catch::Contains("NUL"));
        CHECK_FALSE(rec.allowed);
        CHECK(rec.rule.empty()); // no rule was asked
        CHECK(rec.address.empty());
    }
    SECTION("absolute-form GET past a deny rule") {
        proxy_run run(rules({"*"}, {"evil.test"}));
        auto [got, rec] =
            run.exchange("GET http://evil.test\0.x.test/ HTTP/1.1\r\nHost: x\r\n\r\n"s);
        CHECK_THAT(got, Catch::StartsWith("HTTP/1.1 400"));
        CHECK(rec.rule.empty());
        CHECK(rec.address.empty());
    }
    SECTION("SOCKS5: a length-prefixed name holds a NUL") {
        proxy_run run(rules({"*.allowed.test"}));
        auto [got, rec] = run.exchange(socks5_domain("evil.test\0.allowed.test"s, 443), 12);
        REQUIRE(got.size() >= 4);
        CHECK(got[2] == '\x05'); // the reply to the request (after "\x05\x00")
        CHECK(got[3] != '\x00'); // refused
        CHECK(rec.rule.empty());
        CHECK(rec.address.empty());
    }
}

TEST_CASE("egress proxy: numeric host forms are the address they spell", "[egress]") {
    test_hosts_file hosts("");
    proxy_run run(rules({"*"}, {"203.0.113.7"}));
    for (const std::string form : {"3405803783", "0xcb.0.113.7", "0313.0.113.7", "203.0.28935",
                                   "0xCB007107", "203.0.113.7."}) {
        INFO(form);
        auto [got, rec] = run.exchange("CONNECT " + form + ":443 HTTP/1.1\r\n\r\n");
        CHECK_THAT(got, Catch::StartsWith("HTTP/1.1 403"));
        CHECK(rec.host == "203.0.113.7");
        CHECK(rec.rule == "203.0.113.7"); // the deny rule decided it
        auto [sgot, srec] = run.exchange(socks5_domain(form, 443), 12);
        CHECK(srec.host == "203.0.113.7");
        CHECK(srec.rule == "203.0.113.7");
    }
    // Other addresses: an IP literal passes only when listed, "*" does not list it.
    for (const auto& [form, address] :
         std::vector<std::pair<std::string, std::string>>{{"0x7f.1", "127.0.0.1"},
                                                          {"203.113.7", "203.113.0.7"},
                                                          {"[::ffff:7f00:1]", "127.0.0.1"}}) {
        INFO(form);
        auto [got, rec] = run.exchange("CONNECT " + form + ":443 HTTP/1.1\r\n\r\n");
        CHECK_THAT(got, Catch::StartsWith("HTTP/1.1 403"));
        CHECK(rec.host == address);
        CHECK_THAT(rec.reason, Catch::Contains("IP address no rule lists"));
    }
    // All-numeric-looking names that are no address: refused, not looked up.
    for (const std::string form : {"1.2.3.4.5", "999.1.1.1", "0x1g.1", "4294967296", "1.2.3.08"}) {
        INFO(form);
        auto [got, rec] = run.exchange("CONNECT " + form + ":443 HTTP/1.1\r\n\r\n");
        CHECK_THAT(got, Catch::StartsWith("HTTP/1.1 400"));
        CHECK(rec.rule.empty());
    }
}

TEST_CASE("egress proxy: a name that resolves to this machine's own address is refused",
          "[egress]") {
    const std::string own = own_public_ipv4();
    if (own.empty()) SKIP_TEST("no interface here has an address the table calls public");
    // A service bound to every address, as a local dev server often is.
    asio::io_context sio;
    tcp::acceptor service(sio, tcp::endpoint(tcp::v4(), 0));
    const auto service_port = service.local_endpoint().port();
    std::function<void()> accept_next = [&] {
        service.async_accept([&](std::error_code ec, tcp::socket s) {
            if (ec) return;
            s.close(); // answered and gone: the tunnel ends
            accept_next();
        });
    };
    accept_next();
    std::thread served([&] { sio.run(); });
    test_hosts_file hosts("self.allowed.test " + own + "\n");
    const std::string ask =
        "CONNECT self.allowed.test:" + std::to_string(service_port) + " HTTP/1.1\r\n\r\n";
    {
        proxy_run run(rules({"*.allowed.test"}));
        auto [got, rec] = run.exchange(ask, 12);
        CHECK_THAT(got, Catch::StartsWith("HTTP/1.1 403"));
        CHECK_THAT(rec.reason, Catch::Contains("this machine"));
        CHECK(rec.address.empty());
    }
    {
        auto s = rules({"*.allowed.test"});
        s.allow_private = true; // the source means to reach its own network
        proxy_run run(s);
        auto [got, rec] = run.exchange(ask, 12);
        CHECK_THAT(got, Catch::StartsWith("HTTP/1.1 200"));
        CHECK(rec.address == own);
    }
    asio::post(sio, [&] { service.close(); });
    served.join();
}

TEST_CASE("egress proxy: a non-ASCII host never reaches a person's prompt", "[egress]") {
    test_hosts_file hosts("");
    auto s = rules({"api.example.com"});
    s.ask = true;
    proxy_run run(s);
    // "gооgle.com" with two Cyrillic о (U+043E).
    auto [got, rec] = run.exchange("CONNECT g\xd0\xbe\xd0\xbegle.com:443 HTTP/1.1\r\n\r\n"s);
    CHECK(run.asked == 0);
    CHECK_THAT(got, Catch::StartsWith("HTTP/1.1 400"));
    CHECK_THAT(got, Catch::Contains("xn--"));
    auto [sgot, srec] = run.exchange(socks5_domain("g\xd0\xbe\xd0\xbegle.com", 443), 12);
    CHECK(run.asked == 0);
    // An A-label is a name like any other: asked about.
    run.exchange("CONNECT xn--ggle-55da.com:443 HTTP/1.1\r\n\r\n"s);
    CHECK(run.asked == 1);
}

TEST_CASE("egress rules: numeric rules are normalised, malformed hosts refused", "[egress]") {
    std::string why;
    auto r = parse_rule("0xcb.0.113.7", why);
    REQUIRE(r);
    CHECK(r->literal);
    CHECK(r->host == "203.0.113.7");
    CHECK(r->text == "0xcb.0.113.7");
    r = parse_rule("3405803783:443", why);
    REQUIRE(r);
    CHECK(r->literal);
    CHECK(r->host == "203.0.113.7");
    CHECK(r->port == 443);
    CHECK_FALSE(parse_rule("1.2.3.4.5", why));
    CHECK_THAT(why, Catch::Contains("numeric"));
    CHECK_FALSE(parse_rule("b\xc3\xbc"
                           "cher.example",
                           why));
    CHECK_THAT(why, Catch::Contains("xn--"));
    CHECK(parse_rule("xn--bcher-kva.example", why));
    CHECK_FALSE(parse_rule("evil.test\0.allowed.test"s, why));
    CHECK_FALSE(parse_rule("a..b", why));
    CHECK_FALSE(parse_rule(std::string(64, 'a') + ".example", why));
    CHECK(parse_rule(std::string(63, 'a') + ".example", why));
    CHECK_FALSE(parse_rule("user@host.example", why));
    CHECK_FALSE(parse_rule("*.1.2.3", why));
}

TEST_CASE("egress host: canonical_host takes one name or one address", "[egress]") {
    auto canon = [](std::string_view raw) {
        std::string why;
        const auto h = canonical_host(raw, why);
        if (!h) return "refused: " + why;
        return (h->literal ? "ip " : "name ") + h->text;
    };
    CHECK(canon("API.GitHub.com.") == "name api.github.com");
    CHECK(canon("_srv.my-host.example") == "name _srv.my-host.example");
    CHECK(canon("xn--bcher-kva.example") == "name xn--bcher-kva.example");
    CHECK(canon("3405803783") == "ip 203.0.113.7");
    CHECK(canon("0x7f.1") == "ip 127.0.0.1");
    CHECK(canon("127.1") == "ip 127.0.0.1");
    CHECK(canon("[2001:DB8::1]") == "ip 2001:db8::1");
    CHECK(canon("2001:db8:0::1") == "ip 2001:db8::1");
    CHECK(canon("[::ffff:203.0.113.7]") == "ip 203.0.113.7");
    CHECK(canon("1e3") == "name 1e3"); // not a number to inet_aton: a name
    CHECK_THAT(canon("evil.test\0.allowed.test"s), Catch::Contains("NUL"));
    CHECK_THAT(canon("a\tb"), Catch::Contains("control byte 0x09"));
    CHECK_THAT(canon("g\xd0\xbe\xd0\xbegle.com"), Catch::Contains("xn--"));
    CHECK_THAT(canon("user@host"), Catch::Contains("'@'"));
    for (const auto* bad :
         {"", ".", "a..b", "a b", "h%25", "a/b", "a\\b", "*.x", "[::1", "[fe80::1%eth0]",
          "[1.2.3.4]", "a:b", "1.2.3.4.5", "0x1g.1", "256.0.0.1", "4294967296", "1.2.3.08"}) {
        INFO(bad);
        CHECK_THAT(canon(bad), Catch::StartsWith("refused: "));
    }
    CHECK(canon(std::string(63, 'a') + "." + std::string(63, 'b') + "." + std::string(63, 'c') +
                "." + std::string(61, 'd'))
              .starts_with("name ")); // 253 bytes
    CHECK_THAT(canon(std::string(63, 'a') + "." + std::string(63, 'b') + "." +
                     std::string(63, 'c') + "." + std::string(62, 'd')),
               Catch::Contains("253"));
    CHECK(printable_host("a\0b\\\xff"s) == "a\\x00b\\x5c\\xff");
}

TEST_CASE("egress host: the request parsers refuse what is no host", "[egress]") {
    auto h = parse_http_head("CONNECT Example.COM:8443 HTTP/1.1\r\nHost: x\r\n\r\nTLS");
    CHECK(h.why.empty());
    CHECK(h.protocol == "connect");
    CHECK(h.target.host == "example.com");
    CHECK(h.target.port == 8443);
    CHECK(h.head_end == 46);
    h = parse_http_head("GET http://[2001:db8::1]/a?b HTTP/1.1\r\n\r\n");
    CHECK(h.why.empty());
    CHECK(h.target.host == "2001:db8::1");
    CHECK(h.target.literal);
    CHECK(h.target.port == 80);
    CHECK(h.path == "/a?b");
    CHECK(h.line_end == 39);
    h = parse_http_head("GET http://user@host.test/ HTTP/1.1\r\n\r\n");
    CHECK_THAT(h.why, Catch::Contains("'@'"));
    CHECK(h.target.shown == "user@host.test");
    CHECK(h.target.host.empty());
    h = parse_http_head("CONNECT host.test:0 HTTP/1.1\r\n\r\n");
    CHECK_THAT(h.why, Catch::Contains("port"));
    h = parse_http_head("GET /relative HTTP/1.1\r\n\r\n");
    CHECK_THAT(h.why, Catch::Contains("CONNECT and http://"));
    CHECK(h.target.shown.empty()); // no host: nothing to audit

    CHECK(parse_socks5_request("\x05\x01\x00\x03"s).st == socks5_request::state::incomplete);
    auto q = parse_socks5_request("\x05\x01\x00\x03\x05"s);
    CHECK(q.st == socks5_request::state::incomplete);
    CHECK(q.size == 4 + 6 + 2);
    q = parse_socks5_request("\x05\x01\x00\x03\x0a"
                             "0x7f.0.0.1\x01\xbb"s);
    REQUIRE(q.st == socks5_request::state::ok);
    CHECK(q.target.host == "127.0.0.1");
    CHECK(q.target.literal);
    CHECK(q.target.port == 443);
    q = parse_socks5_request("\x05\x01\x00\x01\xcb\x00\x71\x07\x00\x50"s);
    REQUIRE(q.st == socks5_request::state::ok);
    CHECK(q.target.host == "203.0.113.7");
    CHECK(q.target.port == 80);
    q = parse_socks5_request("\x05\x01\x00\x03\x03"
                             "a\0b\x00\x50"s);
    CHECK(q.st == socks5_request::state::bad);
    CHECK(q.reply == 1);
    CHECK(q.target.shown == "a\\x00b");
    CHECK(parse_socks5_request("\x05\x01\x00\x09\x00"s).reply == 8);
}

TEST_CASE("egress rules: the rule allow_always writes is one parse_rule reads back", "[egress]") {
    std::string why;
    CHECK(exact_rule("docs.example.com", 443, why) == "docs.example.com:443");
    CHECK(exact_rule("2001:db8::1", 443, why) == "[2001:db8::1]:443");
    CHECK(exact_rule("203.0.113.7", 80, why) == "203.0.113.7:80");
    CHECK_FALSE(exact_rule("g\xd0\xbe\xd0\xbegle.com", 443, why)); // look-alike: never written
    CHECK_THAT(why, Catch::Contains("xn--"));
    CHECK_FALSE(exact_rule("Docs.Example.com", 443, why)); // not canonical
    CHECK_FALSE(exact_rule("evil.test\0.x"s, 443, why));
    CHECK_FALSE(exact_rule("a\"b", 443, why));
    CHECK_FALSE(exact_rule("docs.example.com", 0, why));
    CHECK_FALSE(exact_rule("*", 443, why));
}

TEST_CASE("egress address: this machine's own addresses", "[egress]") {
    sockaddr_in in{};
    in.sin_family = AF_INET;
    // The loopback interface is not counted (its addresses are "loopback" by the table).
    ::inet_pton(AF_INET, "127.0.0.1", &in.sin_addr);
    CHECK_FALSE(is_own_address(reinterpret_cast<const sockaddr*>(&in)));
    ::inet_pton(AF_INET, "203.0.113.7", &in.sin_addr);
    CHECK_FALSE(is_own_address(reinterpret_cast<const sockaddr*>(&in)));
    sockaddr_in6 in6{};
    in6.sin6_family = AF_INET6;
    if (const auto own = own_public_ipv4(); !own.empty()) {
        ::inet_pton(AF_INET, own.c_str(), &in.sin_addr);
        CHECK(is_own_address(reinterpret_cast<const sockaddr*>(&in)));
        ::inet_pton(AF_INET6, ("::ffff:" + own).c_str(), &in6.sin6_addr); // as its IPv4 address
        CHECK(is_own_address(reinterpret_cast<const sockaddr*>(&in6)));
    }
    CHECK_FALSE(is_own_address(nullptr));
}

TEST_CASE("egress proxy: after running out of file descriptors it accepts again", "[egress]") {
#if defined(__SANITIZE_ADDRESS__)
    // The sanitizers' runtime checks memory through a pipe of its own (UBSan's vptr check):
    // with every descriptor taken it reports an "invalid vptr" where there is none.
    SKIP_TEST("under the sanitizers: their runtime needs descriptors while every one is taken");
#endif
    test_hosts_file hosts("");
    proxy_run run(rules({"api.example.com"}));
    // A client socket made first; then every descriptor taken, so the proxy's accept fails with
    // EMFILE while the connection waits in the backlog; then given back.
    asio::io_context cio;
    tcp::socket s(cio);
    s.open(tcp::v4());
    rlimit old{};
    REQUIRE(::getrlimit(RLIMIT_NOFILE, &old) == 0);
    std::vector<int> taken;
    rlimit low = old;
    low.rlim_cur = 256;
    REQUIRE(::setrlimit(RLIMIT_NOFILE, &low) == 0);
    for (int fd; (fd = ::dup(0)) >= 0;)
        taken.push_back(fd);
    s.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), run.port));
    std::this_thread::sleep_for(std::chrono::milliseconds(300)); // accept fails meanwhile
    for (const int fd : taken)
        ::close(fd);
    REQUIRE(::setrlimit(RLIMIT_NOFILE, &old) == 0);
    const std::string ask = "CONNECT unlisted.example.com:443 HTTP/1.1\r\n\r\n";
    asio::write(s, asio::buffer(ask));
    timeval tv{5, 0};
    ::setsockopt(s.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char buf[64] = {};
    const auto n = ::recv(s.native_handle(), buf, sizeof buf - 1, 0);
    CHECK(n > 0);
    CHECK_THAT(std::string(buf), Catch::StartsWith("HTTP/1.1 403"));
}

TEST_CASE("egress proxy: a connection that ends in an exception is no longer counted", "[egress]") {
    test_hosts_file hosts("");
    std::atomic<int> refusals{0};
    proxy_run run(rules({"api.example.com"}), [&](proxy_options& o) {
        o.max_connections = 1;
        o.on_refused = [&](const connection_record&) {
            if (refusals++ == 0) throw std::runtime_error("test: the embedder's callback threw");
        };
    });
    const std::string ask = "CONNECT unlisted.example.com:443 HTTP/1.1\r\n\r\n";
    auto [first, rec1] = run.exchange(ask);
    CHECK(first.empty()); // the connection's coroutine ended in the exception
    auto [second, rec2] = run.exchange(ask);
    CHECK_THAT(second, Catch::StartsWith("HTTP/1.1 403")); // not refused as one too many
    CHECK(refusals == 2);
}

// ---- one source's proxy never holds up another's (issue 40, items 7 and 8) -----------------

namespace {

/// Several proxies served by one I/O thread, as meithd serves every source's: each add() is a
/// process's proxy; proxies started from copies of one proxy_options are one source's.
struct shared_loop {
    asio::io_context ioc;
    std::vector<std::shared_ptr<proxy>> proxies;
    std::mutex m;
    std::vector<connection_record> closed, refused;
    std::thread t;

    /// Before go(): a proxy serving `opts` on 127.0.0.1:<ephemeral>; returns its port.
    std::uint16_t add(proxy_options opts) {
        tcp::acceptor a(ioc, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
        const auto port = a.local_endpoint().port();
        opts.on_closed = [this](const connection_record& r) {
            std::lock_guard lock(m);
            closed.push_back(r);
        };
        opts.on_refused = [this](const connection_record& r) {
            std::lock_guard lock(m);
            refused.push_back(r);
        };
        proxies.push_back(proxy::start(ioc.get_executor(), a.release(), std::move(opts)));
        return port;
    }
    void go() {
        t = std::thread([this] { ioc.run(); });
    }
    void stop(std::size_t i) {
        asio::post(ioc, [p = proxies.at(i)] { p->stop(); });
    }
    std::size_t closed_count() {
        std::lock_guard lock(m);
        return closed.size();
    }
    /// Waits (5 s at most) until `n` connections have closed.
    bool wait_closed(std::size_t n) {
        for (int i = 0; i < 500 && closed_count() < n; ++i)
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        return closed_count() >= n;
    }
    ~shared_loop() {
        asio::post(ioc, [this] {
            for (auto& p : proxies)
                p->stop();
        });
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        ioc.stop();
        if (t.joinable()) t.join();
    }
};

/// A client connection of the test's own, read with a bound.
struct test_client {
    asio::io_context cio;
    tcp::socket s{cio};
    explicit test_client(std::uint16_t port) {
        s.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
    }
    void send(std::string_view bytes) { asio::write(s, asio::buffer(bytes.data(), bytes.size())); }
    /// What arrives within `within` (or until EOF, or `enough` bytes).
    std::string read(std::chrono::milliseconds within, std::size_t enough = 1 << 16) {
        const auto until = std::chrono::steady_clock::now() + within;
        std::string got;
        char buf[4096];
        while (got.size() < enough) {
            const auto left = std::chrono::duration_cast<std::chrono::microseconds>(
                until - std::chrono::steady_clock::now());
            if (left.count() <= 0) break;
            timeval tv{static_cast<time_t>(left.count() / 1000000),
                       static_cast<suseconds_t>(left.count() % 1000000)};
            ::setsockopt(s.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
            const auto n = ::recv(s.native_handle(), buf, sizeof buf, 0);
            if (n <= 0) {
                eof = n == 0;
                break;
            }
            got.append(buf, static_cast<std::size_t>(n));
        }
        return got;
    }
    /// True when nothing has arrived yet and the connection is still open.
    bool pending() {
        char b;
        const auto n = ::recv(s.native_handle(), &b, 1, MSG_PEEK | MSG_DONTWAIT);
        return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
    }
    bool eof = false;
};

/// A file to create to let a `wait=` lookup of MEITH_EGRESS_TEST_HOSTS finish.
struct release_file {
    std::string path = "/tmp/meith-egress-release-" + std::to_string(::getpid());
    release_file() { ::unlink(path.c_str()); }
    void release() const {
        const int fd = ::open(path.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
        if (fd >= 0) ::close(fd);
    }
    ~release_file() {
        release(); // a lookup still waiting ends
        std::this_thread::sleep_for(std::chrono::milliseconds(30));
        ::unlink(path.c_str());
    }
};

/// An echo server on 127.0.0.1:<ephemeral> for one connection at a time, on a thread.
struct echo_server {
    asio::io_context io;
    tcp::acceptor a{io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)};
    std::uint16_t port = a.local_endpoint().port();
    std::atomic<int> accepted{0};
    std::thread t;
    explicit echo_server(int connections) {
        t = std::thread([this, connections] {
            for (int i = 0; i < connections; ++i) {
                std::error_code ec;
                tcp::socket s(io);
                a.accept(s, ec);
                if (ec) return;
                ++accepted;
                timeval tv{10, 0}; // a tunnel left open ends the test's thread anyway
                ::setsockopt(s.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
                char buf[4096];
                for (ssize_t n; (n = ::recv(s.native_handle(), buf, sizeof buf, 0)) > 0;)
                    ::send(s.native_handle(), buf, static_cast<std::size_t>(n), MSG_NOSIGNAL);
            }
        });
    }
    ~echo_server() {
        ::shutdown(a.native_handle(), SHUT_RDWR);
        t.join();
    }
};

std::string fmt_connect(std::uint16_t port) {
    return "CONNECT 127.0.0.1:" + std::to_string(port) + " HTTP/1.1\r\n\r\n";
}

proxy_options options_for(rule_set r) {
    proxy_options o;
    o.rules = std::move(r);
    o.connect_timeout = std::chrono::milliseconds(2000);
    return o;
}

} // namespace

TEST_CASE("egress proxy: one source's slow name lookup does not hold up another source's "
          "connections",
          "[egress]") {
    release_file gate;
    test_hosts_file hosts("slow.test 127.0.0.2 wait=" + gate.path + "\nfast.test 127.0.0.3\n");
    shared_loop loop;
    const auto a = loop.add(options_for(rules({"*"}))); // source A
    const auto b = loop.add(options_for(rules({"*"}))); // source B
    loop.go();
    test_client slow(a);
    slow.send("CONNECT slow.test:443 HTTP/1.1\r\n\r\n");
    // A's lookup is under way (or about to be): B's name resolves meanwhile. fast.test is a
    // loopback address: refused, but only after it was resolved.
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    test_client quick(b);
    quick.send("CONNECT fast.test:443 HTTP/1.1\r\n\r\n");
    const auto got = quick.read(std::chrono::seconds(10));
    CHECK_THAT(got, Catch::StartsWith("HTTP/1.1 403"));
    CHECK_THAT(got, Catch::Contains("fast.test resolves to 127.0.0.3, a loopback address"));
    CHECK(slow.pending()); // A's lookup has not ended: B did not wait for it
    gate.release();
    const auto a_got = slow.read(std::chrono::seconds(10));
    CHECK_THAT(a_got, Catch::Contains("slow.test resolves to 127.0.0.2, a loopback address"));
}

TEST_CASE("egress proxy: a name lookup past its deadline is refused, saying so", "[egress]") {
    release_file gate;
    test_hosts_file hosts("slow.test 203.0.113.9 wait=" + gate.path + "\n");
    shared_loop loop;
    auto o = options_for(rules({"*"}));
    o.resolve_timeout = std::chrono::milliseconds(300);
    o.max_lookups = 1;
    const auto port = loop.add(std::move(o));
    loop.go();
    test_client first(port);
    first.send("CONNECT slow.test:443 HTTP/1.1\r\n\r\n");
    const auto got = first.read(std::chrono::seconds(10));
    CHECK_THAT(got, Catch::StartsWith("HTTP/1.1 403"));
    CHECK_THAT(got, Catch::Contains("name resolution of slow.test took longer than 0.3 s"));
    // Its lookup still runs (the resolver cannot be interrupted): it holds the source's only
    // lookup slot, so a second name is refused at once rather than queued behind it.
    test_client second(port);
    second.send(socks5_domain("slow.test", 443));
    const auto sgot = second.read(std::chrono::seconds(10), 12);
    REQUIRE(sgot.size() >= 4);
    CHECK(sgot[3] == '\x02');
    REQUIRE(loop.wait_closed(2));
    std::lock_guard lock(loop.m);
    CHECK_THAT(loop.closed[1].reason, Catch::Contains("name lookups"));
    CHECK_FALSE(loop.closed[0].allowed);
}

TEST_CASE("egress proxy: past a source's connection limit new connections are refused, saying "
          "so, and audited",
          "[egress]") {
    test_hosts_file hosts("");
    shared_loop loop;
    auto o = options_for(rules({"*"}));
    o.max_connections = 3;
    // Two processes of one source (an exec tool's runs: copies of the source's options).
    const auto p1 = loop.add(o);
    const auto p2 = loop.add(o);
    loop.go();
    std::vector<std::unique_ptr<test_client>> idle;
    idle.push_back(std::make_unique<test_client>(p1));
    idle.push_back(std::make_unique<test_client>(p1));
    idle.push_back(std::make_unique<test_client>(p2));
    std::this_thread::sleep_for(std::chrono::milliseconds(100)); // accepted
    test_client over(p1);
    over.send("CONNECT unlisted.example.com:443 HTTP/1.1\r\n\r\n");
    const auto got = over.read(std::chrono::seconds(5));
    CHECK_THAT(got, Catch::StartsWith("HTTP/1.1 403"));
    CHECK_THAT(got, Catch::Contains("3 proxied connections open"));
    test_client socks(p2);
    socks.send(socks5_domain("unlisted.example.com", 443));
    const auto sgot = socks.read(std::chrono::seconds(5), 12);
    REQUIRE(sgot.size() >= 4);
    CHECK(sgot[3] == '\x02');
    REQUIRE(loop.wait_closed(2));
    {
        std::lock_guard lock(loop.m);
        CHECK(loop.refused.size() == 2);
        for (const auto& r : loop.closed) {
            CHECK_FALSE(r.allowed);
            CHECK(r.host == "unlisted.example.com");
            CHECK_THAT(r.reason, Catch::Contains("proxied connections open"));
        }
    }
    // One closes: the next is served again.
    idle.pop_back();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    test_client again(p1);
    again.send("CONNECT 203.0.113.1:443 HTTP/1.1\r\n\r\n");
    const auto agot = again.read(std::chrono::seconds(5));
    CHECK_THAT(agot, Catch::Contains("IP address no rule lists"));
}

TEST_CASE("egress proxy: stopping the proxy (its process exited) closes the tunnels it holds",
          "[egress]") {
    test_hosts_file hosts("");
    echo_server echo(1);
    shared_loop loop;
    const auto port = loop.add(options_for(rules({"127.0.0.1"})));
    loop.go();
    test_client tunnel(port);
    tunnel.send(fmt_connect(echo.port));
    CHECK_THAT(tunnel.read(std::chrono::seconds(5), 39),
               Catch::StartsWith("HTTP/1.1 200 Connection established"));
    tunnel.send("ping");
    CHECK(tunnel.read(std::chrono::seconds(5), 4) == "ping");
    test_client idle(port); // accepted, nothing sent yet
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    loop.stop(0);
    tunnel.read(std::chrono::seconds(5));
    CHECK(tunnel.eof);
    idle.read(std::chrono::seconds(5));
    CHECK(idle.eof);
    REQUIRE(loop.wait_closed(1));
    std::lock_guard lock(loop.m);
    CHECK(loop.closed[0].allowed);
    CHECK(loop.closed[0].bytes_sent == 4);
    CHECK(loop.closed[0].bytes_received == 4);
    CHECK_THAT(loop.closed[0].reason, Catch::Contains("exited"));
}

} // namespace unit_egress_test
