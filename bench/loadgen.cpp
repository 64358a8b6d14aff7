// bench/loadgen.cpp — load generator for bench/run.
//
// Speaks the meith socket protocol (or MCP JSON-RPC over a spawned server's stdio), keeps a
// fixed number of calls in flight per connection, verifies every reply and records per-call
// latency (steady_clock, from the write() that carried the request to the read() that carried
// the reply). One thread, one epoll loop. Depends on POSIX and the standard library only.
//
// Modes:
//   --mode meith       tool_call frames over --socket PATH (default)
//   --mode mcp         MCP over the stdio of --stdio-cmd CMD (one process per connection)
//   --mode list_tools  --iterations N round trips of list_tools on one connection; with
//                      --queries "A|B|…", tool searches (list_tools `query`) in turn
//   --mode idle        open --connections N idle connections (hello each); RSS of --server-pid
//   --mode startup     spawn --spawn-cmd CMD --iterations N times; time to connect + hello
//   --mode wait        retry connect + one tool_call of --tool (arguments --wait-args JSON,
//                      default {"s":"ready?"}) until it works (--timeout S)
//
// Load modes print ONE JSON line:
//   {"calls":N,"errors":E,"seconds":S,"calls_per_s":X,"p50_us":..,"p99_us":..,"p999_us":..,
//    "client_cpu_s":..,"server_cpu_s":..,"children_cpu_s":..,"other_cpu_s":..,...}
// server_cpu_s is the utime+stime delta of the --server-pid processes (stdio: the spawned
// servers), children_cpu_s that of their descendants, other_cpu_s the busy time of the whole
// machine (/proc/stat) minus client, server and children, all over the measurement window.
// Exit status: 0 when errors == 0 and calls > 0, 1 otherwise, 2 on bad usage.

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

namespace {

using clk = std::chrono::steady_clock;

int64_t now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(clk::now().time_since_epoch())
        .count();
}

[[noreturn]] void die(const std::string& msg) {
    std::fprintf(stderr, "loadgen: %s\n", msg.c_str());
    std::exit(1);
}

[[noreturn]] void usage(const std::string& msg) {
    std::fprintf(
        stderr,
        "loadgen: %s\n"
        "usage: loadgen [--mode meith|mcp|list_tools|idle|startup|wait] [--socket PATH]\n"
        "               [--stdio-cmd CMD] [--spawn-cmd CMD] [--connections N] [--depth D]\n"
        "               [--payload BYTES] [--duration S] [--warmup S] [--tool NAME]\n"
        "               [--iterations N] [--server-pid PID[,PID...]] [--timeout S]\n"
        "               [--wait-args JSON]\n",
        msg.c_str());
    std::exit(2);
}

struct options {
    std::string mode = "meith";
    std::string socket_path;
    std::string stdio_cmd;
    std::string spawn_cmd;
    /// --mode list_tools with --queries "A|B|…": list_tools with `query` (tool search,
    /// docs/protocol.md §20), the queries in turn; reported as mode "search".
    std::vector<std::string> queries;
    int connections = 1;
    int depth = 1;
    std::size_t payload = 64;
    double duration = 3.0;
    double warmup = 1.0;
    std::string tool = "echo";
    int iterations = 20;
    std::vector<pid_t> server_pids;
    double timeout = 30.0;
    std::string wait_args = R"({"s":"ready?"})";
};

options parse_args(int argc, char** argv) {
    options o;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        auto val = [&]() -> std::string {
            if (i + 1 >= argc) usage(a + " needs a value");
            return argv[++i];
        };
        auto num = [&](const std::string& s) -> double {
            char* end = nullptr;
            double d = std::strtod(s.c_str(), &end);
            if (end == s.c_str() || *end != 0 || d < 0) usage(a + ": not a number: " + s);
            return d;
        };
        if (a == "--mode")
            o.mode = val();
        else if (a == "--socket")
            o.socket_path = val();
        else if (a == "--stdio-cmd")
            o.stdio_cmd = val();
        else if (a == "--spawn-cmd")
            o.spawn_cmd = val();
        else if (a == "--queries") {
            const std::string all = val();
            for (std::size_t at = 0; at <= all.size();) {
                const auto bar = all.find('|', at);
                o.queries.push_back(all.substr(at, bar - at));
                if (bar == std::string::npos) break;
                at = bar + 1;
            }
        } else if (a == "--connections")
            o.connections = static_cast<int>(num(val()));
        else if (a == "--depth")
            o.depth = static_cast<int>(num(val()));
        else if (a == "--payload")
            o.payload = static_cast<std::size_t>(num(val()));
        else if (a == "--duration")
            o.duration = num(val());
        else if (a == "--warmup")
            o.warmup = num(val());
        else if (a == "--tool")
            o.tool = val();
        else if (a == "--iterations")
            o.iterations = static_cast<int>(num(val()));
        else if (a == "--timeout")
            o.timeout = num(val());
        else if (a == "--wait-args")
            o.wait_args = val();
        else if (a == "--server-pid") {
            std::stringstream ss(val());
            std::string item;
            while (std::getline(ss, item, ','))
                if (!item.empty()) o.server_pids.push_back(static_cast<pid_t>(num(item)));
        } else
            usage("unknown argument " + a);
    }
    if (o.connections < 1 || o.depth < 1 || o.iterations < 1)
        usage("connections, depth, iterations must be >= 1");
    return o;
}

// ------------------------------------------------------------------------------------------
// /proc helpers

