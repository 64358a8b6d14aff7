#include "daemon_fixture.hpp"

#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <array>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <sstream>
#include <stdexcept>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <utility>

namespace meith::test {

namespace {

std::string read_file(const fs::path& p) {
    std::ifstream in(p);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

pid_t spawn(const std::vector<std::string>& args, const fs::path& out_file,
            const fs::path& err_file,
            const std::vector<std::pair<std::string, std::string>>& env = {}) {
    const pid_t pid = ::fork();
    if (pid < 0) throw std::runtime_error("fork failed");
    if (pid == 0) {
        const int out = ::open(out_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
        const int err = ::open(err_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
        const int in = ::open("/dev/null", O_RDONLY);
        ::dup2(in, 0);
        ::dup2(out, 1);
        ::dup2(err, 2);
        ::unsetenv("XDG_RUNTIME_DIR");
        ::unsetenv("MEITH_HOME");
        // A test that finds no daemon must not start one behind its back (cli/autostart.hpp);
        // the auto-start tests set it to "".
        ::setenv("MEITH_NO_AUTOSTART", "1", 1);
        for (const auto& [k, v] : env)
            ::setenv(k.c_str(), v.c_str(), 1);
        std::vector<char*> argv;
        for (const auto& a : args)
            argv.push_back(const_cast<char*>(a.c_str()));
        argv.push_back(nullptr);
        ::execv(argv[0], argv.data());
        ::_exit(127);
    }
    return pid;
}

int wait_pid(pid_t pid, std::chrono::milliseconds timeout, bool& exited, int& status) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
        const pid_t r = ::waitpid(pid, &status, WNOHANG);
        if (r == pid) {
            exited = true;
            return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        }
        std::this_thread::sleep_for(5ms);
    }
    return -1;
}

} // namespace

std::vector<std::string> lines_of(const std::string& text) {
    std::vector<std::string> out;
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line))
        if (!line.empty()) out.push_back(line);
    return out;
}

std::string slurp(const fs::path& p) {
    return read_file(p);
}

env_override::env_override(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value.c_str(), 1);
}

env_override::~env_override() {
    if (old_)
        ::setenv(name_.c_str(), old_->c_str(), 1);
    else
        ::unsetenv(name_.c_str());
}

std::string example_config(const fs::path& home, const fs::path& project) {
    const auto init =
        run_program({"/bin/sh"}, {"-c", "cd '" + project.string() + "' && \"$MEITH\" init"},
                    {{"MEITH", MEITH_CLI}, {"MEITH_HOME", home.string()}});
    if (init.status != 0) throw std::runtime_error("meith init failed: " + init.err);
    std::string text = read_file(home / "meithd.toml");
    fs::remove(home / "meithd.toml");
    return text;
}

int free_tcp_port() {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0)
        throw std::runtime_error("cannot pick a free port");
    ::close(fd);
    return ntohs(a.sin_port);
}

temp_dir::temp_dir() {
    char tmpl[] = "/tmp/meith-e2e-XXXXXX";
    if (!::mkdtemp(tmpl)) throw std::runtime_error("mkdtemp failed");
    path = tmpl;
}

temp_dir::temp_dir(const fs::path& parent) {
    std::string tmpl = (parent / "meith-e2e-XXXXXX").string();
    if (!::mkdtemp(tmpl.data()))
        throw std::runtime_error("mkdtemp failed under " + parent.string());
    path = tmpl;
}

temp_dir::~temp_dir() {
    std::error_code ec;
    fs::remove_all(path, ec);
}

std::string test_host_path() {
    return std::string(MEITH_SOURCE_DIR) + "/tests/hosts/test_host.mjs";
}

std::string host_source_toml(const std::string& name, const std::vector<std::string>& flags,
                             const std::string& extra) {
    std::string cmd = "[\"node\", \"" + test_host_path() + "\"";
    for (const auto& f : flags)
        cmd += ", \"" + f + "\"";
    cmd += "]";
    return "[[sources]]\nname = \"" + name + "\"\nkind = \"host\"\ncommand = " + cmd + "\n" +
           extra + "\n";
}

