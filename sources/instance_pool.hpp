// instance_pool: a source run as one instance per session or per client (`instances =
// "per-session" | "per-client"`, docs/configuration.md "Instances").
//
// The pool is the source the registry knows: its tools are registered once, under its name,
// from the pins or the first instance's listing. Each call goes to the instance of its key —
// its session (`per-session`: each `meith mcp` is one agent), or its client (`per-client`: the
// client profile, else the MCP client's agent name, else its caller) — made from the source's
// config by the kind's factory at the key's first call, bounded by `max_instances`. An instance
// is its own supervised child (a tool host or MCP server as any other, with its own sandbox
// and restarts); all its calls are one key's, so the requests its server sends (roots,
// sampling, elicitation) go to exactly that client. When the last session of a key ends, its
// instance stops after `instance_grace_ms` unless the key comes back first. I/O-thread only.
#pragma once

#include "config/config.hpp"
#include "tools/tool_source.hpp"

#include <asio/any_io_executor.hpp>
#include <asio/steady_timer.hpp>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace meith::sources {

class instance_pool final : public tools::tool_source {
  public:
    /// Makes one instance's source from `cfg` (the kind's factory, not started).
    using instance_factory = std::function<std::shared_ptr<tools::tool_source>()>;

    /// `cfg.instances` is per_session or per_client; `make` builds an instance. The pool makes
    /// one instance at construction that never starts, for the hints a refusal quotes.
    instance_pool(asio::any_io_executor ex, const config::source_config& cfg,
                  std::chrono::milliseconds kill_grace, instance_factory make);
    ~instance_pool() override;

    const std::string& name() const override { return cfg_.name; }
    const std::string& prefix() const override { return cfg_.prefix; }
    std::string_view kind() const override { return template_->kind(); }
    /// starting until its tools are listed; then ready while an instance runs, else idle.
    tools::source_state state() const override;
    /// Lists the tools from the pins, or starts an instance with no key that lists them and
    /// is stopped once it has.
    void start(tools::source_events events) override;
    /// To the instance of `c`'s key, made and started when it has none (refused past
    /// max_instances, saying so).
    void execute(const tools::call_ptr& c, const tools::tool& t) override;
    void stop(std::chrono::milliseconds kill_grace, std::function<void()> done) override;
    /// Restarts every instance.
    void restart() override;
    void fail(std::string why) override;
    /// A session ended: an instance left without sessions stops after instance_grace_ms.
    void session_ended(std::string_view session) override;
    /// The common members, `instances` ([{"key","session"|"client","agent","state","pid",
    /// "restarts","lastError"}]), `instancesMode` and `maxInstances`.
    std::string status_json() const override;
    std::string capabilities_hint(std::string_view remote_name) const override {
        return template_->capabilities_hint(remote_name);
    }
    std::string sandbox_hint(std::string_view error_text) const override {
        return template_->sandbox_hint(error_text);
    }

  private:
    struct instance {
        std::string key;
        std::string agent; ///< the agent of the call that made it ("" when none)
        std::shared_ptr<tools::tool_source> source;
        std::set<std::string, std::less<>> sessions; ///< live sessions that used it
        std::unique_ptr<asio::steady_timer> grace;   ///< armed when `sessions` emptied
    };

    /// The key `c` runs under: its session, or its client.
    std::string key_of(const tools::call& c) const;
    /// Makes and starts the instance of `key`.
    instance& make_instance(const std::string& key, const tools::call& c);
    /// Events an instance reports through: its listing and lifecycle become the pool's.
    tools::source_events instance_events(const std::string& key);
    /// Stops the instance of `key` and forgets it once its process is gone.
    void retire(const std::string& key);
    /// Stops the instance that listed the tools.
    void retire_lister();
    /// Stops `src`, kept in retiring_ until its process is gone.
    void stop_retired(std::shared_ptr<tools::tool_source> src);

    asio::any_io_executor ex_;
    const config::source_config cfg_;
    const std::chrono::milliseconds kill_grace_; ///< `[tools] kill_grace_ms`, for retired ones
    instance_factory make_;
    std::shared_ptr<tools::tool_source> template_; ///< never started
    tools::source_events events_;
    std::map<std::string, instance, std::less<>> instances_;
    /// Stopped instances whose processes are still ending.
    std::vector<std::shared_ptr<tools::tool_source>> retiring_;
    std::shared_ptr<tools::tool_source> lister_; ///< lists the tools when none are pinned
    std::string listed_;                         ///< the listing registered, to skip repeats
    bool listed_once_ = false;
    bool settled_ = false;
    bool stopped_ = false;
    std::optional<std::string> failed_;
    std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

} // namespace meith::sources
