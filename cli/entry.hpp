// entry: what `meith`'s main does, shared with meith-credentials: parse the command line, pick
// the subcommand from the table (help.cpp), run it, and turn cli_error into "meith: ..." on
// stderr plus the exit status (docs/protocol.md §12 lists them).
#pragma once

namespace meith::cli {

/// The whole of `meith ARGS`: returns the process exit status; never throws.
int main_entry(int argc, char** argv);

} // namespace meith::cli
