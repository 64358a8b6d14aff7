// fuzz_config: the TOML config parser and validator (config/config.hpp, parse_config).
//
// The input is the text of a config file named "fuzz.toml" in a folder that does not exist
// (parse_config touches no file; HOME points to a folder that does not exist either, for "~").
// Invariants: it never throws; exactly one of value / error; an error names the file; a value
// honours every documented range and rule (docs/configuration.md): maxima of durations, unique
// and valid names, non-empty commands, absolute working folders, JSON texts that parse.
#include "fuzz_common.hpp"

#include "config/config.hpp"

#include <cctype>
#include <cstdlib>
#include <set>
#include <string>

using meith::fuzz::check;
using meith::fuzz::must_parse;
namespace cfg = meith::config;

namespace {

constexpr const char* fake_home = "/tmp/meith-fuzz-home-does-not-exist";
constexpr const char* fake_dir = "/tmp/meith-fuzz-config-dir-does-not-exist";

bool no_nul(const std::string& s) {
    return s.find('\0') == std::string::npos;
}

void check_json_object(const std::string& text, const char* what) {
    check(must_parse(text, what).is_object(), what, text);
}

void check_command(const std::vector<std::string>& command, std::string_view text) {
    check(!command.empty() && !command[0].empty(), "a process without a program", text);
    for (const auto& arg : command)
        check(no_nul(arg), "a NUL in a command argument", text);
}

void check_value(const cfg::config& c, std::string_view text) {
    const auto& l = c.limits;
    check(l.max_frame_bytes >= 1024, "max_frame_bytes under 1024", text);
    check(l.max_timeout_ms >= 1 && l.max_timeout_ms <= cfg::max_call_timeout_ms,
          "max_timeout_ms out of range", text);
    check(l.max_connections >= 1 && l.max_calls_in_flight_per_connection >= 1,
          "a zero connection or call limit", text);
    check(l.max_outbound_bytes >= l.max_result_bytes, "max_outbound_bytes under max_result_bytes",
          text);
    check(l.idle_timeout_ms <= cfg::max_idle_timeout_ms, "idle_timeout_ms over its maximum", text);
    check(l.write_stall_ms >= 1 && l.write_stall_ms <= cfg::max_grace_ms,
          "write_stall_ms out of range", text);
    const auto& t = c.tools;
    check(t.default_timeout_ms >= 1 && t.default_timeout_ms <= cfg::max_call_timeout_ms,
          "default_timeout_ms out of range", text);
    check(t.shutdown_grace_ms <= cfg::max_grace_ms && t.kill_grace_ms <= cfg::max_grace_ms,
          "a grace over its maximum", text);
    for (const auto& name : t.env_allow)
        check(!name.empty() && no_nul(name), "an empty or NUL env_allow entry", text);

    std::set<std::string> names;
    for (const auto& s : c.sources) {
        check(!s.name.empty() && names.insert(s.name).second, "empty or duplicate source name",
              text);
        for (char ch : s.name)
            check(std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '.' ||
                      ch == '-',
                  "a source name with a forbidden character", text);
        check_command(s.command, text);
        check(s.cwd.is_absolute(), "a source cwd that is not absolute", text);
        for (const auto& [k, v] : s.env)
            check(!k.empty() && k.find('=') == std::string::npos && no_nul(k) && no_nul(v),
                  "an invalid environment variable", text);
        check_json_object(s.config_json, "a source's config is not a JSON object");
        for (const auto& [tool, ms] : s.timeout_ms)
            check(ms >= 1 && ms <= cfg::max_call_timeout_ms, "a tool timeout out of range", text);
        check(s.start_timeout_ms >= 1 && s.start_timeout_ms <= cfg::max_grace_ms,
              "start_timeout_ms out of range", text);
        if (s.kind == cfg::source_kind::exec) {
            check(s.tool.has_value() && !s.tool->name.empty(), "an exec source without a tool",
                  text);
            if (!s.tool->input_schema_json.empty())
                check_json_object(s.tool->input_schema_json,
                                  "an exec tool's input_schema is not a JSON object");
            if (s.tool->timeout_ms)
                check(*s.tool->timeout_ms >= 1 && *s.tool->timeout_ms <= cfg::max_call_timeout_ms,
                      "an exec tool timeout out of range", text);
        } else {
            check(!s.tool.has_value(), "a host source with a tool", text);
        }
    }
    std::set<std::string> hook_names;
    for (const auto& h : c.hooks) {
        check(!h.name.empty() && hook_names.insert(h.name).second, "empty or duplicate hook name",
              text);
        check(!h.phase.empty(), "a hook without a phase", text);
        if (h.kind == cfg::hook_kind::filter)
            check(h.phase == "before_execution" || h.phase == "after_execution",
                  "a filter hook at an observe-only phase", text);
        check_command(h.command, text);
        check(h.cwd.is_absolute(), "a hook cwd that is not absolute", text);
        check(h.timeout_ms >= 1 && h.timeout_ms <= cfg::max_grace_ms, "a hook timeout out of range",
              text);
        for (const auto& glob : h.tools)
            check(!glob.empty(), "an empty hook tool glob", text);
    }
    for (const auto& rule : c.permissions.rules)
        check(!rule.tool.empty(), "a permission rule without a tool", text);
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    setenv("HOME", fake_home, 1);
    unsetenv("MEITH_HOME");
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    cfg::load_result r;
    try {
        r = cfg::parse_config(text, "fuzz.toml", fake_dir);
    } catch (...) {
        check(false, "parse_config threw", text);
    }
    check(r.value.has_value() != r.error.has_value(), "not exactly one of value / error", text);
    if (r.error) {
        check(r.error->where.rfind("fuzz.toml", 0) == 0, "an error that does not name the file",
              r.error->to_string());
        check(!r.error->message.empty(), "an empty error message", text);
        return 0;
    }
    check(!r.value->source_file.has_value(), "parse_config set source_file", text);
    check_value(*r.value, text);
    return 0;
}
