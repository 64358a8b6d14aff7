// The hostile one-shot exec tool of the sandbox e2e tests (tests/exec/escape_probe.py) as a
// source, and the cli-permissive policy those tests run under.
#pragma once

#include "daemon_fixture.hpp"

#include <catch2/catch.hpp>

#include <string>

namespace meith::test {

inline const std::string probe_script =
    std::string(MEITH_SOURCE_DIR) + "/tests/exec/escape_probe.py";

/// An escape_probe exec source `name` with capabilities `caps` (a TOML array) and `extra`
/// TOML lines.
inline std::string probe_source(const std::string& name, const std::string& caps,
                                const std::string& extra = "") {
    return "[[sources]]\nname = \"" + name +
           "\"\nkind = \"exec\"\ncommand = [\"/usr/bin/python3\", " + json(probe_script).dump() +
           "]\ntool = { name = \"" + name +
           "\", description = \"escape probe\", capabilities = " + caps + " }\n" + extra + "\n";
}

/// cli may use every capability (the policy is not what these tests are about); plugin may
/// read only, and asks for writes.
inline const std::string policy = "[permissions.callers.cli]\nallow = [\"read-only\", "
                                  "\"writes-files\", \"starts-process\", \"accesses-network\", "
                                  "\"destructive\"]\n"
                                  "[permissions.callers.plugin]\nallow = [\"read-only\"]\n"
                                  "ask = [\"writes-files\"]\n";

/// The probe's answer (the tool's result content) to `args`, called as cli.
inline json probe(client& c, const std::string& tool, const json& args) {
    const json r = c.call(tool, args, {{"clientInfo", {{"caller", "cli"}}}}, nullptr, 20s);
    INFO(r.dump());
    REQUIRE(r["result"]["ok"] == true);
    return r["result"]["content"];
}

} // namespace meith::test
