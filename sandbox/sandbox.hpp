// sandbox: a tool's declared capabilities made true by the kernel (PROTOCOL.md §13,
// docs/protocol.md §15).
//
// A `plan` is prepared in the daemon (allocating, opening paths, building the Landlock ruleset
// and the seccomp filter) and applied in the child between fork and exec by `apply`, which
// makes raw system calls only (async-signal-safe: the daemon has threads). Nothing of the tool
// runs before it. What a capability set gives:
//   - without writes-files and destructive: writes only in the child's own temporary folder
//     and /dev/null (Landlock); with them, also under cwd, config.root and sandbox_paths.write;
//   - without accesses-network: socket(AF_INET | AF_INET6) fails with EACCES (seccomp);
//     Unix sockets stay usable;
//   - without starts-process: execve only of the command itself (and its script or ELF
//     interpreter) and sandbox_paths.exec (Landlock's execute right);
//   - reading is never restricted; `unknown` leaves the process unconfined (the caller's job).
// PR_SET_NO_NEW_PRIVS is always set for a confined child.
#pragma once

#include "permissions/policy.hpp"

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace meith::sandbox {

/// What the running kernel can enforce, detected once (landlock_create_ruleset's ABI version,
/// PR_GET_SECCOMP). The environment variable MEITH_SANDBOX_TEST_ABSENT ("landlock",
/// "seccomp" or both, comma-separated) makes a feature count as absent: a test switch.
struct kernel_support {
    int landlock_abi = 0; ///< 0: no Landlock
    bool seccomp = false;
};
const kernel_support& detect();
/// "landlock ABI 7, seccomp" / "no Landlock, seccomp" ..., for the start-up log.
std::string describe(const kernel_support& k);

/// What a child may do beyond its capabilities' defaults (a source's `sandbox_paths`).
struct extra_paths {
    std::vector<std::filesystem::path> read; ///< accepted; reading is allowed everywhere
    std::vector<std::filesystem::path> write;
    std::vector<std::filesystem::path> exec;
};

struct request {
    permissions::capability_set capabilities = 0;
    std::filesystem::path program; ///< the resolved, absolute program the child executes
    std::filesystem::path cwd;     ///< writable with writes-files / destructive
    std::optional<std::filesystem::path> root; ///< config.root: writable likewise
    std::filesystem::path tmp_dir;             ///< always writable (the child's TMPDIR)
    extra_paths extra;
};

/// A prepared confinement; shareable between many spawns (one-shot tools).
struct plan {
    plan() = default;
    ~plan();
    plan(const plan&) = delete;
    plan& operator=(const plan&) = delete;

    int ruleset_fd = -1;                    ///< Landlock ruleset, -1 when none
    std::vector<unsigned char> seccomp_bpf; ///< struct sock_filter[]; empty when none
    /// For list_sources: "landlock-abi-N" | "none"; "seccomp" | "none" | "allowed";
    /// "landlock" | "none" | "allowed".
    std::string fs = "none", net = "none", exec = "none";
    /// Whether each protection the capabilities call for is in place.
    bool complete = false;
    permissions::capability_set capabilities = 0;
};

/// Prepares the confinement of `r` with what `k` offers. Paths that do not exist are skipped.
/// Throws std::runtime_error when the kernel refuses a ruleset it said it supports.
std::shared_ptr<const plan> prepare(const request& r, const kernel_support& k = detect());

/// In the child, between fork and exec: PR_SET_NO_NEW_PRIVS, landlock_restrict_self, the
/// seccomp filter. Async-signal-safe. Returns 0, or the errno of the step that failed.
int apply(const plan& p) noexcept;

/// The PATH the daemon looks programs up in: its own, or "/usr/bin:/bin" when unset (as
/// posix_spawnp's default), so confined and unconfined starts find the same program.
std::string program_search_path();

/// `program` as execve would run it from `base_dir` (the child's working folder): a name
/// without '/' looked up in `path_env` (a PATH value), a relative path taken from `base_dir`;
/// made absolute. nullopt when not found or not executable.
std::optional<std::filesystem::path> resolve_program(const std::string& program,
                                                     const std::string& path_env,
                                                     const std::filesystem::path& base_dir = {});

/// The programs executing `program` involves besides itself: a script's interpreter (and the
/// program `#!/usr/bin/env NAME` names), an ELF binary's loader (PT_INTERP). Absolute paths.
std::vector<std::filesystem::path> interpreters_of(const std::filesystem::path& program,
                                                   const std::string& path_env);

} // namespace meith::sandbox
