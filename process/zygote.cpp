#include "process/zygote.hpp"

#include <asio/post.hpp>
#include <spdlog/spdlog.h>

#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <system_error>
#include <utility>

#include <algorithm>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <stdexcept>
#include <sys/socket.h>
#include <unistd.h>

namespace meith::process {

namespace {

/// How long a zygote without runs is kept (MEITH_ZYGOTE_IDLE_MS overrides: tests).
std::chrono::milliseconds idle_time() {
    static const auto ms = [] {
        const char* v = std::getenv("MEITH_ZYGOTE_IDLE_MS");
        return std::chrono::milliseconds(v != nullptr ? std::strtoul(v, nullptr, 10) : 10000);
    }();
    return ms;
}

/// The largest request sent (a unix(7) SOCK_SEQPACKET message must fit the socket's buffer).
constexpr std::size_t max_request = 192 * 1024;

} // namespace

bool zygote::suits(const sandbox::plan& p) {
    const char* off = std::getenv("MEITH_ZYGOTE");
    if (off != nullptr && std::string_view(off) == "0") return false;
    return !p.init.empty() && (p.clone_flags & CLONE_NEWUSER) != 0 &&
           (p.clone_flags & CLONE_NEWPID) != 0 && p.record.empty();
}

std::vector<std::string> zygote::arguments(const sandbox::plan& plan, int control) {
    std::vector<std::string> items{plan.init, "--zygote",
                                   "--control-fd=" + std::to_string(control)};
    if (plan.ruleset_fd >= 0) items.push_back("--ruleset-fd=" + std::to_string(plan.ruleset_fd));
    if (!plan.seccomp_bpf.empty()) {
        std::string hex = "--seccomp=";
        hex.reserve(hex.size() + plan.seccomp_bpf.size() * 2);
        for (const unsigned char b : plan.seccomp_bpf) {
            hex += "0123456789abcdef"[b >> 4];
            hex += "0123456789abcdef"[b & 15];
        }
        items.push_back(std::move(hex));
    }
    if (plan.rlimit_nproc != 0)
        items.push_back("--rlimit-nproc=" + std::to_string(plan.rlimit_nproc));
    if (plan.rlimit_data != 0) items.push_back("--rlimit-data=" + std::to_string(plan.rlimit_data));
    if ((plan.clone_flags & CLONE_NEWPID) != 0) items.emplace_back("--proc");
    if (!plan.tmp_dir.empty()) {
        items.push_back("--tmp=" + plan.tmp_dir);
        items.push_back("--tmp-options=" + plan.tmp_options);
    }
    if (plan.exec_once) items.emplace_back("--exec-once");
    if ((plan.clone_flags & CLONE_NEWNET) != 0) {
        // Each run in a network namespace of its own, with its listeners (§19) if any.
        items.emplace_back("--net");
        if (plan.egress_port != 0) {
            items.push_back("--listen=" + std::to_string(plan.egress_port));
            for (const auto port : plan.forward_ports)
                items.push_back("--listen=" + std::to_string(port));
        }
    }
    // The single-path steps of enter(), checked again by each run (sandbox/mount_steps.hpp).
    for (const auto& path : plan.pinned)
        items.push_back("--pin=" + path);
    for (const auto& path : plan.read_only)
        items.push_back("--protect=" + path);
    for (const auto& path : plan.hidden_dirs)
        items.push_back("--hide-dir=" + path);
    for (const auto& path : plan.hidden_files)
        items.push_back("--hide-file=" + path);
    if (!plan.hidden_files.empty()) items.push_back("--empty-file=" + plan.empty_file);
    return items;
}

zygote::zygote(asio::any_io_executor ex, std::string name,
               std::shared_ptr<const sandbox::plan> plan)
    : ex_(ex), name_(std::move(name)), plan_(std::move(plan)), idle_(ex) {
}

zygote::~zygote() {
    if (control_ >= 0) ::close(control_);
}

void zygote::start(child_reaper& reaper, std::function<void()> on_exit) {
    int pair[2];
    if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0)
        throw std::system_error(errno, std::generic_category(), "socketpair");
    child_process::options opts;
    opts.argv = {plan_->init};
    opts.sandbox = plan_;
    opts.zygote_control = pair[1];
    try {
        process_ = std::make_unique<child_process>(ex_, opts);
    } catch (...) {
        ::close(pair[0]);
        ::close(pair[1]);
        throw;
    }
    ::close(pair[1]);
    control_ = pair[0];
    // Room for a whole request (its environment may hold secrets of some size); where the
    // system caps the buffer lower (net.core.wmem_max), requests are kept under what it got.
    int bytes = 2 * static_cast<int>(max_request);
    ::setsockopt(control_, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof bytes);
    socklen_t len = sizeof bytes;
    if (::getsockopt(control_, SOL_SOCKET, SO_SNDBUF, &bytes, &len) == 0)
        request_limit_ = std::min<std::size_t>(max_request, static_cast<std::size_t>(bytes) / 2);
    // Its first word is 'R', once it is set up: a zygote that dies at start (a broken or older
    // init program) is found now, and the plan's runs start directly (zygote_pool).
    pollfd ready{control_, POLLIN, 0};
    char word = 0;
    if (::poll(&ready, 1, 10000) != 1 || ::recv(control_, &word, 1, MSG_DONTWAIT) != 1 ||
        word != 'R') {
        ::close(std::exchange(control_, -1));
        // What it said on its way out, if anything (an older init program: "unknown option").
        char said[512];
        const ssize_t n = ::read(process_->stderr_pipe().native_handle(), said, sizeof said);
        std::string_view why = n > 0 ? std::string_view(said, static_cast<std::size_t>(n))
                                     : std::string_view("it exited or did not answer in 10 s");
        while (!why.empty() && (why.back() == '\n' || why.back() == '\r'))
            why.remove_suffix(1);
        process_->signal_group(SIGKILL);
        reaper.watch(process_->pid(),
                     [self = shared_from_this()](int) { self->process_->mark_exited(); });
        throw std::runtime_error("meith-sandbox-init --zygote did not start: " + std::string(why));
    }
    process_->close_stdin();
    read_stderr();
    reaper.watch(process_->pid(),
                 [self = shared_from_this(), on_exit = std::move(on_exit)](int st) {
                     self->process_->mark_exited();
                     if (self->control_ >= 0)
                         spdlog::warn("[{}] its zygote {}; the next run starts another",
                                      self->name_, describe_wait_status(st));
                     self->stop();
                     self->process_->kill_stragglers();
                     on_exit();
                 });
    spdlog::debug("[{}] zygote started (pid {})", name_, process_->pid());
    // Idle from the start: a zygote whose first run never came (its start failed in meithd)
    // stops like one whose runs have ended.
    ++in_flight_;
    release();
}

