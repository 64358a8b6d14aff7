// source_factory: the kinds of tool source and how each one is made (docs/protocol.md §7).
//
// Owns one table {kind name -> factory}: "builtin", "host", "exec", "mcp". The daemon makes
// every source through make_source() and never switches on the kind itself, so a new kind is one
// more row in source_factory.cpp plus its make_*_source function.
#pragma once

#include "config/config.hpp"
#include "tools/tool_source.hpp"

#include <asio/any_io_executor.hpp>

#include <memory>
#include <span>
#include <string>
#include <string_view>

namespace meith::process {
class child_reaper;
} // namespace meith::process

namespace meith::sources {

/// What every factory is given besides the source's own config.
struct source_context {
    asio::any_io_executor ex;
    process::child_reaper& reaper;
    const config::config& whole; ///< the daemon's config (`[tools]`, `[limits]`)
};

/// Makes a source from its config (a "builtin" source ignores it).
using source_factory = std::shared_ptr<tools::tool_source> (*)(const source_context& ctx,
                                                               const config::source_config& cfg);

struct source_kind_entry {
    std::string_view kind; ///< as `kind = "..."` names it in the config
    source_factory make;
};

/// Every known kind, in table order.
std::span<const source_kind_entry> source_kinds();

/// The known kinds' names, comma-separated ("builtin, host, exec, mcp"), for error messages.
std::string known_source_kinds();

/// Makes a source of kind `kind` from `cfg`. Throws std::invalid_argument naming the known
/// kinds when `kind` is none of them.
std::shared_ptr<tools::tool_source> make_source(std::string_view kind, const source_context& ctx,
                                                const config::source_config& cfg = {});

/// Makes the source `cfg` describes (`[[sources]]`, kind config::to_string(cfg.kind)); with
/// `instances` other than shared, a pool of them (instance_pool.hpp).
std::shared_ptr<tools::tool_source> make_source(const source_context& ctx,
                                                const config::source_config& cfg);

// ---- The factories behind the table ------------------------------------------------------

/// The built-in source: `echo` (read-only; its content is its arguments) — §7.
std::shared_ptr<tools::tool_source> make_builtin_source();

/// A tool host source (`kind = "host"`, §7) supervised as a subprocess.
std::shared_ptr<tools::tool_source> make_host_source(asio::any_io_executor ex,
                                                     process::child_reaper& reaper,
                                                     const config::source_config& cfg,
                                                     const config::config& whole);

/// An exec source (`kind = "exec"`, §7): one-shot (a process per call) or server mode (one
/// supervised JSON-RPC 2.0 process).
std::shared_ptr<tools::tool_source> make_exec_source(asio::any_io_executor ex,
                                                     process::child_reaper& reaper,
                                                     const config::source_config& cfg,
                                                     const config::config& whole);

/// An MCP server over stdio (`kind = "mcp"`, §7, MCP spec 2025-11-25) supervised as a
/// subprocess: initialize, tools/list (re-listed on list_changed), tools/call with progress
/// and cancellation.
std::shared_ptr<tools::tool_source> make_mcp_source(asio::any_io_executor ex,
                                                    process::child_reaper& reaper,
                                                    const config::source_config& cfg,
                                                    const config::config& whole);

} // namespace meith::sources