namespace {
std::string toml_command(const std::string& script, const std::vector<std::string>& flags) {
    const std::string path = std::string(MEITH_SOURCE_DIR) + "/tests/exec/" + script;
    std::string cmd = script.size() > 3 && script.substr(script.size() - 3) == ".sh"
                          ? "[\"sh\", \"" + path + "\""
                          : "[\"node\", \"" + path + "\"";
    for (const auto& f : flags)
        cmd += ", \"" + f + "\"";
    return cmd + "]";
}
} // namespace

std::string exec_source_toml(const std::string& name, const std::string& mode,
                             const std::string& script, const std::string& tool_name,
                             const std::vector<std::string>& flags, const std::string& extra) {
    return "[[sources]]\nname = \"" + name + "\"\nkind = \"exec\"\nmode = \"" + mode +
           "\"\ncommand = " + toml_command(script, flags) + "\ntool = { name = \"" + tool_name +
           "\", description = \"test exec tool\", capabilities = [\"read-only\"] }\n" + extra +
           "\n";
}

std::string hook_toml(const std::string& name, const std::string& kind, const std::string& mode,
                      const std::string& phase, const std::vector<std::string>& flags,
                      const std::string& extra) {
    return "[[hooks]]\nname = \"" + name + "\"\nkind = \"" + kind + "\"\nmode = \"" + mode +
           "\"\nphase = \"" + phase + "\"\ncommand = " + toml_command("hook.mjs", flags) + "\n" +
           extra + "\n";
}

daemon_process::daemon_process(const std::string& config_toml, std::vector<std::string> extra_args,
                               std::function<void(const fs::path&)> prepare,
                               std::chrono::seconds ready_within)
    : ready_within_(ready_within) {
    socket_ = home_.path / "d.sock";
    if (!config_toml.empty()) {
        std::ofstream(home_.path / "meithd.toml") << config_toml;
    }
    if (prepare) prepare(home_.path);
    args_ = {MEITH_MEITHD,  "--home", home_.path.string(), "--socket", socket_.string(),
             "--log-level", "debug"};
    for (auto& a : extra_args)
        args_.push_back(std::move(a));
    spawn_and_wait();
}

void daemon_process::restart(bool wait_started) {
    if (!exited_) stop(SIGTERM);
    exited_ = false;
    spawn_and_wait();
    if (!wait_started) return;
    // A source whose tools are pinned (every one that listed before) no longer holds meithd's
    // readiness (docs/protocol.md §1): wait for the starts, as the first start's readiness did.
    client c(socket_);
    (void)wait_sources_settled(c, ready_within_);
}

void daemon_process::spawn_and_wait() {
    pid_ = spawn(args_, home_.path / "meithd.out", home_.path / "meithd.log");
    const auto deadline = std::chrono::steady_clock::now() + ready_within_;
    while (std::chrono::steady_clock::now() < deadline) {
        if (::waitpid(pid_, &status_, WNOHANG) == pid_) {
            exited_ = true;
            throw std::runtime_error("meithd exited during startup:\n" + log());
        }
        try {
            auto record = json::parse(read_file(home_.path / "config.json"));
            if (record.value("pid", 0) == pid_) return;
        } catch (...) {
        }
        std::this_thread::sleep_for(5ms);
    }
    // The constructor throws, so no destructor stops it: stop it here, or it (and its tools)
    // outlive the test and load every later one.
    const std::string text = log();
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, &status_, 0);
    exited_ = true;
    throw std::runtime_error("meithd did not become ready:\n" + text);
}

daemon_process::~daemon_process() {
    if (!exited_ && pid_ > 0) {
        ::kill(pid_, SIGTERM);
        int st = 0;
        bool ex = false;
        if (wait_pid(pid_, 10s, ex, st) < 0) {
            ::kill(pid_, SIGKILL);
            ::waitpid(pid_, &st, 0);
        }
    }
}

