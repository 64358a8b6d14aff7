// redactor: key rules (normalised key names), value rules (RE2 patterns compiled once) and the
// bounded JSON summary writer built on a simdjson DOM walk.
#include "audit/redactor.hpp"

#include "audit/audit_log.hpp"

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

constexpr std::string_view redacted_text = "[REDACTED]";

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

/// Every value rule needs one of these bytes somewhere in a match ('-', '_', ':', '=', '@' as
/// separators, a space or tab after an auth scheme word, 'A' of AWS ids and AIza keys, 'J' of
/// a JWT's "eyJ"): a string without any cannot be rewritten and skips the automaton.
constexpr auto value_rule_trigger = [] {
    std::array<bool, 256> t{};
    for (unsigned char c : std::string_view("-_:=@ \tAJ"))
        t[c] = true;
    return t;
}();

/// The rules that need none of these bytes are the token formats (PEM, JWT, AWS ids, GitHub,
/// GitLab, Slack, OpenAI, Anthropic, Google, Stripe); the key=value, URL-credential, auth
/// scheme and AWS-secret rules each need one.
constexpr auto key_value_trigger = [] {
    std::array<bool, 256> t{};
    for (unsigned char c : std::string_view(":= \t"))
        t[c] = true;
    return t;
}();

/// The shortest text a token-format rule matches: a Slack "xoxb-" or "xapp-" prefix and 10
/// more characters. Shorter text can only match through key_value_trigger's bytes.
constexpr std::size_t min_token_match = 15;

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

/// secret_key_uncached with a small per-thread memory: every key of every summarised object
/// comes through here, and keys repeat (the same tools, the same argument names), while the
/// rules cost dozens of comparisons per key.
bool secret_key(std::string_view key) {
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

/// Bytes of a long string's summary that are redacted beyond the max_string_chars kept (at
/// most 4 bytes each): a secret that starts in the kept part and is cut by this window is
/// still caught by its rule (token rules match a prefix, a PEM block runs to the end), unless
/// it is a JWT over 4 KiB, whose kept part would then show its header and claims, never
/// its signature. Prose costs the rules ~25 ns a byte (docs/benchmarks.md (e)), so this bounds
/// the summary of any string to ~130 µs.
constexpr std::size_t redaction_margin_bytes = 4096;

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

} // namespace

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

    /// False when no rule can match `text`: no byte of value_rule_trigger, or shorter than
    /// `min_token_match` without a byte of key_value_trigger. Most argument strings, request
    /// ids and tool names ("t_echo", "req-17") skip the automaton.
    static bool may_match(std::string_view text) {
        if (text.size() < min_token_match) {
            for (unsigned char c : text)
                if (key_value_trigger[c]) return true;
            return false;
        }
        for (unsigned char c : text)
            if (value_rule_trigger[c]) return true;
        return false;
    }

    std::string redact(std::string_view text) const {
        if (!may_match(text)) return std::string(text);
        if (text.size() > max_memo_text) return redact_uncached(text);
        // The same short texts come back call after call (a policy's reason, an agent's name,
        // a hook's verdict): each thread remembers the last answers, direct-mapped by hash.
        // Every impl has the same rules, so an answer holds for all of them.
        struct memo_entry {
            std::string in, out;
            bool used = false;
        };
        thread_local std::array<memo_entry, 64> memo;
        memo_entry& e = memo[std::hash<std::string_view>{}(text) % memo.size()];
        if (!e.used || e.in != text) {
            e.out = redact_uncached(text);
            e.in.assign(text);
            e.used = true;
        }
        return e.out;
    }

    /// Texts up to this long are remembered by `redact`.
    static constexpr std::size_t max_memo_text = 256;

    std::string redact_uncached(std::string_view text) const {
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
    return redactor::impl::may_match(s);
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
        if (trigger && owner_.redact_text(text) != text) return false;
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

redactor::redactor(redaction_limits limits) : impl_(std::make_unique<impl>()), limits_(limits) {
    append_json_string(budget_note_json_, "[cut: summary over " +
                                              std::to_string(limits.max_summary_bytes) + " bytes]");
}

redactor::~redactor() = default;

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

std::string redactor::redact_text(std::string_view text) const {
    return impl_->redact(text);
}

bool redactor::is_secret_key(std::string_view key) const {
    return secret_key(key);
}

// ---- pem_block_filter ----------------------------------------------------------------------

namespace {
bool pem_begin(std::string_view line) {
    const auto at = line.find("-----BEGIN ");
    return at != std::string_view::npos && line.find("-----", at + 11) != std::string_view::npos;
}
bool pem_end(std::string_view line) {
    const auto at = line.find("-----END ");
    return at != std::string_view::npos && line.find("-----", at + 9) != std::string_view::npos;
}
/// Base64 body lines, empty lines and RFC 1421 headers ("Proc-Type: 4,ENCRYPTED").
bool pem_inner(std::string_view line) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' '))
        line.remove_suffix(1);
    if (line.empty()) return true;
    if (const auto colon = line.find(": "); colon != std::string_view::npos && colon > 0) {
        for (char c : line.substr(0, colon))
            if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-') return false;
        return true;
    }
    for (char c : line)
        if (!std::isalnum(static_cast<unsigned char>(c)) && c != '+' && c != '/' && c != '=')
            return false;
    return true;
}
} // namespace

std::string_view pem_block_filter::filter(std::string_view line) {
    static constexpr std::string_view redacted = "[REDACTED: PEM block line]";
    if (inside_) {
        if (pem_end(line)) {
            inside_ = false;
            return redacted;
        }
        if (pem_inner(line)) return redacted;
        // Not PEM any more: an unterminated block ends here. The line may begin the next
        // block (a key cut short, then another), so it is looked at as any other line.
        inside_ = false;
    }
    if (!pem_begin(line)) return line;
    inside_ = !pem_end(line); // a one-line block ends where it starts
    return redacted;
}

const redactor& default_redactor() {
    static const redactor instance;
    return instance;
}

} // namespace meith::audit
