// agent_features: what the registry adds for agents beyond calling a tool (docs/protocol.md §13,
// PROTOCOL.md §11) — previews of a call, and results shaped for a model or a display. What a
// host writes into either reaches the caller with each exact secret value redacted, as results do.
#include "protocol/json_writer.hpp"
#include "registry/registry.hpp"

#include <simdjson.h>

#include <map>

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

void registry::list_tools_filtered(permissions::caller who, tools::list_format format,
                                   std::optional<std::vector<std::string>> tags,
                                   std::string models_json,
                                   std::function<void(std::string tools)> done,
                                   profile_ptr profile) {
    struct gather {
        std::optional<std::vector<std::string>> tags;
        std::map<const tools::tool_source*, std::vector<std::string>> source_tags;
        std::size_t waiting = 0;
        std::function<void(std::string)> done;
    };
    auto g = std::make_shared<gather>();
    g->tags = std::move(tags);
    g->done = std::move(done);
    auto render = [this, who, format, profile, alive = alive_](const std::shared_ptr<gather>& g) {
        if (!*alive) return;
        std::string out;
        tools::tool_table::list_filter filter;
        filter.profile = profile.get();
        if (g->tags) filter.tags = &*g->tags;
        filter.source_tags = &g->source_tags;
        tools_.append_filtered(out, who, policy_, format, filter);
        g->done(std::move(out));
    };
    const auto sources = tools_.sources_with_tools();
    if (models_json.empty()) {
        for (const auto& s : sources)
            g->source_tags[s.get()] = s->tags();
        render(g);
        return;
    }
    g->waiting = sources.size() + 1; // +1: none finishes the list before all were asked
    for (const auto& s : sources)
        s->tags_for_models(models_json, [g, s, render](std::vector<std::string> t) {
            g->source_tags[s.get()] = std::move(t);
            if (--g->waiting == 0) render(g);
        });
    if (--g->waiting == 0) render(g);
}

void registry::preview_call(const std::shared_ptr<const tool>& t, const std::string& args_json,
                            std::function<void(preview)> done) const {
    // The default: the tool's name and its arguments as the audit log shows them (secrets
    // redacted, long strings shortened), cut to 200 characters.
    std::string fallback = t->name + "(";
    fallback += cut_chars(redactor_.summarize_json(args_json), 200);
    fallback += ')';
    std::string params;
    protocol::json_members(params).string("tool_name", t->remote_name).raw("arguments", args_json);
    t->source->call_optional(
        "format_tool_call_preview", std::move(params),
        [fallback = std::move(fallback), done = std::move(done)](std::optional<std::string> v) {
            if (v) {
                simdjson::dom::parser parser;
                std::string_view text;
                if (parser.parse(*v).get_string().get(text) == simdjson::SUCCESS) {
                    // The host's text reaches the caller (preview_tool_call) and approvers: a
                    // secret value it holds stays with it, as in its results.
                    std::string shown(text);
                    audit::redact_exact_secrets(shown);
                    done({std::move(shown), true});
                    return;
                }
            }
            done({fallback, false});
        });
}

} // namespace meith::registry

