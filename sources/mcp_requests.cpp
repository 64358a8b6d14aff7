// mcp_requests: an MCP source's side of the families beyond tools (docs/protocol.md §17) —
// requests meith's clients send it through the gateway, the server's own requests (sampling,
// elicitation, roots: to the client of the call in flight) and notifications, and the
// 2026-07-28 listen and input rounds. The class is in sources/mcp_source.hpp.
#include "sources/mcp_source.hpp"

#include "protocol/json_writer.hpp"
#include "protocol/server_frames.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace meith::sources {

namespace {

/// A log message from the server is cut to this many bytes in the daemon log.
constexpr std::size_t max_log_message = 16 * 1024;

spdlog::level::level_enum log_level_of(std::string_view level) {
    // MCP logging levels (RFC 5424 names), server/utilities/logging.
    if (level == "debug") return spdlog::level::debug;
    if (level == "info" || level == "notice") return spdlog::level::info;
    if (level == "warning") return spdlog::level::warn;
    if (level == "error") return spdlog::level::err;
    if (level == "critical" || level == "alert" || level == "emergency")
        return spdlog::level::critical;
    return spdlog::level::info;
}

} // namespace

void mcp_source::forward(std::string_view method, std::string params_json,
                         std::function<void(tools::mcp_answer)> done) {
    touch(); // a request keeps an on-demand server running, as a call does
    if (!ready_)
        return done(tools::mcp_error(
            -32603, fmt::format("{} is not running ({})", label_, to_string(state()))));
    if (modern_) {
        // 2026-07-28: the log level travels per request, subscriptions on the listen.
        if (method == "logging/setLevel") return done(tools::mcp_answer{true, "{}"});
        if (method == "resources/subscribe" || method == "resources/unsubscribe")
            return subscribe_on_listen(method == "resources/subscribe", params_json,
                                       std::move(done));
        params_json = mcp::with_envelope(params_json, envelope_);
    }
    auto shared = std::make_shared<std::function<void(tools::mcp_answer)>>(std::move(done));
    process::rpc_peer::callbacks cb;
    cb.on_message = [shared](simdjson::dom::object msg, bool) {
        simdjson::dom::element v;
        if (msg["result"].get(v) == simdjson::SUCCESS && v.is_object())
            (*shared)(tools::mcp_answer{true, simdjson::minify(v)});
        else if (msg["error"].get(v) == simdjson::SUCCESS && v.is_object())
            (*shared)(tools::mcp_answer{false, simdjson::minify(v)});
        else
            (*shared)(tools::mcp_error(-32603, "the MCP server's answer has neither a result "
                                               "object nor an error object"));
    };
    cb.on_failure = [shared, label = label_](process::rpc_failure, const std::string& how) {
        (*shared)(tools::mcp_error(
            -32603, fmt::format("{} did not answer: {}", label, how.empty() ? "it stopped" : how)));
    };
    if (!peer_.request(method, params_json, std::move(cb)))
        (*shared)(tools::mcp_error(-32603, fmt::format("{} is not accepting requests", label_)));
}

void mcp_source::follow_task(const tools::call_ptr& c, std::string task_id) {
    const std::uint64_t token = ++next_token_;
    progress_.emplace(token, c);
    tasks_[task_id] = c;
    std::string params = "{";
    protocol::json_members(params).string("taskId", task_id);
    params += '}';
    process::rpc_peer::callbacks cb;
    cb.on_message = [this, c, token, task_id](simdjson::dom::object msg, bool) {
        progress_.erase(token);
        tasks_.erase(task_id);
        simdjson::dom::element result, error;
        if (msg["result"].get(result) == simdjson::SUCCESS)
            c->resolve(mcp::call_result(result));
        else if (msg["error"].get(error) == simdjson::SUCCESS)
            c->resolve(mcp::error_answer(error));
        else
            c->resolve(tool_result::failure(error_code::tool_failed,
                                            "tasks/result: neither result nor error"));
    };
    cb.on_failure = [this, c, token, task_id](process::rpc_failure failure,
                                              const std::string& how) {
        progress_.erase(token);
        tasks_.erase(task_id);
        c->resolve(request_failed(failure, how));
    };
    const auto id = peer_.request("tasks/result", params, std::move(cb));
    if (!id) {
        progress_.erase(token);
        tasks_.erase(task_id);
        return c->resolve(tool_result::failure(
            error_code::tool_failed, fmt::format("{} is not accepting requests", label_)));
    }
    c->on_abandon([this, id = *id, token, task_id, params] {
        peer_.abandon(id);
        progress_.erase(token);
        tasks_.erase(task_id);
        process::rpc_peer::callbacks ignore;
        ignore.on_message = [](simdjson::dom::object, bool) {};
        ignore.on_failure = [](process::rpc_failure, const std::string&) {};
        peer_.request("tasks/cancel", params, std::move(ignore));
    });
}

