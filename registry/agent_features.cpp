// agent_features: what the registry adds for agents beyond calling a tool (docs/protocol.md §13,
// PROTOCOL.md §11) — previews of a call.
#include "protocol/json_writer.hpp"
#include "registry/registry.hpp"

#include <simdjson.h>

namespace meith::registry {

namespace {

/// At most `max` characters (code points) of `text`, never cutting one in half.
std::string_view cut_chars(std::string_view text, std::size_t max) {
    std::size_t chars = 0;
    for (std::size_t i = 0; i < text.size(); ++i) {
        if ((static_cast<unsigned char>(text[i]) & 0xC0) == 0x80) continue;
        if (chars++ == max) return text.substr(0, i);
    }
    return text;
}

} // namespace

void registry::preview_call(const std::shared_ptr<const tool>& t, const std::string& args_json,
                            std::function<void(preview)> done) const {
    // The default: the tool's name and its arguments as the audit log shows them (secrets
    // redacted, long strings shortened), cut to 200 characters.
    std::string fallback = t->name + "(";
    fallback += cut_chars(redactor_.summarize_json(args_json), 200);
    fallback += ')';
    std::string params = R"("tool_name":)";
    protocol::append_json_string(params, t->remote_name);
    params += R"(,"arguments":)";
    params += args_json;
    t->source->call_optional(
        "format_tool_call_preview", std::move(params),
        [fallback = std::move(fallback), done = std::move(done)](std::optional<std::string> v) {
            if (v) {
                simdjson::dom::parser parser;
                std::string_view text;
                if (parser.parse(*v).get_string().get(text) == simdjson::SUCCESS) {
                    done({std::string(text), true});
                    return;
                }
            }
            done({fallback, false});
        });
}

} // namespace meith::registry
