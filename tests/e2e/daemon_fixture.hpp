// daemon_fixture: black-box helpers for end-to-end tests — a temporary home, the real meithd
// binary started as a child process, and a blocking socket client that speaks the frames of
// docs/protocol.md §2-§3. Each helper fails loudly (throws) on timeouts so a hung daemon shows up
// as a failed test, not a stuck one.
#pragma once

#include "protocol/client_channel.hpp"
#include "protocol/client_frames.hpp"
#include "test_skip.hpp"

#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <sys/types.h>
#include <vector>

namespace meith::test {

using json = nlohmann::json;
namespace fs = std::filesystem;
using namespace std::chrono_literals;

/// The whole contents of the file at `p` ("" when it cannot be read).
std::string slurp(const fs::path& p);

/// The non-empty lines of `text` (a command's output), in order.
std::vector<std::string> lines_of(const std::string& text);

/// A fresh folder under /tmp (mode 0700), removed with its contents on destruction.
struct temp_dir {
    temp_dir();
    /// A fresh folder under `parent` instead: for what a confined tool must see, outside the
    /// places its sandbox makes private (/tmp, /run; docs/protocol.md §15).
    explicit temp_dir(const fs::path& parent);
    ~temp_dir();
    temp_dir(const temp_dir&) = delete;
    temp_dir& operator=(const temp_dir&) = delete;
    fs::path path;
};

/// Path of the test tool host, and a TOML `[[sources]]` entry that runs it with `flags`.
std::string test_host_path();
std::string host_source_toml(const std::string& name, const std::vector<std::string>& flags = {},
                             const std::string& extra = "");

/// A TOML `[[sources]]` entry for an exec tool: `script` is a path under tests/exec/ run with
/// node (.mjs) or sh (.sh); `tool_name` is the tool it provides.
std::string exec_source_toml(const std::string& name, const std::string& mode,
                             const std::string& script, const std::string& tool_name,
                             const std::vector<std::string>& flags = {},
                             const std::string& extra = "");

/// A TOML `[[hooks]]` entry running tests/exec/hook.mjs with `flags`.
std::string hook_toml(const std::string& name, const std::string& kind, const std::string& mode,
                      const std::string& phase, const std::vector<std::string>& flags,
                      const std::string& extra = "");

/// The meithd binary running on a temporary home.
class daemon_process {
  public:
    /// Writes `config_toml` to HOME/meithd.toml (when non-empty), starts meithd with
    /// `--home HOME --socket HOME/d.sock` plus `extra_args`, and waits until it is ready
    /// (config.json names its pid). Throws with the daemon's log if it exits or times out.
    /// `prepare(home)` runs before the start, e.g. to plant files in the home. `ready_within`
    /// bounds the wait (a source of 10,000 tools takes longer under the sanitizers).
    explicit daemon_process(const std::string& config_toml = "",
                            std::vector<std::string> extra_args = {},
                            std::function<void(const fs::path&)> prepare = {},
                            std::chrono::seconds ready_within = std::chrono::seconds(20));
    ~daemon_process();

    fs::path home() const { return home_.path; }
    fs::path socket() const { return socket_; }
    pid_t pid() const { return pid_; }

    /// Everything the daemon wrote to stderr so far.
    std::string log() const;
    /// Waits until the log contains `text`: false at the timeout or when the daemon exited.
    bool wait_for_log(const std::string& text, std::chrono::milliseconds timeout = 10s);
    /// Sends `sig` and waits for the exit (up to `timeout`); returns the exit status or -1.
    int stop(int sig = 15, std::chrono::milliseconds timeout = 15s);
    /// Waits for the process to exit on its own; returns its exit status or -1 on timeout.
    int wait_exit(std::chrono::milliseconds timeout);
    bool running();
    /// Starts the daemon again on the same home and socket after it exited (or was killed),
    /// then waits (within ready_within) until no source is starting or restarting, unless
    /// `wait_started` is false: sources listed from their pins make meithd ready before that.
    void restart(bool wait_started = true);
    /// The audit log's lines, parsed.
    std::vector<json> audit() const;
    /// Audit lines with "event" == `event`.
    std::vector<json> audit_events(const std::string& event) const;
    /// Waits until an audit line satisfies `pred`.
    json wait_audit(const std::function<bool(const json&)>& pred,
                    std::chrono::milliseconds timeout = 5s) const;

