// End-to-end: the agent-facing features of docs/protocol.md §13 (PROTOCOL.md §11) — tool lists
// in model providers' formats.
#include "daemon_fixture.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <sys/socket.h>
#include <thread>
#include <vector>

using namespace meith::test;

namespace e2e_agent_test { // one namespace per file: the tests build as unity batches

namespace {

json list_in(client& c, const std::string& format, const std::string& caller = "cli") {
    c.send({{"type", "list_tools"},
            {"protocol", 1},
            {"requestId", "l-" + format},
            {"format", format},
            {"clientInfo", {{"caller", caller}}}});
    const json reply = c.read();
    INFO(reply.dump());
    REQUIRE(reply["type"] == "tools_list");
    return reply["tools"];
}

/// The entry of `tools` whose name (at `name_of`) is `name`, or null.
json named(const json& tools, const std::string& name,
           const std::function<json(const json&)>& name_of) {
    for (const auto& t : tools)
        if (name_of(t) == name) return t;
    return nullptr;
}

std::vector<std::string> keys_of(const json& obj) {
    std::vector<std::string> keys;
    for (const auto& [k, v] : obj.items())
        keys.push_back(k);
    std::sort(keys.begin(), keys.end());
    return keys;
}

} // namespace

TEST_CASE("list_tools in each provider format has that API's shape and leaves denied tools out",
          "[e2e][agent][formats]") {
    daemon_process d(host_source_toml("th") + "[permissions.callers.cli]\n"
                                              "allow = [\"read-only\", \"writes-files\"]\n");
    client c(d.socket());
    const auto by_function_name = [](const json& t) { return t["function"]["name"]; };
    const auto by_name = [](const json& t) { return t["name"]; };

    // OpenAI Chat Completions: ChatCompletionTool.
    const json openai = list_in(c, "openai", "plugin");
    const json typed = named(openai, "t_typed", by_function_name);
    REQUIRE(typed.is_object());
    CHECK(keys_of(typed) == std::vector<std::string>{"function", "type"});
    CHECK(typed["type"] == "function");
    CHECK(keys_of(typed["function"]) ==
          std::vector<std::string>{"description", "name", "parameters"});
    CHECK(typed["function"]["parameters"]["required"] == json::array({"n"}));
    // Denied to plugin (writes-files, unknown): left out.
    CHECK(named(openai, "t_write", by_function_name).is_null());
    CHECK(named(openai, "t_nocaps", by_function_name).is_null());
    // The text-payload tool is a function with one required string `input`.
    const json custom = named(openai, "t_custom", by_function_name);
    REQUIRE(custom.is_object());
    CHECK(custom["function"]["parameters"] ==
          json::parse(R"({"type":"object","properties":{"input":{"type":"string"}},)"
                      R"("required":["input"]})"));

    // cli may write files here: t_write is offered to it.
    CHECK(named(list_in(c, "openai", "cli"), "t_write", by_function_name).is_object());

    // OpenAI Responses: FunctionTool (flat, strict) and CustomTool for text payloads.
    const json responses = list_in(c, "openai.responses");
    const json echo_r = named(responses, "t_echo", by_name);
    REQUIRE(echo_r.is_object());
    CHECK(keys_of(echo_r) ==
          std::vector<std::string>{"description", "name", "parameters", "strict", "type"});
    CHECK(echo_r["strict"] == false);
    const json custom_r = named(responses, "t_custom", by_name);
    REQUIRE(custom_r.is_object());
    CHECK(custom_r["type"] == "custom");
    CHECK_FALSE(custom_r.contains("parameters"));

    // Anthropic Messages: Tool.
    const json anthropic = list_in(c, "anthropic");
    const json echo_a = named(anthropic, "echo", by_name);
    REQUIRE(echo_a.is_object());
    CHECK(keys_of(echo_a) == std::vector<std::string>{"description", "input_schema", "name"});
    CHECK(echo_a["input_schema"]["type"] == "object");

    // MCP tools/list, as meith mcp shows it.
    const json mcp = list_in(c, "mcp");
    const json echo_m = named(mcp, "t_echo", by_name);
    REQUIRE(echo_m.is_object());
    CHECK(echo_m["inputSchema"]["type"] == "object");
    CHECK(echo_m["annotations"]["readOnlyHint"] == true);

    // Every format lists the same allowed tools.
    CHECK(openai.size() == list_in(c, "anthropic", "plugin").size());
    CHECK(openai.size() == list_in(c, "mcp", "plugin").size());

    // The default and "meith" are the ToolDescriptors, denied tools included.
    const json meith = list_in(c, "meith", "plugin");
    CHECK(named(meith, "t_write", by_name)["permission"] == "deny");
    CHECK(named(meith, "t_custom", by_name)["payloadKind"] == "text");

    // An unknown format is a clear error, and the connection goes on.
    c.send({{"type", "list_tools"}, {"requestId", "bad"}, {"format", "gemini"}});
    const json err = c.read();
    CHECK(err["type"] == "error");
    CHECK(err["requestId"] == "bad");
    CHECK_THAT(err["message"].get<std::string>(),
               Catch::Contains("gemini") && Catch::Contains("openai.responses"));
    c.send({{"type", "list_tools"}, {"requestId", "num"}, {"format", 3}});
    CHECK(c.read()["type"] == "error");
    CHECK(list_in(c, "anthropic").is_array());
}

TEST_CASE("the openai, openai.responses and anthropic lists type-check against the providers' "
          "official SDKs",
          "[e2e][agent][formats]") {
    // openai 6.30.1 and @anthropic-ai/sdk 1.13.0 from npm (tests/providers), tsc --strict.
    daemon_process d(host_source_toml("th"));
    client c(d.socket());
    temp_dir out;
    for (const std::string format : {"openai", "openai.responses", "anthropic"})
        std::ofstream(out.path / (format + ".json")) << list_in(c, format).dump(2);
    const auto r = run_program(
        {"/bin/bash"},
        {std::string(MEITH_SOURCE_DIR) + "/tests/providers/check_types.sh", out.path.string()}, {});
    INFO(r.out + r.err);
    CHECK(r.status == 0);
    CHECK_THAT(r.out, Catch::Contains("check_types: ok"));
}

TEST_CASE("meith tools --format prints the list as the provider takes it", "[e2e][agent][cli]") {
    daemon_process d(host_source_toml("th"));
    const auto r = run_cli({"tools", "--format", "anthropic", "--caller", "plugin"}, d.home());
    REQUIRE(r.status == 0);
    const json tools = json::parse(r.out);
    REQUIRE(tools.is_array());
    CHECK(tools[0].contains("input_schema"));
    const auto bad = run_cli({"tools", "--format", "nope"}, d.home());
    CHECK(bad.status == 2);
    CHECK_THAT(bad.err, Catch::Contains("unknown list_tools format"));
    CHECK(run_cli({"status", "--format", "openai"}, d.home()).status == 2);
}

namespace {

json preview(client& c, const std::string& tool, const json& args, const std::string& caller,
             const std::string& id = "p") {
    json frame = {{"type", "preview_tool_call"},
                  {"protocol", 1},
                  {"requestId", id},
                  {"toolName", tool},
                  {"clientInfo", {{"caller", caller}}}};
    if (!args.is_null()) frame["arguments"] = args;
    c.send(frame);
    return c.read();
}

json source_named(client& c, const std::string& name) {
    c.send({{"type", "list_sources"}, {"requestId", "s"}});
    const json reply = c.read();
    for (const auto& s : reply["sources"])
        if (s["name"] == name) return s;
    return nullptr;
}

/// Waits until the host's optional methods are probed (list_sources shows them).
json probed_methods(client& c, const std::string& source) {
    for (int i = 0; i < 500; ++i) {
        const json s = source_named(c, source);
        if (s.is_object() && s["methods"].is_array()) return s["methods"];
        std::this_thread::sleep_for(10ms);
    }
    FAIL("the optional methods of '" << source
                                     << "' were never probed: " << source_named(c, source).dump());
    return nullptr;
}

} // namespace

TEST_CASE("preview_tool_call uses the host's format_tool_call_preview and never runs the tool",
          "[e2e][agent][preview]") {
    daemon_process d(host_source_toml("th", {"--optional-methods"}));
    client c(d.socket());
    const json methods = probed_methods(c, "th");
    CHECK(methods.size() == 7);
    CHECK(std::find(methods.begin(), methods.end(), "format_tool_call_preview") != methods.end());

    const int before = c.call("t_state", json::object())["result"]["content"].get<int>();
    const json p = preview(c, "t_state", {{"a", 1}}, "cli");
    CHECK(p["type"] == "tool_preview");
    CHECK(p["requestId"] == "p");
    CHECK(p["toolName"] == "t_state");
    CHECK(p["permission"] == "allow");
    CHECK(p["text"] == R"(would run t_state with {"a":1})");
    // Not run: the host's call counter moved by one call only.
    CHECK(c.call("t_state", json::object())["result"]["content"].get<int>() == before + 1);

    const json line = d.wait_audit([](const json& l) { return l["event"] == "tool_preview"; });
    CHECK(line["toolName"] == "t_state");
    CHECK(line["previewBy"] == "host");
    CHECK(line["permission"] == "allow");
    CHECK(d.audit_events("tool_call").size() == 2); // the two t_state calls, not the preview
}

TEST_CASE("preview_tool_call without the host method: name(redacted arguments), cut to 200 "
          "characters, a denied tool still gets a preview",
          "[e2e][agent][preview]") {
    daemon_process d(host_source_toml("th"));
    client c(d.socket());
    CHECK(probed_methods(c, "th").empty()); // the plain test host has none of them

    const json p = preview(c, "t_secret", {{"token", "sk-live-THISISSECRET12345"}}, "cli");
    CHECK(p["permission"] == "allow");
    const std::string text = p["text"];
    CHECK_THAT(text, Catch::StartsWith("t_secret({") && Catch::EndsWith("})"));
    CHECK_THAT(text, !Catch::Contains("THISISSECRET"));

    const json big = preview(c, "t_echo", {{"text", std::string(1000, 'x')}}, "cli");
    const std::string big_text = big["text"];
    CHECK(big_text.size() == std::string("t_echo(").size() + 200 + 1);

    // Denied to plugin: permission deny, a preview all the same.
    const json denied = preview(c, "t_write", json::object(), "plugin");
    CHECK(denied["permission"] == "deny");
    CHECK(denied["text"] == "t_write({})");
    const json line = d.wait_audit(
        [](const json& l) { return l["event"] == "tool_preview" && l["toolName"] == "t_write"; });
    CHECK(line["permission"] == "deny");
    CHECK(line["caller"] == "plugin");
    CHECK(line["previewBy"] == "default");
    const auto secret_line = d.audit_events("tool_preview").at(0);
    CHECK_THAT(secret_line.dump(), !Catch::Contains("THISISSECRET"));

    // Arguments are optional; an unknown tool and wrong arguments are clear errors.
    CHECK(preview(c, "t_echo", nullptr, "cli")["text"] == "t_echo({})");
    const json unknown = preview(c, "nope", json::object(), "cli", "u");
    CHECK(unknown["type"] == "error");
    CHECK(unknown["requestId"] == "u");
    CHECK(preview(c, "t_echo", "just text", "cli")["type"] == "error");
    CHECK(preview(c, "t_echo", json::array(), "cli")["type"] == "error");
    CHECK(preview(c, "t_custom", "freeform text", "cli")["type"] == "tool_preview");
}

TEST_CASE("a host method that never answers: the default after the 5 s bound, the host still "
          "serves",
          "[e2e][agent][preview]") {
    daemon_process d(host_source_toml("th", {"--optional-methods", "--hang-preview"}));
    client c(d.socket());
    probed_methods(c, "th");
    const auto started = std::chrono::steady_clock::now();
    const json p = preview(c, "t_echo", {{"a", 1}}, "cli");
    CHECK(p["text"] == R"(t_echo({"a":1}))");
    CHECK(std::chrono::steady_clock::now() - started >= 4s); // it did wait for the host
    CHECK(c.call("t_echo", {{"b", 2}})["result"]["ok"] == true);

    // A client that half-closes after asking still gets the (late) preview.
    client half(d.socket());
    half.send({{"type", "preview_tool_call"},
               {"requestId", "late"},
               {"toolName", "t_echo"},
               {"arguments", json::object()}});
    ::shutdown(half.fd(), SHUT_WR);
    const json late = half.read(15s);
    CHECK(late["type"] == "tool_preview");
    CHECK(late["requestId"] == "late");
}

TEST_CASE("meith preview prints the preview, exit 1 when the call would be denied",
          "[e2e][agent][cli]") {
    daemon_process d(host_source_toml("th", {"--optional-methods"}));
    const auto ok = run_cli({"preview", "t_echo", R"({"x":2})"}, d.home());
    CHECK(ok.status == 0);
    CHECK(ok.out == "would run t_echo with {\"x\":2}\n");
    const auto denied = run_cli({"preview", "t_write", "--caller", "plugin"}, d.home());
    CHECK(denied.status == 1);
    CHECK_THAT(denied.err, Catch::Contains("would be denied"));
}

namespace {

json call_shaped(client& c, const std::string& tool, const json& args, bool model, bool display) {
    json extra = json::object();
    if (model) extra["resultFormat"] = "model";
    if (display) extra["display"] = true;
    return c.call(tool, args, extra)["result"];
}

} // namespace

TEST_CASE("resultFormat model and display use the host's format_tool_result and "
          "to_display_format",
          "[e2e][agent][model]") {
    daemon_process d(host_source_toml("th", {"--optional-methods"}));
    client c(d.socket());
    probed_methods(c, "th");

    const json r = call_shaped(c, "t_echo", {{"a", 1}}, true, true);
    CHECK(r["ok"] == true);
    CHECK(r["content"] == json{{"a", 1}}); // the content itself is unchanged
    CHECK(r["modelContent"] == R"(model sees: {"a":1})");
    CHECK(r["meta"]["display"] ==
          json{{"type", "markdown"}, {"content", R"(**model sees: {"a":1}**)"}});

    // A plain object from format_tool_result becomes its JSON text.
    CHECK(call_shaped(c, "t_echo", {{"object", {{"k", 1}}}}, true, false)["modelContent"] ==
          R"({"plain":{"k":1}})");
    // A failure is formatted by the host too.
    CHECK(call_shaped(c, "t_fail", json::object(), true, false)["modelContent"] ==
          "model sees failure: tool said no");
    // Without resultFormat nothing is added.
    const json plain = call_shaped(c, "t_echo", {{"a", 1}}, false, false);
    CHECK_FALSE(plain.contains("modelContent"));
    CHECK_FALSE(plain.contains("meta"));
}

TEST_CASE("a provider-native envelope from format_tool_result reaches the client byte for byte",
          "[e2e][agent][model]") {
    daemon_process d(host_source_toml("th", {"--optional-methods"}));
    {
        client c(d.socket());
        probed_methods(c, "th");
    }
    meith::protocol::client_channel raw;
    raw.connect(d.socket());
    raw.send_frame(R"({"type":"tool_call","requestId":"n","toolName":"t_echo",)"
                   R"("arguments":{"native":"héllo \"q\""},"resultFormat":"model"})");
    std::string line;
    for (int i = 0; i < 10 && line.find("tool_result") == std::string::npos; ++i)
        line = raw.read_frame(std::chrono::steady_clock::now() + 10s).frame;
    // Exactly what the host's JSON.stringify wrote.
    CHECK_THAT(line,
               Catch::Contains(R"("modelContent":{"type":"provider_native_tool_result",)"
                               R"("format":"openai.responses","output":[{"type":"output_text",)"
                               R"("text":"héllo \"q\""}]})"));
}

