#include "schema/constraints.hpp"
#include "schema/validator_detail.hpp"

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
#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <optional>
#include <unordered_map>

namespace meith::schema {

using detail::escape_token;
using detail::extras;
using detail::format_constraint;
using detail::guard;
using detail::guard_constraint;
using detail::guard_exhausted;
using detail::json;
using detail::make_builder;
using detail::pattern_constraint;
using detail::pattern_properties_constraint;
using detail::recorder;
using detail::recording_done;
using detail::unique_items_constraint;

namespace {

// Debian's valijson 1.0 matches `pattern`, `patternProperties` and the date `format`s with
// std::regex, whose libstdc++ matcher recurses per input character (stack overflow on a long
// string) and backtracks (exponential time); its `uniqueItems` compares every pair, and a
// schema that refers to itself recurses without end. So the schema is rewritten before valijson
// sees it: those keywords become our own constraints (RE2, linear time; a hash set), `$ref`
// cycles that never descend into the arguments are refused, and every subschema carries a
// guard that bounds the work and the stack one validation may use.

constexpr std::size_t max_schema_depth = 128;      ///< nesting of the schema text
constexpr std::size_t guard_base_visits = 100'000; ///< subschema visits, plus ...
constexpr std::size_t guard_visits_per_node = 64;  ///< ... this many per argument node

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

// ---- the flat shape -----------------------------------------------------------------------

/// The inputSchema most tools have — an object whose properties each name one primitive type
/// (or none), some required, additional ones allowed or not — as a list checked straight on
/// the arguments. It only ever accepts: anything it does not find plainly valid (a missing
/// property, a type that differs, 1.0 for an integer) is left to valijson, which decides and
/// explains. tests/fuzz/fuzz_schema holds it to valijson.
struct flat_shape {
    enum class kind : std::uint8_t { any, string, integer, number, boolean, null };
    std::vector<std::pair<std::string, kind>> properties;
    std::vector<std::string> required;
    bool closed = false; ///< additionalProperties: false

    /// The schema's flat shape; nullopt for any keyword outside it (a `default`, a `format`,
    /// a nested object, a `$ref`, …).
    static std::optional<flat_shape> of(const json& schema) {
        flat_shape shape;
        for (const auto& [key, value] : schema.items()) {
            if (key == "description" || key == "title" || key == "$schema" || key == "$id" ||
                key == "examples")
                continue;
            if (key == "type" && value == "object") continue;
            if (key == "additionalProperties" && value.is_boolean()) {
                shape.closed = !value.get<bool>();
                continue;
            }
            if (key == "required" && value.is_array()) {
                for (const auto& name : value) {
                    if (!name.is_string()) return std::nullopt;
                    shape.required.push_back(name.get<std::string>());
                }
                continue;
            }
            if (key == "properties" && value.is_object()) {
                for (const auto& [name, sub] : value.items()) {
                    const auto k = property_kind(sub);
                    if (!k) return std::nullopt;
                    shape.properties.emplace_back(name, *k);
                }
                continue;
            }
            return std::nullopt;
        }
        return shape;
    }

    static std::optional<kind> property_kind(const json& sub) {
        if (!sub.is_object()) return std::nullopt; // `true`/`false` subschemas: valijson's
        kind k = kind::any;
        for (const auto& [key, value] : sub.items()) {
            if (key == "description" || key == "title" || key == "examples") continue;
            if (key != "type" || !value.is_string()) return std::nullopt;
            const auto& t = value.get_ref<const std::string&>();
            if (t == "string")
                k = kind::string;
            else if (t == "integer")
                k = kind::integer;
            else if (t == "number")
                k = kind::number;
            else if (t == "boolean")
                k = kind::boolean;
            else if (t == "null")
                k = kind::null;
            else
                return std::nullopt;
        }
        return k;
    }

    static bool has(kind k, simdjson::dom::element v) {
        using t = simdjson::dom::element_type;
        switch (k) {
        case kind::any:
            return true;
        case kind::string:
            return v.type() == t::STRING;
        case kind::integer:
            return v.type() == t::INT64 || v.type() == t::UINT64;
        case kind::number:
            return v.type() == t::INT64 || v.type() == t::UINT64 || v.type() == t::DOUBLE;
        case kind::boolean:
            return v.type() == t::BOOL;
        case kind::null:
            return v.type() == t::NULL_VALUE;
        }
        return false;
    }

