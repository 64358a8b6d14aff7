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
