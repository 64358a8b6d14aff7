// Unit tests of remote/ against a canned HTTP server on 127.0.0.1 (a thread of the test's own):
// the http_client's redirect rule (a redirect to another origin is never followed with the
// request's headers and body, docs/protocol.md §18) and meith-remote's error text (an error
// page that echoes the request's headers gives back no piece of a token, docs/security.md).
#include "remote/credentials.hpp"
#include "remote/http_client.hpp"

#include <catch2/catch.hpp>

#include <asio/io_context.hpp>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace remote = meith::remote;
using namespace std::chrono_literals;

namespace unit_remote_bridge_test { // one namespace per file: the tests build as unity batches

namespace {

/// One HTTP/1.1 server on 127.0.0.1 that answers each request with `answer(request)` (the raw
/// request: head and body) and closes the connection. Records every request it got.
class canned_server {
  public:
    explicit canned_server(std::function<std::string(const std::string&)> answer)
        : answer_(std::move(answer)) {
        fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        REQUIRE(fd_ >= 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        REQUIRE(::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
        REQUIRE(::listen(fd_, 16) == 0);
        socklen_t len = sizeof a;
        REQUIRE(::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) == 0);
        port_ = ntohs(a.sin_port);
        thread_ = std::thread([this] { serve(); });
    }
    ~canned_server() {
        stop_ = true;
        thread_.join();
        ::close(fd_);
    }
    canned_server(const canned_server&) = delete;
    canned_server& operator=(const canned_server&) = delete;

    std::string origin() const { return "http://127.0.0.1:" + std::to_string(port_); }
    std::vector<std::string> requests() const {
        std::lock_guard lock(mu_);
        return requests_;
    }

  private:
    void serve() {
        while (!stop_) {
            pollfd p{fd_, POLLIN, 0};
            if (::poll(&p, 1, 50) <= 0) continue;
            const int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
            if (c < 0) continue;
            std::string req = read_request(c);
            {
                std::lock_guard lock(mu_);
                requests_.push_back(req);
            }
            const std::string out = answer_(req);
            for (std::size_t at = 0; at < out.size();) {
                const auto n = ::send(c, out.data() + at, out.size() - at, MSG_NOSIGNAL);
                if (n <= 0) break;
                at += static_cast<std::size_t>(n);
            }
            ::shutdown(c, SHUT_WR);
            char sink[256];
            pollfd q{c, POLLIN, 0};
            while (::poll(&q, 1, 200) > 0 && ::recv(c, sink, sizeof sink, 0) > 0) {
            }
            ::close(c);
        }
    }

    static std::string read_request(int c) {
        std::string req;
        char buf[4096];
        std::size_t want = std::string::npos;
        while (want == std::string::npos || req.size() < want) {
            pollfd q{c, POLLIN, 0};
            if (::poll(&q, 1, 5000) <= 0) break;
            const auto n = ::recv(c, buf, sizeof buf, 0);
            if (n <= 0) break;
            req.append(buf, static_cast<std::size_t>(n));
            if (const auto end = req.find("\r\n\r\n");
                end != std::string::npos && want == std::string::npos) {
                std::size_t length = 0;
                std::string lower = req.substr(0, end);
                for (auto& ch : lower)
                    ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
                if (const auto cl = lower.find("\r\ncontent-length:"); cl != std::string::npos)
                    length = std::strtoul(lower.c_str() + cl + 17, nullptr, 10);
                want = end + 4 + length;
            }
        }
        return req;
    }

    std::function<std::string(const std::string&)> answer_;
    int fd_ = -1;
    unsigned short port_ = 0;
    std::atomic<bool> stop_{false};
    std::thread thread_;
    mutable std::mutex mu_;
    std::vector<std::string> requests_;
};

std::string response(int status, const std::string& reason, const std::string& headers,
                     const std::string& body) {
    return "HTTP/1.1 " + std::to_string(status) + " " + reason + "\r\n" + headers +
           "Content-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" +
           body;
}

std::string ok_json(const std::string&) {
    return response(200, "OK", "Content-Type: application/json\r\n",
                    R"({"jsonrpc":"2.0","id":1,"result":{}})");
}

/// Runs `req` on a fresh client to its end (10 s at most).
remote::http_outcome run_request(remote::http_request req) {
    asio::io_context io;
    remote::egress_policy policy;
    policy.allow_private_network = true; // plain http on 127.0.0.1
    remote::http_client http(io.get_executor(), policy);
    remote::http_outcome result;
    bool done = false;
    remote::http_handlers h;
    h.on_done = [&](remote::http_outcome out) {
        result = std::move(out);
        done = true;
        io.stop();
    };
    http.start(std::move(req), std::move(h));
    io.run_for(10s);
    REQUIRE(done);
    return result;
}

/// The value of header `name` (as sent, case-insensitive name) in a raw request.
std::string header_of(const std::string& req, const std::string& name) {
    std::istringstream in(req);
    std::string line;
    while (std::getline(in, line)) {
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line.empty()) break;
        if (line.size() > name.size() && line[name.size()] == ':' &&
            strncasecmp(line.c_str(), name.c_str(), name.size()) == 0) {
            auto v = line.substr(name.size() + 1);
            while (!v.empty() && v.front() == ' ')
                v.erase(0, 1);
            return v;
        }
    }
    return {};
}

// ---- meith-remote as meithd runs it: stdin and stdout pipes --------------------------------

struct bridge_process {
    explicit bridge_process(const std::string& url, const char* max_message_bytes = "8388608") {
        int in[2], out[2];
        REQUIRE(::pipe2(in, O_CLOEXEC) == 0);
        REQUIRE(::pipe2(out, O_CLOEXEC) == 0);
        err_path = std::filesystem::temp_directory_path() /
                   ("meith-remote-test-" + std::to_string(::getpid()) + ".err");
        pid = ::fork();
        REQUIRE(pid >= 0);
        if (pid == 0) {
            ::dup2(in[0], 0);
            ::dup2(out[1], 1);
            const int e = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
            if (e >= 0) ::dup2(e, 2);
            ::execl(MEITH_REMOTE, MEITH_REMOTE, "--source", "s", "--url", url.c_str(),
                    "--allow-private-network", "--max-message-bytes", max_message_bytes,
                    static_cast<char*>(nullptr));
            ::_exit(127);
        }
        ::close(in[0]);
        ::close(out[1]);
        to = in[1];
        from = out[0];
    }
    ~bridge_process() {
        ::close(to);
        int status = 0;
        for (int i = 0; i < 100 && ::waitpid(pid, &status, WNOHANG) == 0; ++i)
            std::this_thread::sleep_for(20ms);
        if (::waitpid(pid, &status, WNOHANG) == 0) {
            ::kill(pid, SIGKILL);
            ::waitpid(pid, &status, 0);
        }
        ::close(from);
        std::error_code ec;
        std::filesystem::remove(err_path, ec);
    }
    void send(const std::string& line) {
        const std::string l = line + "\n";
        REQUIRE(::write(to, l.data(), l.size()) == static_cast<ssize_t>(l.size()));
    }
    /// The next line the bridge writes that holds `needle` (10 s at most).
    std::string line_with(const std::string& needle) {
        const auto deadline = std::chrono::steady_clock::now() + 10s;
        for (;;) {
            for (auto nl = buf.find('\n'); nl != std::string::npos; nl = buf.find('\n')) {
                std::string line = buf.substr(0, nl);
                buf.erase(0, nl + 1);
                seen += line + "\n";
                if (line.find(needle) != std::string::npos) return line;
            }
            const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                deadline - std::chrono::steady_clock::now());
            INFO("meith-remote wrote: " << seen << "\nstderr: " << err());
            REQUIRE(left.count() > 0);
            pollfd p{from, POLLIN, 0};
            if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
            char b[4096];
            const auto n = ::read(from, b, sizeof b);
            REQUIRE(n > 0);
            buf.append(b, static_cast<std::size_t>(n));
        }
    }
    std::string err() const {
        std::ifstream f(err_path);
        return std::string(std::istreambuf_iterator<char>(f), {});
    }