std::string read_file(const std::string& path) {
    std::ifstream f(path);
    if (!f) return {};
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

// Fields of /proc/PID/stat after the comm: index 0 is field 3 (state).
std::vector<std::string> stat_fields(pid_t pid) {
    std::string s = read_file("/proc/" + std::to_string(pid) + "/stat");
    auto rp = s.rfind(')');
    if (rp == std::string::npos) return {};
    std::stringstream ss(s.substr(rp + 2));
    std::vector<std::string> v;
    std::string x;
    while (ss >> x)
        v.push_back(x);
    return v;
}

long clk_tck() {
    static long t = sysconf(_SC_CLK_TCK);
    return t;
}

// utime+stime of a process (all threads) in seconds, or -1.
double proc_cpu_s(pid_t pid) {
    auto f = stat_fields(pid);
    if (f.size() < 13) return -1;
    return (std::stod(f[11]) + std::stod(f[12])) / static_cast<double>(clk_tck());
}

std::vector<pid_t> descendants(const std::vector<pid_t>& roots) {
    std::multimap<pid_t, pid_t> kids;
    if (DIR* d = opendir("/proc")) {
        while (dirent* e = readdir(d)) {
            char* end = nullptr;
            long pid = std::strtol(e->d_name, &end, 10);
            if (*end != 0 || pid <= 0) continue;
            auto f = stat_fields(static_cast<pid_t>(pid));
            if (f.size() < 2) continue;
            kids.emplace(static_cast<pid_t>(std::stol(f[1])), static_cast<pid_t>(pid));
        }
        closedir(d);
    }
    std::vector<pid_t> out, frontier(roots);
    std::set<pid_t> seen(roots.begin(), roots.end());
    while (!frontier.empty()) {
        pid_t p = frontier.back();
        frontier.pop_back();
        auto [b, e] = kids.equal_range(p);
        for (auto it = b; it != e; ++it)
            if (seen.insert(it->second).second) {
                out.push_back(it->second);
                frontier.push_back(it->second);
            }
    }
    return out;
}

// Whole-machine CPU from /proc/stat. With tick-based accounting (this kernel) user/system are
// sampled at timer ticks, which a stopped (NO_HZ) tick misses when a core wakes briefly and
// sleeps again, so busy time is taken as elapsed × online cores − idle − iowait − steal:
// idle and iowait are measured exactly on NO_HZ kernels. The tick-sampled busy time is kept
// for comparison.
struct machine_cpu {
    double idle = 0, steal = 0, tick_busy = 0;
    int64_t at_ns = 0;
};

machine_cpu read_proc_stat() {
    std::ifstream f("/proc/stat");
    std::string cpu;
    double user = 0, nice = 0, sys = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
    f >> cpu >> user >> nice >> sys >> idle >> iowait >> irq >> softirq >> steal;
    const double t = static_cast<double>(clk_tck());
    return {(idle + iowait) / t, steal / t, (user + nice + sys + irq + softirq) / t, now_ns()};
}

// Busy CPU seconds of the whole machine between two readings.
double machine_busy(const machine_cpu& a, const machine_cpu& b) {
    const double cores = static_cast<double>(sysconf(_SC_NPROCESSORS_ONLN));
    const double wall = static_cast<double>(b.at_ns - a.at_ns) / 1e9;
    return wall * cores - (b.idle - a.idle) - (b.steal - a.steal);
}

double client_cpu_s() {
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
           static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

long rss_kib(pid_t pid) {
    std::string s = read_file("/proc/" + std::to_string(pid) + "/status");
    auto p = s.find("VmRSS:");
    if (p == std::string::npos) return -1;
    return std::strtol(s.c_str() + p + 6, nullptr, 10);
}

// CPU of every process on the machine (utime+stime, and cutime+cstime for children it reaped),
// keyed by pid and start time, for "other processes" over a window.
struct proc_cpu {
    std::string start;
    double self = 0, reaped = 0;
};

std::map<pid_t, proc_cpu> all_procs() {
    std::map<pid_t, proc_cpu> m;
    const double t = static_cast<double>(clk_tck());
    if (DIR* d = opendir("/proc")) {
        while (dirent* e = readdir(d)) {
            char* end = nullptr;
            long pid = std::strtol(e->d_name, &end, 10);
            if (*end != 0 || pid <= 0) continue;
            auto f = stat_fields(static_cast<pid_t>(pid));
            if (f.size() < 20) continue;
            m[static_cast<pid_t>(pid)] = {f[19], (std::stod(f[11]) + std::stod(f[12])) / t,
                                          (std::stod(f[13]) + std::stod(f[14])) / t};
        }
        closedir(d);
    }
    return m;
}

// CPU seconds used between two scans by processes not in `ours`. A process that both started
// and was reaped inside the window is counted through its parent's cutime; one alive at the
// start that was reaped inside the window is counted whole (a disturbance all the same).
double others_cpu(const std::map<pid_t, proc_cpu>& a, const std::map<pid_t, proc_cpu>& b,
                  const std::set<pid_t>& ours) {
    double sum = 0;
    for (const auto& [pid, pb] : b) {
        if (ours.count(pid)) continue;
        auto it = a.find(pid);
        if (it != a.end() && it->second.start == pb.start)
            sum += (pb.self - it->second.self) + (pb.reaped - it->second.reaped);
        else
            sum += pb.self + pb.reaped;
    }
    return sum;
}

struct cpu_snapshot {
    double client = 0, server = 0, children = 0;
    machine_cpu machine;
    std::vector<pid_t> kids;
    std::map<pid_t, proc_cpu> procs;
};

cpu_snapshot take_snapshot(const std::vector<pid_t>& servers, const std::vector<pid_t>* kids_in) {
    cpu_snapshot s;
    s.kids = kids_in ? *kids_in : descendants(servers);
    s.procs = all_procs();
    s.machine = read_proc_stat();
    s.client = client_cpu_s();
    for (pid_t p : servers)
        s.server += std::max(0.0, proc_cpu_s(p));
    for (pid_t p : s.kids)
        s.children += std::max(0.0, proc_cpu_s(p));
    return s;
}

// ------------------------------------------------------------------------------------------
// fd helpers

void set_nonblock(int fd) {
    int fl = fcntl(fd, F_GETFL);
    fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

int connect_unix(const std::string& path, bool quiet = false) {
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) die(std::string("socket: ") + std::strerror(errno));
    sockaddr_un sa{};
    sa.sun_family = AF_UNIX;
    if (path.size() >= sizeof sa.sun_path) die("socket path too long: " + path);
    std::memcpy(sa.sun_path, path.c_str(), path.size() + 1);
    if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
        int e = errno;
        close(fd);
        if (!quiet) die("connect " + path + ": " + std::strerror(e));
        errno = e;
        return -1;
    }
    return fd;
}

bool write_all(int fd, const std::string& s) {
    std::size_t off = 0;
    while (off < s.size()) {
        ssize_t n = write(fd, s.data() + off, s.size() - off);
        if (n < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN) {
                pollfd p{fd, POLLOUT, 0};
                poll(&p, 1, 1000);
                continue;
            }
            return false;
        }
        off += static_cast<std::size_t>(n);
    }
    return true;
}