  private:
    temp_dir home_;
    fs::path socket_;
    void spawn_and_wait();
    std::vector<std::string> args_;
    std::chrono::seconds ready_within_;
    pid_t pid_ = -1;
    bool exited_ = false;
    int status_ = 0;
};

/// A daemon that `meith` auto-started on `home` (not our child): at scope exit, the pid in
/// HOME/config.json gets SIGTERM and is waited for (SIGKILL after 10 s).
struct autostarted_daemon {
    fs::path home;
    ~autostarted_daemon();
};

/// Starts meithd and waits for it to exit (startup errors); returns {status, stderr}.
std::pair<int, std::string> run_meithd_expect_exit(const std::vector<std::string>& args,
                                                   std::chrono::milliseconds timeout = 15s);

/// A blocking client connection over the protocol's own client channel
/// (protocol/client_channel.hpp, the one the CLI uses). Frames are parsed with nlohmann_json.
class client {
  public:
    explicit client(const fs::path& socket);
    /// Tag for a connection made from a process with a controlling terminal.
    struct from_terminal_t {};
    static constexpr from_terminal_t from_terminal{};
    /// Connects through a child process that is a session leader with a pseudo-terminal as
    /// its controlling terminal (as a person's shell is), so the daemon's peer — the pid that
    /// called connect(2) — has a tty (PROTOCOL.md §12 approvers). The child lives as long as
    /// the client.
    client(const fs::path& socket, from_terminal_t);
    ~client();
    client(const client&) = delete;
    client& operator=(const client&) = delete;

    void send(const json& frame);
    void send_raw(const std::string& bytes);
    /// The next frame; throws on timeout or EOF.
    json read(std::chrono::milliseconds timeout = 10s);
    /// True when the peer closes the connection within `timeout` (frames before are skipped).
    bool wait_closed(std::chrono::milliseconds timeout = 5s);
    /// True when no frame arrives within `quiet`.
    bool silent_for(std::chrono::milliseconds quiet);

    /// Sends a tool_call and returns its tool_result frame; events go to `events`.
    json call(const std::string& tool, const json& args, const json& extra = json::object(),
              std::vector<json>* events = nullptr, std::chrono::milliseconds timeout = 15s);
    /// Reads frames until the tool_result for `request_id`; events go to `events`.
    json wait_result(const std::string& request_id, std::vector<json>* events = nullptr,
                     std::chrono::milliseconds timeout = 15s);

    int fd() const { return channel_.fd(); }

  private:
    protocol::client_channel channel_;
    protocol::request_id_generator ids_{"t"}; ///< call(): "t1", "t2", ...
    std::optional<std::string> pending_;      ///< a frame silent_for saw; read returns it first
    pid_t terminal_child_ = -1;               ///< from_terminal: the peer process
    int terminal_hold_ = -1;                  ///< its end closes when the client goes
};

/// Polls `pred` every 50 ms until it holds; false when it still does not after `timeout`.
bool eventually(const std::function<bool()>& pred, std::chrono::milliseconds timeout = 15s);

/// Whether list_tools (as the cli caller) lists tool `name` now.
bool has_tool(client& c, const std::string& name);

/// How many descriptors process `pid` has open (entries of /proc/PID/fd).
std::size_t open_fds(pid_t pid);

/// list_sources' entry of source `name` (pid, state, sandbox, ...); null when there is none.
json source_status(client& c, const std::string& name);
/// Waits until no source is starting or restarting (each ready, failed or stopped): a first
/// start that timed out under load (ASan, a busy machine) is restarted and lists its tools
/// later, which a test that compares listings must not race. False after `timeout`.
bool wait_sources_settled(client& c, std::chrono::milliseconds timeout);

/// Whether this kernel gives what meithd's tool sandbox uses (asked the way meithd asks):
/// Landlock and seccomp, and with `namespaces` also user + mount + PID namespaces.
bool kernel_can_confine(bool namespaces = false);

/// Skips (saying so) a test this kernel cannot run: REQUIRE_KERNEL_SANDBOX(false) for
/// Landlock and seccomp, REQUIRE_KERNEL_SANDBOX(true) for namespaces too.
#define REQUIRE_KERNEL_SANDBOX(namespaces)                                                         \
    do {                                                                                           \
        if (!::meith::test::kernel_can_confine(namespaces))                                        \
            SKIP_TEST(std::string("this kernel lacks Landlock, seccomp") +                         \
                      ((namespaces) ? " or user namespaces" : ""));                                \
    } while (false)

/// The approver secret of a daemon's home (HOME/approver.secret, first line).
std::string approver_secret(const fs::path& home);

/// Runs `cmd` with /bin/sh, expects exit status 0, and parses what it printed as JSON (a
/// test driver's one line: tests/mcp/*.mjs).
json run_json_command(const std::string& cmd);

/// An approver: a terminal connection that sent approver_hello with the home's secret and got
/// approver_hello_result.
std::unique_ptr<client> connect_approver(const daemon_process& d);

/// A TCP port on 127.0.0.1 nobody listens on now (the kernel's pick for port 0), for a test
/// server started next.
int free_tcp_port();

/// Runs the meith CLI with `args`; returns {exit status, stdout, stderr}.
struct cli_result {
    int status;
    std::string out;
    std::string err;
};
cli_result run_cli(const std::vector<std::string>& args, const fs::path& home,
                   std::chrono::seconds within = std::chrono::seconds(30));

/// Runs `argv` + `args` (argv[0] a path) with XDG_RUNTIME_DIR and MEITH_HOME unset,
/// MEITH_NO_AUTOSTART=1, then `env` applied (a value of "" sets it empty); waits up to `within`
/// (then kills it: status -1).
cli_result run_program(std::vector<std::string> argv, const std::vector<std::string>& args,
                       const std::vector<std::pair<std::string, std::string>>& env,
                       std::chrono::seconds within = std::chrono::seconds(30));

/// A program running beside the test (`meith audit --follow`, `meith login`, a test server):
/// `argv[0]` looked up in PATH, XDG_RUNTIME_DIR unset, MEITH_NO_AUTOSTART=1, then `env`; its
/// stdout and stderr go to files read back while it runs; its stdin is a pipe that stays open
/// (servers that stop at EOF keep running). SIGTERM at the end (SIGKILL after 10 s).
class background_process {
  public:
    explicit background_process(std::vector<std::string> argv,
                                const std::vector<std::pair<std::string, std::string>>& env = {});
    ~background_process();
    background_process(const background_process&) = delete;
    background_process& operator=(const background_process&) = delete;

