// commands: one function per subcommand, in cli/commands/, one file per command family —
// daemon.cpp (status, tools, sources, reload, policy check), call.cpp (call, preview),
// approve.cpp (approve, grant, grants, revoke), audit.cpp, mcp.cpp (`meith mcp`), service.cpp,
// init.cpp. Each returns the process exit status or throws cli_error; `opts.words[0]` is the
// subcommand's own name.
#pragma once

#include "cli/options.hpp"

namespace meith::cli {

int run_status(const options& opts);
int run_tools(const options& opts);
int run_call(const options& opts);
int run_sources(const options& opts);
int run_source_learn(const options& opts); ///< in meith-credentials (cli/credentials/learn.cpp)
int run_source_restart(const options& opts);
int run_login(const options& opts);
int run_secret_set(const options& opts);
int run_secret_list(const options& opts);
int run_secret_rm(const options& opts);
int run_import(const options& opts);
int run_source_update(const options& opts);
int run_connect(const options& opts);
int run_clients(const options& opts);
int run_reload(const options& opts);
/// `meith stop` / `meith restart` (lifecycle.cpp).
int run_stop(const options& opts);
int run_restart(const options& opts);
int run_policy_check(const options& opts);
// approve.cpp: grants and approvals (docs/protocol.md §14)
int run_approve(const options& opts);
int run_grant(const options& opts);
int run_grants(const options& opts);
int run_revoke(const options& opts);
int run_tools_accept(const options& opts);
/// `meith preview TOOL [JSON]`: preview_tool_call (call.cpp, docs/protocol.md §13).
int run_preview(const options& opts);
int run_audit(const options& opts);
/// `meith mcp`: an MCP server on stdio bridging to meithd (commands/mcp.cpp, the session in
/// bridge/; docs/protocol.md §10).
int run_mcp(const options& opts);
/// `meith service install|uninstall|status` (service.cpp, §10).
int run_service_install(const options& opts);
int run_service_uninstall(const options& opts);
int run_service_status(const options& opts);
/// `meith init`: a working HOME/meithd.toml naming the example tools by absolute path (init.cpp).
int run_init(const options& opts);

} // namespace meith::cli