// Reads one line (without '\n') from fd with a deadline; `buf` keeps what follows it.
bool read_line(int fd, std::string& buf, std::string& line, int64_t deadline_ns) {
    std::size_t scanned = 0; // bytes of buf already searched for '\n'
    for (;;) {
        auto nl = buf.find('\n', scanned);
        scanned = buf.size();
        if (nl != std::string::npos) {
            line.assign(buf, 0, nl);
            buf.erase(0, nl + 1);
            return true;
        }
        int64_t left_ms = (deadline_ns - now_ns()) / 1000000;
        if (left_ms <= 0) return false;
        pollfd p{fd, POLLIN, 0};
        int r = poll(&p, 1, static_cast<int>(std::min<int64_t>(left_ms, 1000)));
        if (r < 0 && errno != EINTR) return false;
        if (r <= 0) continue;
        char tmp[262144];
        ssize_t n = read(fd, tmp, sizeof tmp);
        if (n < 0) {
            if (errno == EINTR || errno == EAGAIN) continue;
            return false;
        }
        if (n == 0) return false;
        buf.append(tmp, static_cast<std::size_t>(n));
    }
}

pid_t spawn_sh(const std::string& cmd, int* child_stdin, int* child_stdout) {
    int in[2] = {-1, -1}, out[2] = {-1, -1};
    if (child_stdin && pipe2(in, O_CLOEXEC) != 0) die("pipe2");
    if (child_stdout && pipe2(out, O_CLOEXEC) != 0) die("pipe2");
    pid_t pid = fork();
    if (pid < 0) die("fork");
    if (pid == 0) {
        if (child_stdin) dup2(in[0], 0);
        if (child_stdout) dup2(out[1], 1);
        std::string full = "exec " + cmd;
        execl("/bin/sh", "sh", "-c", full.c_str(), static_cast<char*>(nullptr));
        _exit(127);
    }
    if (child_stdin) {
        close(in[0]);
        *child_stdin = in[1];
    }
    if (child_stdout) {
        close(out[1]);
        *child_stdout = out[0];
    }
    return pid;
}

bool contains(std::string_view hay, std::string_view needle) {
    return !needle.empty() &&
           memmem(hay.data(), hay.size(), needle.data(), needle.size()) != nullptr;
}

double pct(std::vector<int64_t>& v, double p) { // v sorted, ns → µs
    if (v.empty()) return 0;
    std::size_t idx = static_cast<std::size_t>(std::ceil(p * static_cast<double>(v.size())));
    if (idx > 0) --idx;
    if (idx >= v.size()) idx = v.size() - 1;
    return static_cast<double>(v[idx]) / 1000.0;
}

std::string json_str(std::string_view s) {
    std::string o = "\"";
    for (unsigned char c : s) {
        if (c == '"' || c == '\\') {
            o += '\\';
            o += static_cast<char>(c);
        } else if (c < 0x20) {
            char b[8];
            std::snprintf(b, sizeof b, "\\u%04x", c);
            o += b;
        } else
            o += static_cast<char>(c);
    }
    return o + "\"";
}

std::string fmt(double d, int prec = 3) {
    char b[64];
    std::snprintf(b, sizeof b, "%.*f", prec, d);
    return b;
}

// ------------------------------------------------------------------------------------------
// load modes (meith, mcp)

struct slot {
    uint64_t seq = UINT64_MAX;
    int64_t t = 0;
};

struct conn {
    int idx = 0;
    int rfd = -1, wfd = -1;
    pid_t pid = -1;
    std::vector<char> in;
    std::size_t in_beg = 0, in_end = 0;
    std::string out;
    std::size_t out_off = 0;
    bool out_armed = false;
    bool dead = false;
    uint64_t next_seq = 1;
    int inflight = 0;
    std::vector<slot> ring;
    std::string prefix; // request text up to the sequence number
};

struct load_state {
    const options* o = nullptr;
    bool mcp = false;
    std::string suffix; // request text after the sequence number
    int ep = -1;
    uint64_t errors = 0;
    uint64_t calls = 0;
    bool measuring = false;
    std::vector<int64_t> lat;
    std::string first_error;

