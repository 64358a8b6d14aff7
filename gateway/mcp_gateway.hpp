// mcp_gateway: MCP's families beyond tools, across every MCP source (docs/protocol.md §17).
//
// A client's `mcp_request` names an MCP method; the gateway answers it from the sources that
// offer the family:
//   resources/list, resources/templates/list, prompts/list
//       every ready MCP source that declared the capability, each walked page by page, merged
//       in config order (one answer, no nextCursor). Resources and templates are unchanged
//       (URIs are never rewritten); prompt names get their source's `prefix`, as tools do.
//   resources/read, resources/subscribe, resources/unsubscribe
//       the source first in the config among those that list the URI or have a template that
//       matches it (a later source cannot take an earlier one's templated URI by listing it),
//       else the only source offering resources; a miss lists every source again once before
//       it is an error.
//   prompts/get        the source of the (prefixed) prompt name, asked by its own name
//   completion/complete
//       routed by its `ref`: ref/prompt as prompts/get, ref/resource by template or URI
//   logging/setLevel   kept per subscriber (its log messages are filtered by it) and passed to
//                      every source that declared logging
// Reading a resource, getting a prompt and asking for a completion are permission decisions
// like calls: the source's `resource_capabilities` (default read-only) decided for the caller
// by the same policy; `ask` is refused (a person approves tool calls only). Every request is
// one `mcp_request` audit line (method, source, redacted URI or prompt name, decision,
// outcome, duration).
// Notifications from sources (resources/updated, the list_changed pair, message) go to the
// subscribers that asked (hello `mcp_notifications`; resources/updated only to those that
// subscribed to the URI). I/O-thread only.
#pragma once

#include "permissions/client_profile.hpp"
#include "permissions/policy.hpp"
#include "registry/registry.hpp"
#include "tools/tool_source.hpp"

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <simdjson.h>

namespace meith::gateway {

/// One per daemon, beside the registry it routes over (it sets itself as the registry's
/// source observer, and unsets itself when destroyed).
class mcp_gateway final : public registry::source_observer {
  public:
    explicit mcp_gateway(registry::registry& reg) : reg_(reg) { reg_.set_source_observer(this); }
    ~mcp_gateway() { reg_.set_source_observer(nullptr); }
    mcp_gateway(const mcp_gateway&) = delete;
    mcp_gateway& operator=(const mcp_gateway&) = delete;

    /// Who asks: for the decision, the audit line and the subscriber's state.
    struct requester {
        permissions::caller who = permissions::caller::plugin;
        std::string session_id;
        std::uint64_t subscriber = 0; ///< 0: none (subscribe and setLevel need one)
        /// Its client profile (§23), or null: the sources whose families it reaches.
        std::shared_ptr<const permissions::client_profile> profile;
    };

    /// Answers MCP request `method` with `params_json` (an object). `done` runs exactly once,
    /// maybe before returning, with the result or a JSON-RPC error object.
    void request(requester r, std::string method, std::string params_json,
                 std::function<void(tools::mcp_answer)> done);

    /// A receiver of notification frames (mcp_notification, already rendered). `broadcast`:
    /// it gets list_changed and log messages too (hello `mcp_notifications`), not only the
    /// resources it subscribed to. Returns a token.
    std::uint64_t subscribe(std::function<void(std::string_view frame)> deliver, bool broadcast);
    /// Makes a subscriber a broadcast one (a later hello asked for notifications).
    void set_broadcast(std::uint64_t token);
    /// The client profile whose sources a subscriber hears from (null: every source); set at
    /// its hello and again with each of its requests (a reload's new profile table).
    void set_profile(std::uint64_t token,
                     std::shared_ptr<const permissions::client_profile> profile);
    /// Drops the subscriber and its resource subscriptions (the last one of a URI
    /// unsubscribes its source).
    void unsubscribe(std::uint64_t token);

    /// A source's notification (source_events::mcp_notification).
    void on_notification(tools::tool_source& src, std::string_view method,
                         std::string_view params_json) override;

    /// A source was removed: routes to it are forgotten.
    void on_removed(const tools::tool_source& src) override { forget(src); }
    /// A source stopped or was removed: routes to it are forgotten.
    void forget(const tools::tool_source& src);

  private:
    struct subscriber {
        std::function<void(std::string_view)> deliver;
        bool broadcast = false;
        int level = 0; ///< lowest log severity delivered (index into the RFC 5424 names)
        std::set<std::string> uris;
        std::shared_ptr<const permissions::client_profile> profile;
    };
    using source_ref = std::weak_ptr<tools::tool_source>;
    struct prompt_route {
        source_ref source;
        std::string remote_name;
    };
    struct list_job;