std::string daemon_process::log() const {
    return read_file(home_.path / "meithd.log");
}

bool daemon_process::wait_for_log(const std::string& text, std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
        if (log().find(text) != std::string::npos) return true;
        if (!running()) return log().find(text) != std::string::npos;
        if (std::chrono::steady_clock::now() >= deadline) return false;
        std::this_thread::sleep_for(20ms);
    }
}

int daemon_process::stop(int sig, std::chrono::milliseconds timeout) {
    if (exited_) return WIFEXITED(status_) ? WEXITSTATUS(status_) : 128 + WTERMSIG(status_);
    ::kill(pid_, sig);
    return wait_pid(pid_, timeout, exited_, status_);
}

int daemon_process::wait_exit(std::chrono::milliseconds timeout) {
    if (exited_) return WIFEXITED(status_) ? WEXITSTATUS(status_) : 128 + WTERMSIG(status_);
    return wait_pid(pid_, timeout, exited_, status_);
}

bool daemon_process::running() {
    if (exited_) return false;
    if (::waitpid(pid_, &status_, WNOHANG) == pid_) exited_ = true;
    return !exited_;
}

std::vector<json> daemon_process::audit() const {
    std::vector<json> lines;
    std::ifstream in(home_.path / "audit.jsonl");
    std::string line;
    while (std::getline(in, line))
        lines.push_back(json::parse(line)); // throws on a bad line
    return lines;
}

std::vector<json> daemon_process::audit_events(const std::string& event) const {
    std::vector<json> out;
    for (auto& l : audit())
        if (l.value("event", "") == event) out.push_back(l);
    return out;
}

json daemon_process::wait_audit(const std::function<bool(const json&)>& pred,
                                std::chrono::milliseconds timeout) const {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
        for (auto& l : audit())
            if (pred(l)) return l;
        std::this_thread::sleep_for(10ms);
    }
    throw std::runtime_error("no matching audit line appeared");
}

std::pair<int, std::string> run_meithd_expect_exit(const std::vector<std::string>& args,
                                                   std::chrono::milliseconds timeout) {
    temp_dir logs;
    std::vector<std::string> argv = {MEITH_MEITHD};
    argv.insert(argv.end(), args.begin(), args.end());
    const pid_t pid = spawn(argv, logs.path / "out", logs.path / "err");
    bool exited = false;
    int status = 0;
    int code = wait_pid(pid, timeout, exited, status);
    if (!exited) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, &status, 0);
    }
    return {code, read_file(logs.path / "err") + read_file(logs.path / "out")};
}

client::client(const fs::path& socket) {
    channel_.connect(socket); // throws protocol::client_error (a std::runtime_error)
}

