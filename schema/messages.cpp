// Messages for a failed validation: what the arguments got wrong, in words a caller can act on
// (docs/protocol.md, "Validation errors"). Split from schema_validator.cpp, which compiles and
// runs the schema; this file only reads valijson's errors and the recorded subschemas.
#include "schema/error_reading.hpp"
#include "schema/validator_detail.hpp"

#include <valijson/adapters/nlohmann_json_adapter.hpp>

#include <algorithm>
#include <charconv>
#include <cstdio>

namespace meith::schema::detail {

// ---- messages: a failed validation in words a caller can act on ---------------------------
//
// valijson's errors are an argument path plus English written for the schema's author
// ("Failed to match against any enum values."). A failed validation is told as
// "/op must be one of "get", "set" (got "nope")": each error's kind is read from valijson's
// text, the value from the arguments, and the constraint from the subschema the error came
// from, found by validating once more with the guards recording which subschemas ran at the
// error's path. Only a failed validation pays for this. Argument text (values, property
// names, paths) is quoted cut to `max_quoted` bytes with control characters escaped: messages
// go to the caller and to the audit log.

namespace {

constexpr std::size_t max_quoted = 60;    ///< bytes of one value or name quoted
constexpr std::size_t max_pattern = 120;  ///< bytes of a schema's pattern quoted
constexpr std::size_t max_path = 200;     ///< bytes of one path
constexpr std::size_t max_listed = 12;    ///< enum values or property names listed
constexpr std::size_t max_shown = 3;      ///< violations named in one message
constexpr std::size_t max_candidates = 8; ///< errors looked at for those

/// The longest prefix of `s` of at most `max` bytes that ends on a UTF-8 boundary.
std::string_view utf8_prefix(std::string_view s, std::size_t max) {
    if (s.size() <= max) return s;
    std::size_t n = max;
    while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80)
        --n;
    return s.substr(0, n);
}

/// `s` cut to `max` bytes ("..." when cut), control characters escaped.
std::string plain(std::string_view s, std::size_t max = max_quoted) {
    const std::string_view kept = utf8_prefix(s, max);
    std::string out;
    out.reserve(kept.size() + 3);
    for (const char c : kept) {
        const auto u = static_cast<unsigned char>(c);
        if (c == '\n') {
            out += "\\n";
        } else if (c == '\t') {
            out += "\\t";
        } else if (c == '\r') {
            out += "\\r";
        } else if (u < 0x20 || u == 0x7f) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(u));
            out += buf;
        } else {
            out += c;
        }
    }
    if (kept.size() < s.size()) out += "...";
    return out;
}

/// `s` as a JSON string, cut to `max` bytes ("..." inside the quotes when cut).
std::string quoted_text(std::string_view s, std::size_t max = max_quoted) {
    const std::string_view kept = utf8_prefix(s, max);
    std::string text = json(std::string(kept)).dump(-1, ' ', false, json::error_handler_t::replace);
    if (kept.size() < s.size()) text.insert(text.size() - 1, "...");
    return text;
}

/// A property name as messages quote it: 'extra'.
std::string quoted_name(std::string_view s) {
    return "'" + plain(s) + "'";
}

/// A value as a message shows it: strings quoted and cut, numbers and literals as JSON text,
/// arrays and objects of the arguments by kind only (those of the schema cut).
std::string shown_value(const json& v, bool from_schema = false) {
    if (v.is_string()) return quoted_text(v.get_ref<const std::string&>());
    if (v.is_structured() && !from_schema) return v.is_array() ? "an array" : "an object";
    return plain(v.dump(-1, ' ', false, json::error_handler_t::replace));
}

const char* kind_of(const json& v) {
    switch (v.type()) {
    case json::value_t::null:
        return "null";
    case json::value_t::boolean:
        return "a boolean";
    case json::value_t::string:
        return "a string";
    case json::value_t::array:
        return "an array";
    case json::value_t::object:
        return "an object";
    default:
        return "a number";
    }
}

