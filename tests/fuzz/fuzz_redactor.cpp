// fuzz_redactor: the redactor (audit/redactor.hpp) over arbitrary text and JSON.
//
// The input is used as a log line (redact_text), as JSON text to summarise (which it rarely
// is, so also wrapped as a JSON string and as the value of a fuzz-chosen key), and as lines
// of a child's stderr (pem_block_filter). Invariants: every summary is valid JSON under
// max_summary_bytes; the copy fast path, the padded parse and the DOM walk give the same
// bytes; a value under a secret key is redacted; redact_text keeps valid UTF-8 valid; where
// the prefilter (detail::may_match) says no rule can match, every rule run in full changes
// nothing; a PEM BEGIN line is always withheld. Summaries use the default limits or small
// ones (cuts), chosen by the input's last bit.
#include "fuzz_common.hpp"

#include "audit/redactor.hpp"
#include "audit/redactor_detail.hpp"
#include "protocol/json_writer.hpp"

#include <fuzzer/FuzzedDataProvider.h>

#include <string>

using meith::audit::redactor;
using meith::fuzz::check;
using meith::fuzz::must_parse;
namespace proto = meith::protocol;

namespace {

const redactor& small_redactor() {
    static const redactor r(meith::audit::redaction_limits{
        .max_string_chars = 16, .max_array_items = 3, .max_depth = 3, .max_summary_bytes = 300});
    return r;
}

/// The summary of `json` by every entry point; checks they agree and returns it.
std::string check_summary(const redactor& r, std::size_t limit, std::string_view json) {
    const std::string summary = r.summarize_json(json);
    check(summary.size() < limit, "summary over max_summary_bytes", summary);
    must_parse(summary, "summary is not valid JSON");

    // The caller-padded parse gives the same bytes.
    const meith::fuzz::padded_copy padded(reinterpret_cast<const std::uint8_t*>(json.data()),
                                          json.size());
    std::string out = "x";
    r.append_summary_json(out, padded.view(), true);
    check(out.substr(1) == summary, "padded summary differs", json);

    // For valid JSON: the DOM walk, with and without the text, gives the same bytes.
    static simdjson::dom::parser parser;
    simdjson::dom::element root;
    if (parser.parse(json.data(), json.size()).get(root) == simdjson::SUCCESS) {
        check(r.summarize_element(root) == summary, "summary fast path differs from the DOM walk",
              json);
        out = "[";
        r.append_summary_element(out, root, json);
        check(out.substr(1) == summary, "append_summary_element with text differs", json);
    }
    return summary;
}

void check_redactor(const redactor& r, std::size_t limit, const std::uint8_t* data,
                    std::size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    check_summary(r, limit, text);

    // The text as a JSON string: a string (or the budget note, itself a string) comes back.
    std::string as_string;
    proto::append_json_string(as_string, text);
    const std::string s = check_summary(r, limit, as_string);
    check(must_parse(s, "string summary").is_string(), "summary of a string is not a string", s);

    // {"<key>": "<value>"}: a secret key hides its value.
    FuzzedDataProvider in(data, size);
    const std::string key = in.ConsumeRandomLengthString(64);
    const std::string value = in.ConsumeRemainingBytesAsString();
    std::string obj = "{";
    proto::append_json_string(obj, key);
    obj += ':';
    proto::append_json_string(obj, value);
    obj += '}';
    const std::string o = check_summary(r, limit, obj);
    if (r.is_secret_key(key) && !value.empty())
        check(o.find("[REDACTED]") != std::string::npos ||
                  o.find("[cut: summary over") != std::string::npos,
              "value under a secret key is not redacted", o);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const auto& r = meith::audit::default_redactor();
    const std::string_view text(reinterpret_cast<const char*>(data), size);

    // A log line.
    const std::string redacted = r.redact_text(text);
    if (proto::is_valid_utf8(text))
        check(proto::is_valid_utf8(redacted), "redact_text broke valid UTF-8", redacted);
    // Where the prefilter says no rule can match, none does: every rule, nothing skipped.
    if (!meith::audit::detail::may_match(text))
        check(meith::audit::detail::redact_by_every_rule(text) == text,
              "may_match said no rule matches, but a rule changes the text", text);

    // Summaries cost ~100 µs a string here (each is taken four ways): the input's last bit
    // picks the limits instead of running both.
    if (size > 0 && (data[size - 1] & 1) != 0)
        check_redactor(small_redactor(), 300, data, size);
    else
        check_redactor(r, 4096, data, size);

    // A child's stderr, line by line.
    meith::audit::pem_block_filter pem;
    std::size_t start = 0;
    while (start <= text.size()) {
        auto end = text.find('\n', start);
        if (end == std::string_view::npos) end = text.size();
        const auto line = text.substr(start, end - start);
        if (!meith::audit::detail::may_match(line))
            check(meith::audit::detail::redact_by_every_rule(line) == line,
                  "may_match said no rule matches a line, but a rule changes it", line);
        const auto shown = pem.filter(line);
        const auto begin = line.find("-----BEGIN ");
        if (begin != std::string_view::npos &&
            line.find("-----", begin + 11) != std::string_view::npos)
            check(shown != line, "a PEM BEGIN line is shown", line);
        start = end + 1;
    }
    return 0;
}
