// changes: diffs, confirmation and captured output (cli/changes.hpp).
#include "cli/changes.hpp"

#include "cli/errors.hpp"

#include <cstdio>
#include <fstream>
#include <sstream>

#include <fmt/core.h>
#include <fmt/ranges.h>
#include <unistd.h>

namespace meith::cli {

std::optional<std::string> read_whole_file(const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    if (!in) return std::nullopt;
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

std::string capture_stdout(const std::vector<std::string>& argv, std::string& err) {
    std::string cmd;
    for (const auto& a : argv) {
        cmd += "'";
        for (char c : a)
            cmd += c == '\'' ? std::string("'\\''") : std::string(1, c);
        cmd += "' ";
    }
    cmd += "2>/dev/null";
    std::string out;
    if (FILE* p = ::popen(cmd.c_str(), "r")) {
        char buf[4096];
        std::size_t n;
        while ((n = std::fread(buf, 1, sizeof buf, p)) > 0)
            out.append(buf, n);
        const int status = ::pclose(p);
        if (status != 0) err = fmt::format("`{}` failed (status {})", fmt::join(argv, " "), status);
    } else {
        err = fmt::format("cannot run {}", argv.empty() ? std::string() : argv[0]);
    }
    return out;
}

std::string unified_diff(const std::string& before, const std::string& after,
                         const std::filesystem::path& file) {
    char a[] = "/tmp/meith-diff-a-XXXXXX";
    char b[] = "/tmp/meith-diff-b-XXXXXX";
    const int fa = ::mkstemp(a), fb = ::mkstemp(b);
    if (fa < 0 || fb < 0) return after;
    (void)!::write(fa, before.data(), before.size());
    (void)!::write(fb, after.data(), after.size());
    ::close(fa);
    ::close(fb);
    std::string err;
    const std::string out = capture_stdout(
        {"diff", "-u", "--label", file.string(), "--label", file.string(), a, b}, err);
    ::unlink(a);
    ::unlink(b);
    return out;
}

bool confirm(const std::string& question) {
    if (!::isatty(STDIN_FILENO)) return false;
    fmt::print("{} [y/N] ", question);
    std::fflush(stdout);
    std::string line;
    char c = 0;
    while (::read(STDIN_FILENO, &c, 1) == 1 && c != '\n')
        line += c;
    return line == "y" || line == "Y" || line == "yes";
}

bool change_approved(bool yes, const std::string& question) {
    if (yes || confirm(question)) return true;
    if (!::isatty(STDIN_FILENO))
        throw cli_error(exit_error, "not a terminal to ask at: give --yes to apply, or "
                                    "--dry-run to only print");
    fmt::print("nothing changed\n");
    return false;
}

} // namespace meith::cli