void zygote::read_stderr() {
    // What the zygote itself says (a malformed request, a failed clone): to the log.
    process_->stderr_pipe().async_read_some(
        asio::buffer(err_buf_),
        [self = shared_from_this()](const std::error_code& ec, std::size_t n) {
            if (ec) return;
            std::string_view text(self->err_buf_, n);
            while (!text.empty() && (text.back() == '\n' || text.back() == '\r'))
                text.remove_suffix(1);
            if (!text.empty()) spdlog::warn("[{}] {}", self->name_, text);
            self->read_stderr();
        });
}

int zygote::send_run(const std::string& program, const std::filesystem::path& cwd,
                     const std::vector<std::string>& argv, const std::vector<std::string>& env,
                     int in, int out, int err) {
    if (control_ < 0) return -1;
    // u32 argc, u32 envc, then NUL-terminated: program, cwd, argv..., env...
    request_.clear();
    const std::uint32_t counts[2] = {static_cast<std::uint32_t>(argv.size()),
                                     static_cast<std::uint32_t>(env.size())};
    request_.append(reinterpret_cast<const char*>(counts), sizeof counts);
    const auto add = [this](std::string_view item) {
        request_.append(item);
        request_.push_back('\0');
    };
    add(program);
    add(cwd.native());
    for (const auto& a : argv)
        add(a);
    for (const auto& e : env)
        add(e);
    if (request_.size() > request_limit_) return -1;
    int channel[2];
    if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, channel) != 0) return -1;
    // Non-blocking on meithd's side only: the run's init writes its status blocking.
    ::fcntl(channel[0], F_SETFL, ::fcntl(channel[0], F_GETFL) | O_NONBLOCK);
    const int fds[4] = {in, out, err, channel[1]};
    iovec iov{request_.data(), request_.size()};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof fds)] = {};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof fds);
    std::memcpy(CMSG_DATA(c), fds, sizeof fds);
    ssize_t sent;
    do
        sent = ::sendmsg(control_, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
    while (sent < 0 && errno == EINTR);
    const int send_errno = errno;
    ::close(channel[1]);
    if (sent != static_cast<ssize_t>(request_.size())) {
        ::close(channel[0]);
        // Gone: no more runs for it; the pool starts another. Anything else (its socket
        // full, no memory now) leaves it running, and this run starts directly.
        if (sent < 0 && (send_errno == EPIPE || send_errno == ECONNRESET || send_errno == ENOTCONN))
            stop();
        return -1;
    }
    return channel[0];
}

std::shared_ptr<void> zygote::lease() {
    ++in_flight_;
    idle_.cancel();
    return std::shared_ptr<void>(static_cast<void*>(this),
                                 [self = shared_from_this()](void*) { self->release(); });
}