TEST_CASE("resultFormat model and display without host methods: the defaults",
          "[e2e][agent][model]") {
    daemon_process d(host_source_toml("th"));
    client c(d.socket());
    // String content as is, other content as compact JSON, a failure as "Error: ...".
    const json text = call_shaped(c, "t_big", {{"bytes", 3}}, true, true);
    CHECK(text["modelContent"] == "xxx");
    CHECK(text["meta"]["display"] == json{{"type", "text"}, {"content", "xxx"}});
    CHECK(call_shaped(c, "t_echo", {{"a", json::array({1, 2})}}, true, false)["modelContent"] ==
          R"({"a":[1,2]})");
    CHECK(call_shaped(c, "t_fail", json::object(), true, false)["modelContent"] ==
          "Error: tool said no");
    // Other sources too: the built-in echo.
    CHECK(call_shaped(c, "echo", {{"k", "v"}}, true, false)["modelContent"] == R"({"k":"v"})");
    // display alone: meta.display, no modelContent.
    const json only_display = call_shaped(c, "t_big", {{"bytes", 2}}, false, true);
    CHECK_FALSE(only_display.contains("modelContent"));
    CHECK(only_display["meta"]["display"]["content"] == "xx");

    // A bad resultFormat or display is a VALIDATION_ERROR for the call.
    const json bad = c.call("t_echo", json::object(), {{"resultFormat", "html"}});
    CHECK(bad["result"]["error"]["code"] == "VALIDATION_ERROR");
    const json bad_display = c.call("t_echo", json::object(), {{"display", "yes"}});
    CHECK(bad_display["result"]["error"]["code"] == "VALIDATION_ERROR");
}

