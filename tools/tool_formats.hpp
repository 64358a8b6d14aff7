// tool_formats: a tool as a model provider's API takes it (docs/protocol.md §13, PROTOCOL.md §11):
// the list_tools `format`s besides meith's own ToolDescriptor.
//
//   openai            {"type":"function","function":{"name","description","parameters"}}
//                     (Chat Completions, ChatCompletionTool)
//   openai.responses  {"type":"function","name","description","parameters","strict":false}
//                     (Responses API, FunctionTool); text-payload tools as
//                     {"type":"custom","name","description","format"} (CustomTool)
//   anthropic         {"name","description","input_schema"} (Messages API, Tool)
//   mcp               {"name","title"?,"description","inputSchema","annotations","outputSchema"?}
//                     as `meith mcp` lists it (MCP tools/list)
//
// A tool without a schema gets `{"type":"object","properties":{}}`; a text-payload tool in a
// format that cannot express it is a function with one required string parameter `input`.
#pragma once

#include "tools/tool_source.hpp"

#include <optional>
#include <string>
#include <string_view>

namespace meith::tools {

enum class list_format { meith, openai, openai_responses, anthropic, mcp };
inline constexpr std::size_t list_format_count = 5;

/// "meith", "openai", "openai.responses", "anthropic", "mcp"; nullopt for anything else.
std::optional<list_format> list_format_from_string(std::string_view name);
std::string_view to_string(list_format f);
/// The accepted names, for error messages: "meith, openai, openai.responses, anthropic, mcp".
std::string_view list_format_names();

/// Appends `t` as one JSON object in `f` (not `meith`: tool_table renders those).
void append_provider_tool(std::string& out, const tool& t, list_format f);

} // namespace meith::tools
