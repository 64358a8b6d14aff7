#include "bridge/json.hpp"

namespace meith::bridge {

std::optional<std::string> get_string(const json& obj, std::string_view key) {
    const json* v = get_field(obj, key);
    if (v == nullptr || !v->is_string()) return std::nullopt;
    return v->get<std::string>();
}

const json* get_field(const json& obj, std::string_view key) {
    if (!obj.is_object()) return nullptr;
    auto it = obj.find(key);
    return it == obj.end() ? nullptr : &*it;
}

std::string compact(const json& j) {
    return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

void append_compact(std::string& out, const json& j) {
    // What json::dump does, into `out` (nlohmann's serializer over a string adapter).
    nlohmann::detail::serializer<json> s(nlohmann::detail::output_adapter<char>(out), ' ',
                                         json::error_handler_t::replace);
    s.dump(j, false, false, 0);
}

} // namespace meith::bridge
