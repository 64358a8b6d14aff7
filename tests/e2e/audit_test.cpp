// End-to-end: the audit trail under pressure and the trust boundary (issue "Audit and trust") —
// kill -9 under load, rotation under load, a full or failing disk with fail_closed and
// continue, a read-only file and a disk failing with EIO, the non-call events, and
// `check_policy` explanations.
#include "daemon_fixture.hpp"

#include <catch2/catch.hpp>

#include <atomic>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <fcntl.h>
#include <fstream>
#include <iterator>
#include <linux/fs.h>
#include <mutex>
#include <set>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <thread>
#include <unistd.h>

using namespace meith::test;

namespace e2e_audit_test { // one namespace per file: the tests build as unity batches

namespace {

std::vector<json> all_audit_lines(const fs::path& dir, const std::string& base = "audit.jsonl") {
    std::vector<json> lines;
    for (const auto& e : fs::directory_iterator(dir)) {
        const auto name = e.path().filename().string();
        if (name.rfind(base, 0) != 0) continue;
        std::ifstream in(e.path());
        std::string line;
        while (std::getline(in, line))
            lines.push_back(json::parse(line)); // throws if torn
    }
    return lines;
}

/// Runs `threads` clients calling echo as fast as they can until `stop`; returns the
/// requestIds whose tool_result each client received.
struct load {
    std::atomic<bool> stop{false};
    std::mutex mu;
    std::set<std::string> received;
    std::vector<std::thread> workers;

