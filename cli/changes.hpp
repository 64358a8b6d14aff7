// changes: how `meith import` and `meith connect` show a change to a file before they make it
// (a unified diff), ask for it at a terminal, and run the programs whose output they read.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace meith::cli {

/// The whole of file `p`, byte for byte; nullopt when it cannot be read (or does not exist).
std::optional<std::string> read_whole_file(const std::filesystem::path& p);

/// Runs argv[0] (a shell-quoted command line, stderr discarded) and returns its stdout; `err`
/// says how it failed when it exits non-zero (the output is returned then too).
std::string capture_stdout(const std::vector<std::string>& argv, std::string& err);

/// A unified diff (diff(1) -u) of `before` and `after`, both labelled `file`; empty when equal.
std::string unified_diff(const std::string& before, const std::string& after,
                         const std::filesystem::path& file);

/// Asks `question` with " [y/N] " at the terminal on standard input; true on y or yes. False
/// without asking when standard input is not a terminal.
bool confirm(const std::string& question);

/// Whether to make a change that was just shown: at once with `yes` (--yes), else as the
/// person answers `question` at the terminal ("nothing changed" printed on no). Throws
/// cli_error naming --yes and --dry-run when there is no terminal to ask at.
bool change_approved(bool yes, const std::string& question);

} // namespace meith::cli
