// source_factory: the table of source kinds (see source_factory.hpp).
#include "sources/factory.hpp"

#include "sources/instance_pool.hpp"

#include <array>
#include <stdexcept>

namespace meith::sources {

namespace {

// One row per kind. A factory adapts the table's signature to its source's constructor.
constexpr std::array kinds{
    source_kind_entry{
        "builtin",
        [](const source_context&, const config::source_config&) { return make_builtin_source(); }},
    source_kind_entry{"host",
                      [](const source_context& ctx, const config::source_config& cfg) {
                          return make_host_source(ctx.ex, ctx.reaper, cfg, ctx.whole);
                      }},
    source_kind_entry{"exec",
                      [](const source_context& ctx, const config::source_config& cfg) {
                          return make_exec_source(ctx.ex, ctx.reaper, cfg, ctx.whole);
                      }},
    source_kind_entry{"mcp",
                      [](const source_context& ctx, const config::source_config& cfg) {
                          return make_mcp_source(ctx.ex, ctx.reaper, cfg, ctx.whole);
                      }},
};

} // namespace

std::span<const source_kind_entry> source_kinds() {
    return kinds;
}

std::string known_source_kinds() {
    std::string out;
    for (const auto& k : kinds) {
        if (!out.empty()) out += ", ";
        out += k.kind;
    }
    return out;
}

std::shared_ptr<tools::tool_source> make_source(std::string_view kind, const source_context& ctx,
                                                const config::source_config& cfg) {
    for (const auto& k : kinds)
        if (k.kind == kind) return k.make(ctx, cfg);
    throw std::invalid_argument("unknown source kind '" + std::string(kind) +
                                "' (known kinds: " + known_source_kinds() + ")");
}

std::shared_ptr<tools::tool_source> make_source(const source_context& ctx,
                                                const config::source_config& cfg) {
    if (cfg.instances == config::instance_mode::shared)
        return make_source(config::to_string(cfg.kind), ctx, cfg);
    // One process per session or client: the pool makes them from this same entry.
    return std::make_shared<instance_pool>(
        ctx.ex, cfg, std::chrono::milliseconds(ctx.whole.tools.kill_grace_ms),
        [ctx, cfg] { return make_source(config::to_string(cfg.kind), ctx, cfg); });
}

} // namespace meith::sources
