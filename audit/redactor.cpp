// redactor: key rules (normalised key names) and value rules (RE2 patterns compiled once); the
// bounded JSON summary writer is in summary.cpp.
#include "audit/redactor.hpp"

#include <atomic>
#include <deque>
#include <shared_mutex>

#include "audit/audit_log.hpp"
#include "audit/redactor_detail.hpp"

#include <cctype>
#include <re2/re2.h>
#include <re2/set.h>
#include <simdjson.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cstring>
#include <functional>
#include <optional>
#include <span>
#include <stdexcept>
#include <vector>

namespace meith::audit {

namespace {

using detail::redacted_text;
using detail::redaction_margin_bytes;
using detail::value_rule_trigger;

using piece = re2::StringPiece;

std::string_view to_view(piece p) {
    return {p.data(), p.size()};
}

bool is_key_separator(char c) {
    return c == '_' || c == '-' || c == ' ' || c == '.';
}

char ascii_lower(char c) {
    return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
}

bool is_upper(char c) {
    return c >= 'A' && c <= 'Z';
}
bool is_lower(char c) {
    return c >= 'a' && c <= 'z';
}
bool is_digit(char c) {
    return c >= '0' && c <= '9';
}
bool is_word_char(char c) {
    return is_lower(c) || is_upper(c) || is_digit(c) || c == '_' || c == '.' || c == '-';
}

/// The rules that need none of these bytes are the token formats (PEM, JWT, AWS ids, GitHub,
/// GitLab, Slack, OpenAI, Anthropic, Google, Stripe); the key=value, URL-credential, auth
/// scheme and AWS-secret rules each need one.
constexpr auto key_value_trigger = [] {
    std::array<bool, 256> t{};
    for (unsigned char c : std::string_view(":= \t"))
        t[c] = true;
    return t;
}();

// summary.cpp's copier relies on this: text without a value_rule_trigger byte has none of
// these either.
static_assert([] {
    for (std::size_t c = 0; c < key_value_trigger.size(); ++c)
        if (key_value_trigger[c] && !detail::value_rule_trigger[c]) return false;
    return true;
}());

/// The shortest text a token-format rule matches: a Slack "xoxb-" or "xapp-" prefix and 10
/// more characters. Shorter text can only match through key_value_trigger's bytes.
constexpr std::size_t min_token_match = 15;

bool is_alnum(char c) {
    return is_lower(c) || is_upper(c) || is_digit(c);
}

/// Whether a token-format rule (PEM, JWT, AWS ids, GitHub, GitLab, Slack, OpenAI, Anthropic,
/// Google, Stripe: impl() lists them; none folds case) could match `text`: each begins with a
/// literal this looks for — "-----BEGIN", "eyJ", an 'A' and 19 more of [0-9A-Z] (AWS ids),
/// "AIza", "gh[pousr]_", "github_pat_", "glpat-", "xox", "xapp-", "sk-", "sk_", "rk_", "pk_".
/// A new token rule must add its literal here: tests/fuzz/fuzz_redactor runs every rule where
/// this says none can match.
bool may_hold_token(std::string_view text) {
    auto at = [&](std::size_t i, std::string_view literal) {
        return text.compare(i, literal.size(), literal) == 0;
    };
    auto upper_or_digit = [](char c) { return is_upper(c) || is_digit(c); };
    for (std::size_t i = 0; i < text.size(); ++i) {
        switch (text[i]) {
        case '-':
            if (at(i, "-----BEGIN")) return true;
            break;
        case 'e':
            if (at(i, "eyJ")) return true;
            break;
        case 'A':
            if (at(i, "AIza")) return true;
            if (text.size() - i >= 20 &&
                std::all_of(text.begin() + static_cast<std::ptrdiff_t>(i) + 1,
                            text.begin() + static_cast<std::ptrdiff_t>(i) + 20, upper_or_digit))
                return true;
            break;
        case 'g':
            if (text.size() - i >= 4 && text[i + 1] == 'h' &&
                std::string_view("pousr").find(text[i + 2]) != std::string_view::npos &&
                text[i + 3] == '_')
                return true;
            if (at(i, "github_pat_") || at(i, "glpat-")) return true;
            break;
        case 'x':
            if (at(i, "xox") || at(i, "xapp-")) return true;
            break;
        case 's':
            if (at(i, "sk-") || at(i, "sk_")) return true;
            break;
        case 'r':
            if (at(i, "rk_")) return true;
            break;
        case 'p':
            if (at(i, "pk_")) return true;
            break;
        default:
            break;
        }
    }
    return false;
}

/// Whether `text` holds, in any case, "bearer" or "basic" (the auth-scheme rules) or "aws"
/// (the AWS-secret rule): each of those rules needs its word.
bool names_auth_scheme_or_aws(std::string_view text) {
    auto at = [&](std::size_t i, std::string_view word) {
        if (text.size() - i < word.size()) return false;
        for (std::size_t k = 0; k < word.size(); ++k)
            if (ascii_lower(text[i + k]) != word[k]) return false;
        return true;
    };
    for (std::size_t i = 0; i < text.size(); ++i) {
        const char c = ascii_lower(text[i]);
        if ((c == 'a' && at(i, "aws")) || (c == 'b' && (at(i, "bearer") || at(i, "basic"))))
            return true;
    }
    return false;
}

/// Whether the key=value rule could redact anything in `text`: it only replaces a value
/// whose key is secret (secret_key), and the key before a separator (':' or '=', after
/// optional spaces or tabs) is fixed by its last byte — a quoted key ("…" or '…', at most 64
/// bytes without a backslash or newline) when that is a quote, else the run of key bytes
/// ([A-Za-z0-9_.-], ending in a letter or digit) before it. Until the rule first changes the
/// text its search never starts inside such a run (it resumes after a word), so each key it
/// can take before that is one of these.
bool secret_key_before_separator(std::string_view text) {
    for (std::size_t i = 0; i < text.size(); ++i) {
        if (text[i] != ':' && text[i] != '=') continue;
        std::size_t end = i; // the key ends here
        while (end > 0 && (text[end - 1] == ' ' || text[end - 1] == '\t'))
            --end;
        if (end == 0) continue;
        const char last = text[end - 1];
        if (last == '"' || last == '\'') {
            const std::size_t close = end - 1;
            std::size_t open = close;
            while (open > 0 && close - open <= 64) {
                const char c = text[open - 1];
                if (c == last || c == '\\' || c == '\n') break;
                --open;
            }
            // `open` is the first byte of the content; a quote must stand before it.
            if (open == 0 || text[open - 1] != last || open == close || close - open > 64) continue;
            if (detail::secret_key(text.substr(open, close - open))) return true;
            continue;
        }
        if (!is_alnum(last)) continue;
        std::size_t begin = end - 1;
        while (begin > 0 && is_word_char(text[begin - 1]))
            --begin;
        if (detail::secret_key(text.substr(begin, end - begin))) return true;
    }
    return false;
}

/// Words that make a key secret wherever they appear in the normalised key.
constexpr std::array<std::string_view, 21> strong_words = {
    "password",      "passwd",    "passphrase", "secret",     "token",     "apikey",  "accesskey",
    "authorization", "cookie",    "credential", "privatekey", "privkey",   "session", "signingkey",
    "encryptionkey", "masterkey", "bearer",     "passcode",   "clientkey", "sshkey",  "hmac"};

/// Words that make a key secret only as a whole word (segment) of the key: "db_pwd", "authMethod"
/// but not "author" or "cwd".
constexpr std::array<std::string_view, 6> weak_segments = {"auth", "pwd", "pw",
                                                           "jwt",  "otp", "pass"};

/// Whole normalised keys that are secret although they contain no strong word.
constexpr std::array<std::string_view, 8> exact_secret_keys = {
    "signature",        "sig",
    "xsignature",       "xhubsignature",
    "xhubsignature256", "webhooksignature",
    "requestsignature", "xamzsignature"};

/// Normalised keys that contain a strong word but name counters or tooling, not secrets.
constexpr std::array<std::string_view, 24> allowed_keys = {
    "tokens",           "maxtokens",           "tokencount",   "tokenscount",     "numtokens",
    "tokensused",       "tokenusage",          "tokenlimit",   "tokenizer",       "tokenize",
    "tokenization",     "tokentype",           "inputtokens",  "outputtokens",    "prompttokens",
    "completiontokens", "totaltokens",         "cachedtokens", "reasoningtokens", "maxoutputtokens",
    "maxinputtokens",   "maxcompletiontokens", "sessioncount", "cookieconsent"};

/// The key rules; see redactor.hpp. Keys up to 128 bytes are normalised on the stack.
bool secret_key_uncached(std::string_view key) {
    // PWD/OLDPWD are the shell's working directories, everywhere in environment dumps.
    if (key == "PWD" || key == "OLDPWD") return false;
    char stack_buf[128];
    std::string heap_buf;
    char* buf = stack_buf;
    if (key.size() > sizeof stack_buf) {
        heap_buf.resize(key.size());
        buf = heap_buf.data();
    }
    std::size_t len = 0;
    for (char c : key)
        if (!is_key_separator(c)) buf[len++] = ascii_lower(c);
    const std::string_view norm(buf, len);
    if (std::find(allowed_keys.begin(), allowed_keys.end(), norm) != allowed_keys.end())
        return false;
    if (std::find(exact_secret_keys.begin(), exact_secret_keys.end(), norm) !=
        exact_secret_keys.end())
        return true;
    for (auto w : strong_words)
        if (norm.find(w) != std::string_view::npos) return true;
    // Segments: split at separators and at lower->upper (camelCase) boundaries. A weak word is
    // at most 4 bytes, so longer segments need no comparison.
    std::size_t i = 0;
    while (i < key.size()) {
        while (i < key.size() && is_key_separator(key[i]))
            ++i;
        std::size_t j = i;
        char seg[4];
        std::size_t seg_len = 0;
        while (j < key.size() && !is_key_separator(key[j])) {
            if (j > i && is_upper(key[j]) && is_lower(key[j - 1])) break;
            if (seg_len < sizeof seg) seg[seg_len] = ascii_lower(key[j]);
            ++seg_len;
            ++j;
        }
        if (seg_len <= sizeof seg &&
            std::find(weak_segments.begin(), weak_segments.end(), std::string_view(seg, seg_len)) !=
                weak_segments.end())
            return true;
        i = j;
    }
    return false;
}

} // namespace

namespace detail {

/// secret_key_uncached with a small per-thread memory: every key of every summarised object
/// comes through here, and keys repeat (the same tools, the same argument names), while the
/// rules cost dozens of comparisons per key.
bool secret_key(std::string_view key) {
    // Every rule's word is letters: a key without one ("12" of "12:34") is never secret.
    if (std::none_of(key.begin(), key.end(), [](char c) { return is_lower(c) || is_upper(c); }))
        return false;
    struct slot {
        std::uint8_t len = 0xff; ///< 0xff: empty
        bool secret = false;
        char text[46];
    };
    if (key.size() >= sizeof(slot::text)) return secret_key_uncached(key);
    thread_local std::array<slot, 256> cache;
    slot& s = cache[std::hash<std::string_view>{}(key)&0xff];
    if (s.len == key.size() && std::memcmp(s.text, key.data(), key.size()) == 0) return s.secret;
    s.secret = secret_key_uncached(key);
    s.len = static_cast<std::uint8_t>(key.size());
    std::memcpy(s.text, key.data(), key.size());
    return s.secret;
}

} // namespace detail

namespace {

using detail::secret_key;

/// One value rule: a pattern and how to find the span to replace in a match (nullopt = the match
/// is not a secret after all, e.g. a key=value pair whose key is harmless).
struct value_rule {
    std::unique_ptr<RE2> re;
    std::function<std::optional<piece>(const piece* groups)> pick;
    /// Optional cheap test on the whole match that rules it out before the (costlier)
    /// submatch extraction; must never rule out a match `pick` would accept.
    std::function<bool(std::string_view match)> skip = nullptr;
};

/// The key at the start of a key=value match: quoted, or a run of key characters.
std::string_view leading_key(std::string_view match) {
    if (!match.empty() && (match[0] == '"' || match[0] == '\'')) {
        const auto close = match.find(match[0], 1);
        return close == std::string_view::npos ? std::string_view{} : match.substr(1, close - 1);
    }
    std::size_t n = 0;
    while (n < match.size() && is_word_char(match[n]))
        ++n;
    return match.substr(0, n);
}

/// Counts as a token rather than prose: has a digit or punctuation, or an upper-case letter
/// after the first character ("dXNlcjpwYXNz"), or is long.
bool looks_like_credential(std::string_view s) {
    if (s.size() < 3) return false;
    bool has_lower = false;
    bool inner_upper = false;
    bool digit_or_symbol = false;
    for (std::size_t i = 0; i < s.size(); ++i) {
        char c = s[i];
        if (is_lower(c))
            has_lower = true;
        else if (is_upper(c))
            inner_upper = inner_upper || i > 0;
        else
            digit_or_symbol = true;
    }
    return digit_or_symbol || (inner_upper && has_lower) || s.size() >= 20;
}

/// Random-looking: digits and both letter cases (keeps "sk-learn-tutorial" out).
bool mixed_alnum(std::string_view s) {
    bool lower = false, upper = false, digit = false;
    for (char c : s) {
        lower = lower || is_lower(c);
        upper = upper || is_upper(c);
        digit = digit || is_digit(c);
    }
    return lower && upper && digit;
}

std::optional<piece> first_present(const piece* groups, std::initializer_list<int> indices) {
    for (int i : indices)
        if (groups[i].data() != nullptr) return groups[i];
    return std::nullopt;
}

} // namespace

namespace detail {

/// Characters of UTF-8 text, counted as the bytes that do not continue a sequence.
std::size_t utf8_lead_bytes(std::string_view s) {
    std::size_t n = 0;
    for (unsigned char c : s)
        n += (c & 0xC0) != 0x80;
    return n;
}

/// Number of bytes of the UTF-8 sequence starting at s[i], or 1 for an invalid byte.
std::size_t utf8_sequence_length(std::string_view s, std::size_t i) {
    auto b = static_cast<unsigned char>(s[i]);
    std::size_t n = b < 0x80           ? 1
                    : (b >> 5) == 0x6  ? 2
                    : (b >> 4) == 0xE  ? 3
                    : (b >> 3) == 0x1E ? 4
                                       : 1;
    if (i + n > s.size()) return 1;
    for (std::size_t k = 1; k < n; ++k)
        if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return 1;
    return n;
}

} // namespace detail

using detail::utf8_lead_bytes;
using detail::utf8_sequence_length;

namespace {

/// The exact secret values (add_exact_secret): few (a grant per remote source), so a
/// substring search per text is cheaper than an automaton rebuilt at each addition.
struct exact_secrets {
    std::shared_mutex mutex;
    std::deque<std::string> values;
    std::atomic<std::size_t> count{0};
    std::atomic<std::uint64_t> generation{0};
};

exact_secrets& exacts() {
    static exact_secrets e;
    return e;
}

bool holds_exact(std::string_view text) {
    auto& e = exacts();
    if (e.count.load(std::memory_order_acquire) == 0) return false;
    std::shared_lock lock(e.mutex);
    for (const auto& v : e.values)
        if (text.find(v) != std::string_view::npos) return true;
    return false;
}

void replace_exact_secrets(std::string& s) {
    auto& e = exacts();
    std::shared_lock lock(e.mutex);
    for (const auto& v : e.values)
        for (auto at = s.find(v); at != std::string::npos; at = s.find(v, at + 10))
            s.replace(at, v.size(), "[REDACTED]");
}

} // namespace

bool holds_exact_secret(std::string_view text) {
    return holds_exact(text);
}

bool redact_exact_secrets(std::string& text) {
    if (!holds_exact(text)) return false;
    replace_exact_secrets(text);
    return true;
}

void add_exact_secret(std::string_view value) {
    if (value.size() < 8) return;
    auto& e = exacts();
    std::unique_lock lock(e.mutex);
    if (std::find(e.values.begin(), e.values.end(), value) != e.values.end()) return;
    e.values.emplace_back(value);
    if (e.values.size() > 4096) e.values.pop_front();
    e.count.store(e.values.size(), std::memory_order_release);
    e.generation.fetch_add(1, std::memory_order_acq_rel);
}

struct redactor::impl {
    std::vector<value_rule> rules;
    /// All patterns in one automaton: one pass finds which rules can apply (usually none).
    std::unique_ptr<RE2::Set> any_rule;
    std::size_t key_value_rule = 0; ///< index of the key=value rule (the last)
    std::unique_ptr<RE2> key_words; ///< any word that can make a normalised key secret

