// error_reading: what a valijson error's English text says, as a kind and its parameter
// (docs/protocol.md, "Validation errors"). valijson's errors are prose for a schema's author
// ("Failed to match against any enum values."); schema/messages.cpp turns the kind, the
// arguments' value and the subschema into words a caller can act on. Tied to valijson's
// wording: a text it does not know is kind::other, told as valijson wrote it.
#pragma once

#include <string_view>

namespace meith::schema::detail {

/// The kind of one violation.
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

/// Whether `k` only says that a subschema failed (its own errors say why).
bool is_wrapper(kind k);

/// Kinds whose message needs the subschema the error came from.
bool needs_schema(kind k);

/// One error's kind and the number, name or pattern its text holds (a view into the text).
struct reading {
    kind k = kind::other;
    std::string_view param; ///< a number, name or pattern from the text
};

/// What valijson's (or schema/constraints.hpp's) error `text` says.
reading read_error(std::string_view text);

} // namespace meith::schema::detail
