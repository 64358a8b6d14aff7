// mcp_subscribers: the MCP gateway's clients as listeners (see mcp_gateway.hpp): who gets
// which notification (a client profile hears only its own sources, §23), resource
// subscriptions held once per URI toward the source, and the log level each subscriber asked.
#include "gateway/mcp_gateway.hpp"

#include "gateway/mcp_gateway_internal.hpp"
#include "protocol/frames.hpp"
#include "protocol/json_writer.hpp"
#include "protocol/server_frames.hpp"
#include "registry/registry.hpp"

#include <algorithm>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace meith::gateway {

using namespace gateway_detail;
using protocol::append_json_string;

// ---- subscribers -----------------------------------------------------------------------------

std::uint64_t mcp_gateway::subscribe(std::function<void(std::string_view)> deliver,
                                     bool broadcast) {
    const auto token = ++next_token_;
    subscriber s;
    s.deliver = std::move(deliver);
    s.broadcast = broadcast;
    subscribers_.emplace(token, std::move(s));
    return token;
}

void mcp_gateway::set_broadcast(std::uint64_t token) {
    if (auto it = subscribers_.find(token); it != subscribers_.end()) it->second.broadcast = true;
}

void mcp_gateway::set_profile(std::uint64_t token,
                              std::shared_ptr<const permissions::client_profile> profile) {
    if (auto it = subscribers_.find(token); it != subscribers_.end())
        it->second.profile = std::move(profile);
}

std::optional<std::string> mcp_gateway::out_of_profile(const permissions::client_profile* profile,
                                                       const tools::tool_source& src) const {
    if (profile == nullptr) return std::nullopt;
    return reg_.source_hidden(*profile, src);
}

void mcp_gateway::unsubscribe(std::uint64_t token) {
    auto it = subscribers_.find(token);
    if (it == subscribers_.end()) return;
    for (const auto& uri : it->second.uris) {
        auto s = subscribed_.find(uri);
        if (s == subscribed_.end() || --s->second.second > 0) continue;
        if (auto src = s->second.first.lock(); src && src->mcp()) {
            std::string params = "{";
            protocol::json_members(params).string("uri", uri);
            params += '}';
            src->mcp()->forward("resources/unsubscribe", std::move(params),
                                [](tools::mcp_answer) {});
        }
        subscribed_.erase(s);
    }
    subscribers_.erase(it);
}

void mcp_gateway::on_notification(tools::tool_source& src, std::string_view method,
                                  std::string_view params_json) {
    std::string frame;
    protocol::append_mcp_notification(frame, src.name(), method, params_json);
    simdjson::dom::element params;
    if (parser_.parse(params_json).get(params) != simdjson::SUCCESS) return;
    if (method == "notifications/resources/updated") {
        std::string_view uri;
        if (params["uri"].get_string().get(uri) != simdjson::SUCCESS) return;
        const std::string key(uri);
        for (auto& [token, s] : subscribers_)
            if (s.uris.count(key) && !out_of_profile(s.profile.get(), src)) s.deliver(frame);
        return;
    }
    int severity = 0;
    if (method == "notifications/message") {
        std::string_view level;
        if (params["level"].get_string().get(level) == simdjson::SUCCESS)
            severity = std::max(0, level_index(level));
    } else if (method == "notifications/resources/list_changed") {
        forget(src); // learned again on the next miss
    } else if (method == "notifications/prompts/list_changed") {
        forget(src);
    } else {
        return;
    }
    // deliver() may unsubscribe (a connection closing): walk a copy of the tokens.
    std::vector<std::uint64_t> tokens;
    // A client profile hears only from the sources whose families it reaches (§23).
    for (const auto& [token, s] : subscribers_)
        if (s.broadcast && severity >= s.level && !out_of_profile(s.profile.get(), src))
            tokens.push_back(token);
    for (auto token : tokens)
        if (auto it = subscribers_.find(token); it != subscribers_.end()) it->second.deliver(frame);
}

