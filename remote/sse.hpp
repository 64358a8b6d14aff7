// sse: a parser for text/event-stream bodies (WHATWG HTML, "Server-sent events", §9.2.6
// "Interpreting an event stream"): fields `event`, `data`, `id`, `retry`; lines end in CRLF,
// LF or CR; a blank line dispatches the event. Streamable HTTP carries JSON-RPC messages as
// the `data` of `message` events (MCP spec, transports).
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace meith::remote {

struct sse_event {
    std::string type = "message"; ///< `event:` field, default "message"
    std::string data;             ///< `data:` lines joined by "\n"
    std::string id;               ///< the stream's last event id after this event
    std::optional<long> retry_ms; ///< a `retry:` field in this event
};

class sse_parser {
  public:
    /// `max_event_bytes` bounds one event's data (exactly that many bytes pass); a longer
    /// event is dropped and counted.
    explicit sse_parser(std::size_t max_event_bytes) : max_event_bytes_(max_event_bytes) {}

    /// Feeds the next chunk of the body; calls `on_event` for each complete event.
    void feed(std::string_view chunk, const std::function<void(sse_event&)>& on_event);

    /// The stream's last event id as of the last dispatched event (a blank line), for
    /// `Last-Event-ID` when resuming: an `id:` of an event cut short does not count.
    const std::string& last_event_id() const { return last_id_; }

    /// The stream's reconnection time: the last `retry:` field read (its digits only), kept
    /// for the whole stream (§9.2.6: "set the event stream's reconnection time"). Nullopt until
    /// the server sent one: the client then waits its own backoff.
    std::optional<long> reconnection_ms() const { return reconnection_ms_; }

    /// Events dropped for being over the bound.
    std::size_t dropped() const { return dropped_; }

  private:
    void line(std::string_view l, const std::function<void(sse_event&)>& on_event);

    std::size_t max_event_bytes_;
    std::string pending_;   ///< an incomplete line
    bool after_cr_ = false; ///< the previous chunk ended in CR: a leading LF belongs to it
    sse_event event_;
    bool has_data_ = false;
    bool oversized_ = false;
    std::string id_buffer_; ///< the last `id:` field read, set as last_id_ at dispatch
    std::string last_id_;
    std::optional<long> retry_;
    std::optional<long> reconnection_ms_;
    std::size_t dropped_ = 0;
};

} // namespace meith::remote
