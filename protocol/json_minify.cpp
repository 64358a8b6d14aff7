// json_minify: see json_minify.hpp.
#include "protocol/json_minify.hpp"

#include "protocol/json_writer.hpp"

#include <charconv>

namespace meith::protocol {

void append_minified(std::string& out, simdjson::dom::element value) {
    using type = simdjson::dom::element_type;
    switch (value.type()) {
    case type::OBJECT: {
        out.push_back('{');
        bool first = true;
        simdjson::dom::object obj; // held here: iterating a temporary result's value dangles
        if (value.get_object().get(obj) != simdjson::SUCCESS) return; // type() said object
        for (auto field : obj) {
            if (!first) out.push_back(',');
            first = false;
            append_json_string(out, field.key);
            out.push_back(':');
            append_minified(out, field.value);
        }
        out.push_back('}');
        return;
    }
    case type::ARRAY: {
        out.push_back('[');
        bool first = true;
        simdjson::dom::array arr;
        if (value.get_array().get(arr) != simdjson::SUCCESS) return;
        for (auto item : arr) {
            if (!first) out.push_back(',');
            first = false;
            append_minified(out, item);
        }
        out.push_back(']');
        return;
    }
    case type::STRING:
        append_json_string(out, value.get_string().value_unsafe());
        return;
    case type::INT64: {
        char buf[24];
        const auto r = std::to_chars(buf, buf + sizeof buf, value.get_int64().value_unsafe());
        out.append(buf, r.ptr);
        return;
    }
    case type::UINT64: {
        char buf[24];
        const auto r = std::to_chars(buf, buf + sizeof buf, value.get_uint64().value_unsafe());
        out.append(buf, r.ptr);
        return;
    }
    case type::DOUBLE: {
        // simdjson's own formatting, as simdjson::minify writes it.
        char buf[32];
        char* end = simdjson::internal::to_chars(buf, nullptr, value.get_double().value_unsafe());
        out.append(buf, end);
        return;
    }
    case type::BOOL:
        out.append(value.get_bool().value_unsafe() ? "true" : "false");
        return;
    case type::NULL_VALUE:
        out.append("null");
        return;
    }
}

} // namespace meith::protocol
