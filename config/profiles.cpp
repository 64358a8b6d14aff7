#include "config/profiles.hpp"

#include <algorithm>

namespace meith::config {

namespace {

// What each needs, and why:
// - every profile: its own state folder writable, and the caches programs put under
//   $XDG_CACHE_HOME or npm's cache sent there (a read-only home otherwise fails their first
//   mkdir: Playwright's `ENOENT: mkdir '~/.cache'`, npm's `EROFS ~/.npm/_cacache`).
// - npx: the launcher runs `sh -c` and node (starts-process) and fetches from the registry
//   (accesses-network; a `network` table narrows it to the registry's host).
// - browser: Chromium re-executes itself for its zygote, renderers and GPU process
//   (starts-process), keeps its profile under $XDG_CONFIG_HOME or the --user-data-dir its
//   driver gives (the state folder), and loads pages (accesses-network, loopback included for
//   a local dev server). Chromium's own sandbox needs a nested user namespace, which the
//   seccomp filter refuses every tool (it opens much of the kernel): the profile tells the
//   driver to start it without (Playwright's MCP server: PLAYWRIGHT_MCP_SANDBOX=false, as its
//   --no-sandbox), and meith's sandbox is the one around the browser. Playwright also passes
//   --disable-dev-shm-usage (no /dev/shm). Chromium keeps a Unix socket of its own
//   (SingletonSocket, in TMPDIR, linked from its profile folder): Unix sockets in its state
//   folder and TMPDIR.
const std::vector<sandbox_profile> profiles = {
    {"default",
     "read-only view, its state folder and TMPDIR writable, no other programs, no network",
     {},
     {"{state}"},
     {},
     {{"XDG_CACHE_HOME", "{state}/cache"}, {"npm_config_cache", "{state}/npm-cache"}}},
    {"node",
     "a Node.js server: the default, with node's compile cache in its state folder",
     {},
     {"{state}"},
     {},
     {{"XDG_CACHE_HOME", "{state}/cache"},
      {"npm_config_cache", "{state}/npm-cache"},
      {"NODE_COMPILE_CACHE", "{state}/cache/node"}}},
    {"python",
     "a Python server: the default, with its bytecode cache in its state folder",
     {},
     {"{state}"},
     {},
     {{"XDG_CACHE_HOME", "{state}/cache"}, {"PYTHONPYCACHEPREFIX", "{state}/cache/python"}}},
    {"npx",
     "a launcher (npx, npm exec): runs node and sh, fetches packages into its state folder",
     {"starts-process", "accesses-network"},
     {"{state}"},
     {},
     {{"XDG_CACHE_HOME", "{state}/cache"},
      {"npm_config_cache", "{state}/npm-cache"},
      {"npm_config_update_notifier", "false"}}},
    {"browser",
     "drives a browser (Chromium, Chrome, Firefox) as its child: runs it, keeps its profile "
     "and cache in its state folder, loads pages",
     {"starts-process", "accesses-network"},
     {"{state}"},
     {"{state}", "{tmp}"},
     {{"XDG_CACHE_HOME", "{state}/cache"},
      {"XDG_CONFIG_HOME", "{state}/config"},
      {"npm_config_cache", "{state}/npm-cache"},
      {"PLAYWRIGHT_MCP_SANDBOX", "false"}}},
};

} // namespace

const std::vector<sandbox_profile>& sandbox_profiles() {
    return profiles;
}

const sandbox_profile* find_sandbox_profile(std::string_view name) {
    const auto it = std::find_if(profiles.begin(), profiles.end(),
                                 [&](const sandbox_profile& p) { return p.name == name; });
    return it == profiles.end() ? nullptr : &*it;
}

std::string sandbox_profile_names() {
    std::string out;
    for (const auto& p : profiles)
        out += (out.empty() ? "\"" : ", \"") + std::string(p.name) + "\"";
    return out;
}

} // namespace meith::config
