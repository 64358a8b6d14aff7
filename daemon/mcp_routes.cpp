// mcp_routes: a connection's MCP families beyond tools (docs/protocol.md §17) — mcp_request
// frames answered by the registry's gateway, servers' requests (sampling, elicitation, roots)
// sent to the client as client_request frames and their client_response answers, and the
// gateway's notifications.
#include "daemon/connection.hpp"

#include "platform/fd_passing.hpp"
#include "protocol/json_writer.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

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

// ---- `meith mcp` hands over its stdio (docs/protocol.md §10 "Handoff") -------------------

namespace meith::daemon {

namespace {

/// Why `fd` cannot be the client's `what` (stdin: read, stdout and stderr: written), or "".
/// A pipe or a socket only: a terminal is shared with the user's shell and a file may block
/// (NFS, FUSE), and meithd's one I/O thread must never wait; O_PATH descriptors open nothing.
std::string unfit(int fd, std::string_view what, bool reads) {
    struct stat st {};
    if (::fstat(fd, &st) != 0) return fmt::format("its {} cannot be examined", what);
    if (!S_ISFIFO(st.st_mode) && !S_ISSOCK(st.st_mode))
        return fmt::format("its {} is not a pipe or a socket", what);
    const int flags = ::fcntl(fd, F_GETFL);
    if (flags < 0 || (flags & O_PATH) != 0)
        return fmt::format("its {} is not open for {}", what, reads ? "reading" : "writing");
    const int mode = flags & O_ACCMODE;
    if (reads ? mode == O_WRONLY : mode == O_RDONLY)
        return fmt::format("its {} is not open for {}", what, reads ? "reading" : "writing");
    return {};
}

/// The descriptors that came with a frame, closed unless taken.
struct passed_fds {
    std::vector<int> fds;
    ~passed_fds() {
        for (int fd : fds)
            if (fd >= 0) ::close(fd);
    }
    /// Takes fds[i] as a descriptor of meithd's own (platform::private_nonblocking), or
    /// sets `why`.
    mcp_handoff::client_fd take(std::size_t i, bool write, std::string_view what,
                                std::string& why) {
        const bool socket = [&] {
            struct stat st {};
            return ::fstat(fds[i], &st) == 0 && S_ISSOCK(st.st_mode);
        }();
        const int own = platform::private_nonblocking(fds[i], write);
        if (own < 0) {
            why = fmt::format("its {} cannot be opened: {}", what, std::strerror(errno));
            return {};
        }
        fds[i] = -1; // closed by private_nonblocking, or kept as `own`
        return {own, socket};
    }
};

} // namespace

void connection::on_mcp_handoff(const protocol::frame_head& f,
                                const protocol::mcp_handoff_frame& body, std::string&) {
    passed_fds passed{std::exchange(passed_fds_, {})};
    auto& fds = passed.fds;
    std::string fields;
    protocol::json_members(fields)
        .string("sessionId", session_id_)
        .number("pid", static_cast<std::uint64_t>(peer_.pid));
    const auto refuse = [&](const std::string& why) {
        protocol::append_error_frame(outbound_, f.request_id, "mcp_handoff refused: " + why);
        protocol::json_members(fields).string("reason", why);
        audit_.event("mcp_handoff_refused", fields);
    };
    std::string why;
    if (handoff_ || in_process_)
        why = "this connection has handed over an MCP session already";
    else if (fds.size() < 2)
        why = "mcp_handoff needs the client's stdin and stdout attached to it (SCM_RIGHTS)";
    else if (!adopt_)
        why = "this meithd cannot take MCP sessions";
    if (why.empty()) why = unfit(fds[0], "stdin", true);
    if (why.empty()) why = unfit(fds[1], "stdout", false);
    if (!why.empty()) return refuse(why);
    mcp_handoff::client_fd in = passed.take(0, false, "stdin", why);
    if (!why.empty()) return refuse(why);
    mcp_handoff::client_fd out = passed.take(1, true, "stdout", why);
    if (!why.empty()) {
        ::close(in.fd);
        return refuse(why);
    }
    mcp_handoff::client_fd err;
    if (fds.size() > 2 && unfit(fds[2], "stderr", false).empty()) {
        std::string ignored; // an unfit stderr: the session's notes go to meithd's log only
        err = passed.take(2, true, "stderr", ignored);
    }
    bridge::settings s;
    s.caller = permissions::to_string(caller_for(f));
    s.all = body.all;
    s.search = body.search;
    if (!client_name_.empty()) s.client = client_name_;
    s.when_down = "; meith mcp carries on and reconnects for the next request";
    auto host = std::make_shared<mcp_handoff>(socket_.get_executor(), in, out, err, std::move(s),
                                              "mcp session of " + session_id_,
                                              [weak = weak_from_this()](int status) {
                                                  if (auto self = weak.lock())
                                                      self->on_mcp_ended(status);
                                              });
    if (!host->failed().empty()) return refuse(host->failed());
    // The session's own connection: an ordinary client of the same peer, in this process.
    const std::weak_ptr<mcp_handoff> weak_host = host;
    auto inner = adopt_(peer_, {[weak_host](std::string_view frames) {
                                    if (auto h = weak_host.lock()) h->on_frames(frames);
                                },
                                [weak_host] {
                                    auto h = weak_host.lock();
                                    return h ? h->backlog() : std::size_t{0};
                                },
                                [weak_host](bool stopping) {
                                    if (auto h = weak_host.lock())
                                        h->on_connection_closed(stopping);
                                }});
    if (!inner) {
        host->end(); // `meith mcp` keeps the session, on its own copies of the pipes
        return refuse("meithd is shutting down");
    }
    host->attach(inner);
    handoff_ = std::move(host);
    audit_.event("mcp_handoff", fields);
    handoff_->start();
    outbound_.append(R"({"type":"mcp_handoff_result","protocol":1,"requestId":)");
    append_json_string(outbound_, *f.request_id);
    outbound_.append("}\n");
}

void connection::on_mcp_ended(int exit_status) {
    handoff_.reset();
    if (closed_) return;
    if (exit_status == mcp_handoff::no_verdict) {
        // No verdict: `meith mcp` takes the session over on its own copies of the pipes.
        close_after_flush("the handed-over MCP session's connection ended");
        return;
    }
    outbound_.append(R"({"type":"mcp_ended","protocol":1,"exitCode":)");
    outbound_.append(std::to_string(exit_status));
    outbound_.append("}\n");
    close_after_flush("the handed-over MCP session ended");
}

} // namespace meith::daemon
