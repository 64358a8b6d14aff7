#include "registry/schema_validator.hpp"

#define VALIJSON_USE_EXCEPTIONS 1
#include <nlohmann/json.hpp>
#include <valijson/adapters/nlohmann_json_adapter.hpp>
#include <valijson/schema.hpp>
#include <valijson/schema_parser.hpp>
#include <valijson/validation_results.hpp>
#include <valijson/validator.hpp>

#include <re2/re2.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdio>
#include <functional>
#include <map>
#include <unordered_map>

namespace meith::registry {

namespace {

// Debian's valijson 1.0 matches `pattern`, `patternProperties` and the date `format`s with
// std::regex, whose libstdc++ matcher recurses per input character (stack overflow on a long
// string) and backtracks (exponential time); its `uniqueItems` compares every pair, and a
// schema that refers to itself recurses without end. So the schema is rewritten before valijson
// sees it: those keywords become our own constraints (RE2, linear time; a hash set), `$ref`
// cycles that never descend into the arguments are refused, and every subschema carries a
// guard that bounds the work and the stack one validation may use.

constexpr std::size_t max_schema_depth = 128;         ///< nesting of the schema text
constexpr std::size_t guard_base_visits = 100'000;    ///< subschema visits, plus ...
constexpr std::size_t guard_visits_per_node = 64;     ///< ... this many per argument node
constexpr std::ptrdiff_t guard_stack_bytes = 1 << 20; ///< stack one validation may use

nlohmann::json to_nlohmann(simdjson::dom::element el, std::size_t& nodes) {
    ++nodes;
    using simdjson::dom::element_type;
    switch (el.type()) {
    case element_type::ARRAY: {
        auto arr = nlohmann::json::array();
        const simdjson::dom::array items =
            el.get_array().value_unsafe(); // copy: the result is a temporary
        for (auto item : items)
            arr.push_back(to_nlohmann(item, nodes));
        return arr;
    }
    case element_type::OBJECT: {
        auto obj = nlohmann::json::object();
        const simdjson::dom::object fields = el.get_object().value_unsafe();
        for (auto field : fields)
            obj[std::string(field.key)] = to_nlohmann(field.value, nodes);
        return obj;
    }
    case element_type::INT64:
        return el.get_int64().value_unsafe();
    case element_type::UINT64:
        return el.get_uint64().value_unsafe();
    case element_type::DOUBLE:
        return el.get_double().value_unsafe();
    case element_type::STRING:
        return std::string(el.get_string().value_unsafe());
    case element_type::BOOL:
        return el.get_bool().value_unsafe();
    case element_type::NULL_VALUE:
        return nullptr;
    }
    return nullptr;
}

/// Nesting depth of JSON text (brackets outside strings).
std::size_t text_depth(std::string_view s) {
    std::size_t depth = 0, max_depth = 0;
    bool in_string = false;
    for (std::size_t i = 0; i < s.size(); ++i) {
        const char c = s[i];
        if (in_string) {
            if (c == '\\')
                ++i;
            else if (c == '"')
                in_string = false;
        } else if (c == '"') {
            in_string = true;
        } else if (c == '{' || c == '[') {
            max_depth = std::max(max_depth, ++depth);
        } else if ((c == '}' || c == ']') && depth > 0) {
            --depth;
        }
    }
    return max_depth;
}

// ---- the rewritten schema's own keywords --------------------------------------------------

/// What the rewritten schema's own keywords refer to (by index, as the keyword's value).
struct extras {
    std::vector<std::unique_ptr<RE2>> patterns;
    struct pattern_properties {
        /// regex -> subschema (null: accepts anything); subschemas are owned by the
        /// top-level compile (compile_context::owned), and may be the one that refers to them.
        std::vector<std::pair<std::unique_ptr<RE2>, const schema_validator::compiled*>> patterns;
        std::vector<std::string> named; ///< names in `properties` (not "additional")
        bool additional_allowed = true; ///< additionalProperties is not false
        const schema_validator::compiled* additional = nullptr; ///< its subschema, if any
    };
    std::vector<pattern_properties> pattern_props;
    /// Every subschema of the rewritten document, by the index its guard carries (the guard
    /// names the subschema it runs for, so a failed validation can be explained).
    std::vector<const nlohmann::json*> nodes;
};

// ---- the guard: bounded work and stack per validation ------------------------------------

/// Which subschemas were applied at given argument paths. Only the second run of a validation
/// that failed records (to explain its errors); the first run pays one pointer test per
/// subschema visit.
struct recorder {
    /// Paths asked about, as valijson's context entries ("[n]", "[0]") without "<root>".
    std::vector<std::vector<std::string>> wanted;
    /// Where the arguments a patternProperties subschema validates sit in the whole.
    std::vector<std::string> prefix;
    struct hit {
        std::size_t wanted; ///< index into `wanted`
        const nlohmann::json* node;
        const extras* x;
    };
    std::vector<hit> hits;
    static constexpr std::size_t max_hits = 512;
    /// The second run's errors; recording ends once it holds `stop_at` of them (0: never).
    const valijson::ValidationResults* top = nullptr;
    std::size_t stop_at = 0;

