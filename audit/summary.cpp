// The redactor's bounded JSON summaries (docs/protocol.md §6 "Redaction"): a fast copy for
// text no rule changes (plain_copier), else a walk of the simdjson DOM (summary_writer) that
// redacts secret keys and values, cuts long strings, deep nesting and long arrays, and keeps the
// text valid JSON within max_summary_bytes.
#include "audit/audit_log.hpp"
#include "audit/redactor.hpp"
#include "audit/redactor_detail.hpp"

#include <simdjson.h>

#include <charconv>

#include <string>
#include <string_view>

namespace meith::audit {

using detail::redacted_text;
using detail::redaction_margin_bytes;
using detail::secret_key;
using detail::utf8_lead_bytes;
using detail::utf8_sequence_length;
using detail::value_rule_trigger;

namespace {

/// The bounded summary writer: appends to `out` (after whatever it already holds). Containers
/// reserve room for their closer and one cut note, so whatever is cut, the text stays valid JSON
/// within the limit. Allocates nothing for ordinary values (no secret-format trigger bytes, no
/// cut): strings are escaped straight into `out`.
class summary_writer {
  public:
    summary_writer(const redactor& owner, const redaction_limits& limits,
                   const std::string& budget_note_json, std::string& out)
        : owner_(owner), limits_(limits),
          limit_(limits.max_summary_bytes > 0 ? limits.max_summary_bytes - 1 : 0),
          note_(budget_note_json), out_(out), base_(out.size()) {}

    void run(simdjson::dom::element root) {
        if (!value(root, 0, 0)) {
            out_.resize(base_);
            out_ += note_;
            if (size() > limit_) {
                out_.resize(base_);
                out_ += "null";
            }
        }
    }

  private:
    std::size_t size() const { return out_.size() - base_; }

    /// Appends `e`; false (with out_ unchanged) when it cannot fit leaving `reserve` bytes.
    bool value(simdjson::dom::element e, std::size_t depth, std::size_t reserve) {
        const std::size_t start = out_.size();
        switch (e.type()) {
        case simdjson::dom::element_type::OBJECT:
        case simdjson::dom::element_type::ARRAY:
            if (depth >= limits_.max_depth) {
                append_json_string(out_,
                                   "[cut: depth > " + std::to_string(limits_.max_depth) + "]");
                break;
            }
            return e.type() == simdjson::dom::element_type::ARRAY
                       ? array(e.get_array().value_unsafe(), depth, reserve)
                       : object(e.get_object().value_unsafe(), depth, reserve);
        case simdjson::dom::element_type::STRING:
            string(e.get_string().value_unsafe());
            break;
        case simdjson::dom::element_type::INT64:
            number(e.get_int64().value_unsafe());
            break;
        case simdjson::dom::element_type::UINT64:
            number(e.get_uint64().value_unsafe());
            break;
        case simdjson::dom::element_type::DOUBLE:
            number(e.get_double().value_unsafe());
            break;
        case simdjson::dom::element_type::BOOL:
            out_ += e.get_bool().value_unsafe() ? "true" : "false";
            break;
        case simdjson::dom::element_type::NULL_VALUE:
            out_ += "null";
            break;
        }
        if (size() + reserve > limit_) {
            out_.resize(start);
            return false;
        }
        return true;
    }

    template <typename T>
    void number(T v) {
        char buf[32];
        auto r = std::to_chars(buf, buf + sizeof buf, v);
        out_.append(buf, r.ptr);
    }

    /// Redacts first (a secret must not survive by being cut), then cuts to max_string_chars.
    /// Only the part that can be kept, plus a margin for a secret that starts in it, is
    /// redacted: the rest is dropped unseen (a 10 MB string used to cost 170 ms here).
    void string(std::string_view raw) {
        // Common case: nothing a secret format could match and short enough (bytes bound
        // characters): escaped as is.
        if (raw.size() <= limits_.max_string_chars && !redactor_may_match(raw)) {
            append_json_string(out_, raw);
            return;
        }
        const std::size_t window = limits_.max_string_chars * 4 + redaction_margin_bytes;
        const std::string_view head = raw.substr(0, window);
        std::size_t rest = raw.size() > window ? utf8_lead_bytes(raw.substr(window)) : 0;
        std::string s = owner_.redact_text(head);
        std::size_t pos = 0;
        std::size_t chars = 0;
        while (pos < s.size() && chars < limits_.max_string_chars) {
            pos += utf8_sequence_length(s, pos);
            ++chars;
        }
        rest += utf8_lead_bytes(std::string_view(s).substr(pos));
        if (rest > 0) {
            s.resize(pos);
            s += "\u2026[cut " + std::to_string(rest) + " chars]";
        }
        append_json_string(out_, s);
    }

    void redacted_value() { append_json_string(out_, redacted_text); }

