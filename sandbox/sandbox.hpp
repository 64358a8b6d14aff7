// sandbox: a tool's declared capabilities made true by the kernel (PROTOCOL.md §13,
// docs/protocol.md §15).
//
// A `plan` is prepared in the daemon (allocating, opening paths, building the Landlock ruleset
// and the seccomp filter) and applied in the child between clone and exec by `enter` and
// `apply`, which make raw system calls only (async-signal-safe: the daemon has threads).
// Nothing of the tool runs before them. What every confined child gets (docs/security.md):
//   - namespaces, where the kernel allows them: a user namespace mapping only the daemon's uid
//     and gid, a mount namespace in which the whole tree is read-only (no write, chmod, chown,
//     utimes or xattr change anywhere) except the writable roots below, meithd's home, its
//     socket's folder and the user's credential stores hidden under empty read-only mounts, a
//     private size-bounded tmpfs as its TMPDIR, and a PID namespace with a fresh /proc (other
//     processes invisible); without accesses-network, a network namespace with only loopback;
//   - no capabilities (the bounding set emptied: meithd run as root keeps none for its tools);
//   - the init program (`meith-sandbox-init`) as the namespace's PID 1: it runs the tool,
//     reaps, reports the tool's own wait status, and, without starts-process, lets the tool's
//     first execve through and refuses every later one (seccomp user notification), so
//     neither the ELF loader nor a memfd runs a program.
// What a capability set gives on top:
//   - without writes-files and destructive: writes only in the child's own temporary folder
//     and /dev/null (Landlock, and the read-only tree); with them, also under cwd, config.root
//     and sandbox_paths.write;
//   - without accesses-network: socket(2) fails with EACCES for every family, socketpair(2)
//     works for AF_UNIX only (seccomp); with it, AF_INET, AF_INET6 and NETLINK_ROUTE only (no
//     AF_PACKET, AF_VSOCK, raw IP);
//   - path Unix sockets by allow-list: socket(AF_UNIX) only for a source that declares socket
//     paths (`sandbox_paths.sockets`), and then the places services put sockets (/tmp,
//     /var/tmp, /run, /dev/shm, the user's runtime dir, ...) are empty read-only tmpfs mounts
//     with only the paths the process needs (its program, cwd, writable roots, declared
//     sockets) bound back in — for every confined child, declared or not (namespaces only;
//     without them AF_UNIX stays refused even when declared);
//   - without starts-process: execve only of the command itself (and its script or ELF
//     interpreter) and sandbox_paths.exec (Landlock's execute right), once (see above);
//   - reading is restricted only by the hidden paths; `unknown` leaves the process unconfined.
// PR_SET_NO_NEW_PRIVS is always set; io_uring, ptrace and process_vm_readv/writev are refused.
#pragma once

