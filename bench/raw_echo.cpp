// bench/raw_echo.cpp — the transport's limit, for bench/run.
//
// A minimal Unix-socket server: one thread, epoll, no JSON library. For every line it finds
// the requestId by scanning for "requestId":" and the arguments object by brace matching, and
// answers
//   {"type":"tool_result","protocol":1,"requestId":"<id>","result":{"ok":true,"content":<arguments>}}
// Replies to everything read in one go are written with one write().
//
//   raw_echo --socket PATH

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

namespace {

struct conn {
    int fd = -1;
    std::vector<char> in = std::vector<char>(64 * 1024);
    std::size_t beg = 0, end = 0;
    std::string out;
    std::size_t out_off = 0;
    bool armed = false;
};

volatile sig_atomic_t stop = 0;
volatile sig_atomic_t stop_signal = 0;
volatile sig_atomic_t stop_sender = 0;

// The JSON value starting at p (an object, here): its end, honouring strings and escapes.
const char* value_end(const char* p, const char* e) {
    if (p >= e) return nullptr;
    if (*p != '{' && *p != '[') { // scalar: up to , or }
        while (p < e && *p != ',' && *p != '}')
            ++p;
        return p;
    }
    int level = 0;
    bool in_str = false;
    for (; p < e; ++p) {
        const char c = *p;
        if (in_str) {
            if (c == '\\')
                ++p;
            else if (c == '"')
                in_str = false;
        } else if (c == '"')
            in_str = true;
        else if (c == '{' || c == '[')
            ++level;
        else if (c == '}' || c == ']') {
            if (--level == 0) return p + 1;
        }
    }
    return nullptr;
}

void answer(std::string_view line, std::string& out) {
    static constexpr std::string_view rid = "\"requestId\":\"";
    static constexpr std::string_view args = "\"arguments\":";
    const char* b = line.data();
    const char* e = b + line.size();
    std::string_view id;
    if (const void* k = memmem(b, line.size(), rid.data(), rid.size())) {
        const char* p = static_cast<const char*>(k) + rid.size();
        const char* q = p;
        while (q < e && *q != '"')
            q += (*q == '\\') ? 2 : 1;
        if (q <= e) id = std::string_view(p, static_cast<std::size_t>(std::min(q, e) - p));
    }
    std::string_view content = "null";
    if (const void* k = memmem(b, line.size(), args.data(), args.size())) {
        const char* p = static_cast<const char*>(k) + args.size();
        while (p < e && *p == ' ')
            ++p;
        if (const char* q = value_end(p, e))
            content = std::string_view(p, static_cast<std::size_t>(q - p));
    }
    out += R"({"type":"tool_result","protocol":1,"requestId":")";
    out += id;
    out += R"(","result":{"ok":true,"content":)";
    out += content;
    out += "}}\n";
}

bool flush(int ep, conn& c) {
    while (c.out_off < c.out.size()) {
        ssize_t n = write(c.fd, c.out.data() + c.out_off, c.out.size() - c.out_off);
        if (n < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN) {
                if (!c.armed) {
                    epoll_event ev{};
                    ev.events = EPOLLIN | EPOLLOUT;
                    ev.data.ptr = &c;
                    epoll_ctl(ep, EPOLL_CTL_MOD, c.fd, &ev);
                    c.armed = true;
                }
                return true;
            }
            return false;
        }
        c.out_off += static_cast<std::size_t>(n);
    }
    c.out.clear();
    c.out_off = 0;
    if (c.armed) {
        epoll_event ev{};
        ev.events = EPOLLIN;
        ev.data.ptr = &c;
        epoll_ctl(ep, EPOLL_CTL_MOD, c.fd, &ev);
        c.armed = false;
    }
    return true;
}

// false: close the connection
bool on_readable(conn& c) {
    for (;;) {
        if (c.end == c.in.size()) {
            if (c.beg > 0) {
                std::memmove(c.in.data(), c.in.data() + c.beg, c.end - c.beg);
                c.end -= c.beg;
                c.beg = 0;
            } else
                c.in.resize(c.in.size() * 2);
        }
        ssize_t n = read(c.fd, c.in.data() + c.end, c.in.size() - c.end);
        if (n < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN) break;
            return false;
        }
        if (n == 0) return false;
        c.end += static_cast<std::size_t>(n);
        if (c.end < c.in.size()) break;
    }
    char* base = c.in.data();
    while (c.beg < c.end) {
        char* nl = static_cast<char*>(std::memchr(base + c.beg, '\n', c.end - c.beg));
        if (!nl) break;
        std::string_view line(base + c.beg, static_cast<std::size_t>(nl - (base + c.beg)));
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        if (!line.empty()) answer(line, c.out);
        c.beg = static_cast<std::size_t>(nl - base) + 1;
    }
    if (c.beg == c.end) c.beg = c.end = 0;
    return true;
}

} // namespace

int main(int argc, char** argv) {
    std::string path;
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "--socket") == 0 && i + 1 < argc)
            path = argv[++i];
        else {
            std::fprintf(stderr, "usage: raw_echo --socket PATH\n");
            return 2;
        }
    }
    if (path.empty()) {
        std::fprintf(stderr, "usage: raw_echo --socket PATH\n");
        return 2;
    }
    std::signal(SIGPIPE, SIG_IGN);
    struct sigaction sa {};
    sa.sa_flags = SA_SIGINFO;
    sa.sa_sigaction = [](int sig, siginfo_t* si, void*) {
        stop = 1;
        stop_signal = sig;
        stop_sender = si ? si->si_pid : 0;
    };
    sigaction(SIGTERM, &sa, nullptr);
    sigaction(SIGINT, &sa, nullptr);

    int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (path.size() >= sizeof addr.sun_path) {
        std::fprintf(stderr, "raw_echo: socket path too long\n");
        return 1;
    }
    std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
    unlink(path.c_str());
    if (bind(lfd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || listen(lfd, 4096) != 0) {
        std::fprintf(stderr, "raw_echo: bind/listen %s: %s\n", path.c_str(), std::strerror(errno));
        return 1;
    }
    int ep = epoll_create1(EPOLL_CLOEXEC);
    epoll_event lev{};
    lev.events = EPOLLIN;
    lev.data.ptr = nullptr;
    epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &lev);

    std::vector<epoll_event> evs(256);
    while (!stop) {
        int n = epoll_wait(ep, evs.data(), static_cast<int>(evs.size()), 200);
        if (n < 0) {
            if (errno == EINTR) continue;
            break;
        }
        for (int k = 0; k < n; ++k) {
            auto* c = static_cast<conn*>(evs[static_cast<std::size_t>(k)].data.ptr);
            if (!c) {
                for (;;) {
                    int fd = accept4(lfd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
                    if (fd < 0) break;
                    auto* nc = new conn;
                    nc->fd = fd;
                    epoll_event ev{};
                    ev.events = EPOLLIN;
                    ev.data.ptr = nc;
                    epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
                }
                continue;
            }
            const uint32_t what = evs[static_cast<std::size_t>(k)].events;
            bool keep = true;
            if (what & (EPOLLIN | EPOLLHUP | EPOLLERR)) keep = on_readable(*c);
            if (keep && !c->out.empty()) keep = flush(ep, *c);
            if (!keep) {
                epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, nullptr);
                close(c->fd);
                delete c;
            }
        }
    }
    std::fprintf(stderr, "raw_echo: signal %d from pid %d: exiting\n",
                 static_cast<int>(stop_signal), static_cast<int>(stop_sender));
    unlink(path.c_str());
    return 0;
}
