// init: `meith init` writes HOME/meithd.toml, a working config with the example tools named by
// absolute path, so that it works wherever meithd is started from (auto-start, the user
// service) and copying examples/meithd.toml — whose paths are relative to examples/ — is never
// needed (docs/configuration.md, "meith init").
#include "cli/commands.hpp"
#include "platform/self.hpp"

#include "cli/discovery.hpp"
#include "cli/errors.hpp"
#include "cli/process.hpp"

#include <csignal>
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
    const fs::path self = platform::executable_path();
    if (self.empty()) return std::nullopt;
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

/// A script (starts with "#!"), not a program: a pyenv shim or an npx wrapper, which runs
/// further programs the tools' sandbox does not let it run.
bool is_script(const fs::path& program) {
    std::ifstream in(program, std::ios::binary);
    char head[2] = {};
    return in.read(head, 2) && head[0] == '#' && head[1] == '!';
}

/// The Python interpreter the example runs under: python3 from PATH when it is a program,
/// else (a wrapper script such as a pyenv shim, which exits 126 inside the sandbox)
/// /usr/bin/python3 when that is one; nullopt when there is none. `note` says what was chosen
/// when it is not plain python3.
std::optional<std::string> python_interpreter(std::string& note) {
    const auto found = which("python3");
    if (found && !is_script(*found)) return std::string("python3");
    if (found && fs::exists("/usr/bin/python3") && !is_script("/usr/bin/python3")) {
        note = fmt::format("python3 on PATH ({}) is a wrapper script (a pyenv shim?), which cannot "
                           "run its interpreter inside the tools' sandbox; the Python example "
                           "uses /usr/bin/python3",
                           display_path(*found));
        return std::string("/usr/bin/python3");
    }
    note = found ? fmt::format("python3 on PATH ({}) is a wrapper script and there is no "
                               "/usr/bin/python3: the Python example is left out",
                               display_path(*found))
                 : "no python3 on PATH: the Python example is left out";
    return std::nullopt;
}

/// The Node.js examples: the file tools' host (when its npm dependencies are there), the exec
/// tools, the MCP filesystem server of a source tree; `notes` says what is left out and why.
std::string node_examples(const fs::path& ex, const fs::path& root,
                          std::vector<std::string>& notes) {
    const auto p = [&](const fs::path& rel) { return toml_str((ex / rel).string()); };
    std::string out;
    std::error_code ec;
    const bool node = in_path("node");
    if (!node)
        notes.push_back("node is not on PATH: the Node.js examples (file tools, word_count, kv, "
                        "the MCP filesystem server) are left out; install Node.js and run "
                        "`meith init --force` again");
    const fs::path host_modules = ex / "node-host" / "node_modules";
    const bool host_deps = fs::exists(host_modules / "diff" / "package.json", ec) &&
                           fs::exists(host_modules / "meith" / "package.json", ec);
    if (node && !host_deps)
        notes.push_back(fmt::format("the example file tools are left out: {} lacks its npm "
                                    "dependencies (diff, meith); run `npm ci` there, then "
                                    "`meith init --force`",
                                    display_path(ex / "node-host")));
    if (node && host_deps) {
        out +=
            fmt::format("[[sources]]\n"
                        "name = \"files\"\n"
                        "kind = \"host\"\n"
                        "command = [\"node\", {}]\n"
                        "cwd = {}\n"
                        "config = {{ root = {} }}\n\n",
                        p("node-host/host.mjs"), toml_str(root.string()), toml_str(root.string()));
    }
    if (node) {
        out +=
            fmt::format("[[sources]]\n"
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
            "tool.description = \"In-memory key-value store: op get/set/delete/list; lost when "
            "meithd "
            "stops.\"\n"
            "tool.capabilities = [\"read-only\"]\n"
            "tool.input_schema.type = \"object\"\n"
            "tool.input_schema.required = [\"op\"]\n"
            "tool.input_schema.properties.op = {{ type = \"string\", enum = [\"get\", \"set\", "
            "\"delete\", \"list\"] }}\n"
            "tool.input_schema.properties.key = {{ type = \"string\", minLength = 1 }}\n"
            "tool.input_schema.properties.value = {{}}\n\n",
            p("exec-tools/kv_server.mjs"));
    }
    const fs::path mcp = ex.parent_path() / "tests" / "mcp" / "node_modules" /
                         "@modelcontextprotocol" / "server-filesystem" / "dist" / "index.js";
    if (node && fs::exists(mcp, ec))
        out +=
            fmt::format("# The reference MCP filesystem server, confined to the same folder.\n"
                        "[[sources]]\n"
                        "name = \"mcp-files\"\n"
                        "kind = \"mcp\"\n"
                        "command = [\"node\", {}, {}]\n"
                        "cwd = {}\n"
                        "prefix = \"mcp_\"\n"
                        "trust_annotations = true\n\n",
                        toml_str(mcp.string()), toml_str(root.string()), toml_str(root.string()));
    return out;
}

