// init: `meith init` writes HOME/meithd.toml, a working config with the example tools named by
// absolute path, so that it works wherever meithd is started from (auto-start, the user
// service) and copying examples/meithd.toml — whose paths are relative to examples/ — is never
// needed (docs/configuration.md, "meith init").
#include "cli/commands.hpp"

#include "cli/discovery.hpp"
#include "cli/errors.hpp"
#include "cli/process.hpp"

#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include <fmt/core.h>
#include <sys/stat.h>

namespace meith::cli {

namespace fs = std::filesystem;

namespace {

/// A TOML basic string: quotes and backslashes escaped (paths may hold either).
std::string toml_str(const std::string& s) {
    std::string out = "\"";
    for (char c : s) {
        if (c == '"' || c == '\\') out += '\\';
        out += c;
    }
    return out + "\"";
}

/// The examples folder this meith came with: a source tree's examples/ (meith in build*/bin),
/// else the installed share/doc/meith/examples. nullopt when neither has the example host.
std::optional<fs::path> find_examples() {
    std::error_code ec;
    const fs::path self = fs::read_symlink("/proc/self/exe", ec);
    if (ec) return std::nullopt;
    const fs::path bin = self.parent_path();
    for (const fs::path& candidate : {bin.parent_path().parent_path() / "examples",
                                      bin.parent_path() / "share" / "doc" / "meith" / "examples"}) {
        if (fs::exists(candidate / "node-host" / "host.mjs", ec))
            return fs::weakly_canonical(candidate, ec);
    }
    return std::nullopt;
}

/// True when `inner` is `outer` or below it.
bool holds(const fs::path& outer, const fs::path& inner) {
    auto o = outer.begin(), i = inner.begin();
    for (; o != outer.end(); ++o, ++i)
        if (i == inner.end() || *o != *i) return false;
    return true;
}

std::string config_text(const fs::path& ex, const fs::path& root) {
    const auto p = [&](const fs::path& rel) { return toml_str((ex / rel).string()); };
    std::string out = fmt::format(
        "# Written by `meith init` (meith {}). The example tools of {}, by absolute path;\n"
        "# docs/configuration.md explains every key. The file tools read and write under\n"
        "# {}.\n\n",
        MEITH_VERSION, ex.string(), root.string());
    out += fmt::format("[[sources]]\n"
                       "name = \"files\"\n"
                       "kind = \"host\"\n"
                       "command = [\"node\", {}]\n"
                       "config = {{ root = {} }}\n\n",
                       p("node-host/host.mjs"), toml_str(root.string()));
    out += fmt::format("[[sources]]\n"
                       "name = \"word-count\"\n"
                       "kind = \"exec\"\n"
                       "mode = \"oneshot\"\n"
                       "command = [\"node\", {}]\n"
                       "tool.name = \"word_count\"\n"
                       "tool.description = \"Count the words, lines and characters (code points) "
                       "of a text.\"\n"
                       "tool.capabilities = [\"read-only\"]\n"
                       "tool.input_schema.type = \"object\"\n"
                       "tool.input_schema.properties.text = {{ type = \"string\" }}\n"
                       "tool.input_schema.required = [\"text\"]\n\n",
                       p("exec-tools/word_count.mjs"));
    out += fmt::format(
        "[[sources]]\n"
        "name = \"kv\"\n"
        "kind = \"exec\"\n"
        "mode = \"server\"\n"
        "command = [\"node\", {}]\n"
        "tool.name = \"kv\"\n"
        "tool.description = \"In-memory key-value store: op get/set/delete/list; lost when meithd "
        "stops.\"\n"
        "tool.capabilities = [\"read-only\"]\n"
        "tool.input_schema.type = \"object\"\n"
        "tool.input_schema.required = [\"op\"]\n"
        "tool.input_schema.properties.op = {{ type = \"string\", enum = [\"get\", \"set\", "
        "\"delete\", \"list\"] }}\n"
        "tool.input_schema.properties.key = {{ type = \"string\", minLength = 1 }}\n"
        "tool.input_schema.properties.value = {{}}\n\n",
        p("exec-tools/kv_server.mjs"));
    std::error_code ec;
    const fs::path mcp = ex.parent_path() / "tests" / "mcp" / "node_modules" /
                         "@modelcontextprotocol" / "server-filesystem" / "dist" / "index.js";
    if (fs::exists(mcp, ec))
        out += fmt::format("# The reference MCP filesystem server, confined to the same folder.\n"
                           "[[sources]]\n"
                           "name = \"mcp-files\"\n"
                           "kind = \"mcp\"\n"
                           "command = [\"node\", {}, {}]\n"
                           "prefix = \"mcp_\"\n"
                           "trust_annotations = true\n\n",
                           toml_str(mcp.string()), toml_str(root.string()));
    const fs::path sdk = ex.parent_path() / "sdk" / "python" / "src";
    if (fs::exists(sdk / "meith_tools", ec) && fs::exists(ex / "python-tools", ec))
        out += fmt::format("# A Python tool host on meith's SDK. If python3 is a wrapper script "
                           "(a pyenv shim),\n# name the real interpreter here.\n"
                           "[[sources]]\n"
                           "name = \"python-tools\"\n"
                           "kind = \"host\"\n"
                           "command = [\"python3\", \"-m\", \"meith_tools\", "
                           "\"echo_tool:EchoTool\"]\n"
                           "cwd = {}\n"
                           "env = {{ PYTHONPATH = {} }}\n"
                           "prefix = \"py_\"\n\n",
                           p("python-tools"), toml_str(sdk.string()));
    out += "[permissions.callers.cli]\n"
           "allow = [\"read-only\", \"accesses-network\", \"writes-files\"]\n"
           "deny = [\"destructive\"]\n\n"
           "[permissions.callers.plugin]\n"
           "allow = [\"read-only\", \"accesses-network\"]\n"
           "ask = [\"writes-files\"]      # held for `meith approve`\n\n"
           "[tools]\n"
           "default_timeout_ms = 30000\n";
    return out;
}

} // namespace

int run_init(const options& opts) {
    const fs::path home = resolve_home(opts.home);
    const fs::path file = home / "meithd.toml";
    std::error_code ec;
    if (fs::exists(file, ec) && !opts.force)
        throw cli_error(exit_error, fmt::format("{} exists; --force replaces it (keeping the old "
                                                "one as meithd.toml.bak)",
                                                display_path(file)));
    const auto examples = find_examples();
    if (!examples)
        throw cli_error(exit_error, "cannot find the example tools next to this meith (a source "
                                    "tree's examples/ or share/doc/meith/examples)");
    const fs::path root = fs::weakly_canonical(fs::current_path(), ec);
    const fs::path home_abs = fs::weakly_canonical(fs::absolute(home), ec);
    if (holds(root, home_abs))
        throw cli_error(exit_error,
                        fmt::format("the file tools would get {} as their folder, which holds the "
                                    "meith home {} (tools may never write there); run "
                                    "`meith init` in a project folder",
                                    display_path(root), display_path(home_abs)));
    fs::create_directories(home, ec);
    ::chmod(home.c_str(), 0700);
    if (fs::exists(file, ec)) fs::rename(file, home / "meithd.toml.bak", ec);
    const fs::path tmp = home / "meithd.toml.tmp";
    {
        std::ofstream out(tmp, std::ios::trunc);
        out << config_text(*examples, root);
        if (!out.flush())
            throw cli_error(exit_error, fmt::format("cannot write {}", display_path(tmp)));
    }
    ::chmod(tmp.c_str(), 0600);
    fs::rename(tmp, file, ec);
    if (ec)
        throw cli_error(exit_error,
                        fmt::format("cannot write {}: {}", display_path(file), ec.message()));
    fmt::print("wrote {}: the example tools of {}, file tools confined to {}\n", display_path(file),
               display_path(*examples), display_path(root));
    fmt::print("start meithd with it: meithd{} (or any meith command starts it), then: meith "
               "tools\n",
               opts.home ? fmt::format(" --home {}", opts.home->string()) : std::string());
    fmt::print("a meithd already running keeps its config until: meith reload\n");
    return exit_ok;
}

} // namespace meith::cli