void zygote::release() {
    if (--in_flight_ != 0 || control_ < 0) return;
    idle_.expires_after(idle_time());
    idle_.async_wait([weak = weak_from_this()](const std::error_code& ec) {
        if (ec) return;
        if (auto self = weak.lock(); self && self->in_flight_ == 0) {
            spdlog::debug("[{}] zygote idle: stopped", self->name_);
            self->stop();
        }
    });
}

void zygote::stop() {
    idle_.cancel();
    if (control_ >= 0) ::close(std::exchange(control_, -1));
}

// ---- zygote_pool -----------------------------------------------------------------------------

zygote_pool::zygote_pool(asio::any_io_executor ex, child_reaper& reaper)
    : ex_(std::move(ex)), reaper_(reaper) {
}

std::shared_ptr<zygote> zygote_pool::for_plan(const std::string& name,
                                              const std::shared_ptr<const sandbox::plan>& plan) {
    if (!plan || !zygote::suits(*plan) || failed_.count(plan.get()) != 0) return nullptr;
    const auto it = zygotes_.find(plan.get());
    if (it != zygotes_.end() && it->second->running()) return it->second;
    auto z = std::make_shared<zygote>(ex_, name, plan);
    try {
        z->start(reaper_, [this, key = plan.get(), weak = std::weak_ptr<zygote>(z)] {
            const auto at = zygotes_.find(key);
            if (at != zygotes_.end() && at->second == weak.lock()) zygotes_.erase(at);
        });
    } catch (const std::exception& e) {
        spdlog::warn("[{}] its sandbox cannot be kept as a zygote ({}): each run is started on "
                     "its own",
                     name, e.what());
        failed_.emplace(plan.get(), plan);
        return nullptr;
    }
    zygotes_[plan.get()] = z;
    return z;
}

} // namespace meith::process

// ---- child_reaper's pool and a zygote's runs ---------------------------------------------------

namespace meith::process {

child_reaper::~child_reaper() = default;

zygote_pool& child_reaper::zygotes() {
    if (!zygotes_) zygotes_ = std::make_unique<zygote_pool>(signals_.get_executor(), *this);
    return *zygotes_;
}

void child_process::wait_run_exit(std::function<void(int)> on_exit) {
    channel_.async_wait(asio::posix::stream_descriptor::wait_read,
                        [this, on_exit = std::move(on_exit)](const std::error_code& ec) mutable {
                            if (ec == asio::error::operation_aborted) return; // this object is gone
                            for (;;) {
                                char msg[1 + sizeof(int)];
                                iovec iov{msg, sizeof msg};
                                alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
                                msghdr m{};
                                m.msg_iov = &iov;
                                m.msg_iovlen = 1;
                                m.msg_control = control;
                                m.msg_controllen = sizeof control;
                                const ssize_t n = ::recvmsg(channel_.native_handle(), &m,
                                                            MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
                                if (n < 0 && errno == EINTR) continue;
                                if (n < 0 && errno == EAGAIN) {
                                    wait_run_exit(std::move(on_exit));
                                    return;
                                }
                                int fd = -1;
                                if (const cmsghdr* c = n > 0 ? CMSG_FIRSTHDR(&m) : nullptr;
                                    c != nullptr && c->cmsg_type == SCM_RIGHTS &&
                                    c->cmsg_len == CMSG_LEN(sizeof(int)))
                                    std::memcpy(&fd, CMSG_DATA(c), sizeof fd);
                                if (fd >= 0) {
                                    adopt_run_listener(fd);
                                    continue;
                                }
                                if (n == static_cast<ssize_t>(sizeof msg) && msg[0] == 'X') {
                                    int status;
                                    std::memcpy(&status, msg + 1, sizeof status);
                                    on_exit(status);
                                    return;
                                }
                                if (n <= 0) {
                                    // The run's init ended without a status: killed with its
                                    // namespace.
                                    on_exit(SIGKILL);
                                    return;
                                }
                            }
                        });
}

void child_process::adopt_run_listener(int fd) {
    // In the order the run opened them: the egress proxy's, then each forwarded port's (§19).
    const std::size_t at = run_listeners_++;
    if (!run_egress_ || exited_ || at > run_forward_ports_.size()) {
        ::close(fd);
        return;
    }
    const auto ex = channel_.get_executor();
    if (at == 0) {
        egress_ = egress::proxy::start(ex, fd, *run_egress_);
        return;
    }
    auto fwd = *run_egress_;
    fwd.forward_port = run_forward_ports_[at - 1];
    forwards_.push_back(egress::proxy::start(ex, fd, std::move(fwd)));
}

} // namespace meith::process
