// sse: event stream interpretation, line by line (see sse.hpp).
#include "remote/sse.hpp"

#include <charconv>

namespace meith::remote {

void sse_parser::feed(std::string_view chunk, const std::function<void(sse_event&)>& on_event) {
    if (chunk.empty()) return; // keeps after_cr_: a CR's LF may be in the next chunk
    std::size_t i = 0;
    if (after_cr_ && !chunk.empty() && chunk.front() == '\n') i = 1;
    after_cr_ = false;
    while (i < chunk.size()) {
        const auto end = chunk.find_first_of("\r\n", i);
        if (end == std::string_view::npos) {
            if (pending_.size() + (chunk.size() - i) <= max_event_bytes_ + 1024)
                pending_.append(chunk.substr(i));
            else
                oversized_ = true;
            return;
        }
        if (pending_.empty()) {
            line(chunk.substr(i, end - i), on_event);
        } else {
            pending_.append(chunk.substr(i, end - i));
            std::string whole = std::move(pending_);
            pending_.clear();
            line(whole, on_event);
        }
        i = end + 1;
        if (chunk[end] == '\r') {
            if (i < chunk.size() && chunk[i] == '\n')
                ++i;
            else if (i == chunk.size())
                after_cr_ = true;
        }
    }
}

void sse_parser::line(std::string_view l, const std::function<void(sse_event&)>& on_event) {
    if (l.empty()) { // dispatch
        last_id_ = id_buffer_;
        if (oversized_) {
            ++dropped_;
        } else if (has_data_) {
            event_.id = last_id_;
            if (event_.type.empty()) event_.type = "message";
            event_.retry_ms = retry_;
            on_event(event_);
        }
        event_ = sse_event{};
        has_data_ = false;
        oversized_ = false;
        retry_.reset();
        return;
    }
    if (l.front() == ':') return; // comment (keep-alive)
    std::string_view field = l, value;
    if (const auto colon = l.find(':'); colon != std::string_view::npos) {
        field = l.substr(0, colon);
        value = l.substr(colon + 1);
        if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
    }
    if (field == "data") {
        if (event_.data.size() + (has_data_ ? 1 : 0) + value.size() > max_event_bytes_) {
            oversized_ = true;
            return;
        }
        if (has_data_) event_.data += '\n';
        event_.data.append(value);
        has_data_ = true;
    } else if (field == "event") {
        event_.type.assign(value);
    } else if (field == "id") {
        if (value.find('\0') == std::string_view::npos) id_buffer_.assign(value);
    } else if (field == "retry") {
        long ms = 0; // ASCII digits only: from_chars alone would take "-5"
        const auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), ms);
        if (ec == std::errc() && p == value.data() + value.size() && value.front() != '-') {
            retry_ = ms;
            reconnection_ms_ = ms; // §9.2.6: set at once, whether or not the event dispatches
        }
    }
}

} // namespace meith::remote