TEST_CASE("meith call --model prints modelContent", "[e2e][agent][cli]") {
    daemon_process d(host_source_toml("th", {"--optional-methods"}));
    {
        client c(d.socket());
        probed_methods(c, "th");
    }
    const auto r = run_cli({"call", "t_echo", R"({"a":1})", "--model"}, d.home());
    CHECK(r.status == 0);
    CHECK(r.out == "model sees: {\"a\":1}\n");
    const auto failed = run_cli({"call", "t_fail", "--model"}, d.home());
    CHECK(failed.status == 1);
    CHECK(failed.out == "model sees failure: tool said no\n");
    CHECK(run_cli({"tools", "--model"}, d.home()).status == 2);
}

TEST_CASE("text-payload tools: a string in, payload and payload_kind to the host, redacted in "
          "the audit",
          "[e2e][agent][text]") {
    daemon_process d(host_source_toml("th"));
    client c(d.socket());
    c.send({{"type", "list_tools"}, {"requestId", "l"}});
    const json tools = c.read()["tools"];
    const json custom = named(tools, "t_custom", [](const json& t) { return t["name"]; });
    REQUIRE(custom.is_object());
    CHECK(custom["payloadKind"] == "text");
    CHECK(custom["format"] == json{{"type", "text"}});
    CHECK_FALSE(custom.contains("inputSchema"));
    const json responses = list_in(c, "openai.responses");
    CHECK(named(responses, "t_custom", [](const json& t) { return t["name"]; })["format"] ==
          json{{"type", "text"}});

    // A multi-line payload with a secret in it, as a patch or a REPL line would be.
    const std::string payload = "line one\napi_key=sk-live-THISISSECRET12345\n\"quoted\" \\ end";
    const json r = c.call("t_custom", payload);
    CHECK(r["result"]["ok"] == true);
    CHECK(r["result"]["content"]["got"] == payload);
    CHECK(r["result"]["content"]["kind"] == "string");
    const json line = d.wait_audit(
        [](const json& l) { return l["event"] == "tool_call" && l["toolName"] == "t_custom"; });
    CHECK(line["args"].is_string());
    CHECK_THAT(line.dump(), !Catch::Contains("THISISSECRET"));

    // Bounded only by the frame size: 200 KB is fine.
    const std::string big(200 * 1024, 'p');
    CHECK(c.call("t_custom", big)["result"]["content"]["got"].get<std::string>().size() ==
          big.size());

    // The wrong kind of arguments either way is a VALIDATION_ERROR.
    CHECK(c.call("t_custom", {{"text", "x"}})["result"]["error"]["code"] == "VALIDATION_ERROR");
    CHECK(c.call("t_echo", "just text")["result"]["error"]["code"] == "VALIDATION_ERROR");
    CHECK(c.call("echo", "just text")["result"]["error"]["code"] == "VALIDATION_ERROR");
}