client::client(const fs::path& socket, from_terminal_t) {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) throw std::runtime_error("socket: " + std::string(std::strerror(errno)));
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, socket.c_str(), sizeof addr.sun_path - 1);
    int ready[2], hold[2];
    if (::pipe2(ready, O_CLOEXEC) != 0 || ::pipe2(hold, O_CLOEXEC) != 0)
        throw std::runtime_error("pipe2 failed");
    const pid_t child = ::fork();
    if (child < 0) throw std::runtime_error("fork failed");
    if (child == 0) {
        // A new session; the first terminal a session leader opens without O_NOCTTY becomes
        // its controlling terminal (TIOCSCTTY makes sure). Only async-signal-safe calls here.
        // Keep nothing of the test process but what this child needs: another client's socket
        // held open here would hide that client's disconnect from the daemon.
        for (int i = 3; i < 4096; ++i)
            if (i != fd && i != ready[1] && i != hold[0]) ::close(i);
        char ok = 0;
        if (::setsid() >= 0) {
            const int master = ::posix_openpt(O_RDWR | O_NOCTTY);
            int unlock = 0;
            unsigned int n = 0;
            if (master >= 0 && ::ioctl(master, TIOCSPTLCK, &unlock) == 0 &&
                ::ioctl(master, TIOCGPTN, &n) == 0) {
                char name[32] = "/dev/pts/";
                std::size_t at = 9;
                char digits[16];
                std::size_t k = 0;
                do {
                    digits[k++] = static_cast<char>('0' + n % 10);
                    n /= 10;
                } while (n != 0);
                while (k > 0)
                    name[at++] = digits[--k];
                name[at] = '\0';
                const int slave = ::open(name, O_RDWR);
                if (slave >= 0 && ::ioctl(slave, TIOCSCTTY, 0) == 0 &&
                    ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0)
                    ok = 1;
            }
        }
        (void)!::write(ready[1], &ok, 1);
        char buf;
        while (::read(hold[0], &buf, 1) > 0) {
        }
        ::_exit(0);
    }
    ::close(ready[1]);
    ::close(hold[0]);
    char ok = 0;
    const bool got = ::read(ready[0], &ok, 1) == 1;
    ::close(ready[0]);
    terminal_child_ = child;
    terminal_hold_ = hold[1];
    if (!got || ok != 1) {
        ::close(fd);
        throw std::runtime_error("could not connect from a process with a terminal");
    }
    channel_.adopt(fd);
}

client::~client() {
    // Killed, not only told by EOF: a later terminal client's child inherited our pipe's end.
    if (terminal_hold_ >= 0) ::close(terminal_hold_);
    if (terminal_child_ > 0) {
        ::kill(terminal_child_, SIGKILL);
        ::waitpid(terminal_child_, nullptr, 0);
    }
}

std::string approver_secret(const fs::path& home) {
    std::ifstream in(home / "approver.secret");
    std::string line;
    std::getline(in, line);
    return line;
}

std::unique_ptr<client> connect_approver(const daemon_process& d) {
    auto a = std::make_unique<client>(d.socket(), client::from_terminal);
    a->send({{"type", "approver_hello"},
             {"protocol", 1},
             {"requestId", "ah"},
             {"secret", approver_secret(d.home())}});
    const json r = a->read();
    if (r["type"] != "approver_hello_result")
        throw std::runtime_error("approver_hello refused: " + r.dump());
    return a;
}

void client::send_raw(const std::string& bytes) {
    channel_.send_bytes(bytes);
}

void client::send(const json& frame) {
    channel_.send_frame(frame.dump());
}

json client::read(std::chrono::milliseconds timeout) {
    if (pending_) return json::parse(*std::exchange(pending_, std::nullopt));
    auto r = channel_.read_frame(std::chrono::steady_clock::now() + timeout);
    using status = protocol::client_channel::read_status;
    switch (r.status) {
    case status::frame:
        return json::parse(r.frame);
    case status::closed:
        throw std::runtime_error("connection closed by meithd");
    case status::timed_out:
    case status::woken: // no wake fd given
        break;
    }
    throw std::runtime_error("timed out waiting for a frame");
}

bool client::wait_closed(std::chrono::milliseconds timeout) {
    pending_.reset();
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
        switch (channel_.read_frame(deadline).status) {
        case protocol::client_channel::read_status::frame:
            continue; // frames before the close are skipped
        case protocol::client_channel::read_status::closed:
            return true;
        default:
            return false;
        }
    }
}

bool client::silent_for(std::chrono::milliseconds quiet) {
    if (pending_) return false;
    auto r = channel_.read_frame(std::chrono::steady_clock::now() + quiet);
    switch (r.status) {
    case protocol::client_channel::read_status::frame:
        pending_ = std::move(r.frame); // not lost: the next read returns it
        return false;
    case protocol::client_channel::read_status::closed:
        return false; // a close is not silence
    default:
        return true;
    }
}

