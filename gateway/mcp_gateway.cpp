// mcp_gateway: MCP's families beyond tools across every MCP source (see mcp_gateway.hpp).
#include "gateway/mcp_gateway.hpp"

#include "gateway/mcp_gateway_internal.hpp"
#include "protocol/frames.hpp"
#include "protocol/json_writer.hpp"
#include "protocol/server_frames.hpp"
#include "registry/registry.hpp"

#include <algorithm>
#include <array>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace meith::gateway {

using namespace gateway_detail;
using protocol::append_json_string;

namespace {

/// The member of a list result that holds its items.
std::string_view items_key(std::string_view method) {
    if (method == "resources/list") return "resources";
    if (method == "resources/templates/list") return "resourceTemplates";
    return "prompts";
}

/// `obj` re-rendered with member `key`'s value replaced by the JSON text `value`.
std::string with_member(simdjson::dom::object obj, std::string_view key, std::string_view value) {
    std::string out = "{";
    bool seen = false;
    for (auto [k, v] : obj) {
        if (out.size() > 1) out += ',';
        append_json_string(out, k);
        out += ':';
        if (k == key) {
            out += value;
            seen = true;
        } else {
            out += simdjson::minify(v);
        }
    }
    if (!seen) {
        if (out.size() > 1) out += ',';
        append_json_string(out, key);
        out += ':';
        out += value;
    }
    return out + "}";
}

} // namespace

bool uri_template_matches(std::string_view tmpl, std::string_view uri) {
    // Literal parts must appear in order; each expression between them takes what is left
    // between them (at least one character unless its operator allows an empty expansion).
    std::size_t t = 0, u = 0;
    bool pending_expr = false, may_be_empty = false;
    while (t <= tmpl.size()) {
        const auto open = tmpl.find('{', t);
        const auto lit =
            tmpl.substr(t, open == std::string_view::npos ? std::string_view::npos : open - t);
        if (!pending_expr) {
            if (uri.substr(u, lit.size()) != lit) return false;
            u += lit.size();
        } else if (open == std::string_view::npos) {
            // The last literal: it ends the URI.
            if (uri.size() < u + lit.size() || uri.substr(uri.size() - lit.size()) != lit)
                return false;
            const auto taken = uri.size() - lit.size() - u;
            return taken > 0 || may_be_empty;
        } else if (!lit.empty()) {
            const auto at = uri.find(lit, u + (may_be_empty ? 0 : 1));
            if (at == std::string_view::npos) return false;
            u = at + lit.size();
        }
        if (open == std::string_view::npos) return u == uri.size();
        const auto close = tmpl.find('}', open);
        if (close == std::string_view::npos) return false;
        const char op = open + 1 < tmpl.size() ? tmpl[open + 1] : '\0';
        may_be_empty = op == '/' || op == '?' || op == '&' || op == '#';
        pending_expr = true;
        t = close + 1;
        if (t == tmpl.size()) return uri.size() > u || may_be_empty;
    }
    return u == uri.size();
}

// ---- listing ---------------------------------------------------------------------------------

std::vector<std::shared_ptr<tools::tool_source>>
mcp_gateway::offering(std::string_view capability) const {
    std::vector<std::shared_ptr<tools::tool_source>> out;
    for (const auto& src : reg_.sources())
        if (src->mcp() && src->state() == tools::source_state::ready &&
            src->mcp()->offers(capability))
            out.push_back(src);
    return out;
}

struct mcp_gateway::list_job {
    std::string method;
    std::vector<std::string> parts; ///< per source, its items' JSON joined by commas
    std::size_t pending = 0;
    std::function<void(std::string)> done;
};

void mcp_gateway::list_all(std::string_view method, std::string_view capability,
                           const permissions::client_profile* profile,
                           std::function<void(std::string)> done) {
    auto sources = offering(capability);
    std::erase_if(sources, [&](const auto& src) { return out_of_profile(profile, *src); });
    if (sources.empty()) return done("[]");
    auto job = std::make_shared<list_job>();
    job->method = std::string(method);
    job->parts.resize(sources.size());
    job->pending = sources.size();
    job->done = std::move(done);
    for (std::size_t i = 0; i < sources.size(); ++i) {
        if (method == "resources/templates/list")
            std::erase_if(templates_, [&](const auto& kv) {
                auto p = kv.second.lock();
                return !p || p == sources[i];
            });
        list_pages(job, i, sources[i], std::string(), 0);
    }
}

