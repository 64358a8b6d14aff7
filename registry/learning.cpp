// learning: `meith sources learn` in the registry (docs/protocol.md §15 "Learned profiles"):
// a source moved into the learning confinement and back, and its record summarised into the
// keys of its config entry (the CLI shows and writes them).
#include "registry/registry.hpp"

#include "config/paths.hpp"
#include "protocol/json_writer.hpp"
#include "sandbox/confinement.hpp"
#include "sandbox/learn.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <sstream>

#include <fcntl.h>
#include <unistd.h>

namespace meith::registry {

namespace fs = std::filesystem;

namespace {

/// What the summary starts from for `cfg`: its home, state folder, the tools' temporary
/// folders, its program with what running it takes, its profile.
sandbox::learn_context context_of(const config::source_config& cfg) {
    sandbox::learn_context ctx;
    if (const char* home = std::getenv("HOME")) ctx.home = home;
    ctx.state_dir = cfg.sandbox_paths.state_dir;
    ctx.tmp_root = sandbox::tools_tmp_root();
    ctx.profile = cfg.sandbox_paths.profile;
    const auto strings = [](const std::vector<fs::path>& paths) {
        std::vector<std::string> out;
        for (const auto& p : paths)
            out.push_back(p.string());
        return out;
    };
    for (const auto& root : {ctx.home, cfg.cwd}) {
        if (root.empty()) continue;
        for (const auto& rel : cfg.sandbox_paths.protect)
            ctx.protected_paths.push_back(root / rel);
        for (const auto& rel : sandbox::learning_protected_paths())
            ctx.protected_paths.push_back(root / rel);
    }
    ctx.read = strings(cfg.sandbox_paths.read);
    ctx.write = strings(cfg.sandbox_paths.write);
    ctx.exec = strings(cfg.sandbox_paths.exec);
    ctx.sockets = strings(cfg.sandbox_paths.sockets);
    if (const auto& net = cfg.sandbox_paths.network) {
        ctx.network_allow = net->allow;
        ctx.network_deny = net->deny;
        ctx.allow_private = net->allow_private;
        ctx.ask = net->ask;
    }
    const std::string path = sandbox::program_search_path();
    if (!cfg.command.empty())
        if (auto program = sandbox::resolve_program(cfg.command[0], path, cfg.cwd)) {
            ctx.programs.push_back(*program);
            for (auto& i : sandbox::interpreters_of(*program, path))
                ctx.programs.push_back(std::move(i));
        }
    return ctx;
}

std::string read_bounded(const fs::path& file, std::size_t max_bytes) {
    std::ifstream in(file, std::ios::binary);
    std::string text(max_bytes, '\0');
    in.read(text.data(), static_cast<std::streamsize>(max_bytes));
    text.resize(static_cast<std::size_t>(in.gcount()));
    return text;
}

} // namespace

// Stays whole (~75 lines): start and stop share the lookups and checks, in this order.
registry::learn_outcome registry::learn_source(std::string_view name, bool stop) {
    learn_outcome out;
    const auto src_it = std::find_if(sources_.begin(), sources_.end(),
                                     [&](const auto& s) { return s->name() == name; });
    const auto cfg_it = std::find_if(cfg_.sources.begin(), cfg_.sources.end(),
                                     [&](const auto& s) { return s.name == name; });
    if (src_it == sources_.end() || cfg_it == cfg_.sources.end()) {
        out.error = fmt::format("no source named '{}'", name);
        return out;
    }
    const config::source_config& cfg = *cfg_it;
    const std::string source(name);
    if (!stop) {
        if (cfg.sandbox == config::sandbox_mode::off || !cfg.url.empty() ||
            sandbox::confinement_home().empty()) {
            out.error = fmt::format("'{}' {}: there is no sandbox of its process to learn", name,
                                    !cfg.url.empty() ? "is a remote server"
                                                     : "runs with sandbox = \"off\"");
            return out;
        }
        const fs::path dir = sandbox::confinement_home() / "learn";
        if (auto why = config::ensure_private_dir(dir, false)) {
            out.error = *why;
            return out;
        }
        const fs::path record = dir / (source + ".record");
        const int fd =
            ::open(record.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0) {
            out.error = fmt::format("cannot make {}: {}", record.string(), std::strerror(errno));
            return out;
        }
        ::close(fd);
        sandbox::start_learning(source, record);
        if (!(*src_it)->confine_again()) {
            sandbox::stop_learning(source);
            out.error = fmt::format("'{}' runs no process of its own to learn", name);
            return out;
        }
        tools_.invalidate();
        protocol::json_members m(out.members);
        m.string("name", name).string("record", record.string());
        std::string fields;
        protocol::json_members(fields).string("source", name);
        audit_.event("source_learning_started", fields);
        return out;
    }
    const auto record = sandbox::learning_record(source);
    if (!record) {
        out.error =
            fmt::format("'{}' is not learning; start with `meith sources learn {}`", name, name);
        return out;
    }
    const auto learned = sandbox::summarize(read_bounded(*record, 4 << 20), context_of(cfg));
    sandbox::stop_learning(source);
    (*src_it)->confine_again();
    tools_.invalidate();
    const auto keys = learned.toml_keys();
    protocol::json_members m(out.members);
    m.string("name", name);
    m.key("learned").append(learned.json());
    std::string& list = m.key("keys");
    list += '[';
    for (std::size_t i = 0; i < keys.size(); ++i) {
        list += i == 0 ? "[" : ",[";
        protocol::append_json_string(list, keys[i].first);
        list += ',';
        protocol::append_json_string(list, keys[i].second);
        list += ']';
    }
    list += ']';
    m.string("config", cfg_.source_file ? cfg_.source_file->string() : std::string());
    std::string fields;
    protocol::json_members(fields).string("source", name).number("facts", learned.lines);
    audit_.event("source_learning_stopped", fields);
    return out;
}

} // namespace meith::registry
