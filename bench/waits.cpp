// bench/waits.cpp — what a person waits for (bench/run scenario (l), issue 33).
//
// Times whole programs as a person starts them: process start, connect, answer, exit. One
// thread; POSIX and the standard library only. Every sample is checked; a wrong answer is an
// error, never a fast sample.
//
//   waits --mode command --iterations N --expect TEXT -- PROGRAM ARGS...
//       PROGRAM run N times (stdout read through a pipe); time from fork to exit. Its stdout
//       must contain TEXT and it must exit 0.
//   waits --mode mcp --iterations N [--tools-list] -- PROGRAM ARGS...
//       PROGRAM (`meith mcp …`) started N times; time to the answer of `initialize` written at
//       once to its stdin; with --tools-list, then `notifications/initialized` + `tools/list`
//       and the time from start to the complete tools/list answer (its tools counted).
//   waits --mode daemon --iterations N --socket PATH [--mcp "MEITH ARGS"] [--rss] -- PROGRAM
//   ARGS...
//       PROGRAM (`meithd …`) started N times; time to the first hello answered on PATH, and to
//       every source settled (ready, or idle for an on-demand one: list_sources polled every
//       1 ms) and all tools listed (list_tools). With --mcp, that command (split at spaces:
//       `meith --socket PATH mcp`) is started once hello is answered and timed from PROGRAM's
//       start to its complete tools/list answer (`mcp_list_`). With --rss, after the last
//       start settled and 2 s passed, the summed VmRSS of PROGRAM and every descendant and
//       their count (`rss_kib`, `processes`).
//   --pause-ms N (command mode): sleep N ms between runs (an on-demand source stops when idle).
//
// Prints ONE JSON line: {"mode":M,"iterations":N,"p50_ms":..,"min_ms":..,"max_ms":..,
// "samples_ms":[..], ...mode fields}. Exit status: 0 when every sample worked, 1 otherwise, 2 on
// bad usage.

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace {

using clk = std::chrono::steady_clock;

int64_t now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(clk::now().time_since_epoch())
        .count();
}

/// The program being timed, stopped (SIGTERM) when a sample fails: a daemon must not outlive us.
pid_t running_child = -1;

[[noreturn]] void die(const std::string& msg) {
    if (running_child > 0) kill(running_child, SIGTERM);
    std::fprintf(stderr, "waits: %s\n", msg.c_str());
    std::exit(1);
}

[[noreturn]] void usage(const std::string& msg) {
    std::fprintf(stderr,
                 "waits: %s\n"
                 "usage: waits --mode command|mcp|daemon --iterations N [--expect TEXT]\n"
                 "             [--tools-list] [--socket PATH] [--timeout S] -- PROGRAM ARGS...\n",
                 msg.c_str());
    std::exit(2);
}

struct options {
    std::string mode;
    int iterations = 20;
    std::string expect;
    bool tools_list = false;
    std::string socket_path;
    double timeout = 30;
    std::vector<std::string> mcp; ///< --mcp, split at spaces
    bool rss = false;
    int pause_ms = 0;
    std::vector<std::string> argv;
};

options parse_args(int argc, char** argv) {
    options o;
    int i = 1;
    for (; i < argc; ++i) {
        std::string_view a = argv[i];
        if (a == "--") {
            ++i;
            break;
        }
        auto value = [&]() -> std::string {
            if (i + 1 >= argc) usage(std::string(a) + " needs a value");
            return argv[++i];
        };
        if (a == "--mode")
            o.mode = value();
        else if (a == "--iterations")
            o.iterations = std::atoi(value().c_str());
        else if (a == "--expect")
            o.expect = value();
        else if (a == "--tools-list")
            o.tools_list = true;
        else if (a == "--socket")
            o.socket_path = value();
        else if (a == "--timeout")
            o.timeout = std::atof(value().c_str());
        else if (a == "--mcp") {
            const std::string cmd = value();
            std::size_t from = 0;
            while (from < cmd.size()) {
                const auto to = std::min(cmd.find(' ', from), cmd.size());
                if (to > from) o.mcp.push_back(cmd.substr(from, to - from));
                from = to + 1;
            }
        } else if (a == "--rss")
            o.rss = true;
        else if (a == "--pause-ms")
            o.pause_ms = std::atoi(value().c_str());
        else
            usage("unknown argument " + std::string(a));
    }
    for (; i < argc; ++i)
        o.argv.emplace_back(argv[i]);
    if (o.argv.empty()) usage("no program after --");
    if (o.iterations < 1) usage("--iterations must be at least 1");
    return o;
}

