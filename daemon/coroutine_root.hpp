// coroutine_root: the completion handler for every coroutine the daemon co_spawns.
//
// With `asio::detached`, an exception that escapes a coroutine vanishes: the coroutine ends
// and nothing says so (a dead accept loop leaves a daemon that looks alive and accepts no one).
// `coroutine_root(what, on_failure)` logs the exception with `what` ("accept loop",
// "connection s_… reader") and then calls `on_failure` (close the connection; for the accept
// loop, a fatal shutdown). A coroutine that returns normally is not reported. I/O-thread only.
#pragma once

#include <exception>
#include <functional>
#include <string>
#include <utility>

#include <spdlog/spdlog.h>

namespace meith::daemon {

/// The message of an exception_ptr's exception ("unknown exception" when it is no
/// std::exception).
inline std::string describe(const std::exception_ptr& e) {
    try {
        std::rethrow_exception(e);
    } catch (const std::exception& ex) {
        return ex.what();
    } catch (...) {
        return "unknown exception";
    }
}

/// A completion handler for asio::co_spawn (signature void(std::exception_ptr)).
inline auto coroutine_root(std::string what,
                           std::function<void(const std::string& error)> on_failure = {}) {
    return [what = std::move(what), on_failure = std::move(on_failure)](std::exception_ptr e) {
        if (!e) return;
        const std::string error = describe(e);
        spdlog::error("{} failed: {}", what, error);
        if (on_failure) on_failure(error);
    };
}

} // namespace meith::daemon