TEST_CASE("meith call --text sends a file or standard input as the text payload",
          "[e2e][agent][text][cli]") {
    daemon_process d(host_source_toml("th"));
    const fs::path file = d.home() / "payload.txt";
    std::ofstream(file) << "from a file\nsecond line\n";
    const auto r = run_cli({"call", "t_custom", "--text", file.string(), "--json"}, d.home());
    INFO(r.err);
    REQUIRE(r.status == 0);
    CHECK(json::parse(r.out)["content"]["got"] == "from a file\nsecond line\n");
    CHECK(run_cli({"call", "t_custom", "{}", "--text", file.string()}, d.home()).status == 2);
    CHECK(run_cli({"tools", "--text", file.string()}, d.home()).status == 2);
}

namespace {

json list_with(client& c, const json& extra) {
    json frame = {{"type", "list_tools"}, {"protocol", 1}, {"requestId", "lt"}};
    frame.update(extra);
    c.send(frame);
    const json reply = c.read();
    INFO(reply.dump());
    REQUIRE(reply["type"] == "tools_list");
    return reply["tools"];
}

bool lists(const json& tools, const std::string& name) {
    return std::any_of(tools.begin(), tools.end(), [&](const json& t) {
        return t.value("name", "") == name ||
               (t.contains("function") && t["function"]["name"] == name);
    });
}

} // namespace

