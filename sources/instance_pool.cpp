#include "sources/instance_pool.hpp"

#include "protocol/json_writer.hpp"

#include <asio/post.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>

namespace meith::sources {

using protocol::error_code;
using protocol::tool_result;

namespace {

/// One text per listing, to tell a repeat from a change.
std::string listing_text(const std::vector<tools::tool_definition>& defs) {
    std::string out;
    for (const auto& d : defs) {
        protocol::json_members m(out);
        m.string("n", d.name).string("d", d.description).string("s", d.input_schema_json);
        m.string("e", d.extra_descriptor_json).string("p", d.payload_kind);
        protocol::append_json_string_array(m.key("c"), d.capabilities);
        out += '\n';
    }
    return out;
}

} // namespace

instance_pool::instance_pool(asio::any_io_executor ex, const config::source_config& cfg,
                             std::chrono::milliseconds kill_grace, instance_factory make)
    : ex_(std::move(ex)), cfg_(cfg), kill_grace_(kill_grace), make_(std::move(make)),
      template_(make_()) {
}

instance_pool::~instance_pool() {
    *alive_ = false;
}

tools::source_state instance_pool::state() const {
    if (failed_) return tools::source_state::failed;
    if (stopped_) return tools::source_state::stopped;
    if (!listed_once_) return lister_ ? lister_->state() : tools::source_state::starting;
    for (const auto& [key, inst] : instances_)
        if (inst.source->state() == tools::source_state::ready) return tools::source_state::ready;
    for (const auto& [key, inst] : instances_)
        if (inst.source->state() != tools::source_state::stopped) return inst.source->state();
    return tools::source_state::idle;
}

tools::source_events instance_pool::instance_events(const std::string& key) {
    tools::source_events e;
    std::weak_ptr<bool> alive = alive_;
    e.registered = [this, alive,
                    key](tools::tool_source&,
                         std::vector<tools::tool_definition> defs) -> std::optional<std::string> {
        if (alive.expired() || stopped_) return std::nullopt;
        if (key.empty())
            // The lister has done its job once its listing is in: stopped after this turn.
            asio::post(ex_, [this, alive] {
                if (!alive.expired() && listed_once_ && lister_) retire_lister();
            });
        // Every instance lists what the first did (they run one program): a repeat is not
        // registered again, so clients hear of a change only.
        std::string text = listing_text(defs);
        if (listed_once_ && text == listed_) return std::nullopt;
        auto err = events_.registered ? events_.registered(*this, std::move(defs)) : std::nullopt;
        if (!err) {
            listed_ = std::move(text);
            listed_once_ = true;
        }
        return err;
    };
    e.settled = [this, alive, key](tools::tool_source&) {
        if (alive.expired() || !key.empty()) return;
        // The lister's first start ended (listed or failed): the pool is settled.
        if (!settled_) {
            settled_ = true;
            if (events_.settled) events_.settled(*this);
        }
    };
    e.lifecycle = [this, alive, key](tools::tool_source&, std::string_view event,
                                     std::string_view details) {
        if (alive.expired() || !events_.lifecycle) return;
        std::string fields;
        protocol::json_members(fields).string("instance", key.empty() ? "(lister)" : key);
        if (!details.empty()) (fields += ',') += details;
        events_.lifecycle(*this, event, fields);
    };
    e.descriptors_changed = [this, alive](tools::tool_source&) {
        if (!alive.expired() && events_.descriptors_changed) events_.descriptors_changed(*this);
    };
    e.mcp_notification = [this, alive](tools::tool_source&, std::string_view method,
                                       std::string_view params) {
        if (!alive.expired() && events_.mcp_notification)
            events_.mcp_notification(*this, method, params);
    };
    e.egress_ask = [this, alive](tools::tool_source&, const egress::connection_record& r,
                                 tools::call_ptr owner, egress::ask_reply reply) {
        if (!alive.expired() && events_.egress_ask)
            events_.egress_ask(*this, r, std::move(owner), std::move(reply));
    };
    // An instance waits for its own listing; calls that waited go to the tools as listed then.
    e.current = [this, alive](const tools::tool& t) -> std::shared_ptr<const tools::tool> {
        if (alive.expired() || !events_.current) return nullptr;
        return events_.current(t);
    };
    return e;
}

void instance_pool::start(tools::source_events events) {
    events_ = std::move(events);
    auto defs = events_.pinned ? events_.pinned(*this) : std::vector<tools::tool_definition>{};
    if (!defs.empty()) {
        for (auto& d : defs)
            if (auto it = cfg_.timeout_ms.find(d.name); it != cfg_.timeout_ms.end())
                d.timeout_ms = it->second;
        std::string text = listing_text(defs);
        if (auto err =
                events_.registered ? events_.registered(*this, std::move(defs)) : std::nullopt) {
            failed_ = std::move(*err);
        } else {
            listed_ = std::move(text);
            listed_once_ = true;
        }
        spdlog::info(
            "source '{}' runs an instance {}; {} tool(s) listed from their pins", cfg_.name,
            cfg_.instances == config::instance_mode::per_session ? "per session" : "per client",
            listed_once_ ? std::count(listed_.begin(), listed_.end(), '\n') : 0);
        settled_ = true;
        if (events_.settled) events_.settled(*this);
        return;
    }
    // Nothing pinned: one instance, no client's, lists the tools and stops.
    spdlog::info("source '{}' runs an instance {}; none of its tools is pinned yet, so one "
                 "starts now to list them",
                 cfg_.name,
                 cfg_.instances == config::instance_mode::per_session ? "per session"
                                                                      : "per client");
    lister_ = make_();
    lister_->start(instance_events(""));
}

std::string instance_pool::key_of(const tools::call& c) const {
    if (cfg_.instances == config::instance_mode::per_session) return "session:" + c.session_id;
    if (c.profile) return "client:" + c.profile->name();
    if (!c.agent.empty()) return "agent:" + c.agent;
    return std::string("caller:") + std::string(permissions::to_string(c.caller));
}

instance_pool::instance& instance_pool::make_instance(const std::string& key,
                                                      const tools::call& c) {
    instance inst;
    inst.key = key;
    inst.agent = c.agent;
    inst.source = make_();
    auto [it, fresh] = instances_.emplace(key, std::move(inst));
    spdlog::info("source '{}': instance {} starts ({} of at most {})", cfg_.name, key,
                 instances_.size(), cfg_.max_instances);
    it->second.source->start(instance_events(key));
    return it->second;
}

void instance_pool::execute(const tools::call_ptr& c, const tools::tool& t) {
    if (failed_) {
        c->resolve(
            tool_result::failure(error_code::tool_failed,
                                 fmt::format("source '{}' is failed: {}", cfg_.name, *failed_)));
        return;
    }
    if (stopped_) {
        c->resolve(tool_result::failure(
            error_code::tool_failed,
            fmt::format("source '{}' was stopped (the daemon is shutting down, or a reload "
                        "removed it)",
                        cfg_.name)));
        return;
    }
    const std::string key = key_of(*c);
    auto it = instances_.find(key);
    if (it == instances_.end()) {
        if (instances_.size() >= cfg_.max_instances) {
            c->resolve(tool_result::failure(
                error_code::tool_failed,
                fmt::format("source '{}' runs {} instances already, its max_instances; one is "
                            "freed {} ms after its last session ends (or raise max_instances "
                            "in its [[sources]] entry)",
                            cfg_.name, instances_.size(), cfg_.instance_grace_ms)));
            return;
        }
        it = instances_.find(make_instance(key, *c).key);
    }
    instance& inst = it->second;
    if (inst.sessions.insert(c->session_id).second && inst.grace) {
        inst.grace->cancel(); // its client came back within the grace
        inst.grace.reset();
    }
    c->instance = inst.key;
    inst.source->execute(c, t);
}

void instance_pool::session_ended(std::string_view session) {
    if (stopped_) return; // stopping them all already (a second stop would lose the first's end)
    for (auto& [key, inst] : instances_) {
        const auto found = inst.sessions.find(session);
        if (found == inst.sessions.end()) continue;
        inst.sessions.erase(found);
        if (!inst.sessions.empty()) continue;
        inst.grace = std::make_unique<asio::steady_timer>(ex_);
        inst.grace->expires_after(std::chrono::milliseconds(cfg_.instance_grace_ms));
        inst.grace->async_wait(
            [this, alive = std::weak_ptr<bool>(alive_), key = key](const std::error_code& ec) {
                if (ec || alive.expired() || stopped_) return;
                auto found = instances_.find(key);
                if (found == instances_.end() || !found->second.sessions.empty()) return;
                spdlog::info("source '{}': instance {} stops, its last session ended {} ms ago",
                             cfg_.name, key, cfg_.instance_grace_ms);
                retire(key);
            });
    }
}

void instance_pool::retire_lister() {
    auto src = std::move(lister_);
    lister_.reset();
    spdlog::info("source '{}': its tools are listed; the instance that listed them stops",
                 cfg_.name);
    stop_retired(std::move(src));
}

void instance_pool::retire(const std::string& key) {
    auto it = instances_.find(key);
    if (it == instances_.end()) return;
    auto src = std::move(it->second.source);
    instances_.erase(it);
    stop_retired(std::move(src));
}

void instance_pool::stop_retired(std::shared_ptr<tools::tool_source> src) {
    retiring_.push_back(src);
    src->stop(kill_grace_, [this, alive = std::weak_ptr<bool>(alive_), raw = src.get()] {
        asio::post(ex_, [this, alive, raw] {
            if (alive.expired()) return;
            std::erase_if(retiring_, [raw](const auto& s) { return s.get() == raw; });
        });
    });
}

void instance_pool::stop(std::chrono::milliseconds kill_grace, std::function<void()> done) {
    stopped_ = true;
    std::vector<std::shared_ptr<tools::tool_source>> all = retiring_;
    if (lister_) all.push_back(lister_);
    for (auto& [key, inst] : instances_) {
        if (inst.grace) inst.grace->cancel();
        all.push_back(inst.source);
    }
    if (all.empty()) {
        done();
        return;
    }
    auto remaining = std::make_shared<std::size_t>(all.size());
    auto finish = std::make_shared<std::function<void()>>(std::move(done));
    // Kept alive by `all` until every stop completed.
    auto keep = std::make_shared<std::vector<std::shared_ptr<tools::tool_source>>>(all);
    for (auto& s : all)
        s->stop(kill_grace, [remaining, finish, keep] {
            if (--*remaining == 0) (*finish)();
        });
}

void instance_pool::restart() {
    failed_.reset();
    for (auto& [key, inst] : instances_)
        inst.source->restart();
}

void instance_pool::fail(std::string why) {
    failed_ = why;
    for (auto& [key, inst] : instances_)
        inst.source->fail(why);
}

std::string instance_pool::status_json() const {
    std::string out = "{";
    protocol::json_members m(out);
    m.string("name", cfg_.name).string("kind", kind()).string("state", to_string(state()));
    m.null("pid").number("restarts", 0); // each instance's are in its own status
    if (failed_)
        m.string("lastError", *failed_);
    else
        m.null("lastError");
    m.number("tools", listed_once_ ? static_cast<std::uint64_t>(
                                         std::count(listed_.begin(), listed_.end(), '\n'))
                                   : 0);
    // The sandbox every instance runs in (the template's: each is made from the same entry).
    const auto own = nlohmann::json::parse(template_->status_json(), nullptr, false);
    if (own.is_object() && own.contains("sandbox")) m.key("sandbox") += own["sandbox"].dump();
    m.string("instancesMode",
             cfg_.instances == config::instance_mode::per_session ? "per-session" : "per-client")
        .number("maxInstances", cfg_.max_instances)
        .number("instanceGraceMs", cfg_.instance_grace_ms);
    std::string& list = m.key("instances");
    list += '[';
    bool first = true;
    for (const auto& [key, inst] : instances_) {
        if (!first) list += ',';
        first = false;
        // The instance's own status, with its key and agent in front.
        std::string own = inst.source->status_json();
        list += '{';
        protocol::json_members im(list);
        im.string("key", key)
            .string("agent", inst.agent)
            .number("sessions", static_cast<std::uint64_t>(inst.sessions.size()));
        if (own.size() > 2) (list += ',') += std::string_view(own).substr(1, own.size() - 2);
        list += '}';
    }
    list += ']';
    out += '}';
    return out;
}

} // namespace meith::sources