void mcp_gateway::list_pages(const std::shared_ptr<list_job>& job, std::size_t i,
                             const std::shared_ptr<tools::tool_source>& src, std::string cursor,
                             std::size_t page) {
    // One walk per source: each page's answer asks for the next page until no cursor.
    std::string params = "{}";
    if (!cursor.empty()) {
        params = "{";
        protocol::json_members(params).string("cursor", cursor);
        params += '}';
    }
    src->mcp()->forward(job->method, std::move(params), [=, this](tools::mcp_answer a) {
        const std::string& m = job->method;
        std::string next;
        simdjson::dom::element result;
        simdjson::dom::array items;
        if (!a.ok || parser_.parse(a.json).get(result) != simdjson::SUCCESS ||
            result[items_key(m)].get_array().get(items) != simdjson::SUCCESS) {
            spdlog::warn("MCP source '{}': {} failed; its items are left out: {}", src->name(), m,
                         reg_.redactor().redact_text(a.json.substr(0, 300)));
        } else {
            learn(src, m, items, job->parts[i]);
            std::string_view c;
            if (result["nextCursor"].get_string().get(c) == simdjson::SUCCESS)
                next = std::string(c);
        }
        if (job->parts[i].size() > reg_.cfg().limits.max_result_bytes) {
            spdlog::warn("MCP source '{}': {} is cut at {} bytes (limits.max_result_bytes)",
                         src->name(), m, reg_.cfg().limits.max_result_bytes);
            next.clear();
        }
        if (!next.empty() && page + 1 < max_pages)
            return list_pages(job, i, src, std::move(next), page + 1);
        if (m == "resources/templates/list" &&
            std::none_of(templates_walked_.begin(), templates_walked_.end(),
                         [&](const source_ref& r) { return r.lock() == src; }))
            templates_walked_.push_back(src);
        if (--job->pending == 0) job->done(merge_listing(*job));
    });
}

std::string mcp_gateway::merge_listing(const list_job& job) {
    std::string merged = "[";
    const bool prompts = job.method == "prompts/list";
    std::set<std::string, std::less<>> names; // prompts: the first in config order stays
    for (const auto& p : job.parts) {
        if (p.empty()) continue;
        if (!prompts) {
            if (merged.size() > 1) merged += ',';
            merged += p;
            continue;
        }
        simdjson::dom::array items;
        if (parser_.parse("[" + p + "]").get_array().get(items) != simdjson::SUCCESS) continue;
        for (auto item : items) {
            std::string_view name;
            if (item["name"].get_string().get(name) != simdjson::SUCCESS) continue;
            if (!names.emplace(name).second) {
                spdlog::warn("prompt '{}' is listed once: another MCP source earlier in the "
                             "config offers one of that name (give one of them a `prefix`)",
                             name);
                continue;
            }
            if (merged.size() > 1) merged += ',';
            merged += simdjson::minify(item);
        }
    }
    return merged + "]";
}

void mcp_gateway::learn(const std::shared_ptr<tools::tool_source>& src, std::string_view method,
                        simdjson::dom::array items, std::string& merged) {
    for (auto item : items) {
        simdjson::dom::object obj;
        if (item.get_object().get(obj) != simdjson::SUCCESS) continue;
        std::string_view key;
        // Sources answer in any order: a name or URI two sources list routes to the one
        // earlier in the config, never to whichever answered first (a server cannot take
        // another's resources or prompts by listing them faster).
        if (method == "resources/list") {
            if (obj["uri"].get_string().get(key) == simdjson::SUCCESS) {
                auto [it, fresh] = resource_owner_.try_emplace(std::string(key), src);
                if (!fresh && precedes(src.get(), it->second)) it->second = src;
            }
        } else if (method == "resources/templates/list") {
            if (obj["uriTemplate"].get_string().get(key) == simdjson::SUCCESS)
                templates_.emplace_back(std::string(key), src);
        } else {
            if (obj["name"].get_string().get(key) != simdjson::SUCCESS) continue;
            const std::string name = src->prefix() + std::string(key);
            auto [it, fresh] = prompts_.try_emplace(name, prompt_route{src, std::string(key)});
            if (!fresh && precedes(src.get(), it->second.source))
                it->second = prompt_route{src, std::string(key)};
            if (!merged.empty()) merged += ',';
            merged += with_member(obj, "name", json_string(name));
            continue;
        }
        if (!merged.empty()) merged += ',';
        merged += simdjson::minify(obj);
    }
}

