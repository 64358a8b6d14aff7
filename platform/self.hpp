// self: the running program's own file, from which meith finds the programs installed beside it
// (meith-remote, meith-sandbox-init, the credential helper) and what a service unit runs.
#pragma once

#include <filesystem>
#include <string_view>

namespace meith::platform {

/// The absolute path of the running executable (Linux: the /proc/self/exe link, proc(5);
/// macOS: _NSGetExecutablePath). Empty when it cannot be read.
std::filesystem::path executable_path();

/// A program meith installs beside the running one: `name` in the executable's folder (a
/// build tree, `cmake --install`), else in ../libexec/meith (the .deb) or ../lib/meith; the
/// first that is an executable regular file, normalised. Empty when there is none.
std::filesystem::path installed_program(std::string_view name);

} // namespace meith::platform
