// host_methods: the tool-host protocol's optional methods of one tool host (docs/protocol.md
// §13) — format_tool_call_preview, format_tool_result, to_display_format, get_config_schema,
// get_ui_elements, get_tags, required_tags. Which of them the running process has is probed
// once per start (MethodNotFound = absent, anything else = present); an absent method is
// answered at once, with no round trip. Each use waits at most optional_method_timeout.
// I/O-thread only; owned by the host source, whose liveness `alive` tracks.
#pragma once

#include "process/rpc_peer.hpp"

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <asio/any_io_executor.hpp>

namespace meith::sources {

class host_methods {
  public:
    /// `state_json` is the host's state (kept by the source): sent with the methods that take
    /// it; what they hand back is ignored (a snapshot cannot roll the state back).
    host_methods(asio::any_io_executor ex, process::rpc_peer& peer, std::string& state_json);
    /// What expires with the owning source: the timeouts check it before touching anything.
    /// Must be set before the first call.
    void set_alive(std::weak_ptr<void> alive) { alive_ = std::move(alive); }

    /// A new process: what the last one had is forgotten.
    void reset();
    /// Learns which methods this start has, and the host's tags (get_tags with no models) and
    /// required_tags. `tags_learned` runs when that finished with any tags.
    void probe(const std::string& config_json, std::function<void()> tags_learned);
    /// Asks `method` with `params_members` (the host's state added); `done` once, with the
    /// value (JSON) or nullopt (absent, ok:false, failure, timeout).
    void call(std::string_view method, std::string params_members,
              std::function<void(std::optional<std::string>)> done);

    /// `,"methods":[…present…]`, or `null` until probed.
    void append_status(std::string& out) const;
    const std::vector<std::string>& tags() const { return tags_; }
    const std::vector<std::string>& required_tags() const { return required_tags_; }

  private:
    enum class presence : std::uint8_t { unknown, present, absent };
    static constexpr std::size_t count = 7;
    void ask(std::size_t i, std::string_view params,
             std::function<void(std::optional<std::string>)> done);

    asio::any_io_executor ex_;
    process::rpc_peer& peer_;
    std::string& state_json_;
    std::weak_ptr<void> alive_;
    std::array<presence, count> methods_{};
    std::uint64_t generation_ = 0; ///< counts starts; stale answers do not update methods_
    std::size_t probes_pending_ = 0;
    bool probed_ = false;
    std::vector<std::string> tags_;          ///< get_tags({config, models: []}) at start
    std::vector<std::string> required_tags_; ///< required_tags() at start
};

/// The strings of a JSON array (other items skipped); empty for anything else.
std::vector<std::string> string_array(std::string_view json);

} // namespace meith::sources
