// bridge: stdio <-> Streamable HTTP for one remote MCP source (see bridge.hpp).
#include "remote/bridge.hpp"

#include "protocol/json_writer.hpp"

#include <asio/read.hpp>
#include <asio/write.hpp>

#include <fmt/format.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <ctime>

namespace meith::remote {

using protocol::append_json_string;

namespace {

constexpr std::string_view credentials_request_id = "\"meith:credentials\"";

std::int64_t unix_now() {
    return static_cast<std::int64_t>(std::time(nullptr));
}

void log(const std::string& line) {
    // stderr goes to meithd's log (redacted there); never a token here.
    std::fprintf(stderr, "%s\n", line.c_str());
}

bool starts_with_ci(std::string_view s, std::string_view p) {
    if (s.size() < p.size()) return false;
    for (std::size_t i = 0; i < p.size(); ++i)
        if (std::tolower(static_cast<unsigned char>(s[i])) != p[i]) return false;
    return true;
}

std::chrono::milliseconds backoff(int attempt) {
    return std::chrono::milliseconds(std::min(250 << std::min(attempt, 6), 8000));
}

/// How long to wait before opening a cut stream again: the server's `retry:` (SSE
/// "reconnection time", MCP transports: "the client MUST respect the retry field") when it
/// sent one, between 100 ms (a server that says 0 and ends each stream at once must not have
/// meith reconnect in a tight loop) and 30 s (as Retry-After), else `otherwise`.
std::chrono::milliseconds reconnect_wait(std::optional<long> retry_ms,
                                         std::chrono::milliseconds otherwise) {
    if (!retry_ms) return otherwise;
    return std::chrono::milliseconds(std::clamp<long>(*retry_ms, 100, 30000));
}

/// Whether the space-separated scope list `held` has every scope of `wanted` (RFC 6749 §3.3).
bool covers(std::string_view held, std::string_view wanted) {
    auto words = [](std::string_view s) {
        std::vector<std::string_view> out;
        for (std::size_t i = 0; i < s.size();) {
            const auto sp = s.find(' ', i);
            const auto w = s.substr(i, sp == std::string_view::npos ? s.npos : sp - i);
            if (!w.empty()) out.push_back(w);
            if (sp == std::string_view::npos) break;
            i = sp + 1;
        }
        return out;
    };
    const auto have = words(held);
    for (auto w : words(wanted))
        if (std::find(have.begin(), have.end(), w) == have.end()) return false;
    return true;
}

/// A value that may go in a header line as is: printable ASCII, no CR/LF.
bool header_safe(std::string_view v) {
    return std::all_of(v.begin(), v.end(), [](char c) { return c >= 0x20 && c < 0x7f; });
}
} // namespace

bridge::bridge(asio::io_context& io, bridge_options opts)
    : io_(io), opts_(std::move(opts)), in_(io, ::dup(STDIN_FILENO)), out_(io, ::dup(STDOUT_FILENO)),
      http_(io.get_executor(), opts_.egress), in_framer_(opts_.max_message_bytes),
      refresh_timer_(io), stream_timer_(io) {
}

void bridge::start() {
    in_framer_.scan_oversized({"id"});
    // The secrets first: meithd answers this before anything is sent to the server.
    write_line(
        R"({"jsonrpc":"2.0","id":"meith:credentials","method":"meith/credentials","params":{}})");
    read_stdin();
}

void bridge::read_stdin() {
    auto buf = in_framer_.prepare();
    in_.async_read_some(asio::buffer(buf.data(), buf.size()),
                        [this](const std::error_code& ec, std::size_t n) {
                            if (ec) return shutdown();
                            in_framer_.commit(n);
                            for (;;) {
                                const auto st = in_framer_.next();
                                if (st == protocol::line_framer::status::need_more) break;
                                if (st == protocol::line_framer::status::oversized)
                                    on_oversized();
                                else
                                    on_line(in_framer_.line());
                                if (closing_) return;
                            }
                            read_stdin();
                        });
}

void bridge::on_oversized() {
    // Dropped whole, its tail never read as a message of its own; a request is answered so
    // that its call fails now, saying why, instead of timing out.
    const auto& id = in_framer_.oversized_member(0);
    const auto why = fmt::format("the request is {} bytes, over meith-remote's limit of {} bytes "
                                 "(meithd's max_result_bytes + 1 MiB): not sent to {}",
                                 in_framer_.dropped_bytes(), opts_.max_message_bytes, opts_.url);
    log("meith-remote: " + why);
    outgoing m;
    m.method = "?";
    if (id.k == protocol::top_level_scanner::value::kind::number)
        m.id_json = id.text;
    else if (id.k == protocol::top_level_scanner::value::kind::string)
        m.id_json = '"' + id.text + '"'; // a string without escapes (top_level_scan.hpp)
    if (!m.id_json.empty()) fail_message(m, why);
}

void bridge::on_line(std::string_view line) {
    if (line.empty() || line == "\r") return;
    simdjson::dom::object msg;
    if (parser_.parse(line.data(), line.size()).get_object().get(msg) != simdjson::SUCCESS) {
        log("meith-remote: a line from meithd that is not a JSON object; dropped");
        return;
    }
    auto m = std::make_shared<outgoing>();
    std::string_view method;
    if (msg["method"].get_string().get(method) == simdjson::SUCCESS)
        m->method = std::string(method);
    simdjson::dom::element id;
    if (msg["id"].get(id) == simdjson::SUCCESS) m->id_json = simdjson::minify(id);
    if (m->method.empty() && m->id_json == credentials_request_id) return on_config(msg);
    if (m->method == "initialize") initialize_id_ = m->id_json;
    // 2026-07-28: the revision rides in each request's envelope, and its HTTP headers name the
    // method and the tool, prompt or resource.
    std::string_view v;
    if (msg["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"].get_string().get(v) ==
        simdjson::SUCCESS)
        m->version = std::string(v);
    if (msg["params"]["name"].get_string().get(v) == simdjson::SUCCESS ||
        msg["params"]["uri"].get_string().get(v) == simdjson::SUCCESS)
        m->target = std::string(v);
    m->body.assign(line);
    if (!configured_) {
        held_.emplace_back(line);
        return;
    }
    // A cancelled request's answer stream is closed too: meithd has forgotten the call, and a
    // server that never ends the stream must not pile up open transfers.
    simdjson::dom::element cancelled;
    const bool cancels = m->method == "notifications/cancelled" &&
                         msg["params"]["requestId"].get(cancelled) == simdjson::SUCCESS;
    const std::string cancelled_id = cancels ? simdjson::minify(cancelled) : std::string();
    send(std::move(m));
    if (auto it = in_flight_.find(cancelled_id); cancels && it != in_flight_.end()) {
        http_.cancel(it->second);
        in_flight_.erase(it);
    }
}

void bridge::on_config(simdjson::dom::object msg) {
    simdjson::dom::object result;
    if (msg["result"].get_object().get(result) == simdjson::SUCCESS) {
        simdjson::dom::array headers;
        if (result["headers"].get_array().get(headers) == simdjson::SUCCESS)
            for (auto h : headers) {
                std::string_view v;
                if (h.get_string().get(v) != simdjson::SUCCESS) continue;
                static_headers_.emplace_back(v);
                if (const auto colon = v.find(':'); colon != std::string_view::npos) {
                    auto value = v.substr(colon + 1);
                    while (!value.empty() && value.front() == ' ')
                        value.remove_prefix(1);
                    header_secrets_.emplace_back(value);
                }
            }
        simdjson::dom::array secrets;
        if (result["secrets"].get_array().get(secrets) == simdjson::SUCCESS)
            for (auto e : secrets) {
                std::string_view v;
                if (e.get_string().get(v) == simdjson::SUCCESS) header_secrets_.emplace_back(v);
            }
        simdjson::dom::element grant;
        if (result["grant"].get(grant) == simdjson::SUCCESS && grant.is_object()) {
            std::string why;
            creds_ = credentials_from_json(simdjson::minify(grant), why);
        }
    } else {
        log("meith-remote: meithd sent no credentials; going on without");
    }
    configured_ = true;
    schedule_refresh();
    auto held = std::move(held_);
    held_.clear();
    for (auto& line : held)
        on_line(line);
}

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
    if (status == 401) {
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
    if (status == 403) {
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
            return fail_message(*m, why);
        }
    }
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

void bridge::retry_later(std::shared_ptr<outgoing> m, std::chrono::milliseconds delay) {
    ++m->attempt;
    auto t = std::make_shared<asio::steady_timer>(io_, delay);
    t->async_wait([this, m, t](const std::error_code& ec) {
        if (!ec) post(m);
    });
}

std::string bridge::error_detail(std::string_view body) const {
    // Cut first, then redacted: a token the cut splits is a prefix of it (issue 40, #16).
    std::string detail(protocol::cut_utf8(body, 200));
    std::replace(detail.begin(), detail.end(), '\n', ' ');
    std::replace(detail.begin(), detail.end(), '\r', ' ');
    auto secrets = header_secrets_;
    if (creds_)
        for (auto& v : secret_values(*creds_))
            secrets.push_back(std::move(v));
    redact_secret_pieces(detail, secrets);
    return detail;
}

void bridge::fail_message(const outgoing& m, const std::string& why) {
    // server/discover is meithd's probe: a server of an older revision refuses it by design.
    if (m.method != "server/discover") log("meith-remote: " + why);
    if (m.id_json.empty() || m.method.empty()) return; // a notification or our own answer
    std::string line = R"({"jsonrpc":"2.0","id":)";
    line += m.id_json;
    line += R"(,"error":{"code":-32603,"message":)";
    append_json_string(line, why);
    line += "}}";
    write_line(std::move(line));
}

void bridge::emit(std::string_view json) {
    std::string line(json);
    // Raw CR/LF in JSON text is whitespace only (RFC 8259 §2, §7): one line for meithd.
    std::replace(line.begin(), line.end(), '\n', ' ');
    std::replace(line.begin(), line.end(), '\r', ' ');
    simdjson::dom::element root;
    simdjson::dom::object msg;
    const bool parsed = parser_.parse(line).get(root) == simdjson::SUCCESS;
    if (parsed && root.is_array()) {
        // A JSON-RPC batch (2025-03-26 allowed them): each message on its own. The elements
        // are copied out first: emit() reuses the parser.
        std::vector<std::string> each;
        simdjson::dom::array batch;
        if (root.get_array().get(batch) == simdjson::SUCCESS)
            for (auto e : batch)
                each.push_back(simdjson::minify(e));
        for (const auto& m : each)
            if (!m.empty() && m.front() == '{') emit(m);
        return;
    }
    if (!parsed || root.get_object().get(msg) != simdjson::SUCCESS) {
        log(fmt::format("meith-remote: {} sent a message that is not a JSON object ({} bytes); "
                        "dropped",
                        opts_.url, line.size()));
        return;
    }
    std::string_view method;
    if (msg["method"].get_string().get(method) == simdjson::SUCCESS) {
        if (method.starts_with("meith/")) {
            log(fmt::format("meith-remote: {} sent a message in meith's own namespace ({}); "
                            "dropped",
                            opts_.url, protocol::cut_utf8(method, 80)));
            return;
        }
    } else {
        simdjson::dom::element id;
        if (msg["id"].get(id) == simdjson::SUCCESS) {
            const auto id_json = simdjson::minify(id);
            if (id_json == credentials_request_id) return; // never an answer of ours
            answered_.insert(id_json);
            if (answered_.size() > 4096) answered_.clear();
            if (!initialize_id_.empty() && id_json == initialize_id_) {
                std::string_view v;
                if (msg["result"]["protocolVersion"].get_string().get(v) == simdjson::SUCCESS)
                    protocol_version_ = std::string(v);
                initialize_id_.clear();
            }
        }
    }
    write_line(std::move(line));
}

void bridge::write_line(std::string line) {
    line += '\n';
    out_queue_.push_back(std::move(line));
    flush();
}

void bridge::flush() {
    if (writing_ || out_queue_.empty()) return;
    writing_ = true;
    // One write per turn: every queued line in one buffer.
    auto batch = std::make_shared<std::string>();
    for (auto& l : out_queue_)
        *batch += l;
    out_queue_.clear();
    asio::async_write(out_, asio::buffer(*batch),
                      [this, batch](const std::error_code& ec, std::size_t) {
                          writing_ = false;
                          if (ec) return end(0); // meithd is gone
                          flush();
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

// ---- the grant ------------------------------------------------------------------------------

void bridge::refresh(std::function<void(bool)> then) {
    after_refresh_.push_back(std::move(then));
    if (refreshing_) return;
    if (!creds_) {
        auto waiting = std::move(after_refresh_);
        after_refresh_.clear();
        for (auto& f : waiting)
            f(false);
        return;
    }
    refreshing_ = true;
    refresh_grant(http_, *creds_, [this](refresh_outcome r) {
        refreshing_ = false;
        const bool ok = r.creds.has_value();
        if (ok) {
            creds_ = std::move(r.creds);
            std::string line =
                R"({"jsonrpc":"2.0","method":"meith/credentials_refreshed","params":{"grant":)";
            line += to_json(*creds_);
            line += "}}";
            write_line(std::move(line)); // meithd stores it and logs the refresh
            schedule_refresh();
        } else if (r.invalid_grant) {
            login_required("the grant was revoked or has expired (" + r.why + ")", {});
        } else {
            log("meith-remote: refresh failed: " + r.why);
        }
        auto waiting = std::move(after_refresh_);
        after_refresh_.clear();
        for (auto& f : waiting)
            f(ok);
    });
}

void bridge::schedule_refresh() {
    refresh_timer_.cancel();
    if (!creds_ || creds_->expires_at <= 0 || !renewable(*creds_)) return;
    const auto left = creds_->expires_at - unix_now();
    // Refresh a minute early, or a quarter of the lifetime left for short-lived tokens.
    const auto early = std::clamp<std::int64_t>(left / 4, 1, 60);
    refresh_timer_.expires_after(std::chrono::seconds(std::max<std::int64_t>(left - early, 0)));
    refresh_timer_.async_wait([this](const std::error_code& ec) {
        if (!ec && !closing_) refresh([](bool) {});
    });
}

std::string bridge::refused(const http_outcome& out) {
    // Not transient: a restart would be refused again.
    const auto why = fmt::format("{} ({}); {}", out.error, opts_.url, out.remedy);
    std::string line = R"({"jsonrpc":"2.0","method":"meith/egress_refused","params":{"reason":)";
    append_json_string(line, why);
    write_line(line + "}}");
    return why;
}

namespace {
/// `{"reason":…,"challenge":{…}}`: what meithd keeps for `meith login` (docs/protocol.md §18).
std::string challenge_params(const std::string& why, const bearer_challenge& c) {
    std::string p = R"({"reason":)";
    append_json_string(p, why);
    p += R"(,"challenge":)";
    append_json(p, c);
    return p + "}";
}
} // namespace

void bridge::login_required(const std::string& why, const bearer_challenge& challenge) {
    if (login_required_sent_) return;
    login_required_sent_ = true;
    write_line(R"({"jsonrpc":"2.0","method":"meith/login_required","params":)" +
               challenge_params(why, challenge) + "}");
}

void bridge::step_up_required(const std::string& why, const bearer_challenge& challenge) {
    write_line(R"({"jsonrpc":"2.0","method":"meith/step_up_required","params":)" +
               challenge_params(why, challenge) + "}");
}

// ---- the end ----------------------------------------------------------------------------------

void bridge::shutdown() {
    if (closing_) return;
    closing_ = true;
    refresh_timer_.cancel();
    stream_timer_.cancel();
    if (stream_) http_.cancel(*stream_);
    if (session_id_.empty()) return end(0);
    // MCP transports: a client that is done with a session DELETEs it.
    http_request req;
    req.method = "DELETE";
    req.url = opts_.url;
    req.headers = request_headers(nullptr);
    req.timeout = std::chrono::milliseconds(2000);
    req.connect_timeout = std::chrono::milliseconds(2000);
    http_handlers h;
    h.on_done = [this](http_outcome) { end(0); };
    http_.start(std::move(req), std::move(h));
}

void bridge::end(int status) {
    exit_status_ = status;
    closing_ = true;
    io_.stop();
}

} // namespace meith::remote