    pid_t pid = -1;
    int to = -1, from = -1;
    std::filesystem::path err_path;
    std::string buf, seen;
};

/// Every piece of `secret` of 8 characters or more that starts or ends it, found in `text`.
std::vector<std::string> pieces_in(const std::string& text, const std::string& secret) {
    std::vector<std::string> found;
    for (std::size_t k = 8; k <= secret.size(); ++k) {
        const auto head = secret.substr(0, k), tail = secret.substr(secret.size() - k);
        if (text.find(head) != std::string::npos) found.push_back(head);
        if (text.find(tail) != std::string::npos) found.push_back(tail);
    }
    return found;
}

} // namespace

// ---- redirects --------------------------------------------------------------------------------

TEST_CASE("http_client: a POST with secret headers is not redirected to another origin, but the "
          "same origin is followed",
          "[remote][http][redirect]") {
    canned_server elsewhere(ok_json);
    canned_server server([&](const std::string& req) {
        if (req.starts_with("POST /old "))
            return response(307, "Temporary Redirect", "Location: /mcp\r\n", "");
        if (req.starts_with("POST /away "))
            return response(307, "Temporary Redirect",
                            "Location: " + elsewhere.origin() + "/mcp\r\n", "");
        if (req.starts_with("POST /mcp ")) return ok_json(req);
        return response(404, "Not Found", "", "");
    });
    const std::string key = "k3y-0f-the-t3st-that-must-stay-home-12345";
    auto post = [&](const std::string& path) {
        remote::http_request req;
        req.method = "POST";
        req.url = server.origin() + path;
        req.headers = {"Content-Type: application/json", "X-Api-Key: " + key,
                       "Authorization: Bearer " + key};
        req.body = R"({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"x":"body"}})";
        return req;
    };

    // Another origin (here another port): refused before a byte goes there.
    const auto away = run_request(post("/away"));
    INFO("error: " << away.error << "; " << away.remedy);
    CHECK(elsewhere.requests().empty());
    CHECK(away.refused);
    CHECK(away.error.find("another origin") != std::string::npos);
    CHECK(away.error.find(elsewhere.origin()) != std::string::npos);
    CHECK(away.error.find(key) == std::string::npos);

    // The same origin: followed, headers and body with it.
    const auto same = run_request(post("/old"));
    CHECK(same.error.empty());
    CHECK(same.head.status == 200);
    const auto seen = server.requests();
    REQUIRE(seen.size() == 3);
    CHECK(seen.back().starts_with("POST /mcp "));
    CHECK(header_of(seen.back(), "X-Api-Key") == key);
    CHECK(seen.back().find(R"("x":"body")") != std::string::npos);

    // A request that carries nothing secret (the OAuth metadata GETs) may be sent elsewhere.
    remote::http_request metadata;
    metadata.headers = {"Accept: application/json"};
    metadata.cross_origin_redirects = true;
    canned_server mover([&](const std::string&) {
        return response(302, "Found", "Location: " + elsewhere.origin() + "/meta\r\n", "");
    });
    metadata.url = mover.origin() + "/.well-known/oauth-protected-resource";
    const auto moved = run_request(metadata);
    CHECK(moved.error.empty());
    CHECK(moved.head.status == 200);
    REQUIRE(elsewhere.requests().size() == 1);
    CHECK(elsewhere.requests()[0].starts_with("GET /meta "));
}

