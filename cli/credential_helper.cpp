// credential_helper: run_login and run_secret_* of the command table (cli/credential_helper.hpp).
#include "cli/credential_helper.hpp"
#include "cli/commands.hpp"
#include "cli/errors.hpp"
#include "platform/self.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <fmt/core.h>
#include <sys/stat.h>
#include <unistd.h>

namespace meith::cli {

namespace {

namespace fs = std::filesystem;

/// Set in meith-credentials only.
credential_commands installed{};

bool executable_file(const fs::path& p) {
    struct stat st {};
    return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(p.c_str(), X_OK) == 0;
}

/// Replaces this process with meith-credentials given `opts`' command line; returns only by
/// throwing.
[[noreturn]] void exec_helper(const options& opts) {
    const fs::path helper = credential_helper_path();
    if (helper.empty())
        throw cli_error(
            exit_error,
            fmt::format(
                "meith-credentials (which runs `meith {}`) is not installed beside meith or in "
                "../libexec/meith: reinstall meith, or set MEITH_CREDENTIALS to its path",
                opts.words.empty() ? std::string("login") : opts.words[0]));
    std::vector<char*> argv;
    std::string self = helper.string();
    argv.push_back(self.data());
    std::vector<std::string> args = opts.args;
    for (std::string& a : args)
        argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(self.c_str(), argv.data());
    throw cli_error(exit_error, fmt::format("cannot run {}: {}", self, std::strerror(errno)));
}

} // namespace

void use_credential_commands(const credential_commands& commands) {
    installed = commands;
}

fs::path credential_helper_path() {
    if (const char* p = std::getenv("MEITH_CREDENTIALS"); p != nullptr && *p != '\0')
        return executable_file(p) ? fs::path(p) : fs::path();
    return platform::installed_program("meith-credentials");
}

int run_login(const options& opts) {
    if (installed.login == nullptr) exec_helper(opts);
    return installed.login(opts);
}

int run_secret_set(const options& opts) {
    if (installed.secret_set == nullptr) exec_helper(opts);
    return installed.secret_set(opts);
}

int run_secret_list(const options& opts) {
    if (installed.secret_list == nullptr) exec_helper(opts);
    return installed.secret_list(opts);
}

int run_secret_rm(const options& opts) {
    if (installed.secret_rm == nullptr) exec_helper(opts);
    return installed.secret_rm(opts);
}

int run_import(const options& opts) {
    if (installed.import_servers == nullptr) exec_helper(opts);
    return installed.import_servers(opts);
}

int run_source_update(const options& opts) {
    if (installed.update_source == nullptr) exec_helper(opts);
    return installed.update_source(opts);
}

int run_source_learn(const options& opts) {
    if (installed.learn_source == nullptr) exec_helper(opts);
    return installed.learn_source(opts);
}

} // namespace meith::cli