TEST_CASE("tags: get_tags labels a host's tools, required_tags filters them when list_tools "
          "names tags",
          "[e2e][agent][tags]") {
    daemon_process d(host_source_toml("th", {"--optional-methods"}) +
                     host_source_toml("gated", {"--optional-methods", "--required-tags=beta,tools",
                                                "--name-prefix=g_"}));
    client c(d.socket());
    probed_methods(c, "th");
    probed_methods(c, "gated");

    // Descriptors carry the tags learned at start (get_tags with no models).
    const json plain = list_with(c, json::object());
    const json echo = named(plain, "t_echo", [](const json& t) { return t["name"]; });
    CHECK(echo["tags"] == json::array({"tested"}));
    CHECK(named(plain, "echo", [](const json& t) { return t["name"]; })["tags"] == json::array());
    CHECK(lists(plain, "g_t_echo")); // no `tags` in the frame: nothing filtered

    // `tags` given: the gated host needs both of its required tags.
    CHECK_FALSE(lists(list_with(c, {{"tags", {"beta"}}}), "g_t_echo"));
    CHECK(lists(list_with(c, {{"tags", {"beta"}}}), "t_echo"));
    CHECK(lists(list_with(c, {{"tags", {"tools", "beta", "x"}}}), "g_t_echo"));
    CHECK(lists(list_with(c, {{"tags", {"tools", "beta"}}, {"format", "openai"}}), "g_t_echo"));
    CHECK_FALSE(lists(list_with(c, {{"tags", json::array()}, {"format", "openai"}}), "g_t_echo"));

    // `models`: the hosts' get_tags is asked with them.
    const json for_model = list_with(c, {{"models", {{{"name", "gpt-5"}}}}});
    CHECK(named(for_model, "t_echo", [](const json& t) { return t["name"]; })["tags"] ==
          json::array({"tested", "for-gpt-5"}));

    // Malformed tags/models: a clear error.
    c.send({{"type", "list_tools"}, {"requestId", "bad"}, {"tags", {1, 2}}});
    CHECK(c.read()["type"] == "error");
    c.send({{"type", "list_tools"}, {"requestId", "bad2"}, {"models", "gpt"}});
    CHECK(c.read()["type"] == "error");
}

