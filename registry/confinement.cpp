#include "registry/confinement.hpp"

#include "protocol/json_writer.hpp"
#include "registry/tool_table.hpp"

#include <cerrno>
#include <cstdlib>
#include <mutex>

#include <simdjson.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

namespace meith::registry {

namespace fs = std::filesystem;
using permissions::capability;
using permissions::capability_set;
using protocol::append_json_string;

namespace {

constexpr capability_set bit(capability c) {
    return static_cast<capability_set>(1u << static_cast<unsigned>(c));
}

/// The child's temporary folder: <tmp>/meith-<uid>/<name>, 0700, ours (not a symlink).
std::optional<fs::path> private_tmp(const std::string& name) {
    const fs::path base = fs::temp_directory_path() / ("meith-" + std::to_string(::geteuid()));
    for (const fs::path& dir : {base, base / name}) {
        ::mkdir(dir.c_str(), 0700);
        struct stat st {};
        if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::geteuid() ||
            (st.st_mode & 077) != 0)
            return std::nullopt;
    }
    return base / name;
}

std::optional<fs::path> root_of(const std::string& config_json) {
    simdjson::dom::parser parser;
    std::string_view root;
    if (parser.parse(config_json).get_object()["root"].get_string().get(root) ==
            simdjson::SUCCESS &&
        !root.empty())
        return fs::path(root);
    return std::nullopt;
}

} // namespace

capability_set union_of(const std::vector<std::vector<std::string>>& tool_caps) {
    capability_set u = 0;
    for (const auto& caps : tool_caps)
        u |= permissions::capability_set_from(caps);
    return u;
}

capability_set declared_ahead(const config::source_config& cfg) {
    capability_set u = 0;
    for (const auto& [tool, caps] : cfg.capabilities)
        u |= permissions::capability_set_from(caps);
    return u ? u : bit(capability::read_only);
}

confinement confine(const std::string& name, config::sandbox_mode mode,
                    const config::sandbox_paths_config& paths, capability_set capabilities,
                    const std::vector<std::string>& argv, const fs::path& cwd,
                    const std::string& config_json) {
    static std::once_flag logged;
    const auto& kernel = sandbox::detect();
    std::call_once(logged, [&] {
        if (kernel.landlock_abi > 0 && kernel.seccomp)
            spdlog::info("tool sandbox: {}", sandbox::describe(kernel));
        else
            spdlog::warn("tool sandbox: {}; sources with sandbox = \"require\" will not start",
                         sandbox::describe(kernel));
    });
    confinement c;
    c.capabilities = capabilities;
    std::string& m = c.status_members;
    m = R"("mode":)";
    m += mode == config::sandbox_mode::off       ? R"("off")"
         : mode == config::sandbox_mode::require ? R"("require")"
                                                 : R"("enforce")";
    m += R"(,"capabilities":)";
    append_capabilities(m, capabilities);
    const auto unconfined = [&](std::string_view why) {
        m += R"(,"fs":"none","net":"none","exec":"none","unconfined":)";
        append_json_string(m, why);
    };
    if (mode == config::sandbox_mode::off) {
        unconfined("sandbox = \"off\"");
        return c;
    }
    if ((capabilities & bit(capability::unknown)) != 0) {
        unconfined("a tool has unknown capabilities");
        return c;
    }
    sandbox::request r;
    r.capabilities = capabilities;
    const char* path_env = std::getenv("PATH");
    auto program =
        argv.empty() ? std::nullopt : sandbox::resolve_program(argv[0], path_env ? path_env : "");
    if (!program) {
        // Cannot start anyway: spawning reports it.
        unconfined("the program was not found");
        return c;
    }
    r.program = *program;
    r.cwd = cwd;
    r.root = root_of(config_json);
    if (r.root && r.root->is_relative())
        r.root = (cwd / *r.root).lexically_normal(); // as the host sees it
    auto tmp = private_tmp(name);
    if (!tmp) {
        unconfined("no private temporary folder");
        if (mode == config::sandbox_mode::require)
            c.refusal = "sandbox = \"require\": cannot make a private temporary folder";
        return c;
    }
    r.tmp_dir = *tmp;
    c.tmpdir_env = "TMPDIR=" + tmp->string();
    r.extra.read = paths.read;
    r.extra.write = paths.write;
    r.extra.exec = paths.exec;
    try {
        c.plan = sandbox::prepare(r, kernel);
    } catch (const std::exception& e) {
        unconfined(e.what());
        if (mode == config::sandbox_mode::require) c.refusal = e.what();
        return c;
    }
    m += R"(,"fs":)";
    append_json_string(m, c.plan->fs);
    m += R"(,"net":)";
    append_json_string(m, c.plan->net);
    m += R"(,"exec":)";
    append_json_string(m, c.plan->exec);
    if (!c.plan->complete && mode == config::sandbox_mode::require)
        c.refusal = "sandbox = \"require\", but this kernel offers " + sandbox::describe(kernel);
    return c;
}

} // namespace meith::registry