// ---- error pages ------------------------------------------------------------------------------

TEST_CASE("meith-remote: an error page that echoes the request's headers, cut anywhere, gives "
          "back no piece of a token",
          "[remote][bridge][redaction]") {
    // 40 characters each, as in issue 40.
    const std::string header_secret = "hdr5ecret0123456789abcdefghijklmnopqrstu";
    const std::string access = "acc3ss0123456789ABCDEFGHIJKLMNOPQRSTUVWX";
    REQUIRE(header_secret.size() == 40);
    REQUIRE(access.size() == 40);
    int round = 0;
    canned_server server([&](const std::string& req) {
        const auto key = header_of(req, "X-Api-Key");
        const auto auth = header_of(req, "Authorization");
        std::string body;
        switch (round++) {
        case 0: // the header's value cut by the bridge's 200 bytes: 39 characters left
            body = std::string(150, '.') + "x-api-key: " + key + "\n";
            break;
        case 1: // the bearer token the same way, after "authorization: Bearer "
            body = std::string(139, '.') + "authorization: " + auth + "\n";
            break;
        default: // the server's own cut: the last 30 characters, and the first 20
            body = "key ends ..." + key.substr(key.size() - 30) + ", token starts " +
                   auth.substr(7, 20) + "... whole: " + key;
            break;
        }
        return response(400, "Bad Request", "Content-Type: text/plain\r\n", body);
    });
    bridge_process b(server.origin() + "/mcp");
    b.line_with("meith/credentials");
    remote::credentials grant;
    grant.access_token = access;
    grant.refresh_token = "refr3sh0123456789ABCDEFGHIJKLMNOPQRSTUVW";
    std::string answer = R"({"jsonrpc":"2.0","id":"meith:credentials","result":{"headers":[)";
    answer += "\"X-Api-Key: " + header_secret + "\"],\"grant\":" + remote::to_json(grant) + "}}";
    b.send(answer);
    for (int id = 1; id <= 3; ++id) {
        b.send(R"({"jsonrpc":"2.0","id":)" + std::to_string(id) +
               R"(,"method":"tools/list","params":{}})");
        const auto line = b.line_with(R"("id":)" + std::to_string(id) + ",");
        INFO("error line " << id << ": " << line);
        CHECK(line.find("HTTP 400") != std::string::npos);
        CHECK(line.find("[REDACTED]") != std::string::npos);
        CHECK(pieces_in(line, header_secret).empty());
        CHECK(pieces_in(line, access).empty());
    }
    // Nor in what it logs (meithd's log).
    const auto err = b.err();
    INFO("stderr: " << err);
    CHECK(err.find("HTTP 400") != std::string::npos);
    CHECK(pieces_in(err, header_secret).empty());
    CHECK(pieces_in(err, access).empty());
    // The server did get them: the echo was real.
    REQUIRE(server.requests().size() == 3);
    CHECK(header_of(server.requests()[0], "X-Api-Key") == header_secret);
}