    /// Appends one container item with `emit`, rolling back if it would not leave `reserve`.
    template <typename Emit>
    bool item(bool first, std::size_t reserve, Emit&& emit) {
        const std::size_t mark = out_.size();
        if (!first) out_ += ',';
        if (!emit(reserve) || size() + reserve > limit_) {
            out_.resize(mark);
            return false;
        }
        return true;
    }

    bool array(simdjson::dom::array a, std::size_t depth, std::size_t reserve) {
        // Room kept behind every item: ',' + note + ']' + what the enclosing levels need.
        const std::size_t keep = 1 + note_.size() + 1 + reserve;
        if (size() + 1 + keep > limit_) return false;
        out_ += '[';
        std::size_t index = 0;
        bool first = true;
        for (auto child : a) {
            if (exhausted_) break;
            if (index == limits_.max_array_items) {
                auto more = "[cut " + std::to_string(a.size() - index) + " more items]";
                if (!item(first, keep, [&](std::size_t) {
                        append_json_string(out_, more);
                        return true;
                    }))
                    cut_here(first, false);
                break;
            }
            if (!item(first, keep, [&](std::size_t r) { return value(child, depth + 1, r); })) {
                cut_here(first, false);
                break;
            }
            first = false;
            ++index;
        }
        out_ += ']';
        return true;
    }

    bool object(simdjson::dom::object o, std::size_t depth, std::size_t reserve) {
        // The note goes in as a member: "…": note.
        const std::size_t keep = 1 + object_note_key.size() + note_.size() + 1 + reserve;
        if (size() + 1 + keep > limit_) return false;
        out_ += '{';
        bool first = true;
        for (auto field : o) {
            if (exhausted_) break;
            const bool ok = item(first, keep, [&](std::size_t r) {
                string(field.key);
                out_ += ':';
                if (secret_key(field.key)) {
                    redacted_value();
                    return size() + r <= limit_;
                }
                return value(field.value, depth + 1, r);
            });
            if (!ok) {
                cut_here(first, true);
                break;
            }
            first = false;
        }
        out_ += '}';
        return true;
    }

    /// Closes the current container with the budget note; every enclosing one stops too.
    void cut_here(bool first, bool in_object) {
        if (!first) out_ += ',';
        if (in_object) out_ += object_note_key;
        out_ += note_;
        exhausted_ = true;
    }

    static bool redactor_may_match(std::string_view s);

    static constexpr std::string_view object_note_key = "\"\u2026\":";
    const redactor& owner_;
    const redaction_limits& limits_;
    const std::size_t limit_; ///< the summary must stay strictly under max_summary_bytes
    const std::string& note_; ///< the budget note as a JSON string
    std::string& out_;
    const std::size_t base_; ///< where this summary starts in out_
    bool exhausted_ = false;
};

bool summary_writer::redactor_may_match(std::string_view s) {
    return detail::may_match(s);
}

/// The summary's fast path: JSON text that no rule changes is its own summary. Copies `json`
/// (minus whitespace) to `out` and returns true when it is made only of what the summary
/// writer would write back unchanged: printable-ASCII strings without escapes, no longer than
/// max_string_chars, that no value rule rewrites, under keys that are not secret; integers of
/// up to 18 digits; true, false, null; containers within max_depth and max_array_items; and
/// short enough that no byte budget can cut it. Anything else returns false with `out`
/// unchanged, and the caller takes the simdjson path, which gives the same bytes for what this
/// accepts (tests/unit/redactor_test.cpp compares the two on every corpus case).
class plain_copier {
  public:
    plain_copier(const redactor& owner, const redaction_limits& limits, std::string& out)
        : owner_(owner), limits_(limits), out_(out) {}

    bool run(std::string_view json) {
        // Output never exceeds the input; with this much headroom below the summary limit the
        // budget checks (which keep room for a cut note per open container) never fire.
        if (json.size() + 64 * (limits_.max_depth + 1) >= limits_.max_summary_bytes) return false;
        s_ = json;
        i_ = 0;
        const std::size_t base = out_.size();
        out_.reserve(base + json.size());
        if (value(0) && (skip_ws(), i_ == s_.size())) return true;
        out_.resize(base);
        return false;
    }