    /// True when `args` is plainly valid; false leaves the decision to valijson.
    bool accepts(simdjson::dom::element args) const {
        simdjson::dom::object obj;
        if (args.get_object().get(obj) != simdjson::SUCCESS) return false;
        for (auto field : obj) {
            const auto p = std::find_if(properties.begin(), properties.end(),
                                        [&](const auto& e) { return e.first == field.key; });
            if (p == properties.end() ? closed : !has(p->second, field.value)) return false;
        }
        for (const auto& name : required)
            if (obj.at_key(name).error() != simdjson::SUCCESS) return false;
        return true;
    }
};

// ---- compile-time checks and the rewrite --------------------------------------------------

/// Keywords whose subschemas apply to the same instance (a cycle through them never ends).
constexpr std::array<const char*, 3> same_instance_lists{"allOf", "anyOf", "oneOf"};
constexpr std::array<const char*, 4> same_instance_single{"not", "if", "then", "else"};

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
        for (const char* key : {"multipleOf", "divisibleBy"}) {
            // Draft 7 §6.2.1: "strictly greater than 0". valijson divides by it: an integer 0
            // would be a division by zero (SIGFPE), -1 overflow INT64_MIN.
            if (auto it = node.find(key);
                it != node.end() && (!it->is_number() || !(it->get<double>() > 0)))
                throw std::runtime_error("'" + path + "/" + key +
                                         "' must be a number greater than 0");
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
    /// The top-level schema's flat shape, when it has one: checked before valijson.
    std::optional<flat_shape> flat;
    /// The top-level `properties` that have a `default`, with it: filled into the arguments
    /// before they are validated when they are missing, as the servers' own validators do
    /// (docs/protocol.md §3 "Defaults").
    std::vector<std::pair<std::string, json>> defaults;
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

} // namespace

bool detail::pattern_properties_constraint::check(const schema_validator::compiled& sub,
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

namespace {} // namespace

void detail::validate_recording(const schema_validator::compiled& c, const json& target,
                                std::size_t budget, recorder& rec,
                                valijson::ValidationResults& results) {
    rec.top = &results;
    valijson::adapters::NlohmannJsonAdapter adapter(target);
    guard.visits = 0;
    guard.budget = budget;
    guard.stack_base = static_cast<const char*>(__builtin_frame_address(0));
    guard.rec = &rec;
    try {
        c.validate(adapter, &results);
    } catch (const std::exception&) {
        // recording_done, or the guard: what was recorded so far still helps
    }
    guard.rec = nullptr;
    guard.stack_base = nullptr;
}

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
        c->flat = flat_shape::of(original);
        if (const auto props = original.find("properties");
            props != original.end() && props->is_object())
            for (const auto& [name, sub] : props->items())
                if (sub.is_object())
                    if (const auto d = sub.find("default"); d != sub.end())
                        c->defaults.emplace_back(name, *d);
    } catch (const std::exception& e) {
        out.error = std::string("invalid inputSchema: ") + e.what();
        return out;
    }
    out.validator = std::make_shared<schema_validator>(std::move(c));
    return out;
}

std::optional<std::string> lazy_validator::validate(simdjson::dom::element args) const {
    std::call_once(once_, [this] { compiled_ = schema_validator::compile(json_); });
    if (compiled_.error)
        return "the tool's inputSchema cannot be used: " + *compiled_.error +
               "; the tool takes no calls until its source lists a valid one";
    if (!compiled_.validator) return std::nullopt;
    return compiled_.validator->validate(args);
}

std::optional<std::string> schema_validator::validate(simdjson::dom::element args,
                                                      std::string_view head) const {
    if (compiled_->flat && compiled_->flat->accepts(args)) return std::nullopt;
    return validate_fully(args, head);
}

bool schema_validator::has_flat_shape() const {
    return compiled_->flat.has_value();
}

std::optional<std::string> schema_validator::validate_fully(simdjson::dom::element args,
                                                            std::string_view head) const {
    std::size_t nodes = 0;
    json target = to_nlohmann(args, nodes);
    if (target.is_object())
        for (const auto& [name, value] : compiled_->defaults)
            if (!target.contains(name)) target[name] = value;
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
        return detail::explain_failure(*compiled_, target, results, guard.budget, head);
    } catch (const std::exception&) {
        // Out of memory, say: the first error as valijson words it.
        guard.rec = nullptr;
        guard.stack_base = nullptr;
        std::string message(head);
        if (results.numErrors() > 0) {
            const auto& e = *results.begin();
            message += ": " + detail::shown_path(e.context) + ": " + e.description;
        }
        return message;
    }
}

} // namespace meith::schema