TEST_CASE("a host's config is checked against its get_config_schema at start",
          "[e2e][agent][config]") {
    // level must be an integer >= 1 (tests/hosts/test_host.mjs --config-schema).
    daemon_process d(
        host_source_toml("good", {"--config-schema"}, "config = { level = 2 }") +
        host_source_toml("bad", {"--config-schema", "--name-prefix=b_"}, "config = { level = 0 }") +
        host_source_toml("plain", {"--name-prefix=p_"}, "config = { level = 0 }"));
    client c(d.socket());
    const json good = source_named(c, "good");
    CHECK(good["state"] == "ready");
    const json bad = source_named(c, "bad");
    CHECK(bad["state"] == "failed");
    // In words about the config, not about a tool's arguments.
    CHECK_THAT(bad["lastError"].get<std::string>(),
               Catch::StartsWith("config does not match the host's get_config_schema: /level "
                                 "must be at least 1 (got 0)") &&
                   !Catch::Contains("inputSchema"));
    // A host without the method is not checked.
    CHECK(source_named(c, "plain")["state"] == "ready");
    CHECK(c.call("t_echo", json::object())["result"]["ok"] == true);
}

namespace {

/// The example host of examples/node-host on a scratch root folder, every caller may write.
std::string example_host_toml(const fs::path& root) {
    return "[[sources]]\nname = \"files\"\nkind = \"host\"\ncommand = [\"node\", \"" +
           std::string(MEITH_SOURCE_DIR) + "/examples/node-host/host.mjs\"]\nconfig = { root = \"" +
           root.string() + "\" }\n[permissions.callers.cli]\nallow = [\"read-only\", " +
           "\"writes-files\"]\n[permissions.callers.plugin]\nallow = [\"read-only\", " +
           "\"writes-files\"]\n";
}

} // namespace