#include "permissions/policy.hpp"
#include "sandbox/limits.hpp"

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace meith::sandbox {

/// What the running kernel can enforce, detected once (landlock_create_ruleset's ABI version,
/// PR_GET_SECCOMP, a trial clone into new user, mount, PID and network namespaces). The
/// environment variable MEITH_SANDBOX_TEST_ABSENT ("landlock", "seccomp", "namespaces",
/// comma-separated) makes a feature count as absent: a test switch.
struct kernel_support {
    int landlock_abi = 0; ///< 0: no Landlock
    bool seccomp = false;
    /// Namespaces for confined children: none, or user (unprivileged: the uid mapped to
    /// itself) + mount + PID (+ network) namespaces.
    bool namespaces = false;
    /// Why there are none ("clone(CLONE_NEWUSER): Operation not permitted ..."), for the log.
    std::string namespaces_problem;
};
const kernel_support& detect();
/// "landlock ABI 7, seccomp" / "no Landlock, seccomp" ..., for the start-up log.
std::string describe(const kernel_support& k);

/// The sandbox's init program: `meith-sandbox-init` beside the running executable, else in
/// ../libexec/meith/ or ../lib/meith/ from it (the installed layouts); empty when not found.
/// MEITH_SANDBOX_INIT overrides (tests).
const std::filesystem::path& init_program();

/// What a child may do beyond its capabilities' defaults (a source's `sandbox_paths`).
struct extra_paths {
    std::vector<std::filesystem::path> read; ///< accepted; reading is allowed everywhere
    std::vector<std::filesystem::path> write;
    std::vector<std::filesystem::path> exec;
    /// Path Unix sockets (or folders of them) it may connect to: gives socket(AF_UNIX), and
    /// each is bound back into its private view of the socket places.
    std::vector<std::filesystem::path> sockets;
};

/// Where services put their sockets, private (an empty read-only tmpfs) in every confined
/// child's view: /tmp, /var/tmp, /run (and /var/run when it is a folder of its own), /dev/shm.
/// The daemon adds its own places (request::private_places: $XDG_RUNTIME_DIR, $TMPDIR,
/// $TMUX_TMPDIR). A folder inside another one is covered by it.
const std::vector<std::filesystem::path>& default_private_places();

struct request {
    permissions::capability_set capabilities = 0;
    /// Hidden from the child (namespaces only): folders under an empty read-only tmpfs,
    /// files under an empty read-only file. Paths that do not exist are skipped.
    std::vector<std::filesystem::path> hidden;
    /// An empty file of the daemon's (0400), bound over each hidden file.
    std::filesystem::path empty_file;
    /// Where the child's private tmpfs is mounted (namespaces only): a folder inside tmp_dir,
    /// since Landlock skips a mount point when it walks up from a file (the rule on tmp_dir
    /// covers what is mounted beneath it). Its size bound, bytes.
    std::filesystem::path tmp_mount;
    std::uint64_t tmp_bytes = 64ull << 20;
    std::filesystem::path program; ///< the resolved, absolute program the child executes
    std::filesystem::path cwd;     ///< writable with writes-files / destructive
    /// The folder the process starts in (its cwd even when writes there are withheld): kept
    /// in view inside a private place.
    std::filesystem::path start_dir;
    /// Other paths it was given (its command's absolute arguments: a script, a data folder),
    /// kept in view inside a private place; ones that do not exist are skipped.
    std::vector<std::filesystem::path> given;
    std::optional<std::filesystem::path> root; ///< config.root: writable likewise
    std::filesystem::path tmp_dir;             ///< always writable (the child's TMPDIR)
    /// Folders its profile lets it write whatever its capabilities (its state folder; docs/
    /// protocol.md §15 "Profiles"); each exists (confine makes it).
    std::vector<std::filesystem::path> own;
    extra_paths extra;
    /// Inside the writable roots (namespaces only): existing files and folders mounted
    /// read-only over themselves (protected paths: `.git/hooks`, `.mcp.json`, ...), and folders
    /// mounted over themselves as they are, so that they cannot be renamed away (EBUSY) with
    /// what they hold: the folders between a writable root and a protected path or meithd's
    /// home (docs/protocol.md §15).
    std::vector<std::filesystem::path> read_only, pinned;
    /// The source has a `network` table (docs/protocol.md §19): a network namespace with only
    /// loopback, and a listening socket on 127.0.0.1:`egress_port` there that meithd's egress
    /// proxy serves. Needs namespaces: prepare() throws without them (fail closed).
    bool egress_proxy = false;
    std::uint16_t egress_port = 3128;
    /// With egress_proxy: loopback ports forwarded to the host's (docs/protocol.md §19
    /// "Loopback ports"): a listener on 127.0.0.1:PORT in the namespace for each, served by
    /// meithd, which connects to 127.0.0.1:PORT outside.
    std::vector<std::uint16_t> loopback_forwards;
    /// What the process tree may take of the machine (limits.hpp).
    resource_limits limits;
    /// A learning run (docs/protocol.md §15 "Learned profiles"): the file the init program
    /// records the tool's writes, programs, connections and name lookups to; empty: none.
    std::filesystem::path record;
    /// Besides default_private_places(): folders whose contents the child does not see
    /// (namespaces only), but for the paths it needs (the program and its interpreters, the
    /// init program, cwd, root, tmp_dir, every extra path, /etc/resolv.conf's target), bound
    /// back in. Folders that do not exist are skipped.
    std::vector<std::filesystem::path> private_places;
};

/// One mount a confined child makes in its mount namespace, in order (enter()): a clone of a
/// path bound back over itself (taken before the tree turns read-only; read-write for a
/// writable root), or an empty read-only tmpfs over a private place with the mount points of
/// the binds inside it made first (`dirs` in order, then `files`).
struct mount_step {
    enum class kind { bind_writable, bind_read_only, mask } what = kind::mask;
    std::string path;
    std::vector<std::string> dirs, files; ///< mask only
};

/// A prepared confinement; shareable between many spawns (one-shot tools).
struct plan {
    plan() = default;
    ~plan();
    plan(const plan&) = delete;
    plan& operator=(const plan&) = delete;

    int ruleset_fd = -1;                    ///< Landlock ruleset, -1 when none
    std::vector<unsigned char> seccomp_bpf; ///< struct sock_filter[]; empty when none
    /// CLONE_NEW* flags for the child's clone(2); 0 without namespaces.
    int clone_flags = 0;
    /// With CLONE_NEWUSER: what the child writes to its own setgroups, uid_map, gid_map.
    std::string uid_map, gid_map;
    /// In the mount namespace, in order (shallower paths first): the writable roots mounted
    /// read-write again over the read-only tree, the private places and the paths kept in them.
    std::vector<mount_step> steps;
    /// socket(AF_UNIX) is allowed (the source declares socket paths, and namespaces make the
    /// socket places private).
    bool unix_sockets = false;
    /// Resource limits (limits.hpp): the cgroups the child joins first thing (null: none),
    /// the rlimits apply() sets (0: left as inherited), and the inotify sysctls enter()
    /// writes in its user namespace (empty: not written).
    std::shared_ptr<limit_group> group;
    std::uint64_t rlimit_nproc = 0, rlimit_data = 0;
    std::string inotify_instances, inotify_watches;
    /// For list_sources: "cgroup:pids,memory" | "cgroup:pids,rlimit" | "rlimit" | "none".
    std::string limits = "none";
    /// Pinned folders and read-only paths inside the writable roots (request::pinned,
    /// request::read_only), mounted after the writable roots and before the hidden paths.
    std::vector<std::string> pinned, read_only;
    /// Hidden folders (an empty read-only tmpfs each) and files (empty_file bound over each).
    std::vector<std::string> hidden_dirs, hidden_files;
    std::string empty_file;
    /// The private tmpfs: where, and its mount options ("size=N,mode=0700").
    std::string tmp_dir, tmp_options;
    /// Non-zero: the child opens 127.0.0.1:egress_port in its own network namespace and hands
    /// the listening socket over (open_egress_listener).
    std::uint16_t egress_port = 0;
    /// With an egress port: loopback ports the child also listens on and hands over, in this
    /// order after the proxy's listener (request::loopback_forwards).
    std::vector<std::uint16_t> forward_ports;
    /// The init program to execute (with the program after it); empty: the program itself.
    std::string init;
    /// The init program lets the tool's first execve through and refuses the rest.
    bool exec_once = false;
    /// A learning run: each start appends what the tool does to this file (opened by the
    /// spawn, 0600, and given to the init program as --record-fd); empty: none.
    std::string record;
    /// For list_sources: "landlock-abi-N" | "none"; "seccomp" | "none" | "allowed";
    /// "landlock" | "none" | "allowed"; namespaces "user,mount,pid[,net]" | "none";
    /// home: "hidden" | "readable" (meithd's home, its socket and the credential stores);
    /// unix: "none" (no socket(AF_UNIX)) | "declared" (only the declared paths are in view) |
    /// "refused" (declared, but without namespaces the places cannot be made private).
    std::string fs = "none", net = "none", exec = "none", ns = "none", home = "readable",
                unix = "none";
    /// Whether each protection the capabilities call for is in place.
    bool complete = false;
    permissions::capability_set capabilities = 0;
};

/// Prepares the confinement of `r` with what `k` offers. Paths that do not exist are skipped.
/// Throws std::runtime_error when the kernel refuses a ruleset it said it supports.
std::shared_ptr<const plan> prepare(const request& r, const kernel_support& k = detect());

/// In the child, first thing after a clone(2) with `p.clone_flags`: maps its uid and gid, makes
/// the mount tree private and read-only, mounts the writable roots, the hidden paths, /proc
/// and the tmpfs (`p.steps` ... `p.tmp_dir`). Async-signal-safe. Returns 0, or the errno of
/// the step that failed. Nothing to do without namespaces.
/// In the child after `enter`, for a plan with an egress port: brings loopback up in its
/// network namespace, listens on 127.0.0.1:`p.egress_port` and then on each of
/// `p.forward_ports`, and sends each socket over the Unix socket `channel` (SCM_RIGHTS, one
/// message each, in that order) to meithd. Async-signal-safe. 0, or the errno.
int open_egress_listener(const plan& p, int channel) noexcept;

int enter(const plan& p) noexcept;

/// In the child, after `enter` and chdir: empties the capability bounding set (where it may),
/// PR_SET_NO_NEW_PRIVS, landlock_restrict_self, the seccomp filter. Async-signal-safe.
/// Returns 0, or the errno of the step that failed.
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