    void note(const std::vector<std::string>& context, const nlohmann::json* node,
              const extras* x) {
        if (hits.size() >= max_hits) return;
        std::size_t depth = prefix.size();
        for (const auto& part : context)
            depth += part != "<root>";
        for (std::size_t w = 0; w < wanted.size(); ++w) {
            const auto& want = wanted[w];
            if (want.size() != depth) continue;
            std::size_t i = 0;
            bool same = true;
            for (; i < prefix.size() && same; ++i)
                same = prefix[i] == want[i];
            for (const auto& part : context) {
                if (!same) break;
                if (part == "<root>") continue;
                same = part == want[i++];
            }
            if (same) hits.push_back({w, node, x});
        }
    }
};

struct guard_state {
    std::size_t visits = 0;
    std::size_t budget = 0;
    const char* stack_base = nullptr;
    recorder* rec = nullptr;
};
thread_local guard_state guard;

struct guard_exhausted : std::runtime_error {
    using std::runtime_error::runtime_error;
};
struct recording_done : std::runtime_error {
    using std::runtime_error::runtime_error;
};

class guard_constraint final : public valijson::constraints::PolyConstraint {
  public:
    guard_constraint(const nlohmann::json* node, const extras* x) : node_(node), x_(x) {}
    bool validate(const valijson::adapters::Adapter&, const std::vector<std::string>& context,
                  valijson::ValidationResults*) const override {
        if (++guard.visits > guard.budget)
            throw guard_exhausted("the schema needs too much work for these arguments (over " +
                                  std::to_string(guard.budget) + " subschema checks)");
        const char* here = static_cast<const char*>(__builtin_frame_address(0));
        if (guard.stack_base && guard.stack_base - here > guard_stack_bytes)
            throw guard_exhausted("the schema recurses too deeply for these arguments");
        if (recorder* rec = guard.rec) {
            if (rec->stop_at && rec->top->numErrors() >= rec->stop_at)
                throw recording_done("every path asked about has been recorded");
            rec->note(context, node_, x_);
        }
        return true;
    }

  private:
    Constraint* cloneInto(void* p) const override { return new (p) guard_constraint(*this); }
    size_t sizeOf() const override { return sizeof(guard_constraint); }
    const nlohmann::json* node_;
    const extras* x_;
};

// ---- keywords taken from valijson --------------------------------------------------------

class pattern_constraint final : public valijson::constraints::PolyConstraint {
  public:
    explicit pattern_constraint(const RE2* re) : re_(re) {}
    bool validate(const valijson::adapters::Adapter& target,
                  const std::vector<std::string>& context,
                  valijson::ValidationResults* results) const override {
        if (!target.isString()) return true;
        const std::string s = target.getString();
        if (RE2::PartialMatch(s, *re_)) return true;
        if (results)
            results->pushError(context, "Failed to match the pattern '" + re_->pattern() + "'");
        return false;
    }

  private:
    Constraint* cloneInto(void* p) const override { return new (p) pattern_constraint(*this); }
    size_t sizeOf() const override { return sizeof(pattern_constraint); }
    const RE2* re_;
};

/// `format` date, time and date-time as valijson checks them, with RE2; others are ignored.
class format_constraint final : public valijson::constraints::PolyConstraint {
  public:
    explicit format_constraint(std::string format) : format_(std::move(format)) {}
    bool validate(const valijson::adapters::Adapter& target,
                  const std::vector<std::string>& context,
                  valijson::ValidationResults* results) const override {
        if (!target.isString()) return true;
        static const RE2 date("^([0-9]+)-(0[1-9]|1[012])-(0[1-9]|[12][0-9]|3[01])$");
        static const RE2 time("^([01][0-9]|2[0-3]):([0-5][0-9]):([0-5][0-9]|60)(\\.[0-9]+)?"
                              "(([Zz])|([\\+|\\-]([01][0-9]|2[0-3]):[0-5][0-9]))$");
        static const RE2 date_time(
            "^([0-9]+)-(0[1-9]|1[012])-(0[1-9]|[12][0-9]|3[01])[Tt]([01][0-9]|2[0-3]):"
            "([0-5][0-9]):([0-5][0-9]|60)(\\.[0-9]+)?(([Zz])|([\\+|\\-]([01][0-9]|2[0-3]):[0-5]"
            "[0-9]))$");
        const RE2* re = format_ == "date"        ? &date
                        : format_ == "time"      ? &time
                        : format_ == "date-time" ? &date_time
                                                 : nullptr;
        if (!re) return true;
        if (RE2::FullMatch(target.getString(), *re)) return true;
        if (results) results->pushError(context, "String is not a valid " + format_);
        return false;
    }