TEST_CASE("the example host's apply_patch: a unified diff as a text payload, applied whole or "
          "not at all, confined to its root",
          "[e2e][agent][text][example]") {
    temp_dir root;
    std::ofstream(root.path / "a.txt") << "one\ntwo\nthree\n";
    std::ofstream(root.path / "gone.txt") << "bye\n";
    daemon_process d(example_host_toml(root.path));
    client c(d.socket());
    probed_methods(c, "files");

    const std::string patch =
        "--- a/a.txt\n+++ b/a.txt\n@@ -1,3 +1,3 @@\n one\n-two\n+TWO\n three\n"
        "--- /dev/null\n+++ b/new.txt\n@@ -0,0 +1,1 @@\n+fresh\n";
    // The host's own preview of it, then the call.
    const json p = preview(c, "apply_patch", patch, "cli");
    CHECK(p["text"] == "patch a.txt, new.txt (+2 -1 lines)");
    const json r = c.call("apply_patch", patch);
    INFO(r.dump());
    REQUIRE(r["result"]["ok"] == true);
    CHECK(slurp(root.path / "a.txt") == "one\nTWO\nthree\n");
    CHECK(slurp(root.path / "new.txt") == "fresh\n");
    CHECK(slurp(root.path / "gone.txt") == "bye\n");

    // A hunk that does not apply: nothing is written, not even the file that would apply.
    const std::string stale = "--- /dev/null\n+++ b/other.txt\n@@ -0,0 +1,1 @@\n+x\n"
                              "--- a/a.txt\n+++ b/a.txt\n@@ -1,1 +1,1 @@\n-nope\n+NOPE\n";
    const json failed = c.call("apply_patch", stale, {{"resultFormat", "model"}});
    CHECK(failed["result"]["ok"] == false);
    CHECK_THAT(failed["result"]["modelContent"].get<std::string>(),
               Catch::StartsWith("Error: a.txt: a hunk does not apply"));
    CHECK_FALSE(fs::exists(root.path / "other.txt"));
    // Outside the root: refused.
    const json outside =
        c.call("apply_patch", "--- /dev/null\n+++ b/../escape.txt\n@@ -0,0 +1,1 @@\n+x\n");
    CHECK(outside["result"]["ok"] == false);
    CHECK_FALSE(fs::exists(root.path.parent_path() / "escape.txt"));

    // Every optional method is there, and the model and display formats use them.
    CHECK(probed_methods(c, "files").size() == 7);
    const json read =
        c.call("read_file", {{"path", "a.txt"}}, {{"resultFormat", "model"}, {"display", true}});
    CHECK(read["result"]["modelContent"] == "a.txt:\none\nTWO\nthree\n");
    CHECK(read["result"]["meta"]["display"]["type"] == "markdown");
    CHECK(list_with(c, json::object())[0].contains("tags"));
}

