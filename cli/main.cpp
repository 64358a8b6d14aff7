// meith: the command-line client of meithd (cli/entry.hpp).
#include "cli/entry.hpp"

int main(int argc, char** argv) {
    return meith::cli::main_entry(argc, argv);
}
