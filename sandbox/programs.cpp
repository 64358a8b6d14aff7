// programs: the programs a confined child executes (init program, PATH lookup, interpreters).
#include "platform/self.hpp"
#include "sandbox/sandbox.hpp"

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string_view>

#include <elf.h>
#include <sys/stat.h>
#include <unistd.h>

namespace meith::sandbox {

namespace fs = std::filesystem;

namespace {

bool executable_file(const fs::path& p) {
    struct stat st {};
    return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(p.c_str(), X_OK) == 0;
}

} // namespace

const fs::path& init_program() {
    static const fs::path found = [] {
        if (const char* p = std::getenv("MEITH_SANDBOX_INIT"); p && *p) return fs::path(p);
        return platform::installed_program("meith-sandbox-init");
    }();
    return found;
}

std::string program_search_path() {
    const char* p = std::getenv("PATH");
    return p != nullptr && *p != '\0' ? std::string(p) : std::string("/usr/bin:/bin");
}

std::optional<fs::path> resolve_program(const std::string& program, const std::string& path_env,
                                        const fs::path& base_dir) {
    if (program.empty()) return std::nullopt;
    if (program.find('/') != std::string::npos) {
        fs::path p = program;
        if (p.is_relative()) p = base_dir.empty() ? fs::absolute(p) : base_dir / p;
        p = p.lexically_normal();
        return executable_file(p) ? std::optional(p) : std::nullopt;
    }
    std::size_t start = 0;
    while (start <= path_env.size()) {
        const std::size_t colon = path_env.find(':', start);
        const std::string_view dir = std::string_view(path_env).substr(
            start, colon == std::string::npos ? std::string::npos : colon - start);
        // An empty entry is the current folder (as execvp reads PATH).
        const fs::path p = fs::absolute((dir.empty() ? fs::path(".") : fs::path(dir)) / program);
        if (executable_file(p)) return p;
        if (colon == std::string::npos) break;
        start = colon + 1;
    }
    return std::nullopt;
}

namespace {

std::vector<fs::path> interpreters_at_depth(const fs::path& program, const std::string& path_env,
                                            int depth);

} // namespace

std::vector<fs::path> interpreters_of(const fs::path& program, const std::string& path_env) {
    return interpreters_at_depth(program, path_env, 0);
}

namespace {

std::vector<fs::path> interpreters_at_depth(const fs::path& program, const std::string& path_env,
                                            int depth) {
    std::vector<fs::path> out;
    // The kernel follows at most 4 levels of interpreters (binfmt_script); so do we, and a
    // loop of #! lines cannot recurse without end.
    if (depth > 4) return out;
    std::ifstream in(program, std::ios::binary);
    char head[4096] = {};
    in.read(head, sizeof head);
    const auto got = static_cast<std::size_t>(in.gcount());
    if (got > 2 && head[0] == '#' && head[1] == '!') {
        std::string line(head + 2, got - 2);
        line = line.substr(0, line.find('\n'));
        const auto first = line.find_first_not_of(" \t");
        if (first == std::string::npos) return out;
        const auto end = line.find_first_of(" \t", first);
        const fs::path interp = line.substr(first, end == std::string::npos ? end : end - first);
        out.push_back(interp);
        for (const auto& i : interpreters_at_depth(interp, path_env, depth + 1))
            out.push_back(i);
        if (interp.filename() == "env" && end != std::string::npos) {
            // #!/usr/bin/env node: env executes the named program too.
            const auto name_at = line.find_first_not_of(" \t", end);
            if (name_at != std::string::npos) {
                const auto name_end = line.find_first_of(" \t", name_at);
                if (auto p = resolve_program(line.substr(name_at, name_end == std::string::npos
                                                                      ? name_end
                                                                      : name_end - name_at),
                                             path_env)) {
                    out.push_back(*p);
                    for (const auto& i : interpreters_at_depth(*p, path_env, depth + 1))
                        out.push_back(i);
                }
            }
        }
        return out;
    }
    if (got >= sizeof(Elf64_Ehdr) && std::memcmp(head, ELFMAG, SELFMAG) == 0 &&
        head[EI_CLASS] == ELFCLASS64) {
        Elf64_Ehdr eh;
        std::memcpy(&eh, head, sizeof eh);
        for (unsigned i = 0; i < eh.e_phnum; ++i) {
            Elf64_Phdr ph;
            in.clear();
            in.seekg(static_cast<std::streamoff>(eh.e_phoff + i * eh.e_phentsize));
            if (!in.read(reinterpret_cast<char*>(&ph), sizeof ph)) break;
            if (ph.p_type != PT_INTERP || ph.p_filesz == 0 || ph.p_filesz > 4096) continue;
            std::string interp(ph.p_filesz, '\0');
            in.seekg(static_cast<std::streamoff>(ph.p_offset));
            if (!in.read(interp.data(), static_cast<std::streamsize>(interp.size()))) break;
            interp.resize(std::strlen(interp.c_str()));
            out.emplace_back(interp);
        }
    }
    return out;
}

} // namespace

} // namespace meith::sandbox