json client::call(const std::string& tool, const json& args, const json& extra,
                  std::vector<json>* events, std::chrono::milliseconds timeout) {
    json frame = {{"type", "tool_call"},
                  {"protocol", 1},
                  {"requestId", ids_.next()},
                  {"toolName", tool},
                  {"arguments", args}};
    for (auto& [k, v] : extra.items())
        frame[k] = v;
    send(frame);
    return wait_result(frame["requestId"], events, timeout);
}

json client::wait_result(const std::string& request_id, std::vector<json>* events,
                         std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            deadline - std::chrono::steady_clock::now());
        if (left.count() <= 0) throw std::runtime_error("timed out waiting for " + request_id);
        json f = read(left);
        if (f.value("requestId", "") != request_id) continue;
        if (f["type"] == "tool_event") {
            if (events) events->push_back(f["event"]);
            continue;
        }
        return f;
    }
}

namespace {
/// True while `pid` runs; a zombie nobody reaps (PID 1 of a container may not) counts as gone.
bool process_running(pid_t pid) {
    if (::kill(pid, 0) != 0) return false;
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    std::getline(stat, line);
    const auto close = line.rfind(')');
    return close == std::string::npos || close + 2 >= line.size() || line[close + 2] != 'Z';
}
} // namespace

autostarted_daemon::~autostarted_daemon() {
    std::ifstream in(home / "config.json");
    const json rec = json::parse(in, nullptr, false);
    if (rec.is_discarded() || !rec.contains("pid") || !rec["pid"].is_number_integer()) return;
    const auto pid = rec["pid"].get<pid_t>();
    if (pid <= 0 || ::kill(pid, SIGTERM) != 0) return;
    for (int i = 0; i < 1000 && process_running(pid); ++i)
        std::this_thread::sleep_for(10ms);
    if (process_running(pid)) ::kill(pid, SIGKILL);
}

cli_result run_cli(const std::vector<std::string>& args, const fs::path& home,
                   std::chrono::seconds within) {
    return run_program({MEITH_CLI}, args, {{"MEITH_HOME", home.string()}}, within);
}

cli_result run_program(std::vector<std::string> argv, const std::vector<std::string>& args,
                       const std::vector<std::pair<std::string, std::string>>& env,
                       std::chrono::seconds within) {
    temp_dir out;
    argv.insert(argv.end(), args.begin(), args.end());
    const pid_t pid = spawn(argv, out.path / "out", out.path / "err", env);
    bool exited = false;
    int status = 0;
    int code = wait_pid(pid, within, exited, status);
    if (!exited) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, &status, 0);
    }
    return {code, read_file(out.path / "out"), read_file(out.path / "err")};
}

json source_status(client& c, const std::string& name) {
    c.send({{"type", "list_sources"}, {"protocol", 1}, {"requestId", "list-sources"}});
    const json reply = c.read();
    for (const auto& s : reply["sources"])
        if (s["name"] == name) return s;
    return nullptr;
}

bool eventually(const std::function<bool()>& pred, std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
        if (pred()) return true;
        std::this_thread::sleep_for(50ms);
    }
    return pred();
}

mcp_child::mcp_child(const fs::path& home, std::vector<std::string> env) {
    int in[2], out[2];
    REQUIRE(::pipe2(in, O_CLOEXEC) == 0);
    REQUIRE(::pipe2(out, O_CLOEXEC) == 0);
    pid_ = ::fork();
    REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
        ::dup2(in[0], 0);
        ::dup2(out[1], 1);
        ::setenv("MEITH_NO_AUTOSTART", "1", 1);
        for (auto& e : env)
            ::putenv(e.data());
        const std::string h = home.string();
        ::execl(MEITH_CLI, MEITH_CLI, "--home", h.c_str(), "mcp", static_cast<char*>(nullptr));
        ::_exit(127);
    }
    ::close(in[0]);
    ::close(out[1]);
    to_ = in[1];
    from_ = out[0];
}

mcp_child::~mcp_child() {
    close_input();
    if (from_ >= 0) ::close(from_);
    if (pid_ > 0 && !reaped_) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, nullptr, 0);
    }
}

