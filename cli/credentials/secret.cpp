// `meith secret set|list|rm`: the user's secrets for sources (docs/security.md "Secrets").
//
// A value is read from the terminal with echo off (typed twice), or from standard input when
// it is not a terminal, never from the command line, where `ps` and the shell's history would
// keep it. The store is written directly (meithd need not run); a source gets a new value at
// its next start.
#include "cli/credentials/credentials.hpp"
#include "cli/discovery.hpp"
#include "cli/errors.hpp"
#include "secrets/secret_service.hpp"
#include "secrets/store.hpp"

#include <algorithm>
#include <set>

#include <cerrno>
#include <cstdio>

#include <fcntl.h>
#include <fmt/core.h>
#include <termios.h>
#include <unistd.h>

namespace meith::cli::credentials {

namespace {

constexpr std::size_t max_secret_bytes = 64 * 1024;

/// One line typed at the terminal `fd` with echo off, after `prompt`.
std::string read_hidden(int fd, std::string_view prompt) {
    termios saved{};
    const bool tty = ::tcgetattr(fd, &saved) == 0;
    if (tty) {
        termios quiet = saved;
        quiet.c_lflag &= ~static_cast<tcflag_t>(ECHO);
        quiet.c_lflag |= ECHONL;
        ::tcsetattr(fd, TCSAFLUSH, &quiet);
    }
    (void)!::write(fd, prompt.data(), prompt.size());
    std::string line;
    char c = 0;
    for (;;) {
        const ssize_t n = ::read(fd, &c, 1);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0 || c == '\n') break;
        if (line.size() < max_secret_bytes) line += c;
    }
    if (tty) ::tcsetattr(fd, TCSAFLUSH, &saved);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    return line;
}

std::string read_value(const std::string& name) {
    if (::isatty(STDIN_FILENO)) {
        const int tty = STDIN_FILENO;
        std::string first = read_hidden(tty, fmt::format("Value of secret {} (not shown): ", name));
        if (first.empty()) throw cli_error(exit_error, "no value typed: nothing saved");
        std::string again = read_hidden(tty, "The same again: ");
        if (again != first) throw cli_error(exit_error, "the two values differ: nothing saved");
        return first;
    }
    std::string value;
    char buf[4096];
    for (;;) {
        const ssize_t n = ::read(STDIN_FILENO, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        value.append(buf, static_cast<std::size_t>(n));
        if (value.size() > max_secret_bytes)
            throw cli_error(exit_error, "the value is over 64 KiB: nothing saved");
    }
    if (!value.empty() && value.back() == '\n') value.pop_back();
    if (!value.empty() && value.back() == '\r') value.pop_back();
    if (value.empty())
        throw cli_error(exit_error, "standard input held no value: nothing saved (type it at a "
                                    "terminal, or pipe it in: printf %s \"$TOKEN\" | meith secret "
                                    "set NAME)");
    return value;
}

std::string checked_name(const options& opts) {
    const std::string& name = opts.words.at(2);
    if (!secrets::valid_name(name))
        throw usage_error(fmt::format("'{}' is not a secret name: 1-64 letters, digits, '_', "
                                      "'-' or '.'",
                                      name));
    return name;
}

secrets::secret_map load_or_fail(const std::filesystem::path& home) {
    std::string why;
    auto all = secrets::load(home, why);
    if (!all) throw cli_error(exit_error, why);
    return std::move(*all);
}

} // namespace

std::string store_secret(const std::filesystem::path& home, const std::string& name,
                         const std::string& value) {
    auto all = load_or_fail(home);
    std::string why;
    std::string where;
    if (secrets::secret_service::available()) {
        // The desktop's keyring when one runs; a value of the same name in meith's own store
        // goes, so that one name has one value.
        if (!secrets::secret_service::set(home, name, value, why)) throw cli_error(exit_error, why);
        if (all.erase(name) != 0 && !secrets::save(home, all, why))
            throw cli_error(exit_error, why);
        where = "the desktop's Secret Service (its default keyring)";
    } else {
        all[name] = value;
        if (!secrets::save(home, all, why)) throw cli_error(exit_error, why);
        where = fmt::format("{} (sealed with the key {})", secrets::store_path(home).string(),
                            secrets::key_path().string());
    }
    return where;
}

int secret_set(const options& opts) {
    const std::string name = checked_name(opts);
    const auto home = resolve_home(opts.home);
    load_or_fail(home); // a store the key does not open: said before a value is typed
    const std::string value = read_value(name);
    const std::string where = store_secret(home, name, value);
    fmt::print("secret '{}' saved in {}\n"
               "A source names it as \"${{secret:{}}}\" in its env or headers and gets it at its "
               "next start: meith sources restart SOURCE\n",
               name, where, name);
    return exit_ok;
}

int secret_list(const options& opts) {
    const auto home = resolve_home(opts.home);
    std::set<std::string> names; // names only: a value is never printed
    for (const auto& [name, value] : load_or_fail(home))
        names.insert(name);
    if (secrets::secret_service::available()) {
        std::string why;
        for (auto& n : secrets::secret_service::names(home, why))
            names.insert(std::move(n));
        if (!why.empty()) throw cli_error(exit_error, why);
    }
    for (const auto& n : names)
        fmt::print("{}\n", n);
    return exit_ok;
}

int secret_rm(const options& opts) {
    const std::string name = checked_name(opts);
    const auto home = resolve_home(opts.home);
    auto all = load_or_fail(home);
    std::string why;
    bool removed = false;
    if (secrets::secret_service::available()) {
        removed = secrets::secret_service::remove(home, name, why);
        if (!why.empty()) throw cli_error(exit_error, why);
    }
    if (all.erase(name) != 0) {
        if (!secrets::save(home, all, why)) throw cli_error(exit_error, why);
        removed = true;
    }
    if (!removed)
        throw cli_error(exit_error, fmt::format("no secret named '{}' (meith secret list)", name));
    fmt::print("secret '{}' removed; a source that names it fails at its next start\n", name);
    return exit_ok;
}

} // namespace meith::cli::credentials
