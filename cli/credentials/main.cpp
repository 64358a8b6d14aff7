// meith-credentials: `meith login`, `meith secret …`, `meith import`, `meith sources update`
// and `meith sources learn`
// (cli/credentials/credentials.hpp). `meith` executes it with its own command line; it parses that
// line as `meith` does and runs the command here, with the libraries only these commands need.
#include "cli/credential_helper.hpp"
#include "cli/credentials/credentials.hpp"
#include "cli/entry.hpp"

int main(int argc, char** argv) {
    meith::cli::use_credential_commands(
        {meith::cli::credentials::login, meith::cli::credentials::secret_set,
         meith::cli::credentials::secret_list, meith::cli::credentials::secret_rm,
         meith::cli::credentials::import_servers, meith::cli::credentials::update_source,
         meith::cli::credentials::learn_source});
    return meith::cli::main_entry(argc, argv);
}