  private:
    Constraint* cloneInto(void* p) const override { return new (p) format_constraint(*this); }
    size_t sizeOf() const override { return sizeof(format_constraint); }
    std::string format_;
};

/// A canonical text of a JSON value, equal for values JSON Schema calls equal (numbers by
/// value, objects by members in any order).
void canonical(const valijson::adapters::Adapter& v, std::string& out) {
    if (v.isNull()) {
        out += 'n';
    } else if (v.isBool()) {
        out += v.getBool() ? 't' : 'f';
    } else if (v.isNumber()) {
        char buf[40];
        const double d = v.getNumber();
        const int n = std::snprintf(buf, sizeof buf, "d%.17g;", d == 0 ? 0.0 : d);
        out.append(buf, static_cast<std::size_t>(n));
    } else if (v.isString()) {
        const std::string s = v.getString();
        out += 's' + std::to_string(s.size()) + ':';
        out += s;
    } else if (v.isArray()) {
        out += '[';
        v.applyToArray([&](const valijson::adapters::Adapter& item) {
            canonical(item, out);
            return true;
        });
        out += ']';
    } else if (v.isObject()) {
        std::vector<std::string> members;
        v.applyToObject([&](const std::string& key, const valijson::adapters::Adapter& value) {
            std::string m = std::to_string(key.size()) + ':' + key;
            canonical(value, m);
            members.push_back(std::move(m));
            return true;
        });
        std::sort(members.begin(), members.end());
        out += '{';
        for (const auto& m : members)
            out += m;
        out += '}';
    }
}

class unique_items_constraint final : public valijson::constraints::PolyConstraint {
  public:
    bool validate(const valijson::adapters::Adapter& target,
                  const std::vector<std::string>& context,
                  valijson::ValidationResults* results) const override {
        if (!target.isArray()) return true;
        std::unordered_map<std::string, std::size_t> seen;
        bool unique = true;
        std::size_t index = 0, first = 0;
        target.applyToArray([&](const valijson::adapters::Adapter& item) {
            std::string key;
            canonical(item, key);
            const auto [at, fresh] = seen.emplace(std::move(key), index);
            unique = fresh;
            if (fresh)
                ++index;
            else
                first = at->second;
            return unique;
        });
        if (!unique && results)
            results->pushError(context, "Elements at indexes #" + std::to_string(first) + " and #" +
                                            std::to_string(index) +
                                            " violate uniqueness constraint.");
        return unique;
    }

  private:
    Constraint* cloneInto(void* p) const override { return new (p) unique_items_constraint(*this); }
    size_t sizeOf() const override { return sizeof(unique_items_constraint); }
};

class pattern_properties_constraint final : public valijson::constraints::PolyConstraint {
  public:
    explicit pattern_properties_constraint(const extras::pattern_properties* pp) : pp_(pp) {}
    bool validate(const valijson::adapters::Adapter& target,
                  const std::vector<std::string>& context,
                  valijson::ValidationResults* results) const override {
        if (!target.isObject()) return true;
        bool ok = true;
        target.applyToObject([&](const std::string& key, const valijson::adapters::Adapter& value) {
            bool matched = false;
            for (const auto& [re, sub] : pp_->patterns) {
                if (!RE2::PartialMatch(key, *re)) continue;
                matched = true;
                if (sub && !check(*sub, key, value, context, results)) ok = false;
            }
            if (!matched &&
                std::find(pp_->named.begin(), pp_->named.end(), key) == pp_->named.end()) {
                if (!pp_->additional_allowed) {
                    ok = false;
                    if (results)
                        results->pushError(context, "Object contains a property that could not be "
                                                    "validated using 'properties' or "
                                                    "'additionalProperties' constraints: '" +
                                                        key + "'.");
                } else if (pp_->additional &&
                           !check(*pp_->additional, key, value, context, results)) {
                    ok = false;
                }
            }
            return ok || results != nullptr;
        });
        return ok;
    }

  private:
    static bool check(const schema_validator::compiled& sub, const std::string& key,
                      const valijson::adapters::Adapter& value,
                      const std::vector<std::string>& context,
                      valijson::ValidationResults* results);
    Constraint* cloneInto(void* p) const override {
        return new (p) pattern_properties_constraint(*this);
    }
    size_t sizeOf() const override { return sizeof(pattern_properties_constraint); }
    const extras::pattern_properties* pp_;
};

/// Builds our constraints from the rewritten keywords (values are indexes into `extras`).
template <class F>
class builder final : public valijson::ConstraintBuilder {
  public:
    explicit builder(F make) : make_(std::move(make)) {}
    valijson::constraints::Constraint*
    make(const valijson::adapters::Adapter& value) const override {
        return make_(value);
    }

