// append_floor: what appending audit lines costs the kernel alone, with nothing else.
//
// Writes --lines lines of --line-bytes bytes (newline included) to DIR/floor.jsonl with one
// write(2) of --batch lines on an O_APPEND descriptor, rotating like meithd does (at
// --max-bytes, keeping --keep files: the oldest deleted, the rest renamed up), and prints one
// JSON line with the CPU time per line (user + system of this process). It is the floor under
// any audit trail that keeps meithd's line format and the rule "in the file before the reply":
// bench/run puts it beside scenario (e). Written for the benchmark only; no JSON library.
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

double cpu_seconds() {
    rusage ru{};
    ::getrusage(RUSAGE_SELF, &ru);
    return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
           static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

[[noreturn]] void die(const char* what) {
    std::fprintf(stderr, "append_floor: %s: %s\n", what, std::strerror(errno));
    std::exit(1);
}

} // namespace

int main(int argc, char** argv) {
    std::string dir = "/tmp";
    long line_bytes = 512, batch = 16, lines = 2'000'000, max_bytes = 64l << 20, keep = 5;
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string k = argv[i];
        const char* v = argv[i + 1];
        if (k == "--dir")
            dir = v;
        else if (k == "--line-bytes")
            line_bytes = std::atol(v);
        else if (k == "--batch")
            batch = std::atol(v);
        else if (k == "--lines")
            lines = std::atol(v);
        else if (k == "--max-bytes")
            max_bytes = std::atol(v);
        else if (k == "--keep")
            keep = std::atol(v);
        else {
            std::fprintf(stderr, "append_floor: unknown option %s\n", k.c_str());
            return 2;
        }
    }
    if (line_bytes < 2 || batch < 1 || lines < batch || keep < 1) {
        std::fprintf(stderr, "append_floor: bad arguments\n");
        return 2;
    }
    std::string line(static_cast<std::size_t>(line_bytes - 1), 'x');
    line += '\n';
    std::string buf;
    for (long i = 0; i < batch; ++i)
        buf += line;
    const std::string base = dir + "/floor.jsonl";
    auto numbered = [&](long i) { return base + "." + std::to_string(i); };
    auto cleanup = [&] {
        ::unlink(base.c_str());
        for (long i = 1; i <= keep; ++i)
            ::unlink(numbered(i).c_str());
    };
    cleanup();
    int fd = ::open(base.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) die("open");

    const double cpu0 = cpu_seconds();
    const auto t0 = std::chrono::steady_clock::now();
    long written = 0, size = 0, rotations = 0;
    while (written < lines) {
        if (size > 0 && size + static_cast<long>(buf.size()) > max_bytes) {
            ::unlink(numbered(keep).c_str());
            for (long i = keep - 1; i >= 1; --i)
                ::rename(numbered(i).c_str(), numbered(i + 1).c_str());
            if (::rename(base.c_str(), numbered(1).c_str()) != 0) die("rename");
            ::close(fd);
            fd = ::open(base.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
            if (fd < 0) die("reopen");
            size = 0;
            ++rotations;
        }
        if (::write(fd, buf.data(), buf.size()) != static_cast<ssize_t>(buf.size())) die("write");
        written += batch;
        size += static_cast<long>(buf.size());
    }
    const double cpu = cpu_seconds() - cpu0;
    const double wall =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ::close(fd);
    cleanup();
    std::printf("{\"mode\":\"append_floor\",\"line_bytes\":%ld,\"batch\":%ld,\"lines\":%ld,"
                "\"rotations\":%ld,\"cpu_us_per_line\":%.4f,\"wall_us_per_line\":%.4f}\n",
                line_bytes, batch, written, rotations, cpu / static_cast<double>(written) * 1e6,
                wall / static_cast<double>(written) * 1e6);
    return 0;
}
