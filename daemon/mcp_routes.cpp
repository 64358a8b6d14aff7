// mcp_routes: a connection's MCP families beyond tools (docs/protocol.md §17) — mcp_request
// frames answered by the registry's gateway, servers' requests (sampling, elicitation, roots)
// sent to the client as client_request frames and their client_response answers, and the
// gateway's notifications.
#include "daemon/connection.hpp"

#include "protocol/json_writer.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace meith::daemon {

using protocol::append_json_string;

namespace {

/// The ClientCapabilities member a server's request needs (client/sampling, client/elicitation,
/// client/roots); for elicitation in URL mode, `elicitation.url` as well.
bool declared(const connection::client_capabilities& caps, std::string_view method,
              std::string_view params_json) {
    if (method == "sampling/createMessage") return caps.sampling;
    if (method == "roots/list") return caps.roots;
    if (method != "elicitation/create") return false;
    thread_local simdjson::dom::parser parser;
    simdjson::dom::element params;
    std::string_view mode = "form";
    if (parser.parse(params_json).get(params) == simdjson::SUCCESS &&
        params["mode"].get_string().get(mode) != simdjson::SUCCESS)
        mode = "form";
    return mode == "url" ? caps.elicitation_url : caps.elicitation_form;
}

} // namespace

connection::client_capabilities connection::read_client_capabilities(simdjson::dom::object caps) {
    client_capabilities c;
    simdjson::dom::element v;
    c.sampling = caps["sampling"].get(v) == simdjson::SUCCESS && v.is_object();
    c.roots = caps["roots"].get(v) == simdjson::SUCCESS && v.is_object();
    simdjson::dom::object e;
    if (caps["elicitation"].get_object().get(e) == simdjson::SUCCESS) {
        // An empty elicitation object means form mode (client/elicitation, capabilities).
        const bool form = e["form"].get(v) == simdjson::SUCCESS && v.is_object();
        c.elicitation_url = e["url"].get(v) == simdjson::SUCCESS && v.is_object();
        c.elicitation_form = form || !c.elicitation_url;
    }
    return c;
}

std::uint64_t connection::mcp_subscriber(bool broadcast) {
    if (mcp_subscriber_ != 0) {
        if (broadcast) mcp_.set_broadcast(mcp_subscriber_);
        return mcp_subscriber_;
    }
    mcp_subscriber_ = mcp_.subscribe(
        [weak = weak_from_this()](std::string_view frame) {
            auto self = weak.lock();
            if (!self || self->closed_) return;
            // Notifications are lossy: a server that floods them cannot grow the queue of a
            // client that does not read (back-pressure, docs/protocol.md §5).
            if (self->over_outbound_limit()) {
                if (self->mcp_dropped_++ == 0)
                    spdlog::warn("connection {}: MCP notifications dropped while its client "
                                 "does not read",
                                 self->session_id_);
                return;
            }
            self->outbound_.append(frame);
            self->flush();
        },
        broadcast);
    return mcp_subscriber_;
}

void connection::on_mcp_request(const protocol::frame_head& f,
                                const protocol::mcp_request_frame& body, std::string&) {
    const auto limit = registry_.cfg().limits.max_calls_in_flight_per_connection;
    if (mcp_in_flight_ >= limit) {
        protocol::append_error_frame(
            outbound_, f.request_id,
            fmt::format("too many MCP requests in flight on this connection (limit {}, "
                        "limits.max_calls_in_flight_per_connection)",
                        limit),
            protocol::refusal::limit_reached);
        return;
    }
    gateway::mcp_gateway::requester r;
    r.who = caller_for(f);
    r.session_id = session_id_;
    r.subscriber = mcp_subscriber(false);
    r.profile = profile_for(f);
    mcp_.set_profile(r.subscriber, r.profile);
    std::string params = body.mcp_params ? simdjson::minify(*body.mcp_params) : std::string("{}");
    ++async_replies_;
    ++mcp_in_flight_;
    mcp_.request(std::move(r), std::string(body.mcp_method), std::move(params),
                 [weak = weak_from_this(), id = std::string(*f.request_id)](tools::mcp_answer a) {
                     auto self = weak.lock();
                     if (!self) return;
                     --self->async_replies_;
                     --self->mcp_in_flight_;
                     if (self->closed_) return;
                     protocol::append_mcp_result(self->outbound_, id, a.ok, a.json);
                     self->flush();
                     self->close_if_finished();
                 });
}

bool connection::ask_client(std::string_view request_id, std::string_view method,
                            std::string_view params_json,
                            std::function<void(tools::mcp_answer)> done) {
    if (closed_ || !declared(client_caps_, method, params_json)) return false;
    // A server that floods its client with requests is refused past the calls' own limit or
    // while the client does not read (the server gets -32601 with the reason, §17).
    if (client_requests_.size() >= registry_.cfg().limits.max_calls_in_flight_per_connection ||
        over_outbound_limit()) {
        spdlog::warn("connection {}: a server's {} refused: {} of them wait for the client",
                     session_id_, method, client_requests_.size());
        return false;
    }
    std::string id = fmt::format("cr{}", ++next_client_request_);
    protocol::append_client_request(outbound_, request_id, id, method, params_json);
    std::string fields;
    protocol::json_members m(fields);
    m.string("sessionId", session_id_);
    registry_.append_redacted(m.key("requestId"), request_id);
    m.string("method", method);
    audit_.event("client_request", fields);
    client_requests_.emplace(std::move(id), std::move(done));
    flush();
    return true;
}

void connection::notify_client(std::string_view request_id, std::string_view source,
                               std::string_view method, std::string_view params_json) {
    if (closed_) return;
    protocol::append_mcp_notification(outbound_, source, method, params_json, request_id);
    flush();
}

void connection::on_client_response(const protocol::frame_head& f,
                                    const protocol::client_response_frame& body, std::string&) {
    auto it = client_requests_.find(body.client_request_id);
    if (it == client_requests_.end()) {
        protocol::append_error_frame(
            outbound_, f.request_id,
            fmt::format("no client_request \"{}\" is waiting for an answer (answered already, "
                        "or its call ended)",
                        body.client_request_id));
        return;
    }
    auto done = std::move(it->second);
    client_requests_.erase(it);
    if (body.response_result)
        done(tools::mcp_answer{true, simdjson::minify(*body.response_result)});
    else
        done(tools::mcp_answer{false, simdjson::minify(*body.response_error)});
}

void connection::end_mcp() {
    if (mcp_subscriber_ != 0) mcp_.unsubscribe(mcp_subscriber_);
    mcp_subscriber_ = 0;
    auto waiting = std::move(client_requests_);
    client_requests_.clear();
    for (auto& [id, done] : waiting)
        done(tools::mcp_error(-32603, "the client that was asked disconnected"));
}

} // namespace meith::daemon
