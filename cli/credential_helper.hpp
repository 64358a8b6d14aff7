// credential_helper: how `meith login` and `meith secret …` reach meith-credentials
// (cli/credentials/credentials.hpp says why they run apart). In `meith`, the command table's
// run_login and run_secret_* execute the helper with the same command line; in the helper,
// main installs the real commands first and they run in place.
#pragma once

#include "cli/options.hpp"

#include <filesystem>

namespace meith::cli {

/// The commands meith-credentials runs in place.
struct credential_commands {
    int (*login)(const options&);
    int (*secret_set)(const options&);
    int (*secret_list)(const options&);
    int (*secret_rm)(const options&);
    int (*import_servers)(const options&); ///< `meith import`: it keeps the secrets it finds
    int (*update_source)(const options&);  ///< `meith sources update`: beside import
    int (*learn_source)(const options&);   ///< `meith sources learn`: it edits the config too
};

/// Called once by meith-credentials' main, before main_entry.
void use_credential_commands(const credential_commands& commands);

/// Where meith-credentials is: $MEITH_CREDENTIALS, else beside this executable, else in
/// ../libexec/meith or ../lib/meith from it (the .deb's layout, packaging/CMakeLists.txt).
/// Empty when none of them is an executable file.
std::filesystem::path credential_helper_path();

} // namespace meith::cli