/// A JSON Schema type name as a message says it ("a string"); empty for no type name.
std::string type_phrase(std::string_view t) {
    if (t == "string") return "a string";
    if (t == "number") return "a number";
    if (t == "integer") return "an integer";
    if (t == "boolean") return "a boolean";
    if (t == "object") return "an object";
    if (t == "array") return "an array";
    if (t == "null") return "null";
    if (t == "any") return "any value";
    return {};
}

/// Whether `v` is of the named type (as valijson judges with strict types).
bool has_type(const json& v, std::string_view t) {
    if (t == "string") return v.is_string();
    if (t == "number") return v.is_number();
    if (t == "integer") return v.is_number_integer();
    if (t == "boolean") return v.is_boolean();
    if (t == "object") return v.is_object();
    if (t == "array") return v.is_array();
    if (t == "null") return v.is_null();
    return true;
}

} // namespace

std::string shown_path(const std::vector<std::string>& context) {
    std::string path;
    for (const auto& part : context) {
        if (part == "<root>") continue;
        std::string_view token = part;
        if (token.size() >= 2 && token.front() == '[' && token.back() == ']')
            token = token.substr(1, token.size() - 2);
        path += '/';
        path += escape_token(plain(token));
    }
    if (path.empty()) return "/";
    if (path.size() > max_path) {
        const std::string_view head = utf8_prefix(path, max_path / 2);
        std::size_t from = path.size() - max_path / 2;
        while (from < path.size() && (static_cast<unsigned char>(path[from]) & 0xC0) == 0x80)
            ++from;
        path = std::string(head) + "..." + path.substr(from);
    }
    return path;
}

