// bridge_http: meith-remote's side toward the server (see bridge.hpp): each message as one
// POST and its answer (JSON or an SSE stream), retries, 401s and step-ups, the GET stream of the
// server's own messages, and resuming a cut stream from its last event id after `retry`.
#include "remote/bridge.hpp"

#include "remote/bridge_internal.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace meith::remote {

using namespace bridge_detail;

std::vector<std::string> bridge::request_headers(const outgoing* m) const {
    std::vector<std::string> h;
    h.reserve(static_headers_.size() + 7);
    h.emplace_back(m != nullptr ? "Accept: application/json, text/event-stream"
                                : "Accept: text/event-stream");
    if (m != nullptr) h.emplace_back("Content-Type: application/json");
    for (const auto& s : static_headers_)
        h.push_back(s);
    if (creds_ && !creds_->access_token.empty())
        h.push_back("Authorization: Bearer " + creds_->access_token);
    if (m != nullptr && !m->version.empty() && header_safe(m->version)) {
        h.push_back("MCP-Protocol-Version: " + m->version);
        if (!m->method.empty() && header_safe(m->method)) h.push_back("Mcp-Method: " + m->method);
        if (!m->target.empty() && header_safe(m->target) && m->target.size() <= 1024)
            h.push_back("Mcp-Name: " + m->target);
    } else if (!protocol_version_.empty()) {
        h.push_back("MCP-Protocol-Version: " + protocol_version_);
    }
    if (!session_id_.empty()) h.push_back("Mcp-Session-Id: " + session_id_);
    return h;
}

void bridge::send(std::shared_ptr<outgoing> m) {
    // A grant about to expire is refreshed first (RFC 6749 §6), so the request is not a 401.
    if (creds_ && creds_->expires_at > 0 && renewable(*creds_) &&
        unix_now() + 2 >= creds_->expires_at) {
        return refresh([this, m](bool) { post(m); });
    }
    post(std::move(m));
}

void bridge::post(std::shared_ptr<outgoing> m) {
    if (closing_) return;
    http_request req;
    req.method = "POST";
    req.url = opts_.url;
    req.headers = request_headers(m.get());
    req.body = m->body;
    req.connect_timeout = opts_.connect_timeout;
    req.max_body_bytes = opts_.max_message_bytes;
    auto body = std::make_shared<std::string>();
    auto sse = std::make_shared<bool>(false);
    auto parser = std::make_shared<sse_parser>(opts_.max_message_bytes);
    http_handlers h;
    h.on_head = [this, sse](const http_head& head) {
        *sse = starts_with_ci(head.header("content-type"), "text/event-stream");
        if (auto sid = head.header("mcp-session-id");
            !sid.empty() && session_id_.empty() && sid.size() <= 1024 && header_safe(sid))
            session_id_ = std::string(sid);
    };
    h.on_body = [this, sse, body, parser](std::string_view b) {
        if (!*sse) {
            body->append(b);
            return;
        }
        parser->feed(b, [this](sse_event& e) {
            if (e.type == "message" && !e.data.empty()) emit(e.data);
        });
    };
    h.on_done = [this, m, sse, body, parser](http_outcome out) {
        if (!m->id_json.empty()) in_flight_.erase(m->id_json);
        on_posted(m, std::move(out), *sse, body, parser);
    };
    const auto rid = http_.start(std::move(req), std::move(h));
    if (!m->id_json.empty() && !m->method.empty()) in_flight_[m->id_json] = rid;
}

