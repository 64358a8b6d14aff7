#include "protocol/client_frames.hpp"

#include "protocol/json_writer.hpp"

#include <unistd.h>

namespace meith::protocol {

namespace {

/// `{"type":"<type>","protocol":1,"requestId":"<id>"` — the frame stays open for more members.
std::string open_frame(std::string_view type, std::string_view request_id) {
    std::string out;
    out.reserve(64 + type.size() + request_id.size());
    out += R"({"type":)";
    append_json_string(out, type);
    out += R"(,"protocol":1,"requestId":)";
    append_json_string(out, request_id);
    return out;
}

void append_member(std::string& out, std::string_view key, std::string_view value) {
    out += ',';
    append_json_string(out, key);
    out += ':';
    append_json_string(out, value);
}

/// Appends `,"clientInfo":{"caller":…}` when there is a claim, then closes the frame.
std::string close_frame(std::string out, caller_claim caller) {
    if (caller) {
        out += R"(,"clientInfo":{"caller":)";
        append_json_string(out, *caller);
        out += '}';
    }
    out += '}';
    return out;
}

} // namespace

std::string encode_hello(std::string_view request_id, caller_claim caller) {
    return close_frame(open_frame("hello", request_id), caller);
}

std::string encode_hello(std::string_view request_id, caller_claim caller,
                         std::string_view client) {
    if (client.empty()) return encode_hello(request_id, caller);
    std::string out = open_frame("hello", request_id);
    out += R"(,"clientInfo":{"client":)";
    append_json_string(out, client);
    if (caller) {
        out += R"(,"caller":)";
        append_json_string(out, *caller);
    }
    out += "}}";
    return out;
}

std::string encode_list_tools(std::string_view request_id, caller_claim caller) {
    return close_frame(open_frame("list_tools", request_id), caller);
}

std::string encode_list_tools(std::string_view request_id, caller_claim caller,
                              std::string_view format) {
    std::string out = open_frame("list_tools", request_id);
    if (!format.empty()) append_member(out, "format", format);
    return close_frame(std::move(out), caller);
}

std::string encode_tool_call(const tool_call_request& call) {
    std::string out = open_frame("tool_call", call.request_id);
    append_member(out, "toolName", call.tool_name);
    out += R"(,"arguments":)";
    const std::size_t at = out.size();
    out += call.arguments_json;
    for (std::size_t i = at; i < out.size(); ++i)
        if (out[i] == '\n' || out[i] == '\r') out[i] = ' ';
    if (call.timeout_ms) {
        out += R"(,"timeoutMs":)";
        append_uint(out, *call.timeout_ms);
    }
    if (call.result_model) out += R"(,"resultFormat":"model")";
    if (call.display) out += R"(,"display":true)";
    return close_frame(std::move(out), call.caller);
}

std::string encode_cancel_tool_call(std::string_view request_id) {
    return close_frame(open_frame("cancel_tool_call", request_id), std::nullopt);
}

std::string encode_list_sources(std::string_view request_id, caller_claim caller) {
    return close_frame(open_frame("list_sources", request_id), caller);
}

std::string encode_restart_source(std::string_view request_id, std::string_view name,
                                  caller_claim caller) {
    std::string out = open_frame("restart_source", request_id);
    append_member(out, "name", name);
    return close_frame(std::move(out), caller);
}

std::string encode_learn_source(std::string_view request_id, std::string_view name, bool stop,
                                caller_claim caller) {
    std::string out = open_frame("learn_source", request_id);
    append_member(out, "name", name);
    append_member(out, "action", stop ? "stop" : "start");
    return close_frame(std::move(out), caller);
}

std::string encode_check_policy(std::string_view request_id, std::string_view tool_name,
                                caller_claim caller) {
    std::string out = open_frame("check_policy", request_id);
    append_member(out, "toolName", tool_name);
    return close_frame(std::move(out), caller);
}

std::string encode_reload_config(std::string_view request_id, caller_claim caller) {
    return close_frame(open_frame("reload_config", request_id), caller);
}

std::string request_id_generator::process_prefix(std::string_view name) {
    std::string out(name);
    out += '_';
    append_uint(out, static_cast<std::uint64_t>(::getpid()));
    out += '_';
    return out;
}

std::string request_id_generator::next() {
    std::string out = prefix_;
    append_uint(out, ++counter_);
    return out;
}

} // namespace meith::protocol
