// daemon unit tests: the coroutine root handler (issue 11, defect 15: an exception escaping a
// co_spawn'ed coroutine with asio::detached vanished, e.g. ending the accept loop silently).
#include "daemon/coroutine_root.hpp"

#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>
#include <asio/use_awaitable.hpp>
#include <catch2/catch.hpp>

#include <stdexcept>

namespace {

asio::awaitable<void> throws_after_a_turn() {
    co_await asio::post(co_await asio::this_coro::executor, asio::use_awaitable);
    throw std::runtime_error("accept exploded");
}

asio::awaitable<void> returns() {
    co_return;
}

} // namespace

TEST_CASE("coroutine_root reports an exception that escapes a coroutine", "[daemon][hardening]") {
    asio::io_context ioc;
    std::string seen;
    int calls = 0;
    asio::co_spawn(ioc, throws_after_a_turn(),
                   meith::daemon::coroutine_root("accept loop", [&](const std::string& error) {
                       seen = error;
                       ++calls;
                   }));
    asio::co_spawn(ioc, returns(),
                   meith::daemon::coroutine_root("quiet", [&](const std::string&) { ++calls; }));
    ioc.run();
    CHECK(calls == 1);
    CHECK(seen == "accept exploded");
}

TEST_CASE("describe names non-standard exceptions too", "[daemon]") {
    CHECK(meith::daemon::describe(std::make_exception_ptr(42)) == "unknown exception");
    CHECK(meith::daemon::describe(std::make_exception_ptr(std::logic_error("x"))) == "x");
}

// ---- peer: a tool's process is known at the socket (docs/security.md, attack 1) ------------

#include "platform/peer.hpp"

#include <csignal>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

namespace {

/// A forked grandchild of this process (which stands for meithd), orphaned at once, and a
/// socket to check it on: {the socket, the grandchild's pid}. The walk is given the pid.
std::pair<int, pid_t> grandchild_peer() {
    int sv[2];
    REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    int pids[2];
    REQUIRE(::pipe(pids) == 0);
    const pid_t child = ::fork();
    if (child == 0) {
        ::close(sv[0]);
        const pid_t grandchild = ::fork();
        if (grandchild == 0) {
            const pid_t me = ::getpid();
            [[maybe_unused]] auto n = ::write(pids[1], &me, sizeof me);
            ::pause();
            ::_exit(0);
        }
        ::_exit(0); // the grandchild is orphaned: re-parented to a subreaper or init
    }
    pid_t grandchild = 0;
    REQUIRE(::read(pids[0], &grandchild, sizeof grandchild) == sizeof grandchild);
    ::waitpid(child, nullptr, 0);
    ::close(pids[0]);
    ::close(pids[1]);
    ::close(sv[1]);
    return {sv[0], grandchild};
}

} // namespace

TEST_CASE("tool_peer_problem: a descendant (an orphan too, under a subreaper) is a tool's, "
          "init and a gone pid are told apart",
          "[daemon][peer]") {
    meith::platform::become_subreaper();
    auto [fd, grandchild] = grandchild_peer();
    // The orphaned grandchild was re-parented to us (the subreaper): still our descendant.
    const auto why = meith::platform::tool_peer_problem(fd, grandchild);
    REQUIRE(why);
    CHECK_THAT(*why, Catch::Contains("is a process meithd started"));
    // init(1) does not descend from us (the walk stops there).
    CHECK_FALSE(meith::platform::tool_peer_problem(fd, 1));
    ::kill(grandchild, SIGKILL);
    ::waitpid(grandchild, nullptr, 0);
    // A pid that names no process: its ancestry cannot be read, which is refused.
    const auto gone = meith::platform::tool_peer_problem(fd, grandchild);
    REQUIRE(gone);
    CHECK_THAT(*gone, Catch::Contains("cannot be read"));
    ::close(fd);
}

#include "daemon/instance.hpp"

#include <filesystem>
#include <fstream>

TEST_CASE("sweep_instance_records skips a name too long for a pid instead of stopping start-up",
          "[daemon][instance]") {
    // A 20-digit name made std::stol throw out of start-up.
    std::string tmpl = "/tmp/meith-instances-XXXXXX";
    REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    const std::filesystem::path home = tmpl;
    std::filesystem::create_directory(home / "instances");
    std::ofstream(home / "instances" / "99999999999999999999.json") << "{}";
    // Above any pid_max (2^22): no such process, so the record is stale and swept.
    std::ofstream(home / "instances" / "4194305.json") << "{}";
    std::size_t removed = 0;
    REQUIRE_NOTHROW(removed = meith::daemon::sweep_instance_records(home));
    CHECK(removed == 1);
    CHECK(std::filesystem::exists(home / "instances" / "99999999999999999999.json"));
    CHECK_FALSE(std::filesystem::exists(home / "instances" / "4194305.json"));
    std::filesystem::remove_all(home);
}

#include "daemon/reload.hpp"

#include <nlohmann/json.hpp>

