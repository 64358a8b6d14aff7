// confined_spec: the spawn spec of a source's, exec tool's or hook's program under its
// confinement (sandbox/confinement.hpp): the environment it is allowed, the sandbox plan, its
// TMPDIR, the egress proxy, and `${secret:NAME}` references filled in at each start.
#pragma once

#include "process/supervisor.hpp"
#include "sandbox/confinement.hpp"

#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace meith::process {

/// The spawn spec of `argv` in `cwd`, labelled `label` in log lines: the daemon's values of
/// `env_allow` plus `env` (which wins, `child_environment`), run under `conf`'s sandbox plan
/// with its TMPDIR; `conf` null: unconfined. One builder for every source kind and hook.
process_spec confined_spec(std::string label, const std::vector<std::string>& argv,
                           const std::filesystem::path& cwd,
                           const std::vector<std::string>& env_allow,
                           const std::map<std::string, std::string>& env,
                           const sandbox::confinement* conf);

} // namespace meith::process