// ---- routing ---------------------------------------------------------------------------------

std::size_t mcp_gateway::order_of(const tools::tool_source* src) const {
    const auto& all = reg_.sources();
    for (std::size_t i = 0; i < all.size(); ++i)
        if (all[i].get() == src) return i;
    return all.size();
}

bool mcp_gateway::precedes(const tools::tool_source* src, const source_ref& than) const {
    auto other = than.lock();
    return !other || order_of(src) < order_of(other.get());
}

std::shared_ptr<tools::tool_source> mcp_gateway::owner_of_uri(std::string_view uri) const {
    auto usable = [](const source_ref& r) -> std::shared_ptr<tools::tool_source> {
        auto p = r.lock();
        return p && p->state() == tools::source_state::ready ? p : nullptr;
    };
    // docs/protocol.md §17: the source first in the config that serves the URI, whether it
    // lists it exactly or by a template: a later source cannot take a URI an earlier one
    // serves by a template just by listing that URI (nor the other way round).
    std::shared_ptr<tools::tool_source> best;
    const auto consider = [&](std::shared_ptr<tools::tool_source> p) {
        if (p && (!best || order_of(p.get()) < order_of(best.get()))) best = std::move(p);
    };
    if (auto it = resource_owner_.find(uri); it != resource_owner_.end())
        consider(usable(it->second));
    for (const auto& [tmpl, ref] : templates_) // a template named by itself (completion refs)
        if (tmpl == uri || uri_template_matches(tmpl, uri)) consider(usable(ref));
    return best;
}

bool mcp_gateway::templates_unknown_before(const tools::tool_source& src) const {
    const std::size_t at = order_of(&src);
    for (const auto& s : offering("resources")) {
        if (order_of(s.get()) >= at) continue;
        const bool walked = std::any_of(templates_walked_.begin(), templates_walked_.end(),
                                        [&](const source_ref& r) { return r.lock() == s; });
        if (!walked) return true;
    }
    return false;
}

void mcp_gateway::route_uri(std::string uri,
                            std::function<void(std::shared_ptr<tools::tool_source>)> then) {
    if (auto src = owner_of_uri(uri)) {
        if (!templates_unknown_before(*src)) return then(std::move(src));
        // A source earlier in the config may serve it by a template not learned yet (its
        // templates were never listed, or forgotten at a list_changed): learned first.
        return list_all("resources/templates/list", "resources", nullptr,
                        [this, uri, then](std::string) {
                            auto owner = owner_of_uri(uri);
                            if (!owner) {
                                auto all = offering("resources");
                                if (all.size() == 1) owner = all.front();
                            }
                            then(std::move(owner));
                        });
    }
    // Not learned yet (or gone): list resources and templates again, then decide.
    list_all("resources/list", "resources", nullptr, [this, uri, then](std::string) {
        list_all("resources/templates/list", "resources", nullptr, [this, uri, then](std::string) {
            if (auto src = owner_of_uri(uri)) return then(std::move(src));
            auto all = offering("resources");
            then(all.size() == 1 ? all.front() : nullptr);
        });
    });
}

void mcp_gateway::route_prompt(
    std::string name, std::function<void(std::shared_ptr<tools::tool_source>, std::string)> then) {
    auto lookup =
        [this](
            const std::string& n) -> std::pair<std::shared_ptr<tools::tool_source>, std::string> {
        auto it = prompts_.find(n);
        if (it == prompts_.end()) return {nullptr, {}};
        auto p = it->second.source.lock();
        if (!p || p->state() != tools::source_state::ready) return {nullptr, {}};
        return {p, it->second.remote_name};
    };
    if (auto [src, remote] = lookup(name); src) return then(std::move(src), std::move(remote));
    list_all("prompts/list", "prompts", nullptr, [name, then, lookup](std::string) {
        auto [src, remote] = lookup(name);
        then(std::move(src), std::move(remote));
    });
}

// ---- requests --------------------------------------------------------------------------------

