#include "registry/schema_validator.hpp"

#define VALIJSON_USE_EXCEPTIONS 1
#include <nlohmann/json.hpp>
#include <valijson/adapters/nlohmann_json_adapter.hpp>
#include <valijson/schema.hpp>
#include <valijson/schema_parser.hpp>
#include <valijson/validation_results.hpp>
#include <valijson/validator.hpp>

namespace meith::registry {

namespace {

// valijson evaluates `pattern` with std::regex, whose libstdc++ matcher recurses per input
// character; bounding the strings it sees keeps a hostile argument from exhausting the stack.
constexpr std::size_t max_pattern_checked_string = 16 * 1024;

nlohmann::json to_nlohmann(simdjson::dom::element el) {
    using simdjson::dom::element_type;
    switch (el.type()) {
    case element_type::ARRAY: {
        auto arr = nlohmann::json::array();
        const simdjson::dom::array items =
            el.get_array().value_unsafe(); // copy: the result is a temporary
        for (auto item : items)
            arr.push_back(to_nlohmann(item));
        return arr;
    }
    case element_type::OBJECT: {
        auto obj = nlohmann::json::object();
        const simdjson::dom::object fields = el.get_object().value_unsafe();
        for (auto field : fields)
            obj[std::string(field.key)] = to_nlohmann(field.value);
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

bool has_long_string(simdjson::dom::element el) {
    using simdjson::dom::element_type;
    switch (el.type()) {
    case element_type::STRING:
        return el.get_string().value_unsafe().size() > max_pattern_checked_string;
    case element_type::ARRAY: {
        const simdjson::dom::array items = el.get_array().value_unsafe();
        for (auto item : items)
            if (has_long_string(item)) return true;
    }
        return false;
    case element_type::OBJECT: {
        const simdjson::dom::object fields = el.get_object().value_unsafe();
        for (auto field : fields)
            if (field.key.size() > max_pattern_checked_string || has_long_string(field.value))
                return true;
    }
        return false;
    default:
        return false;
    }
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

} // namespace

struct schema_validator::compiled {
    nlohmann::json document; // valijson's schema keeps references into it
    valijson::Schema schema;
    bool uses_patterns = false;
};

schema_validator::schema_validator(std::unique_ptr<compiled> c) : compiled_(std::move(c)) {
}
schema_validator::~schema_validator() = default;

schema_validator::compile_result schema_validator::compile(std::string_view schema_json) {
    compile_result out;
    auto c = std::make_unique<compiled>();
    try {
        c->document = nlohmann::json::parse(schema_json);
        if (!c->document.is_object()) {
            out.error = "inputSchema must be a JSON object";
            return out;
        }
        if (accepts_any_object(c->document)) return out;
        valijson::SchemaParser parser;
        valijson::adapters::NlohmannJsonAdapter adapter(c->document);
        parser.populateSchema(adapter, c->schema);
    } catch (const std::exception& e) {
        out.error = std::string("invalid inputSchema: ") + e.what();
        return out;
    }
    c->uses_patterns = schema_json.find("\"pattern") != std::string_view::npos ||
                       schema_json.find("\"format\"") != std::string_view::npos;
    out.validator = std::make_shared<schema_validator>(std::move(c));
    return out;
}

std::optional<std::string> schema_validator::validate(simdjson::dom::element args) const {
    if (compiled_->uses_patterns && has_long_string(args))
        return "a string in the arguments is longer than " +
               std::to_string(max_pattern_checked_string) +
               " bytes, the limit for tools whose schema uses patterns or formats";
    const nlohmann::json target = to_nlohmann(args);
    valijson::Validator validator;
    valijson::ValidationResults results;
    valijson::adapters::NlohmannJsonAdapter adapter(target);
    try {
        if (validator.validate(compiled_->schema, adapter, &results)) return std::nullopt;
    } catch (const std::exception& e) {
        return std::string("arguments could not be validated: ") + e.what();
    }
    // valijson lists the innermost failure first, then the enclosing ones; the first entries
    // name the leaves. Paths come as ["<root>", "[n]", "[0]"]; we print them as "/n/0".
    std::string message = "arguments do not match the tool's inputSchema";
    valijson::ValidationResults::Error err;
    int shown = 0;
    while (results.popError(err) && shown < 2) {
        std::string path;
        for (const auto& p : err.context) {
            if (p == "<root>") continue;
            path += '/';
            path += p.size() >= 2 && p.front() == '[' && p.back() == ']' ? p.substr(1, p.size() - 2)
                                                                         : p;
        }
        message += shown == 0 ? ": " : "; ";
        message += (path.empty() ? "/" : path) + ": " + err.description;
        ++shown;
    }
    return message;
}

} // namespace meith::registry