void mcp_gateway::forget(const tools::tool_source& src) {
    auto is = [&](const source_ref& r) {
        auto p = r.lock();
        return !p || p.get() == &src;
    };
    std::erase_if(resource_owner_, [&](const auto& kv) { return is(kv.second); });
    std::erase_if(templates_, [&](const auto& kv) { return is(kv.second); });
    std::erase_if(templates_walked_, is);
    std::erase_if(prompts_, [&](const auto& kv) { return is(kv.second.source); });
}

void mcp_gateway::subscription(const requester& r, bool on, std::string uri,
                               std::string params_json,
                               std::function<void(tools::mcp_answer)> done) {
    auto it = subscribers_.find(r.subscriber);
    if (it == subscribers_.end())
        return done(
            tools::mcp_error(internal_error, "this connection cannot receive notifications"));
    const std::string method = on ? "resources/subscribe" : "resources/unsubscribe";
    if (!on) {
        const auto started = std::chrono::steady_clock::now();
        tools::mcp_answer ok{true, "{}"};
        if (!it->second.uris.erase(uri)) return done(std::move(ok));
        auto s = subscribed_.find(uri);
        if (s != subscribed_.end() && --s->second.second == 0) {
            auto src = s->second.first.lock();
            subscribed_.erase(s);
            if (src && src->mcp())
                return forward(r, src, method, std::move(params_json), uri, std::move(done));
        }
        audit(r, method, nullptr, uri, "allow", ok, started);
        return done(std::move(ok));
    }
    route_uri(uri, [this, r, method, uri, params_json = std::move(params_json),
                    done = std::move(done)](auto src) mutable {
        if (!src)
            return done(
                tools::mcp_error(resource_not_found, "no MCP source lists resource " + uri));
        if (!src->mcp()->offers("resources.subscribe"))
            return done(
                tools::mcp_error(method_not_found, "MCP source '" + src->name() +
                                                       "' does not offer resources/subscribe"));
        forward(r, src, method, std::move(params_json), uri,
                [this, r, uri, src, done = std::move(done)](tools::mcp_answer a) {
                    auto sub = subscribers_.find(r.subscriber);
                    if (a.ok && sub != subscribers_.end() && sub->second.uris.insert(uri).second) {
                        auto [s, fresh] = subscribed_.try_emplace(uri, src, 0);
                        ++s->second.second;
                    }
                    done(std::move(a));
                });
    });
}

void mcp_gateway::set_level(const requester& r, std::string_view params_json,
                            std::function<void(tools::mcp_answer)> done) {
    const auto started = std::chrono::steady_clock::now();
    simdjson::dom::element params;
    std::string_view level;
    if (parser_.parse(params_json).get(params) != simdjson::SUCCESS ||
        params["level"].get_string().get(level) != simdjson::SUCCESS || level_index(level) < 0)
        return done(tools::mcp_error(invalid_params,
                                     "logging/setLevel needs a \"level\": debug, info, "
                                     "notice, warning, error, critical, alert or "
                                     "emergency"));
    if (auto it = subscribers_.find(r.subscriber); it != subscribers_.end())
        it->second.level = level_index(level);
    // Sources send what the most verbose subscriber wants; each subscriber filters for itself.
    int least = level_index(level);
    for (const auto& [token, s] : subscribers_)
        if (s.broadcast) least = std::min(least, s.level);
    std::string forwarded = "{";
    protocol::json_members(forwarded).string("level", log_levels[least]);
    forwarded += '}';
    for (const auto& src : offering("logging"))
        src->mcp()->forward("logging/setLevel", forwarded, [](tools::mcp_answer) {});
    tools::mcp_answer ok{true, "{}"};
    audit(r, "logging/setLevel", nullptr, level, "allow", ok, started);
    done(std::move(ok));
}

} // namespace meith::gateway