/// The Python example on the SDK, under an interpreter that runs in the sandbox.
std::string python_example(const fs::path& ex, std::vector<std::string>& notes) {
    const auto p = [&](const fs::path& rel) { return toml_str((ex / rel).string()); };
    std::string out;
    std::error_code ec;
    const fs::path sdk = ex.parent_path() / "sdk" / "python" / "src";
    if (fs::exists(sdk / "meith_tools", ec) && fs::exists(ex / "python-tools", ec)) {
        std::string note;
        const auto python = python_interpreter(note);
        if (!note.empty()) notes.push_back(note);
        if (python)
            out += fmt::format("# A Python tool host on meith's SDK.\n"
                               "[[sources]]\n"
                               "name = \"python-tools\"\n"
                               "kind = \"host\"\n"
                               "command = [{}, \"-m\", \"meith_tools\", "
                               "\"echo_tool:EchoTool\"]\n"
                               "cwd = {}\n"
                               "env = {{ PYTHONPATH = {} }}\n"
                               "prefix = \"py_\"\n\n",
                               toml_str(*python), p("python-tools"), toml_str(sdk.string()));
    }
    return out;
}

std::string config_text(const fs::path& ex, const fs::path& root, std::vector<std::string>& notes) {
    std::string out = fmt::format(
        "# Written by `meith init` (meith {}). The example tools of {}, by absolute path;\n"
        "# docs/configuration.md explains every key. The file tools read and write under\n"
        "# {}.\n\n",
        MEITH_VERSION, ex.string(), root.string());
    out += node_examples(ex, root, notes);
    out += python_example(ex, notes);
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
    std::vector<std::string> notes; // examples left out or changed, and why
    {
        std::ofstream out(tmp, std::ios::trunc);
        out << config_text(*examples, root, notes);
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
    for (const auto& note : notes)
        fmt::print("note: {}\n", note);
    const std::string home_flag =
        opts.home ? fmt::format(" --home {}", opts.home->string()) : std::string();
    fmt::print("start meithd with it: meithd{} (or any meith command starts it), then: meith "
               "tools{}\n",
               home_flag, home_flag);
    // A daemon already running: a reload applies the new file only if that is the file it
    // reads (one started with --config reads another).
    const auto where = locate_daemon(std::nullopt, opts.home);
    const bool running = where.pid && ::kill(static_cast<pid_t>(*where.pid), 0) == 0;
    if (running && where.config &&
        fs::weakly_canonical(*where.config, ec) != fs::weakly_canonical(file, ec))
        fmt::print("the running meithd (pid {}) reads {} (started with --config): `meith reload` "
                   "re-reads that file, not this one; stop it (kill {}) and the next meith "
                   "command starts one with {}\n",
                   *where.pid, display_path(*where.config), *where.pid, display_path(file));
    else if (running)
        fmt::print("the running meithd (pid {}) keeps its config until: meith reload{}\n",
                   *where.pid, home_flag);
    return exit_ok;
}

} // namespace meith::cli
