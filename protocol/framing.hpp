// framing: newline-delimited frames with a hard size bound (docs/protocol.md §2).
//
// `line_framer` owns one read buffer per connection. The reader asks for free space with
// `prepare`, reads into it, `commit`s the bytes, then drains complete frames with `next`.
// A line longer than `max_frame_bytes` is discarded up to its newline and reported once as
// `oversized`, so memory stays bounded (at most max_frame_bytes + one read chunk + padding)
// whatever a peer sends. Lines returned by `next` are followed by at least
// `frame_padding` readable bytes, so a simdjson parser can read them in place.
// Not thread-safe; one framer per connection.
#pragma once

#include "protocol/top_level_scan.hpp"

#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace meith::protocol {

/// Slack kept readable after every returned line (simdjson's SIMDJSON_PADDING is 64).
inline constexpr std::size_t frame_padding = 64;

class line_framer {
  public:
    enum class status {
        frame,     ///< `line()` holds one frame, without its "\n" or "\r\n"
        oversized, ///< a frame over the limit was dropped; `dropped_bytes()` says how big
        need_more, ///< no complete frame buffered
    };

    /// `max_frame_bytes`: the longest accepted line, excluding its line ending.
    /// `read_chunk`: how much free space `prepare` offers at least.
    explicit line_framer(std::size_t max_frame_bytes, std::size_t read_chunk = 64 * 1024);

    /// Free space to read into (at least `read_chunk` bytes).
    std::span<char> prepare();
    /// Marks `n` bytes of the span from `prepare` as filled.
    void commit(std::size_t n);

    /// Extracts the next event. Empty lines are skipped. The returned line stays valid until
    /// the next call to `next` or `prepare`.
    status next();

    std::string_view line() const { return line_; }
    std::size_t dropped_bytes() const { return dropped_; }
    /// The first bytes (up to 256) of the last oversized frame, e.g. for a log line.
    std::string_view oversized_prefix() const { return prefix_; }
    /// Scans every oversized frame, as its bytes pass, for the top-level members `keys`
    /// (top_level_scan.hpp): a request id written after a long result is still found.
    void
    scan_oversized(std::initializer_list<std::string_view> keys,
                   top_level_scanner::duplicates dup = top_level_scanner::duplicates::first_wins) {
        members_.emplace(keys, dup);
    }
    /// The scanned value of `keys[i]` in the last oversized frame (scan_oversized first).
    const top_level_scanner::value& oversized_member(std::size_t i) const {
        return members_->get(i);
    }
    /// The buffered bytes of an unterminated last line (e.g. at EOF), empty while discarding.
    std::string_view partial() const {
        return discarding_ ? std::string_view{}
                           : std::string_view(buf_.get() + begin_, end_ - begin_);
    }
    /// True while the rest of an over-long line is being dropped (`oversized` follows at its
    /// newline); a client that gives up on such a line at once looks here after `need_more`.
    bool discarding() const { return discarding_; }
    /// Bytes buffered but not yet returned (a partial frame).
    std::size_t buffered() const { return end_ - begin_; }
    /// Current allocation, for memory accounting.
    std::size_t capacity() const { return cap_; }
    /// How often the buffer was reallocated, and the bytes those reallocations copied (to check
    /// that a long frame costs linear time: the buffer doubles, up to the frame bound).
    std::size_t growths() const { return growths_; }
    std::size_t bytes_copied() const { return copied_; }
    /// Frees the buffer when no partial frame is held (an idle connection keeps none).
    void release();
    /// Releases an oversized buffer when nothing is buffered (after a huge frame).
    void shrink_if_idle();

  private:
    std::size_t max_;
    std::size_t chunk_;
    std::unique_ptr<char[]> buf_; ///< not value-initialised: no memset per (re)allocation
    std::size_t cap_ = 0;
    std::size_t begin_ = 0; ///< first unconsumed byte
    std::size_t end_ = 0;   ///< one past the last filled byte
    std::size_t scan_ = 0;  ///< bytes from begin_ already known to hold no '\n'
    bool discarding_ = false;
    bool dropped_cr_ = false; ///< the last byte dropped while discarding was '\r'
    std::size_t dropped_ = 0;
    std::string_view line_;
    std::string prefix_;
    std::optional<top_level_scanner> members_;
    std::size_t growths_ = 0;
    std::size_t copied_ = 0;
};

} // namespace meith::protocol