void mcp_child::send(const json& msg) {
    const std::string line = msg.dump() + "\n";
    REQUIRE(::write(to_, line.data(), line.size()) == static_cast<ssize_t>(line.size()));
}

std::optional<json> mcp_child::read(std::chrono::milliseconds timeout) {
    const auto until = std::chrono::steady_clock::now() + timeout;
    for (;;) {
        if (const auto nl = buf_.find('\n'); nl != std::string::npos) {
            json msg = json::parse(buf_.substr(0, nl));
            buf_.erase(0, nl + 1);
            return msg;
        }
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            until - std::chrono::steady_clock::now());
        if (left.count() <= 0) return std::nullopt;
        pollfd p{from_, POLLIN, 0};
        if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) return std::nullopt;
        std::array<char, 4096> chunk{};
        const ssize_t n = ::read(from_, chunk.data(), chunk.size());
        if (n <= 0) return std::nullopt;
        buf_.append(chunk.data(), static_cast<std::size_t>(n));
    }
}

json mcp_child::answer(int id) {
    for (;;) {
        auto msg = read();
        REQUIRE(msg.has_value());
        if (msg->value("id", json()) == id) return *msg;
    }
}

void mcp_child::close_input() {
    if (to_ >= 0) ::close(std::exchange(to_, -1));
}

int mcp_child::wait(std::chrono::milliseconds timeout) {
    const auto until = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < until) {
        int status = 0;
        if (::waitpid(pid_, &status, WNOHANG) == pid_) {
            reaped_ = true;
            return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        }
        ::usleep(10000);
    }
    return -1;
}

bool mcp_child::eof_within(std::chrono::milliseconds timeout) {
    const auto until = std::chrono::steady_clock::now() + timeout;
    for (;;) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            until - std::chrono::steady_clock::now());
        if (left.count() <= 0) return false;
        pollfd p{from_, POLLIN, 0};
        if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) return false;
        std::array<char, 4096> chunk{};
        if (::read(from_, chunk.data(), chunk.size()) <= 0) return true;
    }
}

std::size_t open_fds(pid_t pid) {
    std::size_t n = 0;
    for ([[maybe_unused]] const auto& e :
         fs::directory_iterator("/proc/" + std::to_string(pid) + "/fd"))
        ++n;
    return n;
}

bool has_tool(client& c, const std::string& name) {
    c.send({{"type", "list_tools"}, {"requestId", "lt"}, {"clientInfo", {{"caller", "cli"}}}});
    for (;;) {
        json f = c.read();
        if (f.value("requestId", "") != "lt") continue;
        for (const auto& t : f["tools"])
            if (t["name"] == name) return true;
        return false;
    }
}

bool wait_sources_settled(client& c, std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
        c.send({{"type", "list_sources"}, {"protocol", 1}, {"requestId", "list-sources"}});
        const json reply = c.read();
        bool settled = true;
        for (const auto& s : reply["sources"]) {
            const auto state = s.value("state", "");
            if (state == "starting" || state == "restarting") settled = false;
        }
        if (settled) return true;
        if (std::chrono::steady_clock::now() >= deadline) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
}

bool kernel_can_confine(bool namespaces) {
    const long abi = ::syscall(SYS_landlock_create_ruleset, nullptr, 0, 1u /* _VERSION */);
    if (abi <= 0 || ::prctl(PR_GET_SECCOMP, 0, 0, 0, 0) < 0) return false;
    if (!namespaces) return true;
    const pid_t pid = ::fork();
    if (pid == 0) ::_exit(::unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID) == 0 ? 0 : 1);
    int status = 0;
    ::waitpid(pid, &status, 0);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/// Runs `cmd` with /bin/sh, expects exit status 0, and parses what it printed as JSON.