    void error(const std::string& what) {
        ++errors;
        if (first_error.empty()) first_error = what.substr(0, 400);
    }
};

void arm(load_state& st, conn& c, bool want_out) {
    if (c.out_armed == want_out) return;
    epoll_event ev{};
    ev.events = EPOLLOUT;
    ev.data.u64 = (static_cast<uint64_t>(c.idx) << 1) | 1u;
    if (c.rfd == c.wfd) { // socket: one registration for both directions
        ev.events = EPOLLIN | (want_out ? EPOLLOUT : 0u);
        ev.data.u64 = static_cast<uint64_t>(c.idx) << 1;
        epoll_ctl(st.ep, EPOLL_CTL_MOD, c.rfd, &ev);
    } else if (want_out) {
        epoll_ctl(st.ep, EPOLL_CTL_ADD, c.wfd, &ev);
    } else {
        epoll_ctl(st.ep, EPOLL_CTL_DEL, c.wfd, nullptr);
    }
    c.out_armed = want_out;
}

void flush(load_state& st, conn& c) {
    while (c.out_off < c.out.size()) {
        ssize_t n = write(c.wfd, c.out.data() + c.out_off, c.out.size() - c.out_off);
        if (n < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN) {
                arm(st, c, true);
                return;
            }
            st.error("write on connection " + std::to_string(c.idx) + ": " + std::strerror(errno));
            c.dead = true;
            return;
        }
        c.out_off += static_cast<std::size_t>(n);
    }
    c.out.clear();
    c.out_off = 0;
    arm(st, c, false);
}

void fill(load_state& st, conn& c, int64_t t) {
    const int depth = st.o->depth;
    char num[24];
    while (c.inflight < depth && !c.dead) {
        uint64_t seq = c.next_seq++;
        slot& s = c.ring[seq & (c.ring.size() - 1)];
        if (s.seq != UINT64_MAX) {
            st.error("requestId window overflow on connection " + std::to_string(c.idx));
            c.dead = true;
            return;
        }
        s.seq = seq;
        s.t = t;
        int len = std::snprintf(num, sizeof num, "%" PRIu64, seq);
        c.out += c.prefix;
        c.out.append(num, static_cast<std::size_t>(len));
        c.out += st.suffix;
        ++c.inflight;
    }
}

uint64_t parse_u64(const char* p, const char* end, const char** stop) {
    uint64_t v = 0;
    const char* q = p;
    while (q < end && *q >= '0' && *q <= '9')
        v = v * 10 + static_cast<uint64_t>(*q++ - '0');
    *stop = q;
    return q == p ? UINT64_MAX : v;
}

void handle_line(load_state& st, conn& c, std::string_view line, int64_t t_recv) {
    if (line.empty() || (line.size() == 1 && line[0] == '\r')) return;
    uint64_t seq = UINT64_MAX;
    bool ok = false;
    const char* b = line.data();
    const char* e = b + line.size();
    if (!st.mcp) {
        static constexpr std::string_view key = "\"requestId\":\"c";
        const void* k = memmem(b, line.size(), key.data(), key.size());
        if (k) {
            const char* p = static_cast<const char*>(k) + key.size();
            const char* q;
            uint64_t ci = parse_u64(p, e, &q);
            if (ci == static_cast<uint64_t>(c.idx) && q < e && *q == '_') {
                seq = parse_u64(q + 1, e, &q);
                if (q >= e || *q != '"') seq = UINT64_MAX;
            }
        }
        ok = seq != UINT64_MAX && contains(line, "\"type\":\"tool_result\"") &&
             contains(line, "\"ok\":true");
    } else {
        // The id of a JSON-RPC response: the last "id": in the line (escaped text cannot match).
        static constexpr std::string_view key = "\"id\":";
        const char* found = nullptr;
        for (const char* p = b;;) {
            const void* k = memmem(p, static_cast<std::size_t>(e - p), key.data(), key.size());
            if (!k) break;
            found = static_cast<const char*>(k);
            p = found + 1;
        }
        if (!found) {
            if (contains(line, "\"method\":")) return; // a notification from the server
        } else {
            const char* q;
            seq = parse_u64(found + key.size(), e, &q);
        }
        ok = seq != UINT64_MAX && contains(line, "\"result\":") &&
             !contains(line, "\"isError\":true") && !contains(line, "\"error\":{");
    }
    if (seq == UINT64_MAX) {
        st.error("reply without a usable id on connection " + std::to_string(c.idx) + ": " +
                 std::string(line));
        return;
    }
    slot& s = c.ring[seq & (c.ring.size() - 1)];
    if (s.seq != seq) {
        st.error("reply for an id not in flight on connection " + std::to_string(c.idx) + ": " +
                 std::string(line));
        return;
    }
    s.seq = UINT64_MAX;
    --c.inflight;
    if (!ok) {
        st.error("failed reply on connection " + std::to_string(c.idx) + ": " + std::string(line));
        return;
    }
    if (st.measuring) {
        ++st.calls;
        st.lat.push_back(t_recv - s.t);
    }
}