void bridge::on_posted(std::shared_ptr<outgoing> m, http_outcome out, bool sse,
                       std::shared_ptr<std::string> body, std::shared_ptr<sse_parser> parser) {
    if (closing_) return;
    const long status = out.head.status;
    if (!out.error.empty()) {
        if (out.refused) return fail_message(*m, refused(out));
        // A stream cut after some events: resume it where it stopped (Last-Event-ID).
        if (sse && !m->id_json.empty() && !parser->last_event_id().empty() &&
            !answered_.contains(m->id_json))
            return resume(m->id_json, parser->last_event_id(), 0, parser->reconnection_ms());
        if (out.transient && m->attempt + 1 < opts_.max_attempts && !sse)
            return retry_later(m, backoff(m->attempt));
        return fail_message(*m, fmt::format("{}: {}", opts_.url, out.error));
    }
    if (status == 401) return on_unauthorized(m, out);
    if (status == 403 && on_forbidden(*m, out)) return;
    if (status == 404 && !session_id_.empty()) {
        // The server ended the session (MCP transports: start a new one): meithd restarts us,
        // and the restart initializes afresh.
        fail_message(*m, fmt::format("{} ended the MCP session (HTTP 404)", opts_.url));
        log(fmt::format("meith-remote: {} ended the session (HTTP 404); exiting so that meithd "
                        "starts a new one",
                        opts_.url));
        return end(75);
    }
    if ((status == 429 || status == 502 || status == 503 || status == 504) &&
        m->attempt + 1 < opts_.max_attempts) {
        auto delay = backoff(m->attempt);
        if (auto ra = out.head.header("retry-after"); !ra.empty()) {
            const long s = std::strtol(std::string(ra).c_str(), nullptr, 10);
            if (s > 0) delay = std::chrono::milliseconds(std::min<long>(s, 30) * 1000);
        }
        return retry_later(m, delay);
    }
    if (status / 100 != 2) {
        const auto detail = error_detail(*body);
        return fail_message(*m, fmt::format("{} answered HTTP {}{}{}", opts_.url, status,
                                            detail.empty() ? "" : ": ", detail));
    }
    if (!sse && !body->empty()) emit(*body);
    if (sse && !m->id_json.empty() && !answered_.contains(m->id_json) &&
        !parser->last_event_id().empty())
        return resume(m->id_json, parser->last_event_id(), 0, parser->reconnection_ms());
    if (!m->id_json.empty()) answered_.erase(m->id_json);
    if (m->method == "notifications/initialized" && !stream_) open_stream("");
}

void bridge::on_unauthorized(const std::shared_ptr<outgoing>& m, const http_outcome& out) {
    if (creds_ && renewable(*creds_) && !m->reauthorized) {
        m->reauthorized = true;
        return refresh([this, m](bool ok) {
            if (ok) return post(m);
            fail_message(*m, fmt::format("{} refused the token (HTTP 401) and it could not "
                                         "be refreshed; run `meith login {}`",
                                         opts_.url, opts_.source));
        });
    }
    const auto challenge = parse_bearer_challenge(out.head.header("www-authenticate"));
    const auto error = error_detail(challenge.error); // the server's words
    const std::string why =
        creds_ ? fmt::format("{} refused the token (HTTP 401{}{})", opts_.url,
                             error.empty() ? "" : ", ", error)
               : fmt::format("{} asks for authorization (HTTP 401) and meith holds no login "
                             "for it",
                             opts_.url);
    login_required(why, challenge);
    return fail_message(*m, why + fmt::format("; run `meith login {}`", opts_.source));
}

bool bridge::on_forbidden(const outgoing& m, const http_outcome& out) {
    // A step-up (MCP spec, "Scope challenge handling"; RFC 6750 §3.1): the token is good
    // but lacks a scope this request needs. Only a person can grant it, with a new login
    // that asks for it: this request fails saying so, the source keeps running.
    const auto challenge = parse_bearer_challenge(out.head.header("www-authenticate"));
    if (challenge.error == "insufficient_scope") {
        const auto scope = error_detail(challenge.scope);
        const bool held = creds_ && covers(creds_->scope, challenge.scope);
        std::string why =
            held ? fmt::format("{} refuses this request for want of the scope \"{}\" "
                               "(HTTP 403 insufficient_scope), although the grant holds it; "
                               "another login will not help: the account behind it may "
                               "lack the permission (ask the server's administrator)",
                               opts_.url, scope)
                 : fmt::format("{} needs the scope \"{}\" for this request (HTTP 403 "
                               "insufficient_scope); run `meith login {}` to grant it",
                               opts_.url, scope, opts_.source);
        step_up_required(why, challenge);
        fail_message(m, why);
        return true;
    }
    return false;
}

void bridge::retry_later(std::shared_ptr<outgoing> m, std::chrono::milliseconds delay) {
    ++m->attempt;
    auto t = std::make_shared<asio::steady_timer>(io_, delay);
    t->async_wait([this, m, t](const std::error_code& ec) {
        if (!ec) post(m);
    });
}

// ---- the GET stream: server-initiated messages (2025-11-25 and older) -----------------------

