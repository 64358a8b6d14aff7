// tool_table: the registry's tools by name (docs/protocol.md §3, §7).
//
// Owns registration (the source's prefix, inputSchema compilation, name clashes between
// sources and within one source), lookup, removing a source's tools, and the rendered
// ToolDescriptors per caller: a cache rebuilt after any change to the tools, to a source's
// state or to the policy, so list_tools with 10,000 tools is one copy. I/O-thread only.
#pragma once

#include "permissions/client_profile.hpp"
#include "permissions/policy.hpp"
#include "tools/tool_formats.hpp"
#include "tools/tool_search.hpp"
#include "tools/tool_source.hpp"

#include <array>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace meith::tools {

/// The most tools one source may list (docs/protocol.md §7): a longer listing is refused whole
/// with an error saying so, and the source fails. Bounds the memory and the I/O thread's time a
/// source's listing can take (each tool's schema is compiled as it registers).
inline constexpr std::size_t max_tools_per_source = 10000;

class tool_table {
  public:
    /// Outcome of register_source().
    struct registration {
        std::optional<std::string> error; ///< the set was refused; the table is unchanged
        bool clash = false;               ///< refused because another source offers a name
        /// Sources that held a name of the set but come after `src` in the config: their
        /// tools were removed to make way (the caller fails them with `displaced_why`).
        std::vector<std::shared_ptr<tool_source>> displaced;
        std::vector<std::string> displaced_why; ///< one per displaced source
    };

    /// `precedes(a, b)`: source a comes before source b in the config.
    using source_order = std::function<bool(const tool_source& a, const tool_source& b)>;

    /// Replaces the tools of `src` by `defs`, each named with the source's own prefix. A tool
    /// whose inputSchema does not compile is skipped (and logged). The whole set is refused
    /// when it has more than max_tools_per_source tools, a name appears twice in it, or a name
    /// belongs to another source that `precedes` src (without `precedes`: any other source).
    /// A name held by a source that src precedes is taken from it: that source's tools are all
    /// removed and it is returned in `displaced`. O(n) in the set's size (hash lookups).
    registration register_source(tool_source& src, std::vector<tool_definition> defs,
                                 const source_order& precedes = {});
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
        /// A client profile (docs/protocol.md §23): only its tools, under its names and
        /// descriptions. Null: every tool as it is.
        const permissions::client_profile* profile = nullptr;
        /// Only the tools the caller may call or ask for (not quarantined).
        bool permitted_only = false;
        /// A page: of the tools that pass the filters above, those from `offset`, at most
        /// `limit`; `*matched` (when set) gets how many passed in all.
        std::size_t offset = 0;
        std::size_t limit = static_cast<std::size_t>(-1);
        std::size_t* matched = nullptr;
    };
    /// As append_descriptors, filtered: rendered afresh, never cached.
    void append_filtered(std::string& out, permissions::caller who,
                         const permissions::policy& policy, list_format format,
                         const list_filter& filter) const {
        render(out, who, policy, format, &filter);
    }
    /// list_tools with `query` (docs/protocol.md §20): the tools `who` may call or ask for,
    /// ranked by tool_search (BM25) for `query`, at most `limit`, comma-separated as
    /// append_descriptors renders each. Returns how many. The index is built at the first
    /// search after the tools changed.
    /// With `profile`, only its tools, shown as it overrides them (ranked on their own text).
    std::size_t append_search(std::string& out, std::string_view query, std::size_t limit,
                              permissions::caller who, const permissions::policy& policy,
                              list_format format = list_format::meith,
                              const permissions::client_profile* profile = nullptr);
    /// Marks tool `name` quarantined or not (a copy replaces it: tools are immutable once
    /// listed). False when there is no such tool.
    bool set_quarantined(std::string_view name, bool quarantined);
    /// Calls `fn` with each tool, in name order.
    template <typename F>
    void for_each(F&& fn) const {
        for (const auto& [name, t] : tools_)
            fn(*t);
    }
    /// The tools of `src`, by name.
    std::vector<std::shared_ptr<const tool>> tools_of(const tool_source& src) const;
    /// Every source that has tools now, once each.
    std::vector<std::shared_ptr<tool_source>> sources_with_tools() const;

    /// Drops the rendered descriptors (a source's state or the policy changed) and tells
    /// `on_change`: what a caller sees of the tools may have changed.
    void invalidate() {
        descriptors_valid_ = {};
        if (on_change) on_change();
    }
    /// The client profiles changed (a reload): their search views are built afresh.
    void profiles_changed() {
        profile_indexes_.clear();
        invalidate();
    }
    /// Runs on every change to the tools or their descriptors (the registry's tools_changed).
    std::function<void()> on_change;

  private:
    /// One meith ToolDescriptor of `t` with `tags`, its permission for `who`; named and
    /// described as `profile` overrides it (with `originalName`), when given.
    static void append_descriptor(std::string& out, const tool& t,
                                  const std::vector<std::string>& tags, permissions::caller who,
                                  const permissions::policy& policy,
                                  const permissions::client_profile* profile = nullptr);
    /// `t` in a provider's `format`, named and described as `profile` overrides it.
    static void append_provider(std::string& out, const tool& t, list_format format,
                                const permissions::client_profile* profile);
    void render(std::string& out, permissions::caller who, const permissions::policy& policy,
                list_format format, const list_filter* filter = nullptr) const;

    std::map<std::string, std::shared_ptr<const tool>, std::less<>> tools_;
    /// Rendered lists per caller and format (index = caller * list_format_count + format).
    std::array<std::string, 2 * list_format_count> descriptors_;
    std::array<bool, 2 * list_format_count> descriptors_valid_{};
    tool_index index_; ///< for append_search; cleared when the tools change

    /// What a profile with overrides searches (docs/protocol.md §23): its tools named and
    /// described as it shows them, so a client finds a tool by the words it reads.
    struct profile_index {
        std::vector<std::unique_ptr<tool>> shown;          ///< copies of the overridden tools
        std::unordered_map<const tool*, const tool*> real; ///< copy -> registered tool
        tool_index index;
    };
    /// The tools themselves changed: the search indexes go, then invalidate().
    void tools_changed() {
        index_.clear();
        profile_indexes_.clear();
        invalidate();
    }
    /// Built on a profile's first search after the tools or the profiles change.
    std::map<std::string, profile_index, std::less<>> profile_indexes_;
    const profile_index& index_for(const permissions::client_profile& profile);
};

} // namespace meith::tools