void mcp_source::relisten() {
    if (listen_id_) {
        peer_.abandon(*listen_id_);
        std::string cancelled = "{";
        protocol::json_members(cancelled).number("requestId", *listen_id_);
        cancelled += '}';
        peer_.notify("notifications/cancelled", params_for(cancelled));
        listen_id_.reset();
    }
    std::string n = "{";
    protocol::json_members m(n);
    m.key("notifications").push_back('{');
    m.boolean("toolsListChanged", true);
    if (server_caps_.prompts) m.boolean("promptsListChanged", true);
    if (server_caps_.resources) m.boolean("resourcesListChanged", true);
    if (!listen_uris_.empty())
        protocol::append_json_string_array(m.key("resourceSubscriptions"), listen_uris_);
    n += "}}";
    process::rpc_peer::callbacks cb; // answered only when the server ends the listen
    cb.on_message = [](simdjson::dom::object, bool) {};
    cb.on_failure = [](process::rpc_failure, const std::string&) {};
    listen_id_ = peer_.request("subscriptions/listen", params_for(n), std::move(cb));
}

void mcp_source::subscribe_on_listen(bool on, std::string_view params_json,
                                     std::function<void(tools::mcp_answer)> done) {
    thread_local simdjson::dom::parser parser;
    std::string_view uri;
    simdjson::dom::element params;
    if (parser.parse(params_json).get(params) != simdjson::SUCCESS ||
        params["uri"].get_string().get(uri) != simdjson::SUCCESS)
        return done(tools::mcp_error(-32602, "params need a string \"uri\""));
    const bool changed = on ? listen_uris_.insert(std::string(uri)).second
                            : listen_uris_.erase(std::string(uri)) > 0;
    if (changed) relisten();
    done(tools::mcp_answer{true, "{}"});
}

void mcp_source::ask_inputs(const tools::call_ptr& c, simdjson::dom::element result,
                            const std::string& remote, int round) {
    if (round + 1 >= max_input_rounds)
        return c->resolve(tool_result::failure(
            error_code::tool_failed,
            fmt::format("{} asked for input {} times in one call", label_, max_input_rounds)));
    struct gather {
        std::size_t pending = 0;
        std::string responses;
        std::string state;
    };
    auto g = std::make_shared<gather>();
    std::string_view state;
    if (result["requestState"].get_string().get(state) == simdjson::SUCCESS)
        g->state = std::string(state);
    struct ask {
        std::string key, method, params;
    };
    std::vector<ask> asks;
    simdjson::dom::object requests;
    if (result["inputRequests"].get_object().get(requests) == simdjson::SUCCESS)
        for (auto [key, req] : requests) {
            std::string_view method;
            simdjson::dom::object params;
            if (req["method"].get_string().get(method) != simdjson::SUCCESS) continue;
            asks.push_back({std::string(key), std::string(method),
                            req["params"].get_object().get(params) == simdjson::SUCCESS
                                ? simdjson::minify(params)
                                : std::string("{}")});
        }
    g->pending = asks.size();
    auto alive = std::weak_ptr<bool>(alive_);
    auto finish = [this, c, remote, round, g, alive] {
        if (!alive.lock() || c->resolved()) return;
        std::string members;
        protocol::json_members m(members);
        m.key("inputResponses").push_back('{');
        members += g->responses;
        members += '}';
        if (!g->state.empty()) m.string("requestState", g->state);
        send_call(c, remote, members, round + 1);
    };
    if (asks.empty()) return finish();
    for (const auto& a : asks) {
        auto answered = [this, c, g, key = a.key, method = a.method, finish,
                         alive](tools::mcp_answer answer) {
            if (!alive.lock() || c->resolved()) return;
            if (!answer.ok)
                return c->resolve(tool_result::failure(
                    error_code::tool_failed,
                    fmt::format("{} asked the client for {}, which answered an error", label_,
                                method),
                    answer.json));
            if (!g->responses.empty()) g->responses += ',';
            append_json_string(g->responses, key);
            g->responses += ':';
            g->responses += answer.json;
            if (--g->pending == 0) finish();
        };
        if (c->ask_client(a.method, a.params, answered)) continue;
        if (a.method == "roots/list") {
            answered(tools::mcp_answer{true, own_roots()});
            continue;
        }
        return c->resolve(tool_result::failure(
            error_code::tool_failed,
            fmt::format("{} needs {} answered (input_required), and the client that made "
                        "the call did not declare it (docs/protocol.md §17)",
                        label_, a.method)));
    }
}

