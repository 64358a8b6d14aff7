// errors: how a subcommand fails — an exception carrying the process exit status.
#pragma once

#include <stdexcept>
#include <string>

namespace meith::cli {

inline constexpr int exit_ok = 0;
inline constexpr int exit_tool_failed = 1; ///< the tool ran and returned ok:false
inline constexpr int exit_error = 2;       ///< usage, connection or protocol error
inline constexpr int exit_interrupted = 130;

/// Ends the command: main prints "meith: <what()>" on stderr and exits with `exit_code()`.
class cli_error : public std::runtime_error {
  public:
    cli_error(int exit_code, const std::string& message)
        : std::runtime_error(message), exit_code_(exit_code) {}
    int exit_code() const { return exit_code_; }

  private:
    int exit_code_;
};

/// A malformed command line; main adds a pointer to --help.
class usage_error : public cli_error {
  public:
    explicit usage_error(const std::string& message) : cli_error(exit_error, message) {}
};

} // namespace meith::cli
