// error_reading: valijson's error texts read back (schema/error_reading.hpp).
#include "schema/error_reading.hpp"

#include <algorithm>

namespace meith::schema::detail {

bool is_wrapper(kind k) {
    return k == kind::property_wrapper || k == kind::item_wrapper || k == kind::wrapper;
}

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

} // namespace meith::schema::detail
