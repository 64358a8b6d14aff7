// credentials: the commands that keep credentials, `meith login` (OAuth 2.1, libcurl through
// remote/) and `meith secret set|list|rm` (OpenSSL and sd-bus through secrets/). They run in
// meith-credentials, a helper `meith` executes for them (cli/credential_helper.hpp), so that
// `meith` itself never loads those libraries: loading them was 6 of the 11 ms a `meith call`
// took from a shell (bench (l), issue 33). Each returns the exit status or throws cli_error,
// as the commands of cli/commands.hpp do.
#pragma once

#include "cli/options.hpp"

#include <filesystem>
#include <string>

namespace meith::cli::credentials {

/// `meith login SOURCE`: login.cpp (docs/protocol.md §18).
int login(const options& opts);
/// `meith secret set NAME`: secret.cpp (docs/security.md "Secrets").
int secret_set(const options& opts);
/// `meith secret list`.
int secret_list(const options& opts);
/// `meith secret rm NAME`.
int secret_rm(const options& opts);
/// `meith import PATH | --client NAME`: import.cpp (docs/bring-your-servers.md).
int import_servers(const options& opts);
/// `meith sources update NAME`: update.cpp (docs/bring-your-servers.md "Updating").
int update_source(const options& opts);
/// `meith sources learn NAME`: learn.cpp (docs/protocol.md §15 "Learned profiles").
int learn_source(const options& opts);

/// Keeps `value` as the secret `name` of `home`, where `meith secret set` would (the desktop's
/// Secret Service when one runs, else the home's sealed store); returns where, in words.
/// Throws cli_error when it cannot.
std::string store_secret(const std::filesystem::path& home, const std::string& name,
                         const std::string& value);

} // namespace meith::cli::credentials