std::string fmt_ms(int64_t ns) {
    char b[32];
    std::snprintf(b, sizeof b, "%.2f", static_cast<double>(ns) / 1e6);
    return b;
}

// A started program with pipes to its stdin (in_fd, -1 when not asked for) and from its stdout.
struct child {
    pid_t pid = -1;
    int in_fd = -1;
    int out_fd = -1;
};

child start(const std::vector<std::string>& args, bool with_stdin) {
    int out[2], in[2] = {-1, -1};
    if (pipe2(out, O_CLOEXEC) != 0) die(std::string("pipe: ") + std::strerror(errno));
    if (with_stdin && pipe2(in, O_CLOEXEC) != 0) die(std::string("pipe: ") + std::strerror(errno));
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    if (with_stdin)
        posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    else
        posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    std::vector<char*> av;
    for (const auto& s : args)
        av.push_back(const_cast<char*>(s.c_str()));
    av.push_back(nullptr);
    child c;
    const int rc = posix_spawnp(&c.pid, av[0], &fa, nullptr, av.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) die("cannot start " + args[0] + ": " + std::strerror(rc));
    running_child = c.pid;
    close(out[1]);
    c.out_fd = out[0];
    if (with_stdin) {
        close(in[0]);
        c.in_fd = in[1];
    }
    return c;
}

// Reads from fd into buf until pred(buf) holds, EOF, or the deadline. Returns pred(buf).
template <class Pred>
bool read_until(int fd, std::string& buf, int64_t deadline, Pred pred) {
    char chunk[65536];
    while (!pred(buf)) {
        const int64_t left_ms = (deadline - now_ns()) / 1000000;
        if (left_ms <= 0) return false;
        pollfd p{fd, POLLIN, 0};
        if (poll(&p, 1, static_cast<int>(left_ms)) <= 0) continue;
        const ssize_t n = read(fd, chunk, sizeof chunk);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return pred(buf);
        buf.append(chunk, static_cast<std::size_t>(n));
    }
    return true;
}

int finish(child& c, bool kill_first) {
    if (c.in_fd >= 0) close(c.in_fd);
    if (kill_first) kill(c.pid, SIGTERM);
    int status = 0;
    waitpid(c.pid, &status, 0);
    running_child = -1;
    close(c.out_fd);
    return status;
}

bool write_all(int fd, std::string_view s) {
    while (!s.empty()) {
        const ssize_t n = write(fd, s.data(), s.size());
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        s.remove_prefix(static_cast<std::size_t>(n));
    }
    return true;
}

std::size_t count(std::string_view hay, std::string_view needle) {
    std::size_t n = 0;
    for (auto at = hay.find(needle); at != std::string_view::npos;
         at = hay.find(needle, at + needle.size()))
        ++n;
    return n;
}

struct samples {
    std::vector<int64_t> ns;
    std::string json(const char* prefix) const {
        std::vector<int64_t> s = ns;
        std::sort(s.begin(), s.end());
        std::string j = std::string(",\"") + prefix + "p50_ms\":" + fmt_ms(s[(s.size() - 1) / 2]) +
                        ",\"" + prefix + "min_ms\":" + fmt_ms(s.front()) + ",\"" + prefix +
                        "max_ms\":" + fmt_ms(s.back()) + ",\"" + prefix + "samples_ms\":[";
        for (std::size_t i = 0; i < ns.size(); ++i)
            j += (i ? "," : "") + fmt_ms(ns[i]);
        return j + "]";
    }
};

std::string head(const std::vector<std::string>& argv) {
    std::string s;
    for (const auto& a : argv)
        s += (s.empty() ? "" : " ") + a;
    return s;
}

int run_command(const options& o) {
    samples t;
    for (int i = 0; i < o.iterations; ++i) {
        const int64_t t0 = now_ns();
        child c = start(o.argv, false);
        std::string out;
        read_until(c.out_fd, out, t0 + static_cast<int64_t>(o.timeout * 1e9),
                   [](const std::string&) { return false; });
        const int status = finish(c, false);
        const int64_t dt = now_ns() - t0;
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            die("`" + head(o.argv) + "` exited with status " + std::to_string(status));
        if (out.find(o.expect) == std::string::npos)
            die("`" + head(o.argv) + "` printed " + out.substr(0, 300) + ", not " + o.expect);
        t.ns.push_back(dt);
        if (o.pause_ms > 0 && i + 1 < o.iterations)
            usleep(static_cast<useconds_t>(o.pause_ms) * 1000);
    }
    std::printf("{\"mode\":\"command\",\"iterations\":%d%s}\n", o.iterations, t.json("").c_str());
    return 0;
}

