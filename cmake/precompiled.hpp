// The third-party headers most of meith's files include, parsed once per build folder
// (cmake/Precompiled.cmake). Only headers that never depend on a macro a file defines first,
// and that put no code in a file that does not use them: not simdjson.h, whose functions in
// unnamed namespaces would land in every file (and its link) though only half include it.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <variant>
#include <vector>

#include <asio/awaitable.hpp>
#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>
#include <asio/local/stream_protocol.hpp>
#include <asio/posix/stream_descriptor.hpp>
#include <asio/steady_timer.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>