tools::call_ptr mcp_source::owning_call(std::string& why) const {
    tools::call_ptr newest;
    std::uint64_t newest_token = 0;
    for (const auto& [token, c] : progress_) {
        if (newest && c->session_id != newest->session_id) {
            why = "calls of more than one client are in flight on this server, so meithd "
                  "cannot tell whose call asks";
            return nullptr;
        }
        if (!newest || token > newest_token) {
            newest = c;
            newest_token = token;
        }
    }
    if (newest) return newest;
    // During its start the calls waiting for it are in flight too: the request is theirs.
    if ((newest = waiting_call_of_one_session())) return newest;
    why = "no call is in flight on this server";
    return newest;
}

void mcp_source::forward_to_client(const std::string& id_json, std::string_view method,
                                   std::string params_json) {
    std::string why;
    auto c = owning_call(why);
    const auto gen = spawns_;
    auto answer = [this, id_json, gen, alive = std::weak_ptr<bool>(alive_)](tools::mcp_answer a) {
        if (!alive.lock() || gen != spawns_) return; // that child is gone
        if (a.ok)
            peer_.reply(id_json, a.json);
        else
            peer_.reply_error_object(id_json, a.json);
    };
    if (c && c->ask_client(method, params_json, answer)) return;
    if (method == "roots/list") return answer(tools::mcp_answer{true, own_roots()});
    if (c) why = "the client that made the call did not declare the capability";
    const std::string shown(mcp::cut_utf8(method, 200));
    spdlog::info("{}: refused its request {}: {}", label_,
                 audit::default_redactor().redact_text(shown), why);
    peer_.reply_error(
        id_json, -32601,
        fmt::format("meithd cannot forward {}: {} (docs/protocol.md §17)", shown, why));
}

std::string mcp_source::own_roots() const {
    // current_path() throws when meithd's folder was removed: ask, never throw here.
    std::error_code ec;
    const auto dir = cfg_.cwd.empty() ? std::filesystem::current_path(ec) : cfg_.cwd;
    return ec ? std::string(R"({"roots":[]})") : mcp::roots_result(dir);
}