void mcp_gateway::request(requester r, std::string method, std::string params_json,
                          std::function<void(tools::mcp_answer)> done) {
    const auto started = std::chrono::steady_clock::now();
    if (method == "resources/list" || method == "resources/templates/list" ||
        method == "prompts/list") {
        const std::string_view capability = method == "prompts/list" ? "prompts" : "resources";
        list_all(method, capability, r.profile.get(),
                 [this, r, method, started, done = std::move(done)](std::string items) {
                     tools::mcp_answer a{true, "{"};
                     protocol::json_members(a.json).raw(items_key(method), items);
                     a.json += '}';
                     audit(r, method, nullptr, {}, "allow", a, started);
                     done(std::move(a));
                 });
        return;
    }
    if (method == "logging/setLevel") return set_level(r, params_json, std::move(done));

    simdjson::dom::element params;
    if (parser_.parse(params_json).get(params) != simdjson::SUCCESS || !params.is_object())
        return done(tools::mcp_error(invalid_params, "params must be an object"));
    if (method == "resources/read" || method == "resources/subscribe" ||
        method == "resources/unsubscribe")
        return request_resource(r, method, std::move(params_json), params, std::move(done));
    if (method == "prompts/get")
        return request_prompt(r, method, std::move(params_json), params, std::move(done));
    if (method == "completion/complete")
        return request_completion(r, method, std::move(params_json), params, std::move(done));
    done(tools::mcp_error(
        method_not_found,
        "method not found: " + method +
            " (meithd answers resources/list, resources/templates/list, "
            "resources/read, resources/subscribe, resources/unsubscribe, prompts/list, "
            "prompts/get, completion/complete and logging/setLevel; tools through "
            "list_tools and tool_call)"));
}

void mcp_gateway::request_resource(const requester& r, const std::string& method,
                                   std::string params_json, simdjson::dom::element params,
                                   std::function<void(tools::mcp_answer)> done) {
    std::string_view text;
    if (params["uri"].get_string().get(text) != simdjson::SUCCESS)
        return done(tools::mcp_error(invalid_params, method + " needs a string \"uri\""));
    if (method != "resources/read")
        return subscription(r, method == "resources/subscribe", std::string(text),
                            std::move(params_json), std::move(done));
    route_uri(std::string(text), [this, r, method, params_json = std::move(params_json),
                                  uri = std::string(text),
                                  done = std::move(done)](auto src) mutable {
        if (!src)
            return done(tools::mcp_error(resource_not_found,
                                         "no MCP source lists resource " + uri +
                                             " (resources/list and resources/templates/list show "
                                             "what there is)"));
        forward(r, src, method, std::move(params_json), uri, std::move(done));
    });
}

void mcp_gateway::request_prompt(const requester& r, const std::string& method,
                                 std::string params_json, simdjson::dom::element params,
                                 std::function<void(tools::mcp_answer)> done) {
    std::string_view text;
    if (params["name"].get_string().get(text) != simdjson::SUCCESS)
        return done(tools::mcp_error(invalid_params, "prompts/get needs a string \"name\""));
    route_prompt(std::string(text), [this, r, method, obj_json = std::string(params_json),
                                     name = std::string(text),
                                     done = std::move(done)](auto src, std::string remote) mutable {
        if (!src)
            return done(
                tools::mcp_error(invalid_params, "no MCP source offers prompt '" + name +
                                                     "' (prompts/list shows what there is)"));
        simdjson::dom::object o;
        if (parser_.parse(obj_json).get_object().get(o) != simdjson::SUCCESS)
            return done(tools::mcp_error(invalid_params, "params must be an object"));
        forward(r, src, method, with_member(o, "name", json_string(remote)), name, std::move(done));
    });
}