/// `meith mcp` (argv) started, initialized and asked tools/list; returns the answer's tool
/// count. Dies on a wrong or missing answer.
std::size_t mcp_tools_list(const std::vector<std::string>& argv, int64_t deadline) {
    static constexpr std::string_view exchange =
        R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench-waits","version":"1"}}})"
        "\n"
        R"({"jsonrpc":"2.0","method":"notifications/initialized"})"
        "\n"
        R"({"jsonrpc":"2.0","id":2,"method":"tools/list"})"
        "\n";
    child c = start(argv, true);
    if (!write_all(c.in_fd, exchange)) die("cannot write to `" + head(argv) + "`");
    std::string out;
    if (!read_until(c.out_fd, out, deadline, [](const std::string& b) {
            const auto at = b.find(R"("id":2,)");
            return at != std::string::npos && b.find('\n', at) != std::string::npos;
        }))
        die("no tools/list answer from `" + head(argv) + "`: " + out.substr(0, 300));
    const std::size_t tools = count(out, "\"inputSchema\"");
    finish(c, false);
    return tools;
}

/// VmRSS (KiB) of `pid` and every process under it, and how many processes that is.
std::pair<std::uint64_t, std::size_t> tree_rss(pid_t root) {
    std::vector<std::pair<pid_t, pid_t>> procs; // pid, parent
    std::vector<std::pair<pid_t, std::uint64_t>> rss;
    if (DIR* d = opendir("/proc")) {
        while (const dirent* e = readdir(d)) {
            const pid_t pid = static_cast<pid_t>(std::atoi(e->d_name));
            if (pid <= 0) continue;
            const std::string base = std::string("/proc/") + e->d_name;
            FILE* f = std::fopen((base + "/status").c_str(), "r");
            if (f == nullptr) continue;
            char line[256];
            pid_t parent = 0;
            std::uint64_t kib = 0;
            while (std::fgets(line, sizeof line, f)) {
                if (std::strncmp(line, "PPid:", 5) == 0) parent = std::atoi(line + 5);
                if (std::strncmp(line, "VmRSS:", 6) == 0)
                    kib = std::strtoull(line + 6, nullptr, 10);
            }
            std::fclose(f);
            procs.emplace_back(pid, parent);
            rss.emplace_back(pid, kib);
        }
        closedir(d);
    }
    std::vector<pid_t> tree{root};
    for (std::size_t i = 0; i < tree.size(); ++i)
        for (const auto& [pid, parent] : procs)
            if (parent == tree[i]) tree.push_back(pid);
    std::uint64_t total = 0;
    for (const auto& [pid, kib] : rss)
        if (std::find(tree.begin(), tree.end(), pid) != tree.end()) total += kib;
    return {total, tree.size()};
}

int run_mcp(const options& o) {
    static constexpr std::string_view init =
        R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench-waits","version":"1"}}})"
        "\n";
    static constexpr std::string_view list =
        R"({"jsonrpc":"2.0","method":"notifications/initialized"})"
        "\n"
        R"({"jsonrpc":"2.0","id":2,"method":"tools/list"})"
        "\n";
    samples ready, listed;
    std::size_t tools = 0, bytes = 0;
    for (int i = 0; i < o.iterations; ++i) {
        const int64_t t0 = now_ns(), deadline = t0 + static_cast<int64_t>(o.timeout * 1e9);
        child c = start(o.argv, true);
        if (!write_all(c.in_fd, init)) die("cannot write initialize to `" + head(o.argv) + "`");
        std::string out;
        const auto line_with = [](std::string_view id) {
            return [id](const std::string& b) {
                const auto at = b.find(id);
                return at != std::string::npos && b.find('\n', at) != std::string::npos;
            };
        };
        if (!read_until(c.out_fd, out, deadline, line_with(R"("id":1,)")) ||
            out.find("\"result\"") == std::string::npos)
            die("no initialize result from `" + head(o.argv) + "`: " + out.substr(0, 300));
        ready.ns.push_back(now_ns() - t0);
        if (o.tools_list) {
            const std::size_t before = out.size();
            if (!write_all(c.in_fd, list)) die("cannot write tools/list");
            if (!read_until(c.out_fd, out, deadline, line_with(R"("id":2,)")))
                die("no tools/list result: " + out.substr(before, 300));
            listed.ns.push_back(now_ns() - t0);
            std::string_view answer = std::string_view(out).substr(before);
            tools = count(answer, "\"inputSchema\"");
            bytes = answer.size();
            if (tools == 0)
                die("tools/list listed no tools: " + std::string(answer.substr(0, 300)));
        }
        finish(c, false);
    }
    std::string j =
        "{\"mode\":\"mcp\",\"iterations\":" + std::to_string(o.iterations) + ready.json("");
    if (o.tools_list)
        j += listed.json("tools_list_") + ",\"tools\":" + std::to_string(tools) +
             ",\"tools_list_bytes\":" + std::to_string(bytes);
    std::printf("%s}\n", j.c_str());
    return 0;
}