TEST_CASE("meith-remote: a request over its limit is answered with an error naming the limit, and "
          "the next message is read whole",
          "[remote][bridge][framing]") {
    // Issue 42: the bridge split meithd's lines by hand; past the limit it emptied its buffer,
    // read the rest of the line as a new one, and never answered the call (it timed out).
    canned_server server([&](const std::string&) {
        return response(200, "OK", "Content-Type: application/json\r\n",
                        R"({"jsonrpc":"2.0","id":2,"result":{"tools":[]}})");
    });
    bridge_process b(server.origin() + "/mcp", "4096");
    b.line_with("meith/credentials");
    b.send(R"({"jsonrpc":"2.0","id":"meith:credentials","result":{"headers":[],"grant":null}})");
    // More than one read's worth (64 KiB), so that the old splitter saw it in pieces.
    b.send(R"({"jsonrpc":"2.0","id":"big-1","method":"tools/call","params":{"name":"echo",)"
           R"("arguments":{"text":")" +
           std::string(200 * 1024, 'x') + R"("}}})");
    const auto answer = b.line_with(R"("id":"big-1")");
    INFO(answer);
    CHECK(answer.find(R"("error")") != std::string::npos);
    CHECK(answer.find("over meith-remote's limit of 4096 bytes") != std::string::npos);
    // The next message is read as it should be, and nothing of the big one reached the server.
    b.send(R"({"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}})");
    const auto next = b.line_with(R"("id":2,)");
    CHECK(next.find(R"("tools":[])") != std::string::npos);
    REQUIRE(server.requests().size() == 1);
    CHECK(server.requests()[0].find("tools/list") != std::string::npos);
}

} // namespace unit_remote_bridge_test