// Reads what is available; returns false at EOF/error.
bool on_readable(load_state& st, conn& c) {
    bool got = false;
    for (int round = 0; round < 8; ++round) {
        if (c.in_end == c.in.size()) {
            if (c.in_beg > 0) {
                std::memmove(c.in.data(), c.in.data() + c.in_beg, c.in_end - c.in_beg);
                c.in_end -= c.in_beg;
                c.in_beg = 0;
            } else {
                c.in.resize(c.in.size() * 2);
            }
        }
        ssize_t n = read(c.rfd, c.in.data() + c.in_end, c.in.size() - c.in_end);
        if (n < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN) break;
            st.error("read on connection " + std::to_string(c.idx) + ": " + std::strerror(errno));
            return false;
        }
        if (n == 0) {
            st.error("connection " + std::to_string(c.idx) + " closed by the server");
            return false;
        }
        got = true;
        c.in_end += static_cast<std::size_t>(n);
        if (c.in_end < c.in.size()) break; // short read: drained
    }
    if (!got) return true;
    const int64_t t_recv = now_ns();
    char* base = c.in.data();
    while (c.in_beg < c.in_end) {
        char* nl = static_cast<char*>(std::memchr(base + c.in_beg, '\n', c.in_end - c.in_beg));
        if (!nl) break;
        handle_line(
            st, c,
            std::string_view(base + c.in_beg, static_cast<std::size_t>(nl - (base + c.in_beg))),
            t_recv);
        c.in_beg = static_cast<std::size_t>(nl - base) + 1;
    }
    if (c.in_beg == c.in_end) c.in_beg = c.in_end = 0;
    return true;
}

std::string mcp_initialize() {
    return R"({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18",)"
           R"("capabilities":{},"clientInfo":{"name":"meith-bench-loadgen","version":"0.0.0"}}})"
           "\n";
}