json run_json_command(const std::string& cmd) {
    FILE* p = ::popen(cmd.c_str(), "r");
    REQUIRE(p != nullptr);
    std::string out;
    std::array<char, 65536> buf{};
    std::size_t n;
    while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0)
        out.append(buf.data(), n);
    const int status = ::pclose(p);
    INFO("`" << cmd << "` printed: " << out);
    REQUIRE(WIFEXITED(status));
    REQUIRE(WEXITSTATUS(status) == 0);
    return json::parse(out);
}

background_process::background_process(
    std::vector<std::string> argv, const std::vector<std::pair<std::string, std::string>>& env) {
    pid_ = ::fork();
    if (pid_ < 0) throw std::runtime_error("fork failed");
    if (pid_ == 0) {
        const int out = ::open((dir_.path / "out").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
        const int err = ::open((dir_.path / "err").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
        int p[2];
        if (::pipe(p) == 0) ::dup2(p[0], 0);
        ::dup2(out, 1);
        ::dup2(err, 2);
        ::unsetenv("XDG_RUNTIME_DIR");
        ::setenv("MEITH_NO_AUTOSTART", "1", 1);
        for (const auto& [k, v] : env)
            ::setenv(k.c_str(), v.c_str(), 1);
        std::vector<char*> args;
        for (auto& a : argv)
            args.push_back(a.data());
        args.push_back(nullptr);
        ::execvp(args[0], args.data());
        ::_exit(127);
    }
}

background_process::~background_process() {
    if (!reaped_ && stop(SIGTERM) < 0) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, nullptr, 0);
    }
}

std::string background_process::out() const {
    return slurp(dir_.path / "out");
}

std::string background_process::err() const {
    return slurp(dir_.path / "err");
}

bool background_process::wait_for(const std::string& text, std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
        if (out().find(text) != std::string::npos) return true;
        if (!running()) return out().find(text) != std::string::npos;
        std::this_thread::sleep_for(20ms);
    }
    return false;
}

bool background_process::running() {
    if (!reaped_ && ::waitpid(pid_, &status_, WNOHANG) == pid_) reaped_ = true;
    return !reaped_;
}

int background_process::wait(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (running() && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(10ms);
    if (!reaped_) return -1;
    return WIFEXITED(status_) ? WEXITSTATUS(status_) : 128 + WTERMSIG(status_);
}

int background_process::stop(int sig) {
    if (running()) ::kill(pid_, sig);
    return wait(10s);
}

std::unique_ptr<background_process> background_cli(const std::vector<std::string>& args,
                                                   const fs::path& home) {
    std::vector<std::string> argv{MEITH_CLI};
    argv.insert(argv.end(), args.begin(), args.end());
    return std::make_unique<background_process>(
        argv, std::vector<std::pair<std::string, std::string>>{{"MEITH_HOME", home.string()}});
}

/// Moves this test process (one per test case under ctest) into a network namespace of its
/// own: lo up, and 203.0.113.5 (TEST-NET-3, an ordinary address to the egress check) on lo:1.
/// Empty when done, else why not.
std::string own_network_namespace() {
    if (::unshare(CLONE_NEWNET) != 0)
        return std::string("unshare(CLONE_NEWNET): ") + std::strerror(errno);
    const int s = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    ifreq up{};
    std::strncpy(up.ifr_name, "lo", IFNAMSIZ - 1);
    if (::ioctl(s, SIOCGIFFLAGS, &up) != 0) return "SIOCGIFFLAGS lo";
    up.ifr_flags |= IFF_UP | IFF_RUNNING;
    if (::ioctl(s, SIOCSIFFLAGS, &up) != 0) return "SIOCSIFFLAGS lo";
    ifreq alias{};
    std::strncpy(alias.ifr_name, "lo:1", IFNAMSIZ - 1);
    auto* in = reinterpret_cast<sockaddr_in*>(&alias.ifr_addr);
    in->sin_family = AF_INET;
    ::inet_pton(AF_INET, "203.0.113.5", &in->sin_addr);
    if (::ioctl(s, SIOCSIFADDR, &alias) != 0) return "SIOCSIFADDR lo:1";
    ::close(s);
    return {};
}

} // namespace meith::test