  private:
    F make_;
};
template <class F>
valijson::ConstraintBuilder* make_builder(F f) {
    return new builder<F>(std::move(f));
}

/// True when the schema constrains nothing beyond "is an object".
bool accepts_any_object(const nlohmann::json& schema) {
    if (!schema.is_object()) return false;
    for (const auto& [key, value] : schema.items()) {
        if (key == "type" && value == "object") continue;
        if (key == "description" || key == "title" || key == "$schema" || key == "$id" ||
            key == "examples")
            continue;
        if (key == "additionalProperties" && value == true) continue;
        if (key == "properties" && value.is_object() && value.empty()) continue;
        if (key == "required" && value.is_array() && value.empty()) continue;
        return false;
    }
    return true;
}

// ---- compile-time checks and the rewrite --------------------------------------------------

using json = nlohmann::json;

/// Keywords whose subschemas apply to the same instance (a cycle through them never ends).
constexpr std::array<const char*, 3> same_instance_lists{"allOf", "anyOf", "oneOf"};
constexpr std::array<const char*, 4> same_instance_single{"not", "if", "then", "else"};

/// A JSON pointer reference token (RFC 6901 §3: "~" as "~0", "/" as "~1").
std::string escape_token(const std::string& s) {
    std::string out;
    for (char c : s) {
        if (c == '~')
            out += "~0";
        else if (c == '/')
            out += "~1";
        else
            out += c;
    }
    return out;
}

/// The JSON pointer of a local `$ref` ("#", "#/definitions/a"); nullopt for anything else.
std::optional<json::json_pointer> local_pointer(const std::string& ref) {
    if (ref.empty() || ref[0] != '#') return std::nullopt;
    std::string ptr = ref.substr(1);
    while (ptr.size() > 1 && ptr.back() == '/')
        ptr.pop_back();
    if (!ptr.empty() && ptr[0] != '/') return std::nullopt; // "#anchor": not supported
    try {
        return json::json_pointer(ptr);
    } catch (const std::exception&) {
        return std::nullopt;
    }
}

/// Refuses `$ref`s that are not local pointers into the document, and cycles of references
/// and combinators that never descend into the arguments (valijson would recurse without end,
/// at compile or at validation).
std::optional<std::string> check_references(const json& root) {
    enum class mark { none, active, done };
    std::map<std::string, mark> marks;
    std::optional<std::string> error;
    std::size_t depth = 0; // a chain of references is followed recursively: bound it
    std::function<void(const json&, const std::string&)> visit;
    // Walks every schema position; `same` follows same-instance edges for the cycle check.
    std::function<void(const json&, const std::string&)> walk_all;
    visit = [&](const json& node, const std::string& path) {
        if (error || !node.is_object()) return;
        auto& m = marks[path];
        if (m == mark::done) return;
        if (m == mark::active) {
            error = "inputSchema refers to itself at '" + (path.empty() ? "#" : "#" + path) +
                    "' without descending into the arguments (a $ref cycle)";
            return;
        }
        if (++depth > 1000) {
            error = "inputSchema: references and combinators nest more than 1000 deep";
            return;
        }
        m = mark::active;
        if (auto ref = node.find("$ref"); ref != node.end()) {
            if (!ref->is_string()) {
                error = "inputSchema: $ref at '#" + path + "' is not a string";
                return;
            }
            const auto ptr = local_pointer(ref->get<std::string>());
            if (!ptr) {
                error = "inputSchema: only local $ref pointers (\"#/...\") are supported, not '" +
                        ref->get<std::string>() + "'";
                return;
            }
            if (!root.contains(*ptr)) {
                error = "inputSchema: $ref '" + ref->get<std::string>() + "' points nowhere";
                return;
            }
            visit(root.at(*ptr), ptr->to_string());
        } else {
            for (const char* k : same_instance_lists)
                if (auto it = node.find(k); it != node.end() && it->is_array())
                    for (std::size_t i = 0; i < it->size(); ++i)
                        visit((*it)[i], path + "/" + k + "/" + std::to_string(i));
            for (const char* k : same_instance_single)
                if (auto it = node.find(k); it != node.end()) visit(*it, path + "/" + k);
            if (auto it = node.find("dependencies"); it != node.end() && it->is_object())
                for (const auto& [name, dep] : it->items())
                    visit(dep, path + "/dependencies/" + escape_token(name));
        }
        marks[path] = mark::done;
        --depth;
    };
    walk_all = [&](const json& node, const std::string& path) {
        if (error || !node.is_object()) return;
        visit(node, path);
        for (const auto& [key, value] : node.items()) {
            if (key == "enum" || key == "const" || key == "default" || key == "examples") continue;
            const std::string here = path + "/" + escape_token(key);
            if (value.is_object() &&
                (key == "properties" || key == "patternProperties" || key == "definitions" ||
                 key == "$defs" || key == "dependencies")) {
                for (const auto& [name, sub] : value.items())
                    walk_all(sub, here + "/" + escape_token(name));
            } else if (value.is_array()) {
                for (std::size_t i = 0; i < value.size(); ++i)
                    walk_all(value[i], here + "/" + std::to_string(i));
            } else if (value.is_object()) {
                walk_all(value, here);
            }
        }
    };
    walk_all(root, "");
    return error;
}

std::unique_ptr<RE2> compile_pattern(const std::string& pattern, const std::string& where) {
    RE2::Options opts;
    opts.set_log_errors(false);
    auto re = std::make_unique<RE2>(pattern, opts);
    if (!re->ok())
        throw std::runtime_error("pattern '" + pattern + "' at '" + where +
                                 "' cannot be matched in linear time (RE2: " + re->error() +
                                 "); backreferences and lookaround are not supported");
    return re;
}

/// What one top-level compile shares with every patternProperties subschema compiled for it.
/// A subschema is compiled once per distinct text (the memo), so a definition whose
/// patternProperties refer back to it ends in the subschema being compiled, not in recursion;
/// the subschemas hold plain pointers to each other and the top-level compile owns them all.
struct compile_context {
    const json& root; ///< the original schema: its definitions / $defs go into each subschema
    std::vector<std::unique_ptr<schema_validator::compiled>>& owned;
    std::map<std::string, const schema_validator::compiled*, std::less<>> memo;
    std::size_t bytes = 0; ///< schema text compiled as subschemas so far (bounded)
};

/// Schema text all patternProperties subschemas of one inputSchema may add up to (each
/// carries the root's definitions).
constexpr std::size_t max_subschema_bytes = 16u << 20;

class rewriter {
  public:
    rewriter(extras& x, compile_context& ctx) : x_(x), ctx_(ctx) {}