void bridge::open_stream(const std::string& last_event_id) {
    if (closing_) return;
    http_request req;
    req.method = "GET";
    req.url = opts_.url;
    req.headers = request_headers(nullptr);
    if (!last_event_id.empty()) req.headers.push_back("Last-Event-ID: " + last_event_id);
    req.connect_timeout = opts_.connect_timeout;
    req.max_body_bytes = std::size_t{1} << 40; // a stream: each event is bounded instead
    auto parser = std::make_shared<sse_parser>(opts_.max_message_bytes);
    auto ok = std::make_shared<bool>(false);
    http_handlers h;
    h.on_head = [ok](const http_head& head) {
        *ok =
            head.status == 200 && starts_with_ci(head.header("content-type"), "text/event-stream");
    };
    h.on_body = [this, parser, ok](std::string_view b) {
        if (!*ok) return;
        stream_failures_ = 0;
        parser->feed(b, [this](sse_event& e) {
            if (e.type == "message" && !e.data.empty()) emit(e.data);
        });
    };
    h.on_done = [this, parser, ok](http_outcome out) {
        stream_.reset();
        if (closing_) return;
        if (!parser->last_event_id().empty()) stream_last_id_ = parser->last_event_id();
        if (out.error.empty() && out.head.status == 405) return; // no stream offered
        if (out.error.empty() && out.head.status == 404 && !session_id_.empty()) {
            log(fmt::format("meith-remote: {} ended the session (HTTP 404)", opts_.url));
            return end(75);
        }
        if (out.error.empty() && out.head.status == 401 && creds_ && renewable(*creds_))
            return refresh([this](bool good) {
                if (good) open_stream(stream_last_id_);
            });
        if (out.refused) {
            refused(out);
            return;
        }
        // Cut or ended: open it again after the server's `retry:`, else a backoff, from the
        // last event seen.
        if (parser->reconnection_ms()) stream_retry_ms_ = parser->reconnection_ms();
        const auto delay =
            reconnect_wait(stream_retry_ms_, backoff(std::min(stream_failures_++, 5)));
        stream_timer_.expires_after(delay);
        stream_timer_.async_wait([this](const std::error_code& ec) {
            if (!ec && !stream_) open_stream(stream_last_id_);
        });
    };
    stream_ = http_.start(std::move(req), std::move(h));
}

void bridge::resume(const std::string& id_json, const std::string& last_event_id, int tries,
                    std::optional<long> retry_ms) {
    if (closing_) return;
    // The first try goes at once unless the server set a reconnection time; later ones back off.
    if (const auto wait = reconnect_wait(retry_ms, tries == 0 ? std::chrono::milliseconds(0)
                                                              : backoff(tries - 1));
        wait.count() > 0) {
        auto t = std::make_shared<asio::steady_timer>(io_, wait);
        return t->async_wait([this, t, id_json, last_event_id, tries](const std::error_code& ec) {
            if (!ec) get_stream_again(id_json, last_event_id, tries);
        });
    }
    get_stream_again(id_json, last_event_id, tries);
}

void bridge::get_stream_again(const std::string& id_json, const std::string& last_event_id,
                              int tries) {
    if (closing_) return;
    if (tries >= 3) {
        outgoing m;
        m.id_json = id_json;
        m.method = "?";
        return fail_message(m, fmt::format("{} cut the response stream and it could not be "
                                           "resumed",
                                           opts_.url));
    }
    http_request req;
    req.method = "GET";
    req.url = opts_.url;
    req.headers = request_headers(nullptr);
    req.headers.push_back("Last-Event-ID: " + last_event_id);
    req.connect_timeout = opts_.connect_timeout;
    req.max_body_bytes = std::size_t{1} << 40;
    auto parser = std::make_shared<sse_parser>(opts_.max_message_bytes);
    auto rid = std::make_shared<http_client::request_id>(0);
    http_handlers h;
    h.on_body = [this, parser, id_json, rid](std::string_view b) {
        parser->feed(b, [this](sse_event& e) {
            if (e.type == "message" && !e.data.empty()) emit(e.data);
        });
        // The answer came: a resumed stream may stay open after it; close it here.
        if (answered_.erase(id_json) > 0) http_.cancel(*rid);
    };
    h.on_done = [this, id_json, last_event_id, parser, tries](http_outcome out) {
        if (answered_.erase(id_json) > 0 || closing_) return;
        if (out.refused) {
            outgoing m;
            m.id_json = id_json;
            m.method = "?";
            return fail_message(m, refused(out));
        }
        const auto from = parser->last_event_id().empty() ? last_event_id : parser->last_event_id();
        resume(id_json, from, tries + 1, parser->reconnection_ms());
    };
    *rid = http_.start(std::move(req), std::move(h));
}

} // namespace meith::remote
