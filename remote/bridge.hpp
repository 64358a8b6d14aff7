// bridge: meith-remote, the child meithd runs for a remote MCP source (`kind = "mcp"` with
// `url`, docs/protocol.md §18). It speaks MCP over stdio to meithd, one JSON-RPC message per
// line, exactly as a local server does, and Streamable HTTP to the server (MCP spec
// 2025-11-25 and 2026-07-28, "Transports"): each message meithd sends is a POST; the answers
// (a JSON body or an SSE stream of messages) come back as lines. It keeps the session id, the
// negotiated MCP-Protocol-Version header, the GET stream of server-initiated messages with
// `Last-Event-ID` resumption, retries with backoff on transient failures, and the OAuth grant:
// the bearer token on every request, a refresh before expiry and on a 401.
//
// Its secrets come from meithd over the same pipe, never argv or the environment: the first
// line it writes is the request `meith/credentials`; meithd answers with the source's static
// headers and grant. A refreshed grant goes back as the notification
// `meith/credentials_refreshed`; a grant only a new login can mend as `meith/login_required`;
// a connection the egress check refused (not worth a restart) as `meith/egress_refused`.
// Messages from the server in the `meith/` namespace are dropped, never passed to meithd.
// Running as meithd's child it is confined like any source (network only, home hidden).
#pragma once

#include "remote/http_client.hpp"
#include "remote/oauth.hpp"
#include "remote/sse.hpp"

#include "protocol/framing.hpp"
#include "protocol/pipe_writer.hpp"

#include <asio/io_context.hpp>
#include <asio/posix/stream_descriptor.hpp>
#include <asio/steady_timer.hpp>

#include <simdjson.h>

#include <deque>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

namespace meith::remote {

struct bridge_options {
    std::string source; ///< the source's name, for messages ("run `meith login NAME`")
    std::string url;
    egress_policy egress;
    std::chrono::milliseconds connect_timeout{10000};
    std::size_t max_message_bytes = 17u << 20; ///< one message from the server, at most
    int max_attempts = 4; ///< per POST, counting the first, on transient failures
};

class bridge {
  public:
    bridge(asio::io_context& io, bridge_options opts);

    /// Starts reading meithd's lines; the io_context's run() returns when meithd closes stdin
    /// (after the session's DELETE) or the session ends.
    void start();

    /// The process's exit status once run() returned.
    int exit_status() const { return exit_status_; }

  private:
    struct outgoing {
        std::string body;
        std::string method;  ///< empty for a response to the server's request
        std::string id_json; ///< empty for a notification
        std::string version; ///< the revision in its 2026-07-28 envelope, if any
        std::string target;  ///< params.name or params.uri (2026-07-28's Mcp-Name header)
        int attempt = 0;
        bool reauthorized = false;
    };

    void read_stdin();
    /// A line from meithd over the limit: dropped, its request answered with an error.
    void on_oversized();
    void on_line(std::string_view line);
    void on_config(simdjson::dom::object msg);
    void send(std::shared_ptr<outgoing> m);
    void post(std::shared_ptr<outgoing> m);
    void on_posted(std::shared_ptr<outgoing> m, http_outcome out, bool sse,
                   std::shared_ptr<std::string> body, std::shared_ptr<sse_parser> parser);
    /// HTTP 401: the token refreshed once and the message sent again, else a login asked for.
    void on_unauthorized(const std::shared_ptr<outgoing>& m, const http_outcome& out);
    /// HTTP 403 insufficient_scope: the message fails with the step-up to take; false for
    /// another 403.
    bool on_forbidden(const outgoing& m, const http_outcome& out);
    void retry_later(std::shared_ptr<outgoing> m, std::chrono::milliseconds delay);
    void fail_message(const outgoing& m, const std::string& why);
    /// A server's error body as the caller may see it: its first 200 bytes on one line, with
    /// every known secret and each prefix and suffix of one (8 bytes or more) redacted.
    std::string error_detail(std::string_view body) const;
    /// A message from the server: checked, one line to meithd.
    void emit(std::string_view json);
    void write_line(std::string line);
    /// A JSON-RPC notification to meithd (`meith/...`, docs/protocol.md §18).
    void notify_daemon(std::string_view method, std::string_view params_json);

    /// The request headers: static ones, the bearer token, the session id and the revision's
    /// (MCP-Protocol-Version; in 2026-07-28 also Mcp-Method and Mcp-Name, MCP spec transports).
    std::vector<std::string> request_headers(const outgoing* m) const;
    void open_stream(const std::string& last_event_id);
    /// GETs the response stream of request `id_json` again from `last_event_id` (`tries` so
    /// far), after `wait`: the stream's own `retry:` (capped), else the backoff.
    void resume(const std::string& id_json, const std::string& last_event_id, int tries,
                std::optional<long> retry_ms);
    void get_stream_again(const std::string& id_json, const std::string& last_event_id, int tries);

    void refresh(std::function<void(bool)> then);
    void schedule_refresh();
    void login_required(const std::string& why, const bearer_challenge& challenge);
    /// A request met 403 insufficient_scope: meithd keeps the challenge for `meith login`.
    void step_up_required(const std::string& why, const bearer_challenge& challenge);
    /// A refused connection (http_outcome::refused): tells meithd (`meith/egress_refused`,
    /// which fails the source at once) and returns the reason with the URL and the remedy.
    std::string refused(const http_outcome& out);

    void shutdown();
    void end(int status);

    asio::io_context& io_;
    bridge_options opts_;
    asio::posix::stream_descriptor in_, out_;
    http_client http_;
    simdjson::dom::parser parser_;
    protocol::line_framer in_framer_; ///< meithd's lines (protocol/framing.hpp)
    /// Lines to meithd (protocol/pipe_writer.hpp); a failed write means meithd is gone.
    protocol::pipe_writer out_writer_;
    /// More than this waiting for meithd to read ends the bridge: meithd always reads.
    static constexpr std::size_t max_unread = 64 * 1024 * 1024;
    bool closing_ = false;

    bool configured_ = false;
    std::deque<std::string> held_; ///< lines from meithd before the credentials came
    std::vector<std::string> static_headers_;
    /// Every value a server must not get back in an error: each header's value, and each
    /// `${secret:…}` value meithd filled in (its `secrets`); the grant's are added when used.
    std::vector<std::string> header_secrets_;
    std::optional<credentials> creds_;
    bool refreshing_ = false;
    std::vector<std::function<void(bool)>> after_refresh_;
    bool login_required_sent_ = false;
    asio::steady_timer refresh_timer_;

    std::string session_id_;
    std::string protocol_version_;   ///< negotiated by initialize (2025-11-25 and older)
    std::string initialize_id_;      ///< id of the initialize in flight, to read its answer
    std::set<std::string> answered_; ///< ids answered on a stream that may need resuming
    /// Requests whose POST is in flight: JSON-RPC id -> transfer (closed when cancelled).
    std::unordered_map<std::string, http_client::request_id> in_flight_;
    std::optional<http_client::request_id> stream_;
    std::string stream_last_id_;
    int stream_failures_ = 0;
    std::optional<long> stream_retry_ms_; ///< the GET stream's last `retry:` (SSE)
    asio::steady_timer stream_timer_;
    int exit_status_ = 0;
};

} // namespace meith::remote