namespace meith::registry {

namespace {

/// The tool-host protocol's own result object for `r`: what format_tool_result and
/// to_display_format get as `result`.
std::string host_result_object(const protocol::tool_result& r) {
    std::string out = "{";
    protocol::json_members m(out);
    if (r.ok)
        m.boolean("success", true).raw("result", r.content_json.empty() ? "null" : r.content_json);
    else
        m.boolean("success", false)
            .string("error", r.error ? std::string_view(r.error->message) : "the tool failed");
    return out + "}";
}

/// modelContent without a host method: string content as is, other content as its compact
/// JSON text, a failure as "Error: <message>" — always a JSON string.
std::string default_model_content(const protocol::tool_result& r) {
    std::string out;
    if (!r.ok) {
        protocol::append_json_string(
            out, "Error: " + (r.error ? r.error->message : std::string("the tool failed")));
        return out;
    }
    simdjson::dom::parser parser;
    std::string_view text;
    if (!r.content_json.empty() &&
        parser.parse(r.content_json).get_string().get(text) == simdjson::SUCCESS) {
        protocol::append_json_string(out, text);
        return out;
    }
    protocol::append_json_string(out,
                                 r.content_json.empty() ? std::string("null") : r.content_json);
    return out;
}

/// A host's format_tool_result answer as modelContent: a string as is, a provider-native
/// envelope object as is (byte for byte), anything else as its JSON text.
std::string model_content_from_host(const std::string& value) {
    simdjson::dom::parser parser;
    simdjson::dom::element v;
    if (parser.parse(value).get(v) != simdjson::SUCCESS) return {};
    if (v.is_null()) return {}; // no answer: the default
    if (v.is_string()) return value;
    std::string_view type;
    if (v.is_object() && v["type"].get_string().get(type) == simdjson::SUCCESS &&
        type == "provider_native_tool_result")
        return value;
    std::string out;
    protocol::append_json_string(out, value);
    return out;
}

/// The text a display gets: modelContent's string, or its JSON text (an envelope).
std::string text_of(const std::string& model_content) {
    simdjson::dom::parser parser;
    std::string_view text;
    if (parser.parse(model_content).get_string().get(text) == simdjson::SUCCESS)
        return std::string(text);
    return model_content;
}

/// `meta` with `"display":<display>` added first.
std::string with_display(const std::string& meta_json, const std::string& display) {
    std::string out = "{";
    protocol::json_members(out).raw("display", display);
    if (meta_json.empty() || meta_json == "{}") return out + "}";
    return out + "," + meta_json.substr(1);
}

} // namespace

void registry::shape_result(const tools::call_ptr& c, protocol::tool_result r) {
    if ((!c->result_model && !c->result_display) || !c->target) {
        c->finalize(std::move(r), tools::call_end::tool);
        return;
    }
    const std::string raw = host_result_object(r);
    auto source = c->target->source;
    // tool_name (the host's own name for it) lets a host of several plugins pick the one that
    // owns the tool; the tool-host protocol's params are `result` and `state`.
    std::string params;
    protocol::json_members(params).string("tool_name", c->target->remote_name).raw("result", raw);
    source->call_optional(
        "format_tool_result", std::move(params),
        [weak = std::weak_ptr<call>(c), source, raw,
         r = std::move(r)](std::optional<std::string> v) mutable {
            auto c = weak.lock();
            if (!c || c->resolved()) return;
            std::string model = v ? model_content_from_host(*v) : std::string();
            if (model.empty()) model = default_model_content(r);
            // The host writes it: redacted as the tool's own result was (docs/security.md
            // "Secrets"), before the display is made of it.
            audit::redact_exact_secrets(model);
            if (c->result_model) r.model_content_json = model;
            if (!c->result_display) {
                c->finalize(std::move(r), tools::call_end::tool);
                return;
            }
            std::string params;
            protocol::json_members(params)
                .string("tool_name", c->target->remote_name)
                .string("text", text_of(model))
                .raw("result", raw);
            source->call_optional(
                "to_display_format", std::move(params),
                [weak, model, r = std::move(r)](std::optional<std::string> d) mutable {
                    auto c = weak.lock();
                    if (!c || c->resolved()) return;
                    std::string display;
                    if (d && *d != "null") {
                        display = *d;
                    } else {
                        display = "{";
                        protocol::json_members(display)
                            .string("type", "text")
                            .raw("content", model);
                        display += '}';
                    }
                    audit::redact_exact_secrets(display);
                    r.meta_json = with_display(r.meta_json, display);
                    c->finalize(std::move(r), tools::call_end::tool);
                });
        });
}

} // namespace meith::registry