namespace {
meith::config::config parse_config_ok(const std::string& text) {
    auto r = meith::config::parse_config(text, "test.toml", "/etc/meith");
    INFO((r.error ? r.error->to_string() : std::string("no error")));
    REQUIRE(r.value);
    return *r.value;
}
std::string source(const std::string& name, const std::string& command) {
    return "[[sources]]\nname = \"" + name + "\"\nkind = \"host\"\ncommand = [\"" + command +
           "\"]\n";
}
} // namespace

TEST_CASE("plan_reload: the config diff of a reload, as data", "[daemon][reload]") {
    using meith::daemon::plan_reload;
    const auto running = parse_config_ok(source("keep", "a") + source("change", "b") +
                                         source("drop", "c") + "[limits]\nmax_connections = 8\n");
    SECTION("the same config changes nothing") {
        const auto p = plan_reload(running, running);
        CHECK(p.changed().empty());
        CHECK(p.needs_restart.empty());
        CHECK(p.kept == std::vector<std::string>{"keep", "change", "drop"});
    }
    SECTION("sources added, removed, replaced and kept; sections in place or at restart") {
        const auto next =
            parse_config_ok(source("new", "d") + source("change", "b2") + source("keep", "a") +
                            "[limits]\nmax_connections = 9\n[permissions]\npersist_grants = true\n"
                            "[audit]\nfsync = \"always\"\n");
        const auto p = plan_reload(running, next);
        CHECK(p.added == std::vector<std::string>{"new"});
        CHECK(p.removed == std::vector<std::string>{"drop"});
        CHECK(p.replaced == std::vector<std::string>{"change"});
        CHECK(p.kept == std::vector<std::string>{"keep"});
        CHECK(p.limits);
        CHECK_FALSE(p.tools);
        // persist_grants alone applies at the next start: [permissions] is otherwise equal.
        CHECK_FALSE(p.permissions);
        CHECK(p.needs_restart == std::vector<std::string>{"audit", "permissions.persist_grants"});
        CHECK(p.changed() == std::vector<std::string>{"limits", "sources"});

        std::string reply;
        meith::daemon::append_reload_reply(reply, std::filesystem::path("/etc/meith/m.toml"), p,
                                           {"keep"});
        const auto j = nlohmann::json::parse("{" + reply + "}");
        CHECK(j["file"] == "/etc/meith/m.toml");
        CHECK(j["changed"] == nlohmann::json({"limits", "sources"}));
        CHECK(j["sources"]["added"] == nlohmann::json({"new"}));
        CHECK(j["sources"]["removed"] == nlohmann::json({"drop"}));
        CHECK(j["sources"]["replaced"] == nlohmann::json({"change"}));
        CHECK(j["sources"]["restarted"] == nlohmann::json({"keep"}));
        CHECK(j["needsRestart"] == nlohmann::json({"audit", "permissions.persist_grants"}));
    }
}

#include "daemon/admission.hpp"

TEST_CASE("admission: a connection is refused for its uid, as a tool's, or over the limit") {
    using meith::daemon::refuse_connection;
    using meith::platform::peer_identity;
    // Taken: the daemon's uid, not a tool's, under the limit.
    CHECK_FALSE(refuse_connection(peer_identity{42, 1000}, 1000, std::nullopt, 3, 4));

    // Another uid: closed without a frame; the audit line names the peer.
    auto other = refuse_connection(peer_identity{42, 1001}, 1000, std::nullopt, 0, 4);
    REQUIRE(other);
    CHECK(other->frame.empty());
    CHECK(other->audit_fields ==
          R"("reason":"peer uid differs from the daemon's","pid":42,"uid":1001)");
    auto unknown = refuse_connection(std::nullopt, 1000, std::nullopt, 0, 4);
    REQUIRE(unknown);
    CHECK(unknown->audit_fields ==
          R"("reason":"peer uid differs from the daemon's","pid":null,"uid":null)");

    // A tool's process: told why, in a frame with its refusal code.
    auto tool = refuse_connection(peer_identity{7, 1000}, 1000,
                                  std::string("pid 7 is a process meithd started"), 0, 4);
    REQUIRE(tool);
    const auto frame = nlohmann::json::parse(tool->frame);
    CHECK(frame["type"] == "error");
    CHECK(frame["code"] == "TOOL_PROCESS");
    CHECK(frame["message"].get<std::string>().find("does not take connections from the tools") !=
          std::string::npos);
    CHECK(tool->audit_fields ==
          R"("reason":"a tool's process: pid 7 is a process meithd started","pid":7,"uid":1000)");

    // At the limit.
    auto full = refuse_connection(peer_identity{9, 1000}, 1000, std::nullopt, 4, 4);
    REQUIRE(full);
    CHECK(nlohmann::json::parse(full->frame)["code"] == "LIMIT_REACHED");
    CHECK(full->audit_fields ==
          R"x("reason":"over limits.max_connections (4)","pid":9,"uid":1000)x");
}