TEST_CASE("the example host's apply_patch never deletes a file: deleting is delete_file's, "
          "which needs destructive",
          "[e2e][agent][text][example]") {
    // Issue 40: a caller whose policy denies `destructive` (delete_file is refused) could still
    // delete a file with a patch whose new name is /dev/null.
    temp_dir root;
    std::ofstream(root.path / "keep.txt") << "one\n";
    std::ofstream(root.path / "gone.txt") << "bye\n";
    daemon_process d(example_host_toml(root.path) + "deny = [\"destructive\"]\n");
    client c(d.socket());
    const json plugin = {{"clientInfo", {{"caller", "plugin"}}}};
    const json refused = c.call("delete_file", {{"path", "gone.txt"}}, plugin);
    CHECK(refused["result"]["error"]["code"] == "PERMISSION_DENIED");

    // A patch that deletes gone.txt and changes keep.txt: refused whole, nothing written.
    const std::string patch = "--- a/keep.txt\n+++ b/keep.txt\n@@ -1,1 +1,1 @@\n-one\n+ONE\n"
                              "--- a/gone.txt\n+++ /dev/null\n@@ -1,1 +0,0 @@\n-bye\n";
    json as_model = plugin;
    as_model["resultFormat"] = "model";
    const json r = c.call("apply_patch", patch, as_model);
    INFO(r.dump());
    CHECK(r["result"]["ok"] == false);
    CHECK_THAT(r["result"]["modelContent"].get<std::string>(),
               Catch::Contains("gone.txt") && Catch::Contains("delete_file"));
    CHECK(slurp(root.path / "gone.txt") == "bye\n");
    CHECK(slurp(root.path / "keep.txt") == "one\n");
    // Even a bare deletion (no hunk) is refused.
    const json bare = c.call("apply_patch", "--- a/gone.txt\n+++ /dev/null\n", plugin);
    CHECK(bare["result"]["ok"] == false);
    CHECK(fs::exists(root.path / "gone.txt"));
}

TEST_CASE("meith tools --tag and meith call --display", "[e2e][agent][cli]") {
    daemon_process d(host_source_toml("th", {"--optional-methods"}) +
                     host_source_toml("gated", {"--optional-methods", "--required-tags=beta",
                                                "--name-prefix=g_"}));
    {
        client c(d.socket());
        probed_methods(c, "th");
        probed_methods(c, "gated");
    }
    CHECK_THAT(run_cli({"tools"}, d.home()).out, Catch::Contains("g_t_echo"));
    CHECK_THAT(run_cli({"tools", "--tag", "alpha"}, d.home()).out, !Catch::Contains("g_t_echo"));
    CHECK_THAT(run_cli({"tools", "--tag", "alpha", "--tag", "beta"}, d.home()).out,
               Catch::Contains("g_t_echo"));
    const auto shown = run_cli({"call", "t_echo", R"({"a":1})", "--display"}, d.home());
    CHECK(shown.status == 0);
    CHECK(json::parse(shown.out)["type"] == "markdown");
}

} // namespace e2e_agent_test
