// bridge: stdio <-> Streamable HTTP for one remote MCP source (see bridge.hpp).
#include "remote/bridge.hpp"

#include "protocol/json_writer.hpp"
#include "remote/bridge_internal.hpp"

#include <asio/read.hpp>
#include <asio/write.hpp>

#include <fmt/format.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <ctime>

namespace meith::remote {

using namespace bridge_detail;
using protocol::append_json_string;

namespace {

constexpr std::string_view credentials_request_id = "\"meith:credentials\"";

} // namespace

bridge::bridge(asio::io_context& io, bridge_options opts)
    : io_(io), opts_(std::move(opts)), in_(io, ::dup(STDIN_FILENO)), out_(io, ::dup(STDOUT_FILENO)),
      http_(io.get_executor(), opts_.egress), in_framer_(opts_.max_message_bytes),
      out_writer_(out_, max_unread, [this](const std::error_code&) { end(0); }), refresh_timer_(io),
      stream_timer_(io) {
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
    std::string line = "{";
    protocol::json_members m_(line);
    m_.string("jsonrpc", "2.0").raw("id", m.id_json);
    m_.key("error").push_back('{');
    m_.raw("code", "-32603").string("message", why);
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

void bridge::notify_daemon(std::string_view method, std::string_view params_json) {
    std::string line = "{";
    protocol::json_members(line)
        .string("jsonrpc", "2.0")
        .string("method", method)
        .raw("params", params_json);
    write_line(line + "}");
}

void bridge::write_line(std::string line) {
    line += '\n';
    if (out_writer_.write(line)) return;
    log(fmt::format("meith-remote: meithd has not read {} bytes of this bridge's output; "
                    "leaving",
                    out_writer_.pending()));
    end(1);
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
            std::string params = "{";
            protocol::json_members(params).raw("grant", to_json(*creds_));
            // meithd stores it and logs the refresh
            notify_daemon("meith/credentials_refreshed", params + "}");
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
    std::string params = "{";
    protocol::json_members(params).string("reason", why);
    notify_daemon("meith/egress_refused", params + "}");
    return why;
}

namespace {
/// `{"reason":…,"challenge":{…}}`: what meithd keeps for `meith login` (docs/protocol.md §18).
std::string challenge_params(const std::string& why, const bearer_challenge& c) {
    std::string p = "{";
    protocol::json_members m(p);
    m.string("reason", why);
    append_json(m.key("challenge"), c);
    return p + "}";
}
} // namespace

void bridge::login_required(const std::string& why, const bearer_challenge& challenge) {
    if (login_required_sent_) return;
    login_required_sent_ = true;
    notify_daemon("meith/login_required", challenge_params(why, challenge));
}

void bridge::step_up_required(const std::string& why, const bearer_challenge& challenge) {
    notify_daemon("meith/step_up_required", challenge_params(why, challenge));
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