    /// Rewrites the schema at `node` in place (see the comment at the top of this file). A
    /// `$ref`'s siblings are rewritten too: valijson ignores them as keywords, but a pointer
    /// may lead into them.
    void schema(json& node, const std::string& path) {
        if (!node.is_object()) return;
        for (auto& [key, value] : node.items()) {
            if (key == "enum" || key == "const" || key == "default" || key == "examples") continue;
            const std::string here = path + "/" + key;
            if (key == "properties" || key == "definitions" || key == "$defs" ||
                key == "dependencies") {
                if (value.is_object())
                    for (auto& [name, sub] : value.items())
                        schema(sub, here + "/" + name);
            } else if (key == "patternProperties" ||
                       (key == "additionalProperties" && node.contains("patternProperties") &&
                        node["patternProperties"].is_object())) {
                // handled below: both become our own keyword (and additionalProperties a
                // subschema compiled on its own, from its original text)
            } else if (value.is_array()) {
                for (std::size_t i = 0; i < value.size(); ++i)
                    schema(value[i], here + "/" + std::to_string(i));
            } else if (value.is_object()) {
                schema(value, here);
            }
        }
        if (auto it = node.find("pattern"); it != node.end() && it->is_string()) {
            x_.patterns.push_back(compile_pattern(it->get<std::string>(), path + "/pattern"));
            node.erase(it);
            node["x-meith-pattern"] = x_.patterns.size() - 1;
        }
        if (auto it = node.find("format"); it != node.end() && it->is_string()) {
            node["x-meith-format"] = it->get<std::string>();
            node.erase("format");
        }
        if (auto it = node.find("uniqueItems"); it != node.end() && it->is_boolean()) {
            if (it->get<bool>()) node["x-meith-unique-items"] = true;
            node.erase("uniqueItems");
        }
        if (auto it = node.find("patternProperties"); it != node.end() && it->is_object()) {
            extras::pattern_properties pp;
            for (auto& [re, sub] : it->items())
                pp.patterns.emplace_back(compile_pattern(re, path + "/patternProperties"),
                                         subschema(sub, path + "/patternProperties/" + re));
            if (auto props = node.find("properties"); props != node.end() && props->is_object())
                for (const auto& [name, sub] : props->items())
                    pp.named.push_back(name);
            if (auto add = node.find("additionalProperties"); add != node.end()) {
                if (add->is_boolean())
                    pp.additional_allowed = add->get<bool>();
                else if (add->is_object())
                    pp.additional = subschema(*add, path + "/additionalProperties");
                node.erase("additionalProperties");
            }
            node.erase("patternProperties");
            x_.pattern_props.push_back(std::move(pp));
            node["x-meith-pattern-properties"] = x_.pattern_props.size() - 1;
        }
        node["x-meith-guard"] = x_.nodes.size();
        x_.nodes.push_back(&node); // stable: objects are maps, arrays are not resized
    }

  private:
    /// A patternProperties value schema, compiled on its own: `$ref`s in it resolve against it
    /// plus the root's `definitions` / `$defs` (documented limit).
    const schema_validator::compiled* subschema(const json& sub, const std::string& where);
    extras& x_;
    compile_context& ctx_;
};

} // namespace

struct schema_validator::compiled {
    json document; // valijson's schema keeps references into it
    valijson::Schema schema;
    extras x;
    /// The top-level compile only: every patternProperties subschema, owned here (they point
    /// at each other, possibly in a cycle).
    std::vector<std::unique_ptr<compiled>> subschemas;