    load(const fs::path& socket, int threads) {
        for (int t = 0; t < threads; ++t)
            workers.emplace_back([this, socket, t] {
                try {
                    client c(socket);
                    for (int i = 0; !stop; ++i) {
                        const std::string id = "w" + std::to_string(t) + "_" + std::to_string(i);
                        auto r = c.call("echo", {{"i", i}, {"pad", std::string(200, 'p')}},
                                        {{"requestId", id}}, nullptr, 5s);
                        if (r["result"]["ok"] == true) {
                            std::lock_guard lock(mu);
                            received.insert(id);
                        }
                    }
                } catch (const std::exception&) {
                    // the daemon went away: this worker is done
                }
            });
    }
    void finish() {
        stop = true;
        for (auto& w : workers)
            w.join();
    }
};

/// Sets or clears the file's immutable attribute (chattr +i / -i, ioctl_iflags(2)): writes
/// through descriptors already open then fail with EPERM, for root too. False when this file
/// system or process cannot (no CAP_LINUX_IMMUTABLE, a file system without the flag).
bool set_immutable(const fs::path& p, bool on) {
    const int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    int flags = 0;
    bool ok = ::ioctl(fd, FS_IOC_GETFLAGS, &flags) == 0;
    if (ok) {
        flags = on ? (flags | FS_IMMUTABLE_FL) : (flags & ~FS_IMMUTABLE_FL);
        ok = ::ioctl(fd, FS_IOC_SETFLAGS, &flags) == 0;
    }
    ::close(fd);
    return ok;
}

} // namespace

TEST_CASE("kill -9 under load leaves an intact log with a line for every answered call",
          "[e2e][audit]") {
    // "never": the I/O thread writes each group of lines; "always" and "interval": the audit
    // writer thread does, and replies wait for its commit.
    const std::string fsync = GENERATE(as<std::string>{}, "never", "always", "interval");
    CAPTURE(fsync);
    daemon_process d("[audit]\nfsync = \"" + fsync + "\"\n");
    load l(d.socket(), 8);
    std::this_thread::sleep_for(1500ms);
    ::kill(d.pid(), SIGKILL);
    l.finish();
    d.wait_exit(5s);
    REQUIRE(l.received.size() > 100);
    // SIGKILL can end a write(2) part-way (the kernel checks for a fatal signal between
    // pages), leaving a torn last line; the replies of that group were never sent. The next
    // start cuts it and records how many bytes it cut (docs/protocol.md §6).
    std::string before;
    {
        std::ifstream in(d.home() / "audit.jsonl", std::ios::binary);
        before.assign(std::istreambuf_iterator<char>(in), {});
    }
    const auto torn_bytes = before.size() - (before.rfind('\n') + 1);
    d.restart();
    d.stop();
    auto lines = all_audit_lines(d.home()); // every line parses
    std::size_t repaired = 0;
    for (auto& line : lines)
        if (line["event"] == "audit_repaired") {
            ++repaired;
            CHECK(line["bytesRemoved"] == torn_bytes);
        }
    CHECK(repaired == (torn_bytes ? 1u : 0u));
    std::set<std::string> audited;
    for (auto& line : lines)
        if (line["event"] == "tool_call") audited.insert(line["requestId"]);
    std::size_t missing = 0;
    for (const auto& id : l.received)
        missing += audited.count(id) ? 0 : 1;
    CHECK(missing == 0);
}

TEST_CASE("rotation under load loses no line", "[e2e][audit]") {
    const std::string fsync = GENERATE(as<std::string>{}, "never", "always");
    CAPTURE(fsync);
    daemon_process d("[audit]\nmax_bytes = 65536\nkeep = 1000\nfsync = \"" + fsync + "\"\n");
    load l(d.socket(), 4);
    std::this_thread::sleep_for(1500ms);
    l.finish();
    d.stop();
    auto lines = all_audit_lines(d.home());
    std::size_t rotated = 0;
    for (const auto& e : fs::directory_iterator(d.home()))
        if (e.path().filename().string().rfind("audit.jsonl.", 0) == 0) ++rotated;
    CHECK(rotated > 3);
    std::set<std::string> audited;
    for (auto& line : lines)
        if (line["event"] == "tool_call") audited.insert(line["requestId"]);
    REQUIRE(l.received.size() > 100);
    for (const auto& id : l.received)
        CHECK(audited.count(id) == 1);
    for (const auto& e : fs::directory_iterator(d.home()))
        if (e.path().filename().string().rfind("audit.jsonl", 0) == 0)
            CHECK(fs::file_size(e.path()) <= 65536 + 16384);
}

TEST_CASE("rotation under load with keep = 2 keeps two old files and no expired one",
          "[e2e][audit]") {
    daemon_process d("[audit]\nmax_bytes = 32768\nkeep = 2\n");
    load l(d.socket(), 4);
    std::this_thread::sleep_for(1000ms);
    l.finish();
    d.stop(); // the writer thread deletes the last expired file before the daemon exits
    std::set<std::string> names;
    for (const auto& e : fs::directory_iterator(d.home()))
        if (e.path().filename().string().rfind("audit.jsonl", 0) == 0)
            names.insert(e.path().filename().string());
    CHECK(names == std::set<std::string>{"audit.jsonl", "audit.jsonl.1", "audit.jsonl.2"});
    // The newest lines survive: the last answered call is in the live file or .1.
    REQUIRE_FALSE(l.received.empty());
    std::size_t lines = 0;
    for (const auto& line : all_audit_lines(d.home())) // every line parses
        lines += line["event"] == "tool_call" ? 1 : 0;
    CHECK(lines > 0);
}

TEST_CASE("an audit log that cannot be written refuses calls (fail_closed) or not (continue)",
          "[e2e][audit]") {
    SECTION("fail_closed, the default, on /dev/full") {
        daemon_process d("[audit]\npath = \"/dev/full\"\n");
        client c(d.socket());
        auto r = c.call("echo", json::object());
        CHECK(r["result"]["ok"] == false);
        CHECK(r["result"]["error"]["code"] == "TOOL_FAILED");
        CHECK_THAT(r["result"]["error"]["message"].get<std::string>(), Catch::Contains("audit"));
        CHECK_THAT(d.log(), Catch::Contains("/dev/full"));
    }
    SECTION("continue keeps serving") {
        daemon_process d("[audit]\npath = \"/dev/full\"\non_failure = \"continue\"\n");
        client c(d.socket());
        CHECK(c.call("echo", {{"a", 1}})["result"]["ok"] == true);
    }
}

TEST_CASE("a full disk triggers fail_closed until space is back", "[e2e][audit]") {
    temp_dir mnt;
    if (::mount("tmpfs", mnt.path.c_str(), "tmpfs", 0, "size=256k,mode=0700") != 0) {
        WARN("cannot mount a small tmpfs here (needs root); the /dev/full case covers ENOSPC");
        return;
    }
    struct unmount {
        fs::path p;
        ~unmount() { ::umount2(p.c_str(), MNT_DETACH); }
    } guard{mnt.path};
    const auto audit = mnt.path / "audit.jsonl";
    daemon_process d("[audit]\npath = \"" + audit.string() + "\"\n");
    client c(d.socket());
    CHECK(c.call("echo", json::object())["result"]["ok"] == true);
    {
        std::ofstream filler(mnt.path / "filler", std::ios::binary);
        const std::string block(4096, 'f');
        while (filler.write(block.data(), block.size())) {
        }
    }
    bool refused = false;
    // Appends fill the page already allocated to the log first; ENOSPC comes after that.
    for (int i = 0; i < 40 && !refused; ++i) {
        auto r = c.call("echo", json::object());
        refused =
            r["result"]["ok"] == false &&
            r["result"]["error"]["message"].get<std::string>().find("audit") != std::string::npos;
    }
    CHECK(refused);
    fs::remove(mnt.path / "filler");
    bool recovered = false;
    for (int i = 0; i < 5 && !recovered; ++i)
        recovered = c.call("echo", json::object())["result"]["ok"] == true;
    CHECK(recovered);
    std::ifstream in(audit);
    std::string line;
    while (std::getline(in, line))
        CHECK_NOTHROW(json::parse(line)); // nothing torn
}

TEST_CASE("an audit log made read-only triggers fail_closed and no result leaves unaudited",
          "[e2e][audit]") {
    daemon_process d;
    client c(d.socket());
    client idle(d.socket()); // connected before the failure, silent until after it
    idle.send({{"type", "list_tools"}});
    REQUIRE(idle.read()["type"] == "tools_list"); // its connection_open line is on file
    REQUIRE(c.call("echo", {{"n", 0}}, {{"requestId", "before"}})["result"]["ok"] == true);
    const auto audit = d.home() / "audit.jsonl";
    if (!set_immutable(audit, true)) {
        WARN("cannot make " << audit << " immutable here (needs root and ext4/xfs/btrfs)");
        return;
    }
    struct writable_again {
        fs::path p;
        ~writable_again() { set_immutable(p, false); }
    } guard{audit};

    // The call whose line is the first to fail ran, but its result is withheld; later calls
    // are refused before they run. None of them reaches the client as a success.
    auto first = c.call("echo", {{"n", 1}}, {{"requestId", "lost"}});
    CHECK(first["result"]["ok"] == false);
    CHECK(first["result"]["error"]["code"] == "TOOL_FAILED");
    CHECK_THAT(first["result"]["error"]["message"].get<std::string>(), Catch::Contains("withheld"));
    auto refused = c.call("echo", {{"n", 2}}, {{"requestId", "refused"}});
    CHECK(refused["result"]["ok"] == false);
    CHECK_THAT(refused["result"]["error"]["message"].get<std::string>(),
               Catch::Contains("fail_closed"));
    CHECK_THAT(d.log(), Catch::Contains("Operation not permitted"));

    set_immutable(audit, false);
    bool recovered = false;
    for (int i = 0; i < 5 && !recovered; ++i)
        recovered = c.call("echo", {{"n", 3}}, {{"requestId", "after"}})["result"]["ok"] == true;
    CHECK(recovered);
    // Connections whose lines were all written have nothing withheld, whether opened after
    // the failure or idle through it.
    client later(d.socket());
    CHECK(later.call("echo", {{"n", 4}}, {{"requestId", "new_conn"}})["result"]["ok"] == true);
    CHECK(idle.call("echo", {{"n", 5}}, {{"requestId", "idle_conn"}})["result"]["ok"] == true);
    // Every line parses, and each success the client received has its line.
    std::set<std::string> ids;
    for (const auto& l : all_audit_lines(d.home()))
        if (l["event"] == "tool_call" && l["ok"] == true) ids.insert(l["requestId"]);
    CHECK(ids.count("before") == 1);
    CHECK(ids.count("after") == 1);
    CHECK(ids.count("new_conn") == 1);
    CHECK(ids.count("idle_conn") == 1);
    CHECK(ids.count("lost") == 0);
}

TEST_CASE("a disk that fails with EIO triggers fail_closed", "[e2e][audit]") {
    // A small ext4 file system on a loop device, shut down under the daemon as a dying disk
    // or an `errors=remount-ro` file system would be: every write fails with EIO.
    temp_dir dir;
    const auto image = dir.path / "disk.img";
    const auto mnt = dir.path / "mnt";
    fs::create_directory(mnt);
    const std::string mount_cmd = "truncate -s 8M " + image.string() + " && mkfs.ext4 -q -F " +
                                  image.string() + " >/dev/null 2>&1 && mount -o loop " +
                                  image.string() + " " + mnt.string() + " 2>/dev/null";
    if (std::system(mount_cmd.c_str()) != 0) {
        WARN("cannot loop-mount an ext4 image here (needs root, mkfs.ext4 and loop devices)");
        return;
    }
    struct unmount {
        fs::path p;
        ~unmount() { ::umount2(p.c_str(), MNT_DETACH); }
    } guard{mnt};
    const auto audit = mnt / "audit.jsonl";
    daemon_process d("[audit]\npath = \"" + audit.string() + "\"\n");
    client c(d.socket());
    REQUIRE(c.call("echo", json::object())["result"]["ok"] == true);

    constexpr unsigned long ext4_ioc_shutdown = _IOR('X', 125, std::uint32_t);
    std::uint32_t nologflush = 2; // EXT4_GOING_FLAGS_NOLOGFLUSH
    const int fd = ::open(mnt.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    REQUIRE(fd >= 0);
    const bool down = ::ioctl(fd, ext4_ioc_shutdown, &nologflush) == 0;
    ::close(fd);
    REQUIRE(down);

    for (int i = 0; i < 3; ++i) {
        auto r = c.call("echo", {{"i", i}});
        CHECK(r["result"]["ok"] == false);
        CHECK(r["result"]["error"]["code"] == "TOOL_FAILED");
        CHECK_THAT(r["result"]["error"]["message"].get<std::string>(), Catch::Contains("audit"));
    }
    CHECK_THAT(d.log(), Catch::Contains("Input/output error"));
    CHECK(d.running()); // refusing, not crashing
}

TEST_CASE("cancel requests, list_tools, connections and lifecycle are audited", "[e2e][audit]") {
    daemon_process d;
    {
        client c(d.socket());
        c.send({{"type", "list_tools"}});
        c.read();
        c.send({{"type", "cancel_tool_call"}, {"requestId", "nothing"}});
        c.call("echo", json::object());
    }
    d.wait_audit([](const json& l) { return l.value("event", "") == "connection_close"; });
    d.stop();
    std::set<std::string> events;
    for (auto& l : d.audit()) {
        events.insert(l["event"]);
        CHECK(l["ts"].is_string());
    }
    for (const char* e : {"daemon_start", "connection_open", "list_tools", "cancel_tool_call",
                          "tool_call", "connection_close", "daemon_stop"})
        CHECK(events.count(e) == 1);
    auto cancel = d.audit_events("cancel_tool_call").at(0);
    CHECK(cancel["inFlight"] == false);
    auto open = d.audit_events("connection_open").at(0);
    CHECK(open["pid"].get<int>() == ::getpid());
    CHECK(open["uid"].get<int>() == static_cast<int>(::getuid()));
}

TEST_CASE("check_policy explains the decision for a tool and caller", "[e2e][audit]") {
    daemon_process d(
        host_source_toml("th") +
        "[permissions.callers.cli]\nallow = [\"read-only\", \"writes-files\"]\ndeny = "
        "[\"destructive\"]\n"
        "[[permissions.rules]]\ntool = \"t_noc*\"\ncaller = \"cli\"\ndecision = \"allow\"\n");
    client c(d.socket());
    auto ask = [&](const std::string& tool, const std::string& caller) {
        c.send({{"type", "check_policy"},
                {"requestId", "p"},
                {"toolName", tool},
                {"clientInfo", {{"caller", caller}}}});
        auto f = c.read();
        REQUIRE(f["type"] == "policy_decision");
        return f;
    };
    auto w = ask("t_write", "plugin");
    CHECK(w["decision"] == "deny");
    CHECK_THAT(w["reason"].get<std::string>(), Catch::Contains("writes-files"));
    CHECK(ask("t_write", "cli")["decision"] == "allow");
    auto rule = ask("t_nocaps", "cli");
    CHECK(rule["decision"] == "allow");
    CHECK_THAT(rule["reason"].get<std::string>(), Catch::Contains("rule 1"));
    CHECK(ask("t_nocaps", "plugin")["decision"] == "deny");
    auto unknown = ask("nope", "cli");
    CHECK(unknown["known"] == false);
    CHECK(unknown["decision"] == "deny");
}

} // namespace e2e_audit_test