int connect_unix(const std::string& path) {
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::snprintf(a.sun_path, sizeof a.sun_path, "%s", path.c_str());
    if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

// One frame and its answer (the line after it) on fd.
bool ask(int fd, std::string_view frame, std::string& buf, std::string& line, int64_t deadline) {
    if (!write_all(fd, frame)) return false;
    if (!read_until(fd, buf, deadline,
                    [](const std::string& b) { return b.find('\n') != std::string::npos; }))
        return false;
    const auto nl = buf.find('\n');
    line.assign(buf, 0, nl);
    buf.erase(0, nl + 1);
    return true;
}

int run_daemon(const options& o) {
    if (o.socket_path.empty()) usage("--mode daemon needs --socket");
    std::signal(SIGPIPE, SIG_IGN);
    samples hello, listed, mcp_listed;
    std::size_t tools = 0, sources = 0, mcp_tools = 0;
    std::pair<std::uint64_t, std::size_t> rest{0, 0};
    for (int i = 0; i < o.iterations; ++i) {
        unlink(o.socket_path.c_str());
        const int64_t t0 = now_ns(), deadline = t0 + static_cast<int64_t>(o.timeout * 1e9);
        child c = start(o.argv, false);
        int fd = -1;
        std::string buf, line;
        while (fd < 0) {
            if (now_ns() > deadline) die("`" + head(o.argv) + "` never listened");
            int status;
            if (waitpid(c.pid, &status, WNOHANG) == c.pid)
                die("`" + head(o.argv) + "` exited with status " + std::to_string(status));
            fd = connect_unix(o.socket_path);
            if (fd < 0) usleep(200);
        }
        if (!ask(fd, "{\"type\":\"hello\",\"requestId\":\"h\"}\n", buf, line, deadline) ||
            line.find("hello_result") == std::string::npos)
            die("no hello_result: " + line.substr(0, 300));
        hello.ns.push_back(now_ns() - t0);
        if (!o.mcp.empty()) {
            mcp_tools = mcp_tools_list(o.mcp, deadline);
            mcp_listed.ns.push_back(now_ns() - t0);
            running_child = c.pid;
        }
        for (;;) {
            if (!ask(fd, "{\"type\":\"list_sources\",\"requestId\":\"s\"}\n", buf, line, deadline))
                die("no sources_list; last: " + line.substr(0, 300));
            sources = count(line, "\"state\":");
            if (count(line, "\"state\":\"ready\"") + count(line, "\"state\":\"idle\"") == sources)
                break;
            if (const auto bad = line.find("\"state\":\"failed\""); bad != std::string::npos) {
                const auto from = line.rfind("{\"name\":", bad);
                die("a source failed: " + line.substr(from == std::string::npos ? 0 : from, 1200));
            }
            usleep(1000);
        }
        if (!ask(fd, "{\"type\":\"list_tools\",\"requestId\":\"t\"}\n", buf, line, deadline) ||
            line.find("tools_list") == std::string::npos)
            die("no tools_list: " + line.substr(0, 300));
        listed.ns.push_back(now_ns() - t0);
        tools = count(line, "\"inputSchema\"");
        if (o.rss && i + 1 == o.iterations) {
            sleep(2); // at rest: first allocations done, nothing in flight
            rest = tree_rss(c.pid);
        }
        close(fd);
        finish(c, true);
    }
    std::string extra;
    if (!o.mcp.empty())
        extra += mcp_listed.json("mcp_list_") + ",\"mcp_tools\":" + std::to_string(mcp_tools);
    if (o.rss)
        extra += ",\"rss_kib\":" + std::to_string(rest.first) +
                 ",\"processes\":" + std::to_string(rest.second);
    std::printf("{\"mode\":\"daemon\",\"iterations\":%d%s%s,\"sources\":%zu,\"tools\":%zu%s}\n",
                o.iterations, listed.json("").c_str(), hello.json("hello_").c_str(), sources, tools,
                extra.c_str());
    return 0;
}

} // namespace

int main(int argc, char** argv) {
    const options o = parse_args(argc, argv);
    if (o.mode == "command") return run_command(o);
    if (o.mode == "mcp") return run_mcp(o);
    if (o.mode == "daemon") return run_daemon(o);
    usage("unknown mode '" + o.mode + "'");
}
