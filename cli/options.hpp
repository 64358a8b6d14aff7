// options: the command line of `meith`. Global and per-command options may come before or
// after the subcommand; main checks the per-command ones against its command table.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace meith::cli {

struct options {
    std::optional<std::filesystem::path> socket; ///< --socket PATH
    std::optional<std::filesystem::path> home;   ///< --home DIR
    std::string caller = "cli";                  ///< --caller cli|plugin
    bool help = false;                           ///< -h, --help
    bool version = false;                        ///< --version
    bool json = false;                           ///< --json (tools, call, sources)
    std::optional<std::uint64_t> timeout_ms;     ///< --timeout-ms N (call, sources restart)
    std::vector<std::string> words;              ///< positionals; words[0] is the subcommand
};

/// Parses the arguments after argv[0]. Accepts `--opt VALUE` and `--opt=VALUE`; everything
/// after `--` is positional. Throws usage_error on unknown options or bad values.
options parse_options(const std::vector<std::string>& args);

} // namespace meith::cli
