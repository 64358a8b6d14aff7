// fuzz_common: helpers shared by the libFuzzer targets in tests/fuzz (see README.md there).
//
// A failed invariant prints what broke and abort()s, which libFuzzer reports as a crash and
// saves the input as an artifact.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include <simdjson.h>

namespace meith::fuzz {

/// Aborts with `what` (and up to 200 bytes of `text`) unless `ok`.
inline void check(bool ok, const char* what, std::string_view text = {}) {
    if (ok) return;
    std::fprintf(stderr, "fuzz invariant broken: %s\n", what);
    if (!text.empty()) {
        const auto shown = text.substr(0, 200);
        std::fprintf(stderr, "  text (%zu bytes): %.*s%s\n", text.size(),
                     static_cast<int>(shown.size()), shown.data(), text.size() > 200 ? "…" : "");
    }
    std::abort();
}

/// A copy of `data` followed by `padding` readable bytes (simdjson parses such text in place,
/// and the framer guarantees this much after every line). The padding is not zeroed on purpose:
/// a parser must not depend on what is there.
class padded_copy {
  public:
    padded_copy(const std::uint8_t* data, std::size_t size,
                std::size_t padding = simdjson::SIMDJSON_PADDING)
        : buf_(size + padding, '\x7f') {
        if (size > 0) std::memcpy(buf_.data(), data, size);
        size_ = size;
    }
    std::string_view view() const { return {buf_.data(), size_}; }

  private:
    std::vector<char> buf_;
    std::size_t size_ = 0;
};

/// A simdjson parser for re-reading what the code under test wrote: deeper than the default
/// 1024 levels, since an encoder nests a value that may itself be 1024 deep.
inline simdjson::dom::parser& checking_parser() {
    static simdjson::dom::parser p = [] {
        simdjson::dom::parser q;
        if (q.allocate(1 << 16, 4096) != simdjson::SUCCESS) std::abort();
        return q;
    }();
    return p;
}

/// Aborts unless `text` is one valid JSON document; returns its root (valid until the next
/// use of checking_parser()).
inline simdjson::dom::element must_parse(std::string_view text, const char* what) {
    simdjson::dom::element root;
    const auto ec = checking_parser().parse(text.data(), text.size()).get(root);
    if (ec != simdjson::SUCCESS) {
        std::fprintf(stderr, "simdjson: %s\n", simdjson::error_message(ec));
        check(false, what, text);
    }
    return root;
}

/// Aborts unless `frame` is exactly one line ("\n" at the end, nowhere else) holding a JSON
/// object; returns the object.
inline simdjson::dom::object must_be_frame(std::string_view frame, const char* what) {
    check(!frame.empty() && frame.back() == '\n', "frame does not end with a newline", frame);
    const auto body = frame.substr(0, frame.size() - 1);
    check(body.find('\n') == std::string_view::npos, "frame holds a raw newline", frame);
    simdjson::dom::object obj;
    check(must_parse(body, what).get_object().get(obj) == simdjson::SUCCESS,
          "frame is not a JSON object", frame);
    return obj;
}

} // namespace meith::fuzz