  private:
    void skip_ws() {
        while (i_ < s_.size() &&
               (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\r' || s_[i_] == '\t'))
            ++i_;
    }

    bool value(std::size_t depth) {
        skip_ws();
        if (i_ >= s_.size()) return false;
        switch (s_[i_]) {
        case '{':
            return depth < limits_.max_depth && object(depth);
        case '[':
            return depth < limits_.max_depth && array(depth);
        case '"': {
            std::string_view text;
            return string(text);
        }
        case 't':
            return literal("true");
        case 'f':
            return literal("false");
        case 'n':
            return literal("null");
        default:
            return integer();
        }
    }

    bool literal(std::string_view word) {
        if (s_.substr(i_, word.size()) != word) return false;
        out_.append(word);
        i_ += word.size();
        return true;
    }

    /// -?(0|[1-9][0-9]*), at most 18 digits (always an int64, written back as is); "-0",
    /// fractions and exponents are left to the simdjson path.
    bool integer() {
        const std::size_t start = i_;
        if (s_[i_] == '-') ++i_;
        const std::size_t digits = i_;
        while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9')
            ++i_;
        const std::size_t n = i_ - digits;
        if (n == 0 || n > 18 || (s_[digits] == '0' && (n > 1 || digits != start))) return false;
        if (i_ < s_.size() && (s_[i_] == '.' || s_[i_] == 'e' || s_[i_] == 'E')) return false;
        out_.append(s_.data() + start, i_ - start);
        return true;
    }

    /// A string at s_[i_] == '"': copied when the summary writer would write it back as is.
    bool string(std::string_view& text) {
        const std::size_t start = ++i_;
        bool trigger = false;
        for (;; ++i_) {
            if (i_ >= s_.size()) return false;
            const auto c = static_cast<unsigned char>(s_[i_]);
            if (c == '"') break;
            if (c < 0x20 || c > 0x7e || c == '\\') return false;
            trigger |= value_rule_trigger[c];
        }
        text = s_.substr(start, i_ - start);
        ++i_;
        if (text.size() > limits_.max_string_chars) return false;
        // Without a trigger byte no value rule can match (key_value_trigger's bytes are among
        // value_rule_trigger's): only an exact secret could, so the text is not scanned again.
        if ((trigger ? detail::may_match(text) : holds_exact_secret(text)) &&
            owner_.redact_text(text) != text)
            return false;
        out_.push_back('"');
        out_.append(text);
        out_.push_back('"');
        return true;
    }

    bool object(std::size_t depth) {
        ++i_;
        out_.push_back('{');
        skip_ws();
        if (i_ < s_.size() && s_[i_] == '}') {
            ++i_;
            out_.push_back('}');
            return true;
        }
        for (;;) {
            skip_ws();
            std::string_view key;
            if (i_ >= s_.size() || s_[i_] != '"' || !string(key) || secret_key(key)) return false;
            skip_ws();
            if (i_ >= s_.size() || s_[i_] != ':') return false;
            ++i_;
            out_.push_back(':');
            if (!value(depth + 1)) return false;
            skip_ws();
            if (i_ >= s_.size()) return false;
            if (s_[i_++] == '}') break;
            if (s_[i_ - 1] != ',') return false;
            out_.push_back(',');
        }
        out_.push_back('}');
        return true;
    }

    bool array(std::size_t depth) {
        ++i_;
        out_.push_back('[');
        skip_ws();
        if (i_ < s_.size() && s_[i_] == ']') {
            ++i_;
            out_.push_back(']');
            return true;
        }
        for (std::size_t items = 1;; ++items) {
            if (items > limits_.max_array_items || !value(depth + 1)) return false;
            skip_ws();
            if (i_ >= s_.size()) return false;
            if (s_[i_++] == ']') break;
            if (s_[i_ - 1] != ',') return false;
            out_.push_back(',');
        }
        out_.push_back(']');
        return true;
    }

    const redactor& owner_;
    const redaction_limits& limits_;
    std::string& out_;
    std::string_view s_;
    std::size_t i_ = 0;
};

} // namespace

void redactor::append_summary_json(std::string& out, std::string_view json, bool padded) const {
    const std::size_t base = out.size();
    try {
        if (plain_copier(*this, limits_, out).run(json)) return;
        // One parser per thread: parsers are not thread-safe but are costly to recreate.
        thread_local simdjson::dom::parser parser;
        simdjson::dom::element root;
        if (parser.parse(json.data(), json.size(), !padded).get(root) != simdjson::SUCCESS) {
            append_json_string(out, "[invalid JSON: " + std::to_string(json.size()) + " bytes]");
            return;
        }
        summary_writer(*this, limits_, budget_note_json_, out).run(root);
    } catch (...) {
        out.resize(base);
        out += "\"[summary failed]\"";
    }
}

void redactor::append_summary_element(std::string& out, simdjson::dom::element value,
                                      std::string_view json) const {
    const std::size_t base = out.size();
    try {
        if (!json.empty() && plain_copier(*this, limits_, out).run(json)) return;
        summary_writer(*this, limits_, budget_note_json_, out).run(value);
    } catch (...) {
        out.resize(base);
        out += "\"[summary failed]\"";
    }
}

std::string redactor::summarize_json(std::string_view json) const {
    std::string out;
    append_summary_json(out, json);
    return out;
}

std::string redactor::summarize_element(simdjson::dom::element value) const {
    std::string out;
    append_summary_element(out, value);
    return out;
}

} // namespace meith::audit