    /// Parses the (already checked) `document` into `schema`, with our keywords.
    void build(compile_context& ctx) {
        rewriter(x, ctx).schema(document, "#");
        valijson::SchemaParser parser;
        extras* xp = &x;
        parser.addConstraintBuilder("x-meith-guard", make_builder([xp](const auto& v) {
                                        return new guard_constraint(
                                            xp->nodes.at(static_cast<std::size_t>(v.getInteger())),
                                            xp);
                                    }));
        parser.addConstraintBuilder(
            "x-meith-pattern", make_builder([xp](const auto& v) {
                return new pattern_constraint(
                    xp->patterns.at(static_cast<std::size_t>(v.getInteger())).get());
            }));
        parser.addConstraintBuilder("x-meith-format", make_builder([](const auto& v) {
                                        return new format_constraint(v.getString());
                                    }));
        parser.addConstraintBuilder("x-meith-unique-items", make_builder([](const auto&) {
                                        return new unique_items_constraint();
                                    }));
        parser.addConstraintBuilder(
            "x-meith-pattern-properties", make_builder([xp](const auto& v) {
                return new pattern_properties_constraint(
                    &xp->pattern_props.at(static_cast<std::size_t>(v.getInteger())));
            }));
        valijson::adapters::NlohmannJsonAdapter adapter(document);
        parser.populateSchema(adapter, schema);
    }

