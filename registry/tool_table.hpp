// tool_table: the registry's tools by name (docs/protocol.md §3, §7).
//
// Owns registration (the source's prefix, inputSchema compilation, name clashes between
// sources and within one source), lookup, removing a source's tools, and the rendered
// ToolDescriptors per caller: a cache rebuilt after any change to the tools, to a source's
// state or to the policy, so list_tools with 10,000 tools is one copy. I/O-thread only.
#pragma once

#include "permissions/policy.hpp"
#include "registry/tool_formats.hpp"
#include "registry/tool_source.hpp"

#include <array>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace meith::registry {

class tool_table {
  public:
    /// Outcome of register_source().
    struct registration {
        std::optional<std::string> error; ///< the set was refused; the table is unchanged
        bool clash = false;               ///< refused because another source offers a name
    };

    /// Replaces the tools of `src` by `defs`, each named with the source's own prefix. A tool
    /// whose inputSchema does not compile is skipped (and logged). The whole set is refused
    /// when a name belongs to another source or appears twice in it.
    registration register_source(tool_source& src, std::vector<tool_definition> defs);
    /// Removes every tool of `src`.
    void remove_source(const tool_source& src);

    /// The tool named `name`, or null.
    std::shared_ptr<const tool> find(std::string_view name) const {
        auto it = tools_.find(name);
        return it == tools_.end() ? nullptr : it->second;
    }
    std::size_t size() const { return tools_.size(); }

    /// Appends the tools, comma-separated, as `who` sees them under `policy`: meith
    /// ToolDescriptors (every tool, with its permission), or in a provider's `format` (only
    /// the tools `who` may call; tool_formats.hpp).
    void append_descriptors(std::string& out, permissions::caller who,
                            const permissions::policy& policy,
                            list_format format = list_format::meith);
    /// What a list_tools with `tags` / `models` asks for (docs/protocol.md §13).
    struct list_filter {
        /// The frame's `tags`: a source whose required_tags are not all among them is left
        /// out. Null: no filtering.
        const std::vector<std::string>* tags = nullptr;
        /// Tags per source from get_tags for the frame's `models`, in place of the ones
        /// learned at start. Null: the learned ones.
        const std::map<const tool_source*, std::vector<std::string>>* source_tags = nullptr;
    };
    /// As append_descriptors, filtered: rendered afresh, never cached.
    void append_filtered(std::string& out, permissions::caller who,
                         const permissions::policy& policy, list_format format,
                         const list_filter& filter) const {
        render(out, who, policy, format, &filter);
    }
    /// Every source that has tools now, once each.
    std::vector<std::shared_ptr<tool_source>> sources_with_tools() const;

    /// Drops the rendered descriptors (a source's state or the policy changed) and tells
    /// `on_change`: what a caller sees of the tools may have changed.
    void invalidate() {
        descriptors_valid_ = {};
        if (on_change) on_change();
    }
    /// Runs on every change to the tools or their descriptors (the registry's tools_changed).
    std::function<void()> on_change;

  private:
    void render(std::string& out, permissions::caller who, const permissions::policy& policy,
                list_format format, const list_filter* filter = nullptr) const;

    std::map<std::string, std::shared_ptr<const tool>, std::less<>> tools_;
    /// Rendered lists per caller and format (index = caller * list_format_count + format).
    std::array<std::string, 2 * list_format_count> descriptors_;
    std::array<bool, 2 * list_format_count> descriptors_valid_{};
};

} // namespace meith::registry