int run_load(const options& o) {
    load_state st;
    st.o = &o;
    st.mcp = o.mode == "mcp";
    if (st.mcp && o.stdio_cmd.empty()) usage("--mode mcp needs --stdio-cmd");
    if (!st.mcp && o.socket_path.empty()) usage("--mode meith needs --socket");
    std::signal(SIGPIPE, SIG_IGN);

    const std::string payload(o.payload, 'x');
    if (st.mcp)
        st.suffix = R"(,"method":"tools/call","params":{"name":")" + o.tool +
                    R"(","arguments":{"s":")" + payload + "\"}}}\n";
    else
        st.suffix = R"(","toolName":")" + o.tool + R"(","arguments":{"s":")" + payload + "\"}}\n";

    std::size_t ring = 1024;
    while (ring < static_cast<std::size_t>(o.depth) * 64)
        ring <<= 1;

    std::vector<conn> conns(static_cast<std::size_t>(o.connections));
    std::vector<pid_t> server_pids = o.server_pids;
    const int64_t setup_deadline = now_ns() + static_cast<int64_t>(o.timeout * 1e9);
    for (int i = 0; i < o.connections; ++i) {
        conn& c = conns[static_cast<std::size_t>(i)];
        c.idx = i;
        c.in.resize(256 * 1024);
        c.ring.resize(ring);
        if (st.mcp) {
            c.pid = spawn_sh(o.stdio_cmd, &c.wfd, &c.rfd);
            server_pids.push_back(c.pid);
            c.prefix = R"({"jsonrpc":"2.0","id":)";
            std::string buf, line;
            if (!write_all(c.wfd, mcp_initialize()))
                die("cannot write initialize to the MCP server");
            bool inited = false;
            while (read_line(c.rfd, buf, line, setup_deadline)) {
                if (contains(line, "\"id\":0") && contains(line, "\"result\"")) {
                    inited = true;
                    break;
                }
            }
            if (!inited) die("MCP server did not answer initialize: " + line);
            if (!buf.empty()) die("unexpected output after initialize: " + buf);
            write_all(c.wfd, R"({"jsonrpc":"2.0","method":"notifications/initialized"})"
                             "\n");
            set_nonblock(c.rfd);
            set_nonblock(c.wfd);
        } else {
            c.rfd = c.wfd = connect_unix(o.socket_path);
            set_nonblock(c.rfd);
            c.prefix = R"({"type":"tool_call","requestId":"c)" + std::to_string(i) + "_";
        }
    }

    st.ep = epoll_create1(EPOLL_CLOEXEC);
    for (conn& c : conns) {
        epoll_event ev{};
        ev.events = EPOLLIN;
        ev.data.u64 = static_cast<uint64_t>(c.idx) << 1;
        epoll_ctl(st.ep, EPOLL_CTL_ADD, c.rfd, &ev);
    }
    st.lat.reserve(1 << 22);

    const int64_t t0 = now_ns();
    const int64_t warm_end = t0 + static_cast<int64_t>(o.warmup * 1e9);
    int64_t win_start = 0, win_end = 0;
    cpu_snapshot snap0, snap1;
    std::vector<pid_t> kids;

    for (conn& c : conns) {
        fill(st, c, now_ns());
        flush(st, c);
    }
    if (o.warmup <= 0) {
        snap0 = take_snapshot(server_pids, nullptr);
        kids = snap0.kids;
        win_start = now_ns();
        st.measuring = true;
    }

    std::vector<epoll_event> evs(static_cast<std::size_t>(std::max(64, o.connections * 2)));
    int alive = o.connections;
    while (alive > 0) {
        int n = epoll_wait(st.ep, evs.data(), static_cast<int>(evs.size()), 20);
        if (n < 0 && errno != EINTR) die("epoll_wait");
        for (int k = 0; k < n; ++k) {
            conn& c = conns[evs[static_cast<std::size_t>(k)].data.u64 >> 1];
            if (c.dead) continue;
            const uint32_t what = evs[static_cast<std::size_t>(k)].events;
            const bool is_w = evs[static_cast<std::size_t>(k)].data.u64 & 1u;
            if (!is_w && (what & (EPOLLIN | EPOLLHUP | EPOLLERR))) {
                if (!on_readable(st, c)) c.dead = true;
            }
            if (!c.dead && (what & EPOLLOUT)) flush(st, c);
            if (!c.dead && c.inflight < o.depth && c.out.empty()) {
                fill(st, c, now_ns());
                flush(st, c);
            }
            if (c.dead) {
                epoll_ctl(st.ep, EPOLL_CTL_DEL, c.rfd, nullptr);
                if (c.wfd != c.rfd && c.out_armed) epoll_ctl(st.ep, EPOLL_CTL_DEL, c.wfd, nullptr);
                --alive;
            }
        }
        const int64_t t = now_ns();
        if (!st.measuring && win_start == 0 && t >= warm_end) {
            snap0 = take_snapshot(server_pids, nullptr);
            kids = snap0.kids;
            win_start = now_ns();
            st.measuring = true;
        } else if (st.measuring && t >= win_start + static_cast<int64_t>(o.duration * 1e9)) {
            win_end = t;
            st.measuring = false;
            snap1 = take_snapshot(server_pids, &kids);
            break;
        }
    }
    if (win_end == 0) { // every connection died
        win_end = now_ns();
        snap1 = take_snapshot(server_pids, &kids);
        if (win_start == 0) win_start = win_end;
    }

    // Close: sockets; for MCP the servers' stdin, then read their stdout to EOF (answers to
    // calls still in flight) so they do not die of EPIPE, then wait (SIGKILL after 2 s).
    for (conn& c : conns) {
        if (c.wfd != c.rfd)
            close(c.wfd);
        else
            close(c.rfd);
    }
    if (st.mcp) {
        const int64_t dl = now_ns() + 2000000000LL;
        for (conn& c : conns) {
            char tmp[65536];
            for (;;) {
                pollfd p{c.rfd, POLLIN, 0};
                const int64_t left = (dl - now_ns()) / 1000000;
                if (left <= 0 || poll(&p, 1, static_cast<int>(left)) <= 0) break;
                ssize_t n = read(c.rfd, tmp, sizeof tmp);
                if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) break;
            }
            close(c.rfd);
            int status;
            while (waitpid(c.pid, &status, WNOHANG) == 0) {
                if (now_ns() > dl) {
                    kill(c.pid, SIGKILL);
                    waitpid(c.pid, &status, 0);
                    break;
                }
                usleep(2000);
            }
        }
    }

    std::sort(st.lat.begin(), st.lat.end());
    const double secs = static_cast<double>(win_end - win_start) / 1e9;
    const double client = snap1.client - snap0.client;
    const double server = snap1.server - snap0.server;
    const double children = snap1.children - snap0.children;
    const double busy = machine_busy(snap0.machine, snap1.machine);
    const double other = busy - client - server - children;
    std::set<pid_t> ours(server_pids.begin(), server_pids.end());
    ours.insert(kids.begin(), kids.end());
    ours.insert(getpid());
    // Capped by the machine's busy time not ours: a parent's cutime counts a reaped child whole.
    const double other_procs =
        std::min(others_cpu(snap0.procs, snap1.procs, ours), std::max(other, 0.0));
    const double other_tick =
        (snap1.machine.tick_busy - snap0.machine.tick_busy) - client - server - children;
    double mean = 0;
    for (int64_t v : st.lat)
        mean += static_cast<double>(v);
    mean = st.lat.empty() ? 0 : mean / static_cast<double>(st.lat.size()) / 1000.0;

    std::string j = "{";
    j += "\"calls\":" + std::to_string(st.calls);
    j += ",\"errors\":" + std::to_string(st.errors);
    j += ",\"seconds\":" + fmt(secs, 3);
    j += ",\"calls_per_s\":" + fmt(secs > 0 ? static_cast<double>(st.calls) / secs : 0, 1);
    j += ",\"p50_us\":" + fmt(pct(st.lat, 0.50), 1);
    j += ",\"p99_us\":" + fmt(pct(st.lat, 0.99), 1);
    j += ",\"p999_us\":" + fmt(pct(st.lat, 0.999), 1);
    j += ",\"max_us\":" + fmt(st.lat.empty() ? 0 : static_cast<double>(st.lat.back()) / 1000.0, 1);
    j += ",\"mean_us\":" + fmt(mean, 1);
    j += ",\"client_cpu_s\":" + fmt(client, 3);
    j += ",\"server_cpu_s\":" + fmt(server, 3);
    j += ",\"children_cpu_s\":" + fmt(children, 3);
    j += ",\"other_cpu_s\":" + fmt(other, 3);
    j += ",\"other_procs_cpu_s\":" + fmt(other_procs, 3);
    j += ",\"other_tick_cpu_s\":" + fmt(other_tick, 3);
    j += ",\"steal_s\":" + fmt(snap1.machine.steal - snap0.machine.steal, 3);
    j += ",\"server_pids\":" + std::to_string(server_pids.size());
    j += ",\"children_pids\":" + std::to_string(kids.size());
    j += ",\"mode\":" + json_str(o.mode);
    j += ",\"tool\":" + json_str(o.tool);
    j += ",\"connections\":" + std::to_string(o.connections);
    j += ",\"depth\":" + std::to_string(o.depth);
    j += ",\"payload\":" + std::to_string(o.payload);
    j += ",\"warmup_s\":" + fmt(o.warmup, 1);
    if (!st.first_error.empty()) j += ",\"first_error\":" + json_str(st.first_error);
    j += "}";
    std::printf("%s\n", j.c_str());
    std::fflush(stdout);
    return (st.errors == 0 && st.calls > 0) ? 0 : 1;
}