    std::string out() const;
    std::string err() const;
    /// Waits until standard output contains `text` (false at the timeout or when it exited).
    bool wait_for(const std::string& text, std::chrono::milliseconds timeout = 10s);
    bool running();
    /// Waits for the exit: its status, 128+N when killed by signal N, -1 after `timeout`.
    int wait(std::chrono::milliseconds timeout);
    /// Sends `sig`, then wait(10 s).
    int stop(int sig);

  private:
    temp_dir dir_;
    pid_t pid_ = -1;
    bool reaped_ = false;
    int status_ = 0;
};

/// `meith mcp --home HOME` on pipes, as an MCP client runs it (auto-start off; `env` entries
/// "NAME=value" added): lines written to its stdin, lines read from its stdout. Killed (SIGKILL)
/// at the end if still running.
class mcp_child {
  public:
    explicit mcp_child(const fs::path& home, std::vector<std::string> env = {});
    ~mcp_child();
    mcp_child(const mcp_child&) = delete;
    mcp_child& operator=(const mcp_child&) = delete;

    pid_t pid() const { return pid_; }
    /// Writes one message line.
    void send(const json& msg);
    /// The next message on stdout; nullopt at EOF or after `timeout`.
    std::optional<json> read(std::chrono::milliseconds timeout = 10s);
    /// The answer with `id`, skipping notifications (fails the test at EOF or a timeout).
    json answer(int id);
    /// Closes its stdin (EOF).
    void close_input();
    /// Its exit status (128+N when killed by signal N), -1 after `timeout`.
    int wait(std::chrono::milliseconds timeout = 15s);
    /// True when stdout reaches EOF within `timeout` (messages before are dropped).
    bool eof_within(std::chrono::milliseconds timeout);

  private:
    pid_t pid_ = -1;
    int to_ = -1, from_ = -1;
    std::string buf_;
    bool reaped_ = false;
};

/// Moves this test process (one per test case under ctest) into a network namespace of its
/// own: lo up, and 203.0.113.5 (TEST-NET-3, an ordinary address to the egress checks) on lo:1.
/// Empty when done, else why not (it needs root).
std::string own_network_namespace();

/// `meith ARGS` in the background on daemon home `home`.
std::unique_ptr<background_process> background_cli(const std::vector<std::string>& args,
                                                   const fs::path& home);

/// Sets an environment variable for one scope, restoring the old value (or its absence) at
/// its end; children started meanwhile (meithd, the CLI) inherit it.
class env_override {
  public:
    env_override(const char* name, const std::string& value);
    ~env_override();
    env_override(const env_override&) = delete;
    env_override& operator=(const env_override&) = delete;

  private:
    std::string name_;
    std::optional<std::string> old_;
};

/// The example config as `meith init` writes it when run in `project` with home `home` (tools
/// by absolute path, the file tools confined to `project`); the file itself is removed, so a
/// daemon_process can write the text (with more appended) into its own home.
std::string example_config(const fs::path& home, const fs::path& project);

} // namespace meith::test
