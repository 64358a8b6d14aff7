// fuzz_framing: the bounded line framer (protocol/framing.hpp).
//
// The input picks a frame bound, a read chunk size and a seed for the sizes of the reads; the
// rest is the byte stream, fed read by read as a connection feeds it, draining with `next`
// after each read and sometimes releasing or shrinking the idle buffer. Every event is checked
// against a reference split of the whole stream at '\n': the same frames in order (one "\r"
// stripped, empty lines skipped), oversized events where a line exceeds the bound (with its
// size and first bytes), lines never over the bound and followed by frame_padding readable
// bytes, memory never over bound + read chunk + padding, and the unterminated tail as partial().
#include "fuzz_common.hpp"

#include "protocol/framing.hpp"

#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <deque>
#include <string>

using meith::fuzz::check;
using meith::protocol::frame_padding;
using meith::protocol::line_framer;

namespace {

struct expected_event {
    bool oversized = false;
    std::string_view line; ///< the frame, or the whole dropped line (its '\r' ending included)
    std::size_t size = 0;  ///< frame or dropped bytes, without the line ending
};

/// The reference: the stream cut at '\n' (docs/protocol.md §2).
std::deque<expected_event> reference(std::string_view stream, std::size_t max,
                                     std::string_view& tail) {
    std::deque<expected_event> out;
    std::size_t start = 0;
    for (;;) {
        const auto nl = stream.find('\n', start);
        if (nl == std::string_view::npos) break;
        const auto raw = stream.substr(start, nl - start);
        std::size_t len = raw.size();
        if (len > 0 && raw[len - 1] == '\r') --len;
        if (len > max)
            out.push_back({true, raw, len});
        else if (len > 0)
            out.push_back({false, raw.substr(0, len), len});
        start = nl + 1;
    }
    tail = stream.substr(start);
    return out;
}

std::uint64_t splitmix64(std::uint64_t& state) {
    std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    FuzzedDataProvider in(data, size);
    const auto max = in.ConsumeIntegralInRange<std::size_t>(0, 600);
    const auto chunk = in.ConsumeIntegralInRange<std::size_t>(1, 300);
    std::uint64_t rng = in.ConsumeIntegral<std::uint64_t>();
    const std::string stream = in.ConsumeRemainingBytesAsString();

    std::string_view tail;
    auto expected = reference(stream, max, tail);

    line_framer framer(max, chunk);
    const std::size_t memory_bound = max + 2 + chunk + frame_padding;
    std::size_t fed = 0;
    while (fed < stream.size()) {
        const std::uint64_t r = splitmix64(rng);
        const auto span = framer.prepare();
        check(span.size() >= chunk, "prepare offers less than the read chunk");
        check(framer.capacity() <= memory_bound, "framer buffer over its bound");
        const std::size_t n = std::min<std::size_t>(1 + r % span.size(), stream.size() - fed);
        std::copy_n(stream.data() + fed, n, span.data());
        framer.commit(n);
        fed += n;
        for (;;) {
            const auto st = framer.next();
            if (st == line_framer::status::need_more) break;
            check(!expected.empty(), "framer returned an event the stream does not hold");
            const expected_event want = expected.front();
            expected.pop_front();
            if (st == line_framer::status::frame) {
                const auto line = framer.line();
                check(!want.oversized, "framer returned a frame over the bound", line);
                check(line.size() <= max, "frame longer than max_frame_bytes", line);
                check(line == want.line, "framer returned other bytes than the stream's line",
                      line);
                // The padding must be readable (ASan reports a read past the buffer).
                volatile char sink = 0;
                for (std::size_t i = 0; i < frame_padding; ++i)
                    sink = sink + line.data()[line.size() + i];
                (void)sink;
            } else {
                check(want.oversized, "framer dropped a line within the bound", want.line);
                check(framer.dropped_bytes() == want.size, "wrong dropped_bytes", want.line);
                const auto prefix = framer.oversized_prefix();
                check(!prefix.empty() && prefix.size() <= 256 &&
                          want.line.substr(0, prefix.size()) == prefix,
                      "oversized_prefix is not the start of the dropped line", prefix);
            }
        }
        // An idle connection may give its buffer back between reads.
        if ((r >> 32) % 7 == 0) framer.release();
        if ((r >> 40) % 5 == 0) framer.shrink_if_idle();
    }
    check(expected.empty(), "framer missed a complete line of the stream");
    if (tail.size() <= max + 1) {
        check(framer.partial() == tail, "partial() is not the unterminated tail", tail);
        check(framer.buffered() == tail.size(), "buffered() is not the tail's size", tail);
    } else {
        check(framer.partial().empty(), "partial() holds part of a line being discarded");
    }
    return 0;
}
