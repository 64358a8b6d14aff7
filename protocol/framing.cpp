#include "protocol/framing.hpp"

#include <algorithm>
#include <cstring>

namespace meith::protocol {

namespace {

/// Read buffers of idle connections (release()), kept per thread for the next prepare(): a
/// connection that sends a request, waits for the reply and sends the next makes no
/// allocation per request, while idle connections still hold no buffer of their own.
struct spare_buffers {
    static constexpr std::size_t keep = 8;
    std::unique_ptr<char[]> bufs[keep];
    std::size_t caps[keep] = {};
    std::size_t count = 0;
};

spare_buffers& spares() {
    thread_local spare_buffers s;
    return s;
}

} // namespace

line_framer::line_framer(std::size_t max_frame_bytes, std::size_t read_chunk)
    : max_(max_frame_bytes), chunk_(read_chunk) {
}

std::span<char> line_framer::prepare() {
    line_ = {};
    // Move the partial frame to the front so the buffer does not creep.
    if (begin_ > 0) {
        std::memmove(buf_.get(), buf_.get() + begin_, end_ - begin_);
        end_ -= begin_;
        begin_ = 0;
    }
    const std::size_t need = end_ + chunk_ + frame_padding;
    if (cap_ == 0) {
        // A spare of another framer fits only if it is within this one's bound too (framers
        // differ in chunk and frame bounds: the fuzzer's do, and a reload changes the latter).
        auto& s = spares();
        const std::size_t ceiling = max_ + 2 + chunk_ + frame_padding;
        if (s.count > 0 && s.caps[s.count - 1] >= need && s.caps[s.count - 1] <= ceiling) {
            --s.count;
            buf_ = std::move(s.bufs[s.count]);
            cap_ = s.caps[s.count];
        }
    }
    if (cap_ < need) {
        // Grow geometrically (a long frame costs linear time, not a copy per read), but never
        // past what the longest frame can need.
        const std::size_t ceiling = max_ + 2 + chunk_ + frame_padding;
        const std::size_t grown = std::max(need, std::min(2 * cap_, ceiling));
        auto bigger = std::unique_ptr<char[]>(new char[grown]);
        if (end_ > 0) std::memcpy(bigger.get(), buf_.get(), end_);
        copied_ += end_;
        ++growths_;
        buf_ = std::move(bigger);
        cap_ = grown;
    }
    return {buf_.get() + end_, chunk_};
}

void line_framer::commit(std::size_t n) {
    end_ += n;
}

line_framer::status line_framer::next() {
    line_ = {};
    for (;;) {
        const char* base = buf_.get() + begin_;
        const std::size_t avail = end_ - begin_;
        const void* nl = avail > scan_ ? std::memchr(base + scan_, '\n', avail - scan_) : nullptr;
        if (nl == nullptr) {
            scan_ = avail;
            if (discarding_) {
                if (members_) members_->feed({base, avail});
                dropped_ += avail;
                if (avail > 0) dropped_cr_ = base[avail - 1] == '\r';
                begin_ = end_ = scan_ = 0;
            } else if (avail > max_ + 1) { // +1: a trailing '\r' may still belong to the ending
                prefix_.assign(base, std::min<std::size_t>(avail, 256));
                if (members_) {
                    members_->reset();
                    members_->feed({base, avail});
                }
                discarding_ = true;
                dropped_ = avail;
                dropped_cr_ = base[avail - 1] == '\r';
                begin_ = end_ = scan_ = 0;
            }
            return status::need_more;
        }
        const auto len = static_cast<std::size_t>(static_cast<const char*>(nl) - base);
        begin_ += len + 1;
        scan_ = 0;
        if (discarding_) {
            discarding_ = false;
            if (members_) members_->feed({base, len});
            // The '\r' of a "\r\n" ending is not part of the frame, wherever it arrived.
            if (len > 0)
                dropped_ += base[len - 1] == '\r' ? len - 1 : len;
            else if (dropped_cr_)
                --dropped_;
            return status::oversized;
        }
        std::size_t frame_len = len;
        if (frame_len > 0 && base[frame_len - 1] == '\r') --frame_len;
        if (frame_len > max_) {
            prefix_.assign(base, std::min<std::size_t>(frame_len, 256));
            if (members_) {
                members_->reset();
                members_->feed({base, frame_len});
            }
            dropped_ = frame_len;
            return status::oversized;
        }
        if (frame_len == 0) continue; // empty lines are ignored (§2)
        line_ = std::string_view(base, frame_len);
        return status::frame;
    }
}

void line_framer::release() {
    if (begin_ != end_ || discarding_) return;
    auto& s = spares();
    // Only ordinary buffers are kept (one chunk and its padding): a huge frame's goes.
    if (buf_ && cap_ <= 2 * (chunk_ + frame_padding) && s.count < spare_buffers::keep) {
        s.bufs[s.count] = std::move(buf_);
        s.caps[s.count] = cap_;
        ++s.count;
    }
    buf_.reset();
    cap_ = 0;
    begin_ = end_ = scan_ = 0;
    line_ = {};
}

void line_framer::shrink_if_idle() {
    if (begin_ == end_ && cap_ > 4 * (chunk_ + frame_padding)) {
        buf_.reset();
        cap_ = 0;
        begin_ = end_ = scan_ = 0;
    }
}

} // namespace meith::protocol