namespace {

/// "1.500000" (valijson's std::to_string) as "1.5".
std::string trimmed_number(std::string_view text) {
    std::string s(text);
    if (s.find('.') != std::string::npos && s.find_first_of("eE") == std::string::npos) {
        while (!s.empty() && s.back() == '0')
            s.pop_back();
        if (!s.empty() && s.back() == '.') s.pop_back();
    }
    return s;
}

/// Whether the schema's number `v` is the one valijson printed as `text`.
bool same_number(const json& v, std::string_view text) {
    if (!v.is_number()) return false;
    if (std::to_string(v.get<double>()) == text) return true;
    return v.is_number_integer() && std::to_string(v.get<std::int64_t>()) == text;
}

std::size_t utf8_length(std::string_view s) {
    std::size_t n = 0;
    for (const char c : s)
        n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
    return n;
}

std::string count_of(std::string_view n, const char* one, const char* many) {
    return std::string(n) + " " + (n == "1" ? one : many);
}

// -- which subschema an error came from --

struct found {
    const json* keyword = nullptr; ///< the keyword's value in that subschema
    const json* node = nullptr;
    const extras* x = nullptr;
};

/// The subschemas recorded at path `wanted` that have `key`, in the order they ran, preferring
/// those whose keyword `fails(value)`: the `nth` of them (the error is the nth of its kind at
/// that path), else the last; none when no subschema there has `key`.
template <class Fails>
found pick(const recorder& rec, std::size_t wanted, const char* key, std::size_t nth,
           Fails&& fails) {
    std::vector<found> all, failing;
    for (const auto& h : rec.hits) {
        if (h.wanted != wanted || !h.node->is_object()) continue;
        const auto it = h.node->find(key);
        if (it == h.node->end()) continue;
        if (std::any_of(all.begin(), all.end(), [&](const found& f) { return f.node == h.node; }))
            continue;
        all.push_back({&*it, h.node, h.x});
        if (fails(*it)) failing.push_back(all.back());
    }
    const auto& from = failing.empty() ? all : failing;
    if (from.empty()) return {};
    return from[std::min(nth, from.size() - 1)];
}

found pick(const recorder& rec, std::size_t wanted, const char* key) {
    return pick(rec, wanted, key, 0, [](const json&) { return true; });
}

/// The schema's number behind valijson's `printed` one (minimum, multipleOf, ...).
std::string schema_number(const recorder& rec, std::size_t wanted,
                          std::initializer_list<const char*> keys, std::string_view printed) {
    for (const char* key : keys) {
        const found f =
            pick(rec, wanted, key, 0, [&](const json& v) { return same_number(v, printed); });
        if (f.keyword && same_number(*f.keyword, printed)) return f.keyword->dump();
    }
    return trimmed_number(printed);
}

/// "(the schema lists: a, b, and names matching "^x")" for a property that is not allowed.
std::string allowed_properties(const recorder& rec, std::size_t wanted) {
    std::vector<std::string_view> names, patterns;
    const found ours =
        pick(rec, wanted, "x-meith-pattern-properties", 0, [](const json&) { return true; });
    const found theirs = pick(rec, wanted, "additionalProperties", 0,
                              [](const json& v) { return v.is_boolean() && !v.get<bool>(); });
    if (ours.keyword && ours.keyword->is_number_unsigned() &&
        ours.keyword->get<std::size_t>() < ours.x->pattern_props.size()) {
        const auto& pp = ours.x->pattern_props[ours.keyword->get<std::size_t>()];
        for (const auto& n : pp.named)
            names.push_back(n);
        for (const auto& [re, sub] : pp.patterns)
            patterns.push_back(re->pattern());
    } else if (theirs.keyword && theirs.keyword->is_boolean() && !theirs.keyword->get<bool>()) {
        if (auto props = theirs.node->find("properties");
            props != theirs.node->end() && props->is_object())
            for (const auto& [name, sub] : props->items())
                names.push_back(name);
    } else {
        return {};
    }
    if (names.empty() && patterns.empty()) return " (the schema allows no properties here)";
    std::string out = names.empty() ? " (the schema allows only " : " (the schema lists: ";
    for (std::size_t i = 0; i < names.size() && i < max_listed; ++i)
        out += (i ? ", " : "") + plain(names[i]);
    if (names.size() > max_listed) out += ", ...";
    for (std::size_t i = 0; i < patterns.size() && i < max_listed; ++i)
        out += std::string(i               ? " or "
                           : names.empty() ? "names matching "
                                           : ", and names matching ") +
               quoted_text(patterns[i], max_pattern);
    if (patterns.size() > max_listed) out += " or ...";
    return out + ")";
}

const char* format_example(std::string_view format) {
    if (format == "date") return "2026-01-31";
    if (format == "time") return "12:00:00Z";
    if (format == "date-time") return "2026-01-31T12:00:00Z";
    return nullptr;
}

/// A `type` violation: "X must be a string or null (got a number)"; for an integer given a
/// fraction, the value itself ("(got 1.5)": "a number" would not say what is wrong).
std::string explain_type(const std::string& subject, const json* value, const recorder& rec,
                         std::size_t wanted, std::size_t nth, const std::string& got_kind,
                         const std::string& got_value) {
    const found f = pick(rec, wanted, "type", nth, [&](const json& t) {
        if (!value) return true;
        if (t.is_string()) return !has_type(*value, t.get_ref<const std::string&>());
        if (!t.is_array()) return true;
        return std::none_of(t.begin(), t.end(), [&](const json& one) {
            return !one.is_string() || has_type(*value, one.get_ref<const std::string&>());
        });
    });
    std::vector<std::string> phrases;
    bool integer = false, number = false;
    auto add = [&](const json& t) {
        if (!t.is_string()) return;
        const auto& name = t.get_ref<const std::string&>();
        if (auto p = type_phrase(name); !p.empty()) phrases.push_back(std::move(p));
        integer = integer || name == "integer";
        number = number || name == "number";
    };
    if (f.keyword && f.keyword->is_array())
        for (const auto& t : *f.keyword)
            add(t);
    else if (f.keyword)
        add(*f.keyword);
    if (phrases.empty()) return subject + " has a type the schema does not allow" + got_kind;
    std::string list;
    for (std::size_t i = 0; i < phrases.size(); ++i)
        list += (i == 0 ? "" : i + 1 == phrases.size() ? " or " : ", ") + phrases[i];
    // 1.5 for an integer: "a number" would not say what is wrong.
    const bool show = integer && !number && value && value->is_number();
    return subject + " must be " + list + (show ? got_value : got_kind);
}

/// An `enum` violation: the values the schema lists (at most max_listed of them).
std::string explain_enum(const std::string& subject, const json* value, const recorder& rec,
                         std::size_t wanted, std::size_t nth, const std::string& got_value) {
    const found f = pick(rec, wanted, "enum", nth, [&](const json& values) {
        return !value || !values.is_array() ||
               std::find(values.begin(), values.end(), *value) == values.end();
    });
    if (!f.keyword || !f.keyword->is_array() || f.keyword->empty())
        return subject + " must be one of the values the schema lists" + got_value;
    const json& values = *f.keyword;
    std::string list;
    for (std::size_t i = 0; i < values.size() && i < max_listed; ++i)
        list += (i ? ", " : "") + shown_value(values[i], true);
    if (values.size() > max_listed) list += ", ... (" + std::to_string(values.size()) + " values)";
    return subject + (values.size() == 1 ? " must be " : " must be one of ") + list + got_value;
}

/// A `uniqueItems` violation; `param` is valijson's "A and #B violate uniqueness constraint.".
std::string explain_unique(const std::string& subject, std::string_view param) {
    // "A and #B violate uniqueness constraint."
    const std::string_view first = param.substr(0, param.find(' '));
    const auto hash = param.find('#');
    const std::string_view second = hash == std::string_view::npos
                                        ? std::string_view{}
                                        : param.substr(hash + 1, param.find(' ', hash) - hash - 1);
    return subject + " must not contain duplicates" +
           (second.empty() ? std::string()
                           : " (items " + plain(first) + " and " + plain(second) + " are equal)");
}

/// A `dependencies` violation: which present property requires the missing one.
std::string explain_dependency(const std::string& subject, bool root, const std::string& in,
                               const json* value, const recorder& rec, std::size_t wanted,
                               std::string_view missing) {
    const found f = pick(rec, wanted, "dependencies");
    if (f.keyword && f.keyword->is_object() && value && value->is_object()) {
        for (const auto& [name, dep] : f.keyword->items()) {
            if (!value->contains(name)) continue;
            const bool names_it =
                (dep.is_string() && dep.get_ref<const std::string&>() == missing) ||
                (dep.is_array() && std::any_of(dep.begin(), dep.end(), [&](const json& d) {
                     return d.is_string() && d.get_ref<const std::string&>() == missing;
                 }));
            if (names_it)
                return "property " + quoted_name(name) + " requires property " +
                       quoted_name(missing) + in;
        }
    }
    return (root ? "missing" : subject + " is missing") + " property " + quoted_name(missing) +
           ", which the schema's dependencies require";
}

/// One violation in words. `value` is the arguments' value at the error's path (null if
/// absent); `wanted` the path's index in `rec`; `nth` how many errors of this kind at this
/// path came before.
/// Stays whole (~105 lines): one case per JSON Schema keyword, the table of what each says; the
/// keywords with more to say than a line have their own explain_* above.
std::string explain_one(const valijson::ValidationResults::Error& e, const reading& r,
                        const json* value, const recorder& rec, std::size_t wanted,
                        std::size_t nth) {
    const std::string path = shown_path(e.context);
    const bool root = path == "/";
    const std::string subject = root ? "the arguments" : path;
    const std::string in = root ? "" : " in " + path;
    const std::string got_kind = value ? std::string(" (got ") + kind_of(*value) + ")" : "";
    const std::string got_value = value ? " (got " + shown_value(*value) + ")" : "";
    const std::string got_length =
        value && value->is_string()
            ? " (got " + std::to_string(utf8_length(value->get_ref<const std::string&>())) + ")"
            : "";
    const std::string got_size =
        value && value->is_structured() ? " (got " + std::to_string(value->size()) + ")" : "";
    switch (r.k) {
    case kind::type:
        return explain_type(subject, value, rec, wanted, nth, got_kind, got_value);
    case kind::enumeration:
        return explain_enum(subject, value, rec, wanted, nth, got_value);
    case kind::constant: {
        const found f =
            pick(rec, wanted, "const", nth, [&](const json& c) { return !value || c != *value; });
        if (!f.keyword)
            return subject + " must be the value the schema's 'const' gives" + got_value;
        return subject + " must be " + shown_value(*f.keyword, true) + got_value;
    }
    case kind::minimum:
        return subject + " must be at least " + schema_number(rec, wanted, {"minimum"}, r.param) +
               got_value;
    case kind::exclusive_minimum:
        return subject + " must be greater than " +
               schema_number(rec, wanted, {"exclusiveMinimum", "minimum"}, r.param) + got_value;
    case kind::maximum:
        return subject + " must be at most " + schema_number(rec, wanted, {"maximum"}, r.param) +
               got_value;
    case kind::exclusive_maximum:
        return subject + " must be less than " +
               schema_number(rec, wanted, {"exclusiveMaximum", "maximum"}, r.param) + got_value;
    case kind::multiple_of:
        return subject + " must be a multiple of " +
               schema_number(rec, wanted, {"multipleOf", "divisibleBy"}, r.param) + got_value;
    case kind::min_length:
        return subject + " must be at least " + count_of(r.param, "character", "characters") +
               got_length;
    case kind::max_length:
        return subject + " must be at most " + count_of(r.param, "character", "characters") +
               got_length;
    case kind::pattern:
        if (r.param.empty()) return subject + " does not match the schema's pattern" + got_value;
        return subject + " must match the pattern " + quoted_text(r.param, max_pattern) + got_value;
    case kind::format: {
        const std::string_view name = r.param;
        const char* example = format_example(name);
        return subject + " must be a valid " + plain(name) +
               (example ? std::string(" such as \"") + example + "\"" : "") + got_value;
    }
    case kind::min_items:
        return subject + " must have at least " + count_of(r.param, "item", "items") + got_size;
    case kind::max_items:
        return subject + " must have at most " + count_of(r.param, "item", "items") + got_size;
    case kind::min_properties:
        return subject + " must have at least " + count_of(r.param, "property", "properties") +
               got_size;
    case kind::max_properties:
        return subject + " must have at most " + count_of(r.param, "property", "properties") +
               got_size;
    case kind::unique_items:
        return explain_unique(subject, r.param);
    case kind::required:
        return (root ? "missing" : subject + " is missing") + " required property " +
               quoted_name(r.param);
    case kind::additional_property:
        return "property " + quoted_name(r.param) + " is not allowed" + in +
               allowed_properties(rec, wanted);
    case kind::dependency:
        return explain_dependency(subject, root, in, value, rec, wanted, r.param);
    case kind::any_of:
        return subject + " must match at least one of the schemas in 'anyOf'";
    case kind::one_of_none:
        return subject + " must match exactly one of the schemas in 'oneOf' (it matches none)";
    case kind::one_of_many:
        return subject +
               " must match exactly one of the schemas in 'oneOf' (it matches more than one)";
    case kind::negation:
        return subject + " must not match the schema in 'not'";
    case kind::contains:
        return subject + " must contain at least one item that matches the schema in 'contains'";
    case kind::additional_items: {
        const found f = pick(rec, wanted, "items");
        const std::string n = f.keyword && f.keyword->is_array() ? std::to_string(f.keyword->size())
                                                                 : std::string(r.param);
        if (n.empty()) return subject + " has more items than the schema allows" + got_size;
        return subject + " must have at most " + count_of(n, "item", "items") + got_size;
    }
    case kind::property_wrapper:
        return (root ? "" : path) + "/" + escape_token(plain(r.param)) +
               " does not match its schema";
    case kind::item_wrapper:
        return (root ? "" : path) + "/" + plain(r.param) + " does not match its schema";
    case kind::wrapper:
        return subject + " does not match its schema";
    case kind::other:
        break;
    }
    return path + ": " + plain(e.description, 200);
}

/// The arguments' value at a valijson context, if there is one.
const json* value_at(const json& root, const std::vector<std::string>& context) {
    const json* v = &root;
    for (const auto& part : context) {
        if (part == "<root>") continue;
        std::string_view token = part;
        if (token.size() >= 2 && token.front() == '[' && token.back() == ']')
            token = token.substr(1, token.size() - 2);
        if (v->is_object()) {
            const auto it = v->find(std::string(token));
            if (it == v->end()) return nullptr;
            v = &*it;
        } else if (v->is_array()) {
            std::size_t i = 0;
            const auto [end, ec] = std::from_chars(token.data(), token.data() + token.size(), i);
            if (ec != std::errc{} || end != token.data() + token.size() || i >= v->size())
                return nullptr;
            v = &(*v)[i];
        } else {
            return nullptr;
        }
    }
    return v;
}

} // namespace