    bool validate(const valijson::adapters::NlohmannJsonAdapter& target,
                  valijson::ValidationResults* results) const {
        valijson::Validator validator;
        return validator.validate(schema, target, results);
    }
};

namespace {

const schema_validator::compiled* rewriter::subschema(const json& sub, const std::string& where) {
    if (!sub.is_object()) {
        if (sub.is_boolean() && sub.get<bool>()) return nullptr;
        if (!sub.is_boolean()) throw std::runtime_error("'" + where + "' is not a schema");
    }
    std::string key = sub.dump();
    if (auto it = ctx_.memo.find(key); it != ctx_.memo.end()) return it->second;
    auto c = std::make_unique<schema_validator::compiled>();
    c->document = sub.is_object() ? sub : json{{"not", json::object()}};
    for (const char* defs : {"definitions", "$defs"})
        if (ctx_.root.contains(defs) && !c->document.contains(defs))
            c->document[defs] = ctx_.root[defs];
    ctx_.bytes += c->document.size() > 1 ? c->document.dump().size() : key.size();
    if (ctx_.bytes > max_subschema_bytes)
        throw std::runtime_error("its patternProperties schemas add up to more than " +
                                 std::to_string(max_subschema_bytes >> 20) +
                                 " MiB with the definitions each one carries");
    if (auto err = check_references(c->document)) throw std::runtime_error(*err);
    auto* raw = c.get();
    ctx_.owned.push_back(std::move(c));
    ctx_.memo.emplace(std::move(key), raw); // before build: a subschema may refer to itself
    raw->build(ctx_);
    return raw;
}

bool pattern_properties_constraint::check(const schema_validator::compiled& sub,
                                          const std::string& key,
                                          const valijson::adapters::Adapter& value,
                                          const std::vector<std::string>& context,
                                          valijson::ValidationResults* results) {
    const auto* concrete = dynamic_cast<const valijson::adapters::NlohmannJsonAdapter*>(&value);
    if (!concrete) throw std::runtime_error("patternProperties: unexpected value adapter");
    valijson::ValidationResults inner;
    bool ok = false;
    if (recorder* rec = guard.rec) { // explaining: the subschema's paths continue `context`
        const std::size_t depth = rec->prefix.size();
        for (const auto& part : context)
            if (part != "<root>") rec->prefix.push_back(part);
        rec->prefix.push_back("[" + key + "]");
        try {
            ok = sub.validate(*concrete, results ? &inner : nullptr);
        } catch (...) {
            rec->prefix.resize(depth);
            throw;
        }
        rec->prefix.resize(depth);
    } else {
        ok = sub.validate(*concrete, results ? &inner : nullptr);
    }
    if (ok) return true;
    if (results) {
        auto where = context;
        where.push_back("[" + key + "]");
        valijson::ValidationResults::Error e;
        bool any = false;
        while (inner.popError(e)) {
            auto ctx = where;
            for (const auto& part : e.context)
                if (part != "<root>") ctx.push_back(part);
            results->pushError(ctx, e.description);
            any = true;
        }
        if (!any) results->pushError(where, "Failed to match a patternProperties schema");
    }
    return false;
}

} // namespace

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

/// A path as messages show it: "/" for the arguments, else "/a/0/b" (RFC 6901, each name
/// cut and escaped, the whole cut in the middle).
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

// -- what an error says --

enum class kind {
    type,
    enumeration,
    constant,
    minimum,
    exclusive_minimum,
    maximum,
    exclusive_maximum,
    multiple_of,
    min_length,
    max_length,
    pattern,
    format,
    min_items,
    max_items,
    min_properties,
    max_properties,
    unique_items,
    required,
    additional_property,
    dependency,
    any_of,
    one_of_none,
    one_of_many,
    negation,
    contains,
    additional_items,
    property_wrapper, ///< "the schema of property 'x' failed": its own errors say why
    item_wrapper,     ///< the same for item #n
    wrapper,          ///< the same for allOf, if/then/else, additionalProperties, ...
    other,
};

bool is_wrapper(kind k) {
    return k == kind::property_wrapper || k == kind::item_wrapper || k == kind::wrapper;
}

/// Kinds whose message needs the subschema the error came from.
bool needs_schema(kind k) {
    switch (k) {
    case kind::type:
    case kind::enumeration:
    case kind::constant:
    case kind::minimum:
    case kind::exclusive_minimum:
    case kind::maximum:
    case kind::exclusive_maximum:
    case kind::multiple_of:
    case kind::additional_property:
    case kind::dependency:
    case kind::additional_items:
        return true;
    default:
        return false;
    }
}

struct reading {
    kind k = kind::other;
    std::string_view param; ///< a number, name or pattern from the text
};

/// What valijson's (or our constraints') error `text` says.
reading read_error(std::string_view text) {
    std::string_view rest;
    auto after = [&](std::string_view head) {
        if (!text.starts_with(head)) return false;
        rest = text.substr(head.size());
        return true;
    };
    auto word = [&] { return rest.substr(0, rest.find(' ')); };
    auto quoted = [&] { return rest.substr(0, std::min(rest.size(), rest.rfind('\''))); };
    if (text == "Value type not permitted by 'type' constraint.") return {kind::type, {}};
    if (text == "Failed to match against any enum values.") return {kind::enumeration, {}};
    if (text == "Failed to match expected value set by 'const' constraint.")
        return {kind::constant, {}};
    if (after("Expected number greater than or equal to ")) return {kind::minimum, rest};
    if (after("Expected number greater than ")) return {kind::exclusive_minimum, rest};
    if (after("Expected number less than or equal to ")) return {kind::maximum, rest};
    if (after("Expected number less than ")) return {kind::exclusive_maximum, rest};
    if (after("Value should be a multiple of ")) return {kind::multiple_of, rest};
    if (after("String should be no fewer than ")) return {kind::min_length, word()};
    if (after("String should be no more than ")) return {kind::max_length, word()};
    if (after("Array should contain no fewer than ")) return {kind::min_items, word()};
    if (after("Array should contain no more than ")) return {kind::max_items, word()};
    if (after("Object should have no fewer than ")) return {kind::min_properties, word()};
    if (after("Object should have no more than ")) return {kind::max_properties, word()};
    if (after("Failed to match the pattern '")) return {kind::pattern, quoted()};
    if (text == "Failed to match regex specified by 'pattern' constraint.")
        return {kind::pattern, {}};
    if (after("String is not a valid ") || after("String should be a valid "))
        return {kind::format, rest};
    if (after("Elements at indexes #")) return {kind::unique_items, rest};
    if (after("Missing required property '")) return {kind::required, quoted()};
    if (after("Object contains a property that could not be validated using 'properties' or "
              "'additionalProperties' constraints: '"))
        return {kind::additional_property, quoted()};
    if (after("Missing dependency '")) return {kind::dependency, quoted()};
    if (text == "Failed to validate against any schemas allowed by anyOf constraint.")
        return {kind::any_of, {}};
    if (text == "Failed to validate against any child schemas allowed by oneOf constraint.")
        return {kind::one_of_none, {}};
    if (text == "Failed to validate against exactly one child schema.")
        return {kind::one_of_many, {}};
    if (text == "Target should not validate against schema specified in 'not' constraint.")
        return {kind::negation, {}};
    if (text == "Failed to any values against subschema in 'contains' constraint.")
        return {kind::contains, {}};
    if (text == "Array contains more items than allowed by items constraint.")
        return {kind::additional_items, {}};
    if (after("Cannot validate item #")) return {kind::additional_items, word()};
    if (after("Failed to validate against schema associated with property name '"))
        return {kind::property_wrapper, quoted()};
    if (after("Failed to validate item #")) {
        if (rest.ends_with("against corresponding item schema.")) return {kind::wrapper, {}};
        return {kind::item_wrapper, word()};
    }
    if (after("Failed to validate against ") ||
        text == "Failed to match a patternProperties schema")
        return {kind::wrapper, {}};
    return {kind::other, {}};
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

/// One violation in words. `value` is the arguments' value at the error's path (null if
/// absent); `wanted` the path's index in `rec`; `nth` how many errors of this kind at this
/// path came before.
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
    case kind::type: {
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
    case kind::enumeration: {
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
        if (values.size() > max_listed)
            list += ", ... (" + std::to_string(values.size()) + " values)";
        return subject + (values.size() == 1 ? " must be " : " must be one of ") + list + got_value;
    }
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
    case kind::unique_items: {
        // "A and #B violate uniqueness constraint."
        const std::string_view first = r.param.substr(0, r.param.find(' '));
        const auto hash = r.param.find('#');
        const std::string_view second =
            hash == std::string_view::npos
                ? std::string_view{}
                : r.param.substr(hash + 1, r.param.find(' ', hash) - hash - 1);
        return subject + " must not contain duplicates" +
               (second.empty()
                    ? std::string()
                    : " (items " + plain(first) + " and " + plain(second) + " are equal)");
    }
    case kind::required:
        return (root ? "missing" : subject + " is missing") + " required property " +
               quoted_name(r.param);
    case kind::additional_property:
        return "property " + quoted_name(r.param) + " is not allowed" + in +
               allowed_properties(rec, wanted);
    case kind::dependency: {
        const found f = pick(rec, wanted, "dependencies");
        if (f.keyword && f.keyword->is_object() && value && value->is_object()) {
            for (const auto& [name, dep] : f.keyword->items()) {
                if (!value->contains(name)) continue;
                const bool names_it =
                    (dep.is_string() && dep.get_ref<const std::string&>() == r.param) ||
                    (dep.is_array() && std::any_of(dep.begin(), dep.end(), [&](const json& d) {
                         return d.is_string() && d.get_ref<const std::string&>() == r.param;
                     }));
                if (names_it)
                    return "property " + quoted_name(name) + " requires property " +
                           quoted_name(r.param) + in;
            }
        }
        return (root ? "missing" : subject + " is missing") + " property " + quoted_name(r.param) +
               ", which the schema's dependencies require";
    }
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

/// The message for a validation of `target` that failed with `results`: up to `max_shown`
/// violations (the echoes of enclosing schemas — "property 'x' failed" — only when nothing
/// more specific was found), each in words. `budget`: the guard's, for the second run.
std::string explain_failure(const schema_validator::compiled& c, const json& target,
                            const valijson::ValidationResults& results, std::size_t budget) {
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
        rec.top = &again;
        rec.stop_at = stop_at;
        valijson::adapters::NlohmannJsonAdapter adapter(target);
        guard.visits = 0;
        guard.budget = budget;
        guard.stack_base = static_cast<const char*>(__builtin_frame_address(0));
        guard.rec = &rec;
        try {
            c.validate(adapter, &again);
        } catch (const std::exception&) {
            // recording_done, or the guard: what was recorded so far still helps
        }
        guard.rec = nullptr;
        guard.stack_base = nullptr;
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
    std::string message = "arguments do not match the tool's inputSchema";
    for (std::size_t k = 0; k < lines.size(); ++k)
        message += (k ? "; " : ": ") + lines[k];
    if (more) message += "; and " + std::to_string(more) + " more";
    return message;
}

} // namespace

schema_validator::schema_validator(std::unique_ptr<compiled> c) : compiled_(std::move(c)) {
}
schema_validator::~schema_validator() = default;

schema_validator::compile_result schema_validator::compile(std::string_view schema_json) {
    compile_result out;
    auto c = std::make_unique<compiled>();
    try {
        if (text_depth(schema_json) > max_schema_depth) {
            out.error =
                "inputSchema nests deeper than " + std::to_string(max_schema_depth) + " levels";
            return out;
        }
        c->document = json::parse(schema_json);
        if (!c->document.is_object()) {
            out.error = "inputSchema must be a JSON object";
            return out;
        }
        if (accepts_any_object(c->document)) return out;
        if (auto err = check_references(c->document)) {
            out.error = *err;
            return out;
        }
        const json original = c->document;
        compile_context ctx{original, c->subschemas, {}, 0};
        c->build(ctx);
    } catch (const std::exception& e) {
        out.error = std::string("invalid inputSchema: ") + e.what();
        return out;
    }
    out.validator = std::make_shared<schema_validator>(std::move(c));
    return out;
}

std::optional<std::string> schema_validator::validate(simdjson::dom::element args) const {
    std::size_t nodes = 0;
    const json target = to_nlohmann(args, nodes);
    valijson::ValidationResults results;
    valijson::adapters::NlohmannJsonAdapter adapter(target);
    // Bounded work and stack for this validation (the guard in every subschema checks both).
    guard.visits = 0;
    guard.budget = guard_base_visits + guard_visits_per_node * nodes;
    guard.stack_base = static_cast<const char*>(__builtin_frame_address(0));
    try {
        const bool ok = compiled_->validate(adapter, &results);
        guard.stack_base = nullptr;
        if (ok) return std::nullopt;
    } catch (const guard_exhausted& e) {
        guard.stack_base = nullptr;
        return std::string("arguments could not be validated: ") + e.what();
    } catch (const std::exception& e) {
        guard.stack_base = nullptr;
        return std::string("arguments could not be validated: ") + e.what();
    }
    try {
        return explain_failure(*compiled_, target, results, guard.budget);
    } catch (const std::exception&) {
        // Out of memory, say: the first error as valijson words it.
        guard.rec = nullptr;
        guard.stack_base = nullptr;
        std::string message = "arguments do not match the tool's inputSchema";
        if (results.numErrors() > 0) {
            const auto& e = *results.begin();
            message += ": " + shown_path(e.context) + ": " + e.description;
        }
        return message;
    }
}

} // namespace meith::registry