void mcp_gateway::request_completion(const requester& r, const std::string& method,
                                     std::string params_json, simdjson::dom::element params,
                                     std::function<void(tools::mcp_answer)> done) {
    std::string_view text;
    simdjson::dom::object ref;
    std::string_view type;
    if (params["ref"].get_object().get(ref) != simdjson::SUCCESS ||
        ref["type"].get_string().get(type) != simdjson::SUCCESS)
        return done(tools::mcp_error(invalid_params,
                                     "completion/complete needs a \"ref\" of type ref/prompt or "
                                     "ref/resource"));
    if (type == "ref/prompt") {
        if (ref["name"].get_string().get(text) != simdjson::SUCCESS)
            return done(tools::mcp_error(invalid_params, "a ref/prompt needs a string \"name\""));
        route_prompt(std::string(text), [this, r, method, params_json = std::move(params_json),
                                         name = std::string(text), done = std::move(done)](
                                            auto src, std::string remote) mutable {
            if (!src)
                return done(tools::mcp_error(invalid_params, "no MCP source offers prompt '" +
                                                                 name +
                                                                 "' (prompts/list shows what there "
                                                                 "is)"));
            simdjson::dom::object p, rf;
            if (parser_.parse(params_json).get_object().get(p) != simdjson::SUCCESS ||
                p["ref"].get_object().get(rf) != simdjson::SUCCESS)
                return done(tools::mcp_error(invalid_params, "params must be an object"));
            std::string new_ref = with_member(rf, "name", json_string(remote));
            if (parser_.parse(params_json).get_object().get(p) != simdjson::SUCCESS)
                return done(tools::mcp_error(invalid_params, "params must be an object"));
            forward(r, src, method, with_member(p, "ref", new_ref), name, std::move(done));
        });
        return;
    }
    if (type == "ref/resource") {
        if (ref["uri"].get_string().get(text) != simdjson::SUCCESS)
            return done(tools::mcp_error(invalid_params, "a ref/resource needs a string \"uri\""));
        route_uri(std::string(text), [this, r, method, params_json = std::move(params_json),
                                      uri = std::string(text),
                                      done = std::move(done)](auto src) mutable {
            if (!src)
                return done(tools::mcp_error(resource_not_found,
                                             "no MCP source lists resource template " + uri));
            forward(r, src, method, std::move(params_json), uri, std::move(done));
        });
        return;
    }
    return done(tools::mcp_error(invalid_params, "ref.type must be ref/prompt or ref/resource"));
}

void mcp_gateway::forward(const requester& r, const std::shared_ptr<tools::tool_source>& src,
                          std::string_view method, std::string params_json, std::string target,
                          std::function<void(tools::mcp_answer)> done) {
    const auto started = std::chrono::steady_clock::now();
    auto* peer = src->mcp();
    // The registry's one decision (§17, §23): a client profile reaches the families of its
    // sources only, decided before the policy, as a hidden tool is.
    const auto verdict = reg_.decide_family_request(*src, target, r.who, r.profile.get());
    if (verdict.hidden) {
        auto a = tools::mcp_error(
            permission_denied, fmt::format("PERMISSION_DENIED: {} of '{}' from MCP source '{}': {}",
                                           method, target, src->name(), verdict.decision.reason));
        audit(r, method, src.get(), target, "deny", a, started);
        return done(std::move(a));
    }
    const auto& d = verdict.decision;
    if (!d.allow) {
        auto a =
            tools::mcp_error(permission_denied,
                             fmt::format("PERMISSION_DENIED: {} of '{}' from MCP source '{}': {}{}",
                                         method, target, src->name(), d.reason,
                                         d.ask ? " (a person approves tool calls only: allow the "
                                                 "source's resource_capabilities for this caller)"
                                               : ""));
        audit(r, method, src.get(), target, permissions::to_string(d.outcome()), a, started);
        return done(std::move(a));
    }
    peer->forward(method, std::move(params_json),
                  [this, r, m = std::string(method), weak = std::weak_ptr<tools::tool_source>(src),
                   target = std::move(target), started,
                   done = std::move(done)](tools::mcp_answer a) {
                      auto s = weak.lock();
                      audit(r, m, s.get(), target, "allow", a, started);
                      done(std::move(a));
                  });
}

void mcp_gateway::audit(const requester& r, std::string_view method, const tools::tool_source* src,
                        std::string_view target, std::string_view decision,
                        const tools::mcp_answer& a, std::chrono::steady_clock::time_point started) {
    std::string f;
    protocol::json_members m(f);
    m.string("sessionId", r.session_id).string("caller", permissions::to_string(r.who));
    if (r.profile) m.string("client", r.profile->name()); // as on tool_call lines (§23)
    m.string("method", method);
    if (src) m.string("source", src->name());
    if (!target.empty()) reg_.append_redacted(m.key("target"), target);
    m.string("decision", decision).string("outcome", a.ok ? "ok" : "error");
    if (!a.ok) {
        simdjson::dom::element e;
        std::string_view message;
        if (parser_.parse(a.json).get(e) == simdjson::SUCCESS &&
            e["message"].get_string().get(message) == simdjson::SUCCESS)
            reg_.append_redacted(m.key("error"), message.substr(0, 1024));
    }
    const auto us = std::chrono::duration_cast<std::chrono::microseconds>(
                        std::chrono::steady_clock::now() - started)
                        .count();
    m.key("durationMs") += fmt::format("{:.3f}", static_cast<double>(us) / 1000.0);
    reg_.audit_trail().event("mcp_request", f);
}

} // namespace meith::gateway