std::string explain_failure(const schema_validator::compiled& c, const json& target,
                            const valijson::ValidationResults& results, std::size_t budget,
                            std::string_view head) {
    // Told apart cheaply: there may be an error per argument node.
    auto echo = [](const std::string& text) {
        if (!text.starts_with("Failed to ")) return false;
        if (text.starts_with("Failed to validate item #")) return true;
        return text.starts_with("Failed to validate against schema associated with property") ||
               is_wrapper(read_error(text).k);
    };
    const bool specific = std::any_of(results.begin(), results.end(),
                                      [&](const auto& e) { return !echo(e.description); });
    // The first few candidates are explained; equal explanations (two anyOf branches that
    // both want a string, say) are named once.
    std::vector<const valijson::ValidationResults::Error*> candidates;
    std::vector<std::size_t> positions; // of the candidates in `results`
    std::size_t eligible = 0, i = 0;
    for (auto it = results.begin(); it != results.end(); ++it, ++i) {
        if (specific && echo(it->description)) continue;
        ++eligible;
        if (candidates.size() == max_candidates) continue;
        candidates.push_back(&*it);
        positions.push_back(i);
    }

    // The paths to explain, and what ran there (a second run, recording).
    recorder rec;
    std::vector<std::size_t> wanted(candidates.size());
    bool rerun = false;
    for (std::size_t k = 0; k < candidates.size(); ++k) {
        std::vector<std::string> tokens;
        for (const auto& part : candidates[k]->context)
            if (part != "<root>") tokens.push_back(part);
        const auto at = std::find(rec.wanted.begin(), rec.wanted.end(), tokens);
        wanted[k] = static_cast<std::size_t>(at - rec.wanted.begin());
        if (at == rec.wanted.end()) rec.wanted.push_back(std::move(tokens));
        rerun = rerun || needs_schema(read_error(candidates[k]->description).k);
    }
    if (rerun) {
        // The second run may stop once every candidate's path is done with: an error is
        // pushed at an enclosing path ("property 'x' failed") only after every subschema at
        // the path has run (errors come in the same order in both runs).
        std::size_t stop_at = 0;
        for (std::size_t k = 0; k < candidates.size(); ++k) {
            const auto& ctx = candidates[k]->context;
            const auto from = results.begin() + static_cast<std::ptrdiff_t>(positions[k]);
            const auto echo = std::find_if(from, results.end(), [&](const auto& e) {
                return e.context.size() < ctx.size() &&
                       std::equal(e.context.begin(), e.context.end(), ctx.begin());
            });
            if (echo == results.end()) {
                stop_at = 0; // never: run to the end
                break;
            }
            stop_at = std::max(stop_at, static_cast<std::size_t>(echo - results.begin()) + 1);
        }
        valijson::ValidationResults again;
        rec.stop_at = stop_at;
        validate_recording(c, target, budget, rec, again);
    }

    std::vector<std::string> lines;
    std::size_t used = 0; // candidates named, or equal to one named
    for (std::size_t k = 0; k < candidates.size() && lines.size() < max_shown; ++k, ++used) {
        const reading r = read_error(candidates[k]->description);
        std::size_t nth = 0;
        for (std::size_t j = 0; j < k; ++j)
            nth += wanted[j] == wanted[k] && read_error(candidates[j]->description).k == r.k;
        std::string line = explain_one(*candidates[k], r, value_at(target, candidates[k]->context),
                                       rec, wanted[k], nth);
        if (std::find(lines.begin(), lines.end(), line) == lines.end())
            lines.push_back(std::move(line));
    }
    const std::size_t more = eligible - used;
    std::string message(head);
    for (std::size_t k = 0; k < lines.size(); ++k)
        message += (k ? "; " : ": ") + lines[k];
    if (more) message += "; and " + std::to_string(more) + " more";
    return message;
}

} // namespace meith::schema::detail