    impl() {
        // Order matters: whole blocks (PEM) first so their bodies are gone before token rules
        // look at them; key=value last, where re-redacting "[REDACTED]" is a no-op.
        add(R"re((-----BEGIN[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----)((?s:.*?))(-----END[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----|$))re",
            [](const piece* g) { return std::optional<piece>(g[2]); });
        add(R"re(\beyJ[A-Za-z0-9_-]{4,}\.eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*)re", whole_match);
        add(R"re(\b[A-Za-z][A-Za-z0-9+.-]*://[^/\s:@]*:([^/\s@]+)@)re",
            [](const piece* g) { return std::optional<piece>(g[1]); });
        add(R"re(\b(?i:bearer)[ \t]+([A-Za-z0-9._~+/=-]+))re", [](const piece* g) {
            return looks_like_credential(to_view(g[1])) ? std::optional<piece>(g[1]) : std::nullopt;
        });
        add(R"re(\b(?i:basic)[ \t]+([A-Za-z0-9+/]+={0,2}))re", [](const piece* g) {
            auto v = to_view(g[1]);
            return v.size() >= 6 && looks_like_credential(v) ? std::optional<piece>(g[1])
                                                             : std::nullopt;
        });
        add(R"re(\b(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AIPA|AROA|ANPA|ANVA|APKA)[0-9A-Z]{16}\b)re",
            whole_match);
        add(R"re((?i:aws[a-z0-9_ .-]{0,30}(?:secret|key|credential)[a-z0-9_ .-]{0,20})["']?(?:[ \t]*[:=][ \t]*|[ \t]+)["']?([A-Za-z0-9/+]{40})(?:[^A-Za-z0-9/+=]|$))re",
            [](const piece* g) { return std::optional<piece>(g[1]); });
        add(R"re(\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{30,})re", whole_match);
        add(R"re(\bgithub_pat_[A-Za-z0-9_]{22,})re", whole_match);
        add(R"re(\bglpat-[A-Za-z0-9_-]{20,})re", whole_match);
        add(R"re(\bxox[abposr]-[A-Za-z0-9-]{10,})re", whole_match);
        add(R"re(\bxapp-[A-Za-z0-9-]{10,})re", whole_match);
        add(R"re(\bsk-ant-[A-Za-z0-9_-]{20,})re", whole_match);
        add(R"re(\bsk-(?:proj-|svcacct-|admin-)?([A-Za-z0-9_-]{20,}))re", [](const piece* g) {
            return mixed_alnum(to_view(g[1])) ? std::optional<piece>(g[0]) : std::nullopt;
        });
        add(R"re(\bAIza[0-9A-Za-z_-]{35})re", whole_match);
        add(R"re(\b(?:sk|rk|pk)_(?:live|test)_[0-9A-Za-z]{10,})re", whole_match);
        // key=value, key: value, "key": "value" with a secret-like key; an auth scheme word
        // ("Bearer") before the value is kept.
        add(R"re((?:"([^"\\\n]{1,64})"|'([^'\\\n]{1,64})'|([A-Za-z0-9_.-]*[A-Za-z0-9]))[ \t]*[:=][ \t]*(?:((?i:bearer|basic|digest|token))[ \t]+)?(?:"((?:[^"\\\n]|\\.)*)"|'((?:[^'\\\n]|\\.)*)'|([^\s,;&"'(){}<>=][^\s,;&"'(){}<>]*)))re",
            [](const piece* g) -> std::optional<piece> {
                auto key = first_present(g, {1, 2, 3});
                if (!key || !secret_key(to_view(*key))) return std::nullopt;
                auto value = first_present(g, {5, 6, 7});
                if (!value || value->empty()) return std::nullopt;
                return value;
            },
            [](std::string_view match) { return !secret_key(leading_key(match)); });
        key_value_rule = rules.size() - 1;

        // Every word that can make a key secret (secret_key_uncached): strong words, weak
        // segments, and "sig", which every exact secret key contains.
        std::string words;
        for (auto list : {std::span<const std::string_view>(strong_words),
                          std::span<const std::string_view>(weak_segments)})
            for (auto w : list)
                (words += words.empty() ? "" : "|") += std::string(w);
        key_words = compile("(?:" + words + "|sig)");

        any_rule = std::make_unique<RE2::Set>(options(), RE2::UNANCHORED);
        for (const auto& r : rules) {
            std::string error;
            if (any_rule->Add(r.re->pattern(), &error) < 0)
                throw std::logic_error("redactor: bad pattern: " + error);
        }
        if (!any_rule->Compile()) throw std::logic_error("redactor: pattern set too large");
    }

    static RE2::Options options() {
        RE2::Options opts;
        opts.set_log_errors(false);
        opts.set_max_mem(64 << 20);
        return opts;
    }

    static std::optional<piece> whole_match(const piece* g) { return g[0]; }

    static std::unique_ptr<RE2> compile(const std::string& pattern) {
        auto re = std::make_unique<RE2>(pattern, options());
        if (!re->ok()) throw std::logic_error("redactor: bad pattern: " + re->error());
        return re;
    }

    void add(const char* pattern, std::function<std::optional<piece>(const piece*)> pick,
             std::function<bool(std::string_view)> skip = nullptr) {
        rules.push_back({compile(pattern), std::move(pick), std::move(skip)});
    }

    /// Replaces every picked span of `r` in `s` by "[REDACTED]".
    static void apply(const value_rule& r, std::string& s) {
        const int ngroups = 1 + r.re->NumberOfCapturingGroups();
        std::vector<piece> groups(static_cast<std::size_t>(ngroups));
        std::string out;
        bool changed = false;
        std::size_t copied = 0; // bytes of s already moved to out
        std::size_t from = 0;   // where the next search starts
        const piece text(s);
        // With `skip`, find the bounds first (DFA only) and extract groups only when needed.
        const int first_groups = r.skip ? 1 : ngroups;
        while (from <= s.size() &&
               r.re->Match(text, from, s.size(), RE2::UNANCHORED, groups.data(), first_groups)) {
            const auto match_begin = static_cast<std::size_t>(groups[0].data() - s.data());
            const auto match_end = match_begin + groups[0].size();
            const bool skipped = r.skip && r.skip(to_view(groups[0]));
            if (!skipped && first_groups != ngroups &&
                !r.re->Match(text, match_begin, match_end, RE2::ANCHOR_BOTH, groups.data(),
                             ngroups))
                groups[0] = piece(); // cannot happen: the same text matched just before
            auto secret =
                skipped || groups[0].data() == nullptr ? std::nullopt : r.pick(groups.data());
            if (!secret || secret->data() == nullptr || to_view(*secret) == redacted_text) {
                // Resume after the current word: a later, overlapping match may still be a
                // secret, but a word's tail ("ax_tokens" of "max_tokens") must not be judged.
                from = match_begin + 1;
                while (from < s.size() && is_word_char(s[from]))
                    ++from;
                continue;
            }
            const auto secret_begin = static_cast<std::size_t>(secret->data() - s.data());
            out.append(s, copied, secret_begin - copied);
            out += redacted_text;
            copied = secret_begin + secret->size();
            from = std::max(match_end, copied + (match_end == match_begin ? 1 : 0));
            changed = true;
        }
        if (!changed) return;
        out.append(s, copied, std::string::npos);
        s = std::move(out);
    }

    /// False when no key in `text` can be secret: secret_key() looks for its words in the key
    /// lower-cased without separators, and such a key is a substring of the text lower-cased
    /// without separators. Prose with `key=value` pairs costs the key=value rule a match per
    /// pair (~25 ns a byte); this one pass spares it where no key word occurs at all.
    bool may_hold_secret_key(std::string_view text) const {
        thread_local std::string norm;
        norm.clear();
        norm.reserve(text.size());
        for (char c : text)
            if (!is_key_separator(c)) norm.push_back(ascii_lower(c));
        const bool found = RE2::PartialMatch(norm, *key_words);
        if (norm.capacity() > 65536) std::string().swap(norm); // a huge log line: not kept
        return found;
    }

    /// False when no rule can match `text`, decided without the automaton:
    ///  * no byte of value_rule_trigger, or shorter than `min_token_match` without a byte of
    ///    key_value_trigger (most ids and names: "t_echo", "req-17");
    ///  * or no token rule can match (its bytes absent, too short, or no token's literal:
    ///    may_hold_token) and no '@' (URL credentials), so only the auth-scheme, AWS-secret and
    ///    key=value rules are left: the first two need their words ("bearer", "basic", "aws";
    ///    looked for in ASCII text only), the last a secret key before one of its separators
    ///    (secret_key_before_separator). Most prose and messages
    ///    ("Echo: 12:ab", "status=ok") end here; it costs a pass over the text, the automaton
    ///    ~10 ns a byte and a copy (docs/benchmarks.md (e)).
    /// tests/fuzz/fuzz_redactor checks that every rule, run without this test, changes nothing
    /// where it says false.
    static bool may_match(std::string_view text) {
        if (holds_exact(text)) return true;
        bool separator_or_space = false; // key_value_trigger
        bool token = false;              // value_rule_trigger's other bytes
        bool non_ascii = false;
        for (unsigned char c : text) {
            separator_or_space |= key_value_trigger[c];
            token |= value_rule_trigger[c] && !key_value_trigger[c];
            non_ascii |= c >= 0x80;
        }
        if (token && text.size() >= min_token_match && may_hold_token(text)) return true;
        if (!separator_or_space) return false;
        if (token && text.find('@') != text.npos) return true; // URL credentials
        // RE2 folds case by Unicode: (?i:basic) also matches "baſic" (U+017F), so the words
        // are looked for in ASCII text only.
        return non_ascii || names_auth_scheme_or_aws(text) || secret_key_before_separator(text);
    }

    /// The first, cheapest test of may_match: an exact secret, or a byte some rule needs
    /// (value_rule_trigger; key_value_trigger's only, under min_token_match bytes).
    static bool has_trigger(std::string_view text) {
        if (holds_exact(text)) return true;
        const auto& trigger =
            text.size() < min_token_match ? key_value_trigger : detail::value_rule_trigger;
        for (unsigned char c : text)
            if (trigger[c]) return true;
        return false;
    }

    std::string redact(std::string_view text) const {
        if (!has_trigger(text)) return std::string(text);
        if (text.size() > max_memo_text)
            return may_match(text) ? redact_uncached(text) : std::string(text);
        const std::string* changed = memo_of(text);
        return changed ? *changed : std::string(text);
    }

    /// The redaction of `text` (has_trigger, at most max_memo_text bytes), remembered;
    /// nullptr when no rule changes it.
    const std::string* memo_of(std::string_view text) const {
        // The same short texts come back call after call (a policy's reason, an agent's name,
        // a hook's verdict): each thread remembers the last answers, direct-mapped by hash, so
        // a text seen before costs a hash and a compare, not may_match's passes. Every impl
        // has the same rules, so an answer holds for all of them.
        struct memo_entry {
            std::string in, out;
            std::uint64_t generation = 0; ///< of the exact secrets it was made with
            bool used = false;
            bool changed = false; ///< `out` is the redaction; else `in` is its own
        };
        thread_local std::array<memo_entry, 64> memo;
        memo_entry& e = memo[std::hash<std::string_view>{}(text) % memo.size()];
        const auto generation = exacts().generation.load(std::memory_order_acquire);
        if (!e.used || e.in != text || e.generation != generation) {
            // Made before the entry is touched: a throw (out of memory) leaves no entry that
            // would later pass a text unredacted.
            std::string redacted;
            const bool changed = may_match(text) && (redacted = redact_uncached(text)) != text;
            e.used = false;
            e.in.assign(text);
            if (changed) e.out = std::move(redacted);
            e.changed = changed;
            e.generation = generation;
            e.used = true;
        }
        return e.changed ? &e.out : nullptr;
    }

    void append_redacted_json(std::string& out, std::string_view text) const {
        if (!has_trigger(text)) return protocol::append_json_string(out, text);
        if (text.size() > max_memo_text) {
            if (!may_match(text)) return protocol::append_json_string(out, text);
            return protocol::append_json_string(out, redact_uncached(text));
        }
        const std::string* changed = memo_of(text);
        protocol::append_json_string(out, changed ? std::string_view(*changed) : text);
    }

    /// Texts up to this long are remembered by `redact`.
    static constexpr std::size_t max_memo_text = 256;

    std::string redact_uncached(std::string_view text) const {
        if (holds_exact(text)) {
            std::string s(text);
            replace_exact_secrets(s);
            return redact_rules(s);
        }
        return redact_rules(text);
    }

    std::string redact_rules(std::string_view text) const {
        std::vector<int> hits;
        RE2::Set::ErrorInfo error{RE2::Set::kNoError};
        if (!any_rule->Match(piece(text.data(), text.size()), &hits, &error)) {
            if (error.kind == RE2::Set::kNoError) return std::string(text);
            // The set's DFA gave up (huge input): fall back to trying every rule.
            hits.resize(rules.size());
            for (std::size_t i = 0; i < rules.size(); ++i)
                hits[i] = static_cast<int>(i);
        }
        std::sort(hits.begin(), hits.end()); // rules run in their declared order
        std::string s(text);
        for (int i : hits) {
            const auto rule = static_cast<std::size_t>(i);
            if (rule == key_value_rule && !may_hold_secret_key(s)) continue;
            apply(rules[rule], s);
        }
        return s;
    }
};

namespace detail {
bool may_match(std::string_view text) {
    return redactor::impl::may_match(text);
}

std::string redact_by_every_rule(std::string_view text) {
    static const redactor::impl rules;
    std::string s(text);
    replace_exact_secrets(s);
    for (const auto& rule : rules.rules)
        redactor::impl::apply(rule, s);
    return s;
}
} // namespace detail

redactor::redactor(redaction_limits limits) : impl_(std::make_unique<impl>()), limits_(limits) {
    append_json_string(budget_note_json_, "[cut: summary over " +
                                              std::to_string(limits.max_summary_bytes) + " bytes]");
}

redactor::~redactor() = default;

std::string redactor::redact_text(std::string_view text) const {
    return impl_->redact(text);
}

void redactor::append_redacted_json_string(std::string& out, std::string_view text) const {
    impl_->append_redacted_json(out, text);
}

bool redactor::is_secret_key(std::string_view key) const {
    return secret_key(key);
}

const redactor& default_redactor() {
    static const redactor instance;
    return instance;
}

} // namespace meith::audit
