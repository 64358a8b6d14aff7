// redactor: turns arbitrary JSON (tool arguments, results) and free text (log lines) into
// summaries that carry no secret and stay small (docs/protocol.md §6).
//
// Rules: values under secret-like keys (password, passwd, secret, token, api key, access key,
// authorization, cookie, credential, private key, session, ... in any case and with any of
// `_`, `-`, ` `, `.` or none as separator) become "[REDACTED]"; string values matching known
// secret formats (AWS keys, GitHub/GitLab/Slack tokens, OpenAI/Anthropic-style keys, Google API
// keys, Stripe keys, JWTs, PEM private keys, Bearer/Basic headers, passwords in URLs) have the
// secret part replaced by "[REDACTED]"; strings over 256 characters, arrays over 50 items and
// nesting deeper than 6 levels are cut with a note of what was cut (of a long string only the
// kept part and a 4 KiB margin are redacted, docs/protocol.md §6). A summary stays under
// 4 KiB. Patterns are RE2, compiled once. A redactor is immutable after construction and safe
// to share between threads. Cost by size and kind of text: bench/summary_cost.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include <simdjson.h>

namespace meith::audit {

struct redaction_limits {
    std::size_t max_string_chars = 256;
    std::size_t max_array_items = 50;
    std::size_t max_depth = 6;
    std::size_t max_summary_bytes = 4096;
};

/// Adds `value` to the exact secret values every redactor replaces with "[REDACTED]" wherever
/// it occurs, in any text, before its rules run: tokens and secrets meithd holds for sources
/// (a remote source's OAuth grant and `${secret:…}` headers, docs/security.md). Values under
/// 8 bytes are ignored (they would redact ordinary words). Process-wide, thread-safe; values
/// stay until the process ends (at most 4096 are kept: the oldest go first).
void add_exact_secret(std::string_view value);

/// Replaces each exact secret value (add_exact_secret) in `text` with "[REDACTED]": what a
/// tool writes back of a secret it was given does not reach its caller (docs/security.md
/// "Secrets"). False, and `text` untouched, when none occurs; one atomic load when meithd
/// holds no secret. Exact bytes only: a tool that encodes a secret it holds is not caught.
bool redact_exact_secrets(std::string& text);
/// Whether any exact secret value occurs in `text`.
bool holds_exact_secret(std::string_view text);

class redactor {
  public:
    explicit redactor(redaction_limits limits = {});
    ~redactor();
    redactor(const redactor&) = delete;
    redactor& operator=(const redactor&) = delete;

    /// Redacted, bounded summary of the JSON text `json`, itself valid JSON text. Invalid JSON
    /// gives a JSON string noting it ("[invalid JSON: N bytes]"). Never throws.
    std::string summarize_json(std::string_view json) const;

    /// The same summary of an already parsed value (saves a parse when the caller holds one).
    std::string summarize_element(simdjson::dom::element value) const;

    /// Appends the summary of `json` to `out` (no allocation for ordinary values; text that no
    /// rule changes is copied, minus whitespace, without being parsed). `padded`:
    /// the caller guarantees simdjson::SIMDJSON_PADDING readable bytes after `json`, which
    /// saves copying it (simdjson's padding rule). Thread-safe: one parser per thread.
    void append_summary_json(std::string& out, std::string_view json, bool padded = false) const;

    /// Appends the summary of an already parsed value to `out`. `json`, when given, is the
    /// value's JSON text: text that no rule changes is copied as its own summary without
    /// walking the value (the same bytes either way).
    void append_summary_element(std::string& out, simdjson::dom::element value,
                                std::string_view json = {}) const;

    /// `text` with every secret-looking substring replaced by "[REDACTED]" (also `KEY=value`
    /// lines with secret-like keys); for the daemon's own log lines. Not length-bounded.
    std::string redact_text(std::string_view text) const;
    /// Appends redact_text(`text`) to `out` as a JSON string, without the copy: the hot path's
    /// ids, names and reasons, which no rule changes, are escaped straight from `text`.
    void append_redacted_json_string(std::string& out, std::string_view text) const;

    /// True when `key` names a secret (password, api_key, X-Api-Key, sessionToken, ...).
    bool is_secret_key(std::string_view key) const;

    struct impl; ///< RE2 rules (public for the summary writer in redactor.cpp only)

  private:
    std::unique_ptr<impl> impl_;
    redaction_limits limits_;
    std::string budget_note_json_; ///< "[cut: summary over N bytes]" as a JSON string
};

/// Redacts PEM blocks (`-----BEGIN … PRIVATE KEY-----` … `-----END …-----`) in a stream of
/// lines, e.g. a child's stderr, which is redacted one line at a time: the body lines of a key
/// are plain base64 that no single-line rule recognises. Every line from BEGIN to END becomes
/// "[REDACTED: PEM block line]"; a block without END ends at the first line that is neither
/// base64, empty nor an RFC 1421 header. One filter per stream; not thread-safe.
class pem_block_filter {
  public:
    /// `line` (without its line ending) as it may be shown: itself, or the redaction note.
    std::string_view filter(std::string_view line);

  private:
    bool inside_ = false;
};

/// The process-wide redactor used by the logging sink and the audit log.
const redactor& default_redactor();

} // namespace meith::audit