// For the single-shot modes: the window's length and what other processes used in it.
std::string window_fields(const cpu_snapshot& a, const cpu_snapshot& b, std::vector<pid_t> ours_v) {
    std::set<pid_t> ours(ours_v.begin(), ours_v.end());
    ours.insert(a.kids.begin(), a.kids.end());
    ours.insert(getpid());
    const double secs = static_cast<double>(b.machine.at_ns - a.machine.at_ns) / 1e9;
    const double mine = (b.client - a.client) + (b.server - a.server) + (b.children - a.children);
    const double other = machine_busy(a.machine, b.machine) - mine;
    const double procs = std::min(others_cpu(a.procs, b.procs, ours), std::max(other, 0.0));
    return ",\"seconds\":" + fmt(secs, 3) + ",\"client_cpu_s\":" + fmt(b.client - a.client, 3) +
           ",\"server_cpu_s\":" + fmt((b.server - a.server) + (b.children - a.children), 3) +
           ",\"other_cpu_s\":" + fmt(other, 3) + ",\"other_procs_cpu_s\":" + fmt(procs, 3);
}

// ------------------------------------------------------------------------------------------
// list_tools latency

int run_list_tools(const options& o) {
    if (o.socket_path.empty()) usage("--mode list_tools needs --socket");
    int fd = connect_unix(o.socket_path);
    std::string buf, line;
    std::vector<int64_t> samples;
    std::size_t bytes = 0, tools = 0;
    const int warm = 2;
    int64_t first = 0; // the connection's first list_tools (unmeasured: any cache is cold)
    cpu_snapshot snap0, snap1;
    for (int i = 0; i < o.iterations + warm; ++i) {
        if (i == warm) snap0 = take_snapshot(o.server_pids, nullptr);
        const std::string id = "l" + std::to_string(i);
        std::string frame = R"({"type":"list_tools","requestId":")" + id + "\"";
        if (!o.queries.empty()) // plain words: no JSON escaping needed
            frame +=
                R"(,"query":")" + o.queries[static_cast<std::size_t>(i) % o.queries.size()] + "\"";
        frame += "}\n";
        const int64_t t0 = now_ns();
        if (!write_all(fd, frame)) die("write list_tools");
        if (!read_line(fd, buf, line, t0 + static_cast<int64_t>(o.timeout * 1e9)))
            die("no list_tools answer");
        const int64_t t1 = now_ns();
        if (line.find("\"type\":\"tools_list\"") == std::string::npos ||
            line.find("\"requestId\":\"" + id + "\"") == std::string::npos)
            die("unexpected list_tools answer: " + line.substr(0, 300));
        bytes = line.size() + 1;
        tools = 0;
        for (std::size_t p = 0; (p = line.find("\"permission\":", p)) != std::string::npos; ++p)
            ++tools;
        if (i == 0) first = t1 - t0;
        if (i >= warm) samples.push_back(t1 - t0);
    }
    snap1 = take_snapshot(o.server_pids, &snap0.kids);
    close(fd);
    std::sort(samples.begin(), samples.end());
    auto ms = [](int64_t ns) { return fmt(static_cast<double>(ns) / 1e6, 3); };
    std::string j = std::string("{\"mode\":\"") + (o.queries.empty() ? "list_tools" : "search") +
                    "\",\"iterations\":" + std::to_string(samples.size());
    if (!o.queries.empty()) j += ",\"queries\":" + std::to_string(o.queries.size());
    j += ",\"tools\":" + std::to_string(tools) + ",\"reply_bytes\":" + std::to_string(bytes);
    j += ",\"p50_ms\":" + ms(samples[(samples.size() - 1) / 2]);
    j += ",\"min_ms\":" + ms(samples.front()) + ",\"max_ms\":" + ms(samples.back()) +
         ",\"first_ms\":" + ms(first);
    j += window_fields(snap0, snap1, o.server_pids);
    j += ",\"samples_ms\":[";
    for (std::size_t i = 0; i < samples.size(); ++i)
        j += (i ? "," : "") + ms(samples[i]);
    j += "]}";
    std::printf("%s\n", j.c_str());
    return 0;
}

// ------------------------------------------------------------------------------------------
// idle connections and their memory

int run_idle(const options& o) {
    if (o.socket_path.empty() || o.server_pids.size() != 1)
        usage("--mode idle needs --socket and one --server-pid");
    std::signal(SIGPIPE, SIG_IGN);
    const pid_t srv = o.server_pids[0];
    usleep(300000);
    const long before = rss_kib(srv);
    const int64_t t0 = now_ns();
    std::vector<int> fds;
    fds.reserve(static_cast<std::size_t>(o.connections));
    const int wave = 256;
    std::string line;
    for (int base = 0; base < o.connections; base += wave) {
        const int end = std::min(o.connections, base + wave);
        for (int i = base; i < end; ++i) {
            int fd = connect_unix(o.socket_path, true);
            if (fd < 0) die("connect #" + std::to_string(i) + ": " + std::strerror(errno));
            fds.push_back(fd);
            if (!write_all(fd, R"({"type":"hello","requestId":"h)" + std::to_string(i) + "\"}\n"))
                die("write hello #" + std::to_string(i));
        }
        for (int i = base; i < end; ++i) {
            std::string buf;
            if (!read_line(fds[static_cast<std::size_t>(i)], buf, line,
                           now_ns() + static_cast<int64_t>(o.timeout * 1e9)))
                die("no hello_result on connection #" + std::to_string(i));
            if (!contains(line, "\"type\":\"hello_result\""))
                die("connection #" + std::to_string(i) + " got: " + line.substr(0, 300));
        }
    }
    const double open_s = static_cast<double>(now_ns() - t0) / 1e9;
    usleep(500000);
    const long after = rss_kib(srv);
    for (int fd : fds)
        close(fd);
    usleep(1000000);
    const long after_close = rss_kib(srv);
    const double per =
        static_cast<double>(after - before) * 1024.0 / static_cast<double>(o.connections);
    std::string j = "{\"mode\":\"idle\",\"connections\":" + std::to_string(o.connections);
    j += ",\"rss_before_kib\":" + std::to_string(before) +
         ",\"rss_after_kib\":" + std::to_string(after);
    j += ",\"rss_after_close_kib\":" + std::to_string(after_close);
    j += ",\"bytes_per_connection\":" + fmt(per, 0) + ",\"open_seconds\":" + fmt(open_s, 3) + "}";
    std::printf("%s\n", j.c_str());
    return 0;
}

