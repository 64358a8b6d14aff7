// resolver: name lookups on threads of their own (see resolver.hpp).
#include "egress/resolver.hpp"

#include "egress/rules.hpp"

#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <sstream>
#include <thread>

#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace meith::egress {

namespace {

/// MEITH_EGRESS_TEST_HOSTS: a file of "NAME ADDRESS [wait=PATH] [delay=MS]" lines that replaces
/// DNS for the proxy (a test switch: getent-free resolution of test names). `wait=PATH` makes
/// the lookup of NAME block until PATH exists (two minutes at most), `delay=MS` makes it take MS
/// milliseconds: a slow resolver, on the thread that resolves.
std::optional<std::vector<asio::ip::address>> test_hosts(const std::string& name) {
    const char* file = std::getenv("MEITH_EGRESS_TEST_HOSTS");
    if (file == nullptr || *file == '\0') return std::nullopt;
    std::vector<asio::ip::address> out;
    std::ifstream in(file);
    std::string line;
    while (std::getline(in, line)) {
        std::istringstream words(line);
        std::string n, a;
        if (!(words >> n >> a) || normal_host(n) != name) continue;
        for (std::string opt; words >> opt;) {
            if (opt.starts_with("wait=")) {
                const std::string path = opt.substr(5);
                for (int i = 0; i < 12000 && ::access(path.c_str(), F_OK) != 0; ++i)
                    std::this_thread::sleep_for(std::chrono::milliseconds(10));
            } else if (opt.starts_with("delay=")) {
                std::this_thread::sleep_for(std::chrono::milliseconds(std::atol(opt.c_str() + 6)));
            }
        }
        std::error_code ec;
        auto addr = asio::ip::make_address(a, ec);
        if (!ec) out.push_back(addr);
    }
    return out;
}

} // namespace

std::vector<asio::ip::address> resolve_blocking(const std::string& host, std::uint16_t port) {
    if (auto fixed = test_hosts(host)) return std::move(*fixed);
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_ADDRCONFIG;
    addrinfo* list = nullptr;
    std::vector<asio::ip::address> out;
    if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &list) != 0) return out;
    for (auto* i = list; i != nullptr; i = i->ai_next) {
        if (i->ai_family == AF_INET) {
            sockaddr_in in{};
            std::memcpy(&in, i->ai_addr, sizeof in);
            asio::ip::address_v4::bytes_type b;
            std::memcpy(b.data(), &in.sin_addr, 4);
            out.emplace_back(asio::ip::address_v4(b));
        } else if (i->ai_family == AF_INET6) {
            sockaddr_in6 in6{};
            std::memcpy(&in6, i->ai_addr, sizeof in6);
            asio::ip::address_v6::bytes_type b;
            std::memcpy(b.data(), in6.sin6_addr.s6_addr, 16);
            out.emplace_back(asio::ip::address_v6(b, in6.sin6_scope_id));
        }
    }
    ::freeaddrinfo(list);
    return out;
}

lookup::~lookup() {
    if (notify_fd_ >= 0) ::close(notify_fd_);
}

std::optional<std::vector<asio::ip::address>> lookup::take() {
    std::lock_guard lock(m_);
    if (!done_) return std::nullopt;
    return std::move(addrs_);
}

std::shared_ptr<lookup> start_lookup(const std::string& host, std::uint16_t port,
                                     std::shared_ptr<std::atomic<std::size_t>> in_flight,
                                     int& wake_fd, std::string& why) {
    int pair[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) {
        why = fmt::format("name resolution of {} could not start: {}", host, std::strerror(errno));
        return nullptr;
    }
    auto st = std::make_shared<lookup>();
    st->notify_fd_ = pair[1];
    ++*in_flight;
    try {
        std::thread([st, in_flight, host, port] {
            auto addrs = resolve_blocking(host, port);
            {
                std::lock_guard lock(st->m_);
                st->addrs_ = std::move(addrs);
                st->done_ = true;
            }
            const char one = 1;
            (void)::send(st->notify_fd_, &one, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
            --*in_flight;
        }).detach();
    } catch (const std::exception& e) {
        --*in_flight;
        ::close(pair[0]);
        why = fmt::format("name resolution of {} could not start: {}", host, e.what());
        return nullptr;
    }
    wake_fd = pair[0];
    return st;
}

} // namespace meith::egress