void mcp_source::on_incoming(simdjson::dom::object msg) {
    std::string_view method;
    if (msg["method"].get_string().get(method) != simdjson::SUCCESS) {
        spdlog::warn("{}: a message whose method is not a string (skipped)", label_);
        return;
    }
    simdjson::dom::element id;
    simdjson::dom::object params;
    const bool has_params = msg["params"].get_object().get(params) == simdjson::SUCCESS;
    if (msg["id"].get(id) == simdjson::SUCCESS) {
        answer_request(simdjson::minify(id), method,
                       has_params ? simdjson::minify(params) : std::string("{}"));
        return;
    }
    if (method.starts_with("meith/") && remote() && has_params) {
        on_bridge_notification(method, params);
    } else if (method == "notifications/progress" && has_params) {
        on_progress(params);
    } else if (method == "notifications/tools/list_changed") {
        on_list_changed();
    } else if (method == "notifications/message" && has_params) {
        on_log(params);
        if (events_.mcp_notification)
            events_.mcp_notification(*this, method, simdjson::minify(params));
    } else if ((method == "notifications/resources/updated" ||
                method == "notifications/resources/list_changed" ||
                method == "notifications/prompts/list_changed") &&
               events_.mcp_notification) {
        // A 2026-07-28 listen stamps its id in _meta: meithd's own, not passed on.
        events_.mcp_notification(
            *this, method,
            has_params ? mcp::without_meta_key(simdjson::minify(params), mcp::subscription_id_key)
                       : std::string("{}"));
    } else if (method == "notifications/tasks/status" && has_params) {
        on_task_status(params);
    } else if (method == "notifications/elicitation/complete" && has_params) {
        std::string why;
        if (auto c = owning_call(why))
            c->notify_client(cfg_.name, method, simdjson::minify(params));
    } else {
        spdlog::debug("{}: notification {} ignored", label_,
                      audit::default_redactor().redact_text(mcp::cut_utf8(method, 200)));
    }
}

void mcp_source::answer_request(const std::string& id_json, std::string_view method,
                                std::string params_json) {
    if (method == "ping") {
        peer_.reply(id_json, "{}");
    } else if (method == "meith/credentials" && remote()) {
        answer_credentials(id_json); // meith-remote's own request, never the server's
    } else if (method == "roots/list" || method == "sampling/createMessage" ||
               method == "elicitation/create") {
        forward_to_client(id_json, method, std::move(params_json));
    } else {
        // Anything else (tasks/*, a newer revision's requests): meithd offers none.
        spdlog::info("{}: refused its request {} (meithd does not offer it)", label_,
                     audit::default_redactor().redact_text(mcp::cut_utf8(method, 200)));
        peer_.reply_error(
            id_json, -32601,
            fmt::format("Method not found: meithd does not offer {}", mcp::cut_utf8(method, 200)));
    }
}

void mcp_source::on_task_status(simdjson::dom::object params) {
    std::string_view task_id, status, message;
    if (params["taskId"].get_string().get(task_id) != simdjson::SUCCESS) return;
    auto it = tasks_.find(std::string(task_id));
    if (it == tasks_.end()) return;
    std::optional<std::string_view> shown;
    if (params["statusMessage"].get_string().get(message) == simdjson::SUCCESS)
        shown = mcp::cut_utf8(message, 1024);
    std::string event;
    protocol::append_task_status_event(event,
                                       params["status"].get_string().get(status) ==
                                               simdjson::SUCCESS
                                           ? status
                                           : std::string_view("unknown"),
                                       shown);
    it->second->emit(event);
}

void mcp_source::on_progress(simdjson::dom::object params) {
    const auto token = mcp::progress_token(params);
    if (!token) return;
    auto it = progress_.find(*token);
    if (it == progress_.end()) return; // the call is over
    const auto event = mcp::progress_event(params);
    if (!event.empty()) it->second->emit(event);
}

void mcp_source::on_list_changed() {
    if (!ready_ && !listing_) return; // the first listing is still to come
    if (listing_) {
        relist_ = true; // list again once this walk is done
        return;
    }
    spdlog::info("{}: tools changed; listing them again", label_);
    start_listing();
}

void mcp_source::on_log(simdjson::dom::object params) {
    std::string_view level = "info", logger;
    if (params["level"].get_string().get(level) != simdjson::SUCCESS) level = "info";
    if (params["logger"].get_string().get(logger) != simdjson::SUCCESS) logger = {};
    simdjson::dom::element data;
    std::string text;
    std::string_view s;
    if (params["data"].get(data) == simdjson::SUCCESS)
        text =
            data.get_string().get(s) == simdjson::SUCCESS ? std::string(s) : simdjson::minify(data);
    const auto& redactor = audit::default_redactor();
    spdlog::log(log_level_of(level), "[{}{}{}] {}", label_, logger.empty() ? "" : " ",
                redactor.redact_text(mcp::cut_utf8(logger, 200)),
                redactor.redact_text(mcp::cut_utf8(text, max_log_message)));
}

} // namespace meith::sources