// ------------------------------------------------------------------------------------------
// start-up to first connect + hello

// Returns elapsed ns, or -1.
int64_t try_hello_until(const std::string& path, int64_t t0, int64_t deadline, pid_t child,
                        std::string& why) {
    std::string line;
    while (now_ns() < deadline) {
        if (child > 0) {
            int status;
            if (waitpid(child, &status, WNOHANG) == child) {
                why =
                    "the daemon exited with status " + std::to_string(status) + " before answering";
                return -1;
            }
        }
        int fd = connect_unix(path, true);
        if (fd < 0) {
            usleep(200);
            continue;
        }
        std::string buf;
        if (write_all(fd, "{\"type\":\"hello\",\"requestId\":\"s1\"}\n") &&
            read_line(fd, buf, line, deadline) && contains(line, "\"type\":\"hello_result\"")) {
            int64_t dt = now_ns() - t0;
            close(fd);
            return dt;
        }
        close(fd);
        usleep(200);
    }
    why = "timed out; last reply: " + line;
    return -1;
}

int run_startup(const options& o) {
    if (o.socket_path.empty() || o.spawn_cmd.empty())
        usage("--mode startup needs --socket and --spawn-cmd");
    std::signal(SIGPIPE, SIG_IGN);
    std::vector<int64_t> samples;
    const cpu_snapshot snap0 = take_snapshot({}, nullptr);
    for (int i = 0; i < o.iterations; ++i) {
        unlink(o.socket_path.c_str());
        const int64_t t0 = now_ns();
        pid_t pid = spawn_sh(o.spawn_cmd, nullptr, nullptr);
        std::string why;
        int64_t dt = try_hello_until(o.socket_path, t0, t0 + static_cast<int64_t>(o.timeout * 1e9),
                                     pid, why);
        kill(pid, SIGTERM);
        int status;
        const int64_t dl = now_ns() + 15000000000LL;
        while (waitpid(pid, &status, WNOHANG) == 0) {
            if (now_ns() > dl) {
                kill(pid, SIGKILL);
                waitpid(pid, &status, 0);
                break;
            }
            usleep(2000);
        }
        if (dt < 0) die("start-up #" + std::to_string(i) + ": " + why);
        samples.push_back(dt);
        usleep(200000);
    }
    const cpu_snapshot snap1 = take_snapshot({}, &snap0.kids);
    std::vector<int64_t> sorted = samples;
    std::sort(sorted.begin(), sorted.end());
    auto ms = [](int64_t ns) { return fmt(static_cast<double>(ns) / 1e6, 2); };
    std::string j = "{\"mode\":\"startup\",\"iterations\":" + std::to_string(samples.size());
    j += ",\"p50_ms\":" + ms(sorted[(sorted.size() - 1) / 2]) +
         ",\"min_ms\":" + ms(sorted.front()) + ",\"max_ms\":" + ms(sorted.back()) +
         window_fields(snap0, snap1, {}) + ",\"samples_ms\":[";
    for (std::size_t i = 0; i < samples.size(); ++i)
        j += (i ? "," : "") + ms(samples[i]);
    j += "]}";
    std::printf("%s\n", j.c_str());
    return 0;
}

// Waits until the server at --socket answers an echo tool_call (readiness for bench/run).
int run_wait(const options& o) {
    if (o.socket_path.empty()) usage("--mode wait needs --socket");
    std::signal(SIGPIPE, SIG_IGN);
    const int64_t t0 = now_ns(), deadline = t0 + static_cast<int64_t>(o.timeout * 1e9);
    std::string line;
    while (now_ns() < deadline) {
        int fd = connect_unix(o.socket_path, true);
        if (fd < 0) {
            usleep(2000);
            continue;
        }
        std::string buf;
        bool ok = write_all(fd, R"({"type":"tool_call","requestId":"w1","toolName":")" + o.tool +
                                    R"(","arguments":)" + o.wait_args + "}\n") &&
                  read_line(fd, buf, line, deadline);
        close(fd);
        if (ok && contains(line, "\"type\":\"tool_result\"") && contains(line, "\"ok\":true")) {
            std::printf("{\"mode\":\"wait\",\"ms\":%.1f}\n",
                        static_cast<double>(now_ns() - t0) / 1e6);
            return 0;
        }
        if (ok) die("server answered, but not ok: " + line.substr(0, 300));
        usleep(2000);
    }
    die("server at " + o.socket_path + " did not become ready within " + fmt(o.timeout, 0) + " s");
}

} // namespace

int main(int argc, char** argv) {
    const options o = parse_args(argc, argv);
    if (o.mode == "meith" || o.mode == "mcp") return run_load(o);
    if (o.mode == "list_tools") return run_list_tools(o);
    if (o.mode == "idle") return run_idle(o);
    if (o.mode == "startup") return run_startup(o);
    if (o.mode == "wait") return run_wait(o);
    usage("unknown mode " + o.mode);
}