    std::vector<std::shared_ptr<tools::tool_source>> offering(std::string_view capability) const;
    /// Walks `method` (resources/list, resources/templates/list or prompts/list) over every
    /// source offering `capability`; `done` gets the merged items array's JSON text.
    void list_all(std::string_view method, std::string_view capability,
                  const permissions::client_profile* profile,
                  std::function<void(std::string items)> done);
    /// Why `src`'s families are out of `profile` (null: in), or nullopt.
    std::optional<std::string> out_of_profile(const permissions::client_profile* profile,
                                              const tools::tool_source& src) const;
    /// Asks `src` for page `page` of `job`'s list at `cursor`; its answer asks for the next
    /// page (at most max_pages) and, the last source done, answers the job.
    void list_pages(const std::shared_ptr<list_job>& job, std::size_t i,
                    const std::shared_ptr<tools::tool_source>& src, std::string cursor,
                    std::size_t page);
    /// The sources' items as one JSON array, in config order; a prompt name listed by an
    /// earlier source hides a later one's.
    std::string merge_listing(const list_job& job);
    void learn(const std::shared_ptr<tools::tool_source>& src, std::string_view method,
               simdjson::dom::array items, std::string& merged);
    /// The source first in the config that serves `uri` as learned: by listing it, or by a
    /// template that matches it (or is it); null when none.
    std::shared_ptr<tools::tool_source> owner_of_uri(std::string_view uri) const;
    /// Whether a source offering resources that comes before `src` in the config has not had
    /// its templates listed since it started or changed them (it may serve a URI `src` lists).
    bool templates_unknown_before(const tools::tool_source& src) const;
    /// The source's position in the config (the registry's order); past the end when gone.
    std::size_t order_of(const tools::tool_source* src) const;
    /// Whether `src` comes before the source `than` refers to (or that one is gone).
    bool precedes(const tools::tool_source* src, const source_ref& than) const;
    /// Routes by URI (listing again once on a miss), then runs `then` with the source or null.
    void route_uri(std::string uri, std::function<void(std::shared_ptr<tools::tool_source>)> then);
    void route_prompt(std::string name,
                      std::function<void(std::shared_ptr<tools::tool_source>, std::string)> then);

    // The routed families of `request`: `params` is `params_json` parsed (an object).
    /// resources/read, resources/subscribe and resources/unsubscribe: routed by `uri`.
    void request_resource(const requester& r, const std::string& method, std::string params_json,
                          simdjson::dom::element params,
                          std::function<void(tools::mcp_answer)> done);
    /// prompts/get: routed by the (prefixed) prompt name, asked by the source's own name.
    void request_prompt(const requester& r, const std::string& method, std::string params_json,
                        simdjson::dom::element params, std::function<void(tools::mcp_answer)> done);
    /// completion/complete: routed by its `ref`, as prompts/get or by URI template.
    void request_completion(const requester& r, const std::string& method, std::string params_json,
                            simdjson::dom::element params,
                            std::function<void(tools::mcp_answer)> done);
    /// Decides, forwards and audits one routed request.
    void forward(const requester& r, const std::shared_ptr<tools::tool_source>& src,
                 std::string_view method, std::string params_json, std::string target,
                 std::function<void(tools::mcp_answer)> done);
    void audit(const requester& r, std::string_view method, const tools::tool_source* src,
               std::string_view target, std::string_view decision, const tools::mcp_answer& a,
               std::chrono::steady_clock::time_point started);
    void set_level(const requester& r, std::string_view params_json,
                   std::function<void(tools::mcp_answer)> done);
    void subscription(const requester& r, bool on, std::string uri, std::string params_json,
                      std::function<void(tools::mcp_answer)> done);

    registry::registry& reg_;
    std::map<std::uint64_t, subscriber> subscribers_;
    std::uint64_t next_token_ = 0;
    std::map<std::string, source_ref, std::less<>> resource_owner_; ///< URI → source, as listed
    std::vector<std::pair<std::string, source_ref>> templates_;     ///< uriTemplate → source
    std::vector<source_ref> templates_walked_; ///< sources whose templates were listed
    std::map<std::string, prompt_route, std::less<>> prompts_; ///< prefixed name → route
    /// URIs some subscriber subscribed to, with their source and count of subscribers.
    std::map<std::string, std::pair<source_ref, std::size_t>, std::less<>> subscribed_;
    simdjson::dom::parser parser_;
};

/// Whether `uri` matches RFC 6570 template `tmpl` with simple expansions: the literal parts in
/// order, each `{…}` standing for one or more characters (a `{/x}`, `{?x}`, `{&x}` or `{#x}`
/// expression may also be empty).
bool uri_template_matches(std::string_view tmpl, std::string_view uri);

} // namespace meith::gateway
