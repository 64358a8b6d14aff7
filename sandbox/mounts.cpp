// mounts: a confined child's mount namespace: the steps planned in the daemon, and enter().
#include "sandbox/internal.hpp"
#include "sandbox/mount_steps.hpp"

#include <algorithm>
#include <cerrno>
#include <stdexcept>
#include <string_view>

#include <fcntl.h>
#include <linux/mount.h> // not <sys/mount.h>: the two clash on glibc 2.36; raw calls only
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace meith::sandbox {

namespace fs = std::filesystem;
using detail::max_writable;

namespace {

/// True when `inner` is `outer` or lies beneath it (component-wise, both lexically normal).
bool within(const fs::path& inner, const fs::path& outer) {
    auto i = inner.begin();
    for (auto o = outer.begin(); o != outer.end(); ++o, ++i) {
        if (o->empty() && std::next(o) == outer.end()) break; // a trailing '/'
        if (i == inner.end() || *i != *o) return false;
    }
    return true;
}

std::size_t depth_of(const std::string& path) {
    return static_cast<std::size_t>(std::count(path.begin(), path.end(), '/'));
}

/// The deepest step of `steps` (other than `self`) that `path` lies within; nullptr if none.
const mount_step* enclosing_step(const std::vector<mount_step>& steps, const fs::path& path,
                                 const mount_step* self = nullptr) {
    const mount_step* best = nullptr;
    for (const auto& s : steps)
        if (&s != self && within(path, s.path) && s.path != path.string() &&
            (best == nullptr || depth_of(s.path) > depth_of(best->path) ||
             (depth_of(s.path) == depth_of(best->path) && s.what != mount_step::kind::mask)))
            best = &s;
    return best;
}

} // namespace

const std::vector<fs::path>& default_private_places() {
    // /tmp itself is not among them: checkouts, scripts and test folders live there, and a
    // tool needs them; the socket right (seccomp) is what keeps a tool off its sockets.
    static const std::vector<fs::path> places{"/var/tmp", "/run", "/var/run", "/dev/shm"};
    return places;
}

namespace detail {

bool masked_away(const plan& p, const fs::path& h) {
    if (std::any_of(p.steps.begin(), p.steps.end(),
                    [&](const mount_step& s) { return s.path == h.string(); }))
        return false; // a bind at h itself: hidden over it
    const mount_step* s = enclosing_step(p.steps, h);
    return s != nullptr && s->what == mount_step::kind::mask;
}

// Stays whole (~120 lines): the mount steps are made in the order the child applies them
// (later steps mask earlier ones), and that order is the rule; split, it would be hidden.
void plan_mounts(plan& p, const request& r, const fs::path& init, bool writes) {
    std::error_code ec;
    std::vector<mount_step> steps;
    const auto add_bind = [&](const fs::path& raw, mount_step::kind what) {
        if (raw.empty() || !raw.is_absolute()) return;
        const fs::path path = raw.lexically_normal();
        if (!fs::exists(path, ec)) return;
        if (what == mount_step::kind::bind_writable && !fs::is_directory(path, ec)) return;
        steps.push_back({what, path.string(), {}, {}});
    };
    for (const auto& path : r.own)
        add_bind(path, mount_step::kind::bind_writable);
    if (writes) {
        add_bind(r.cwd, mount_step::kind::bind_writable);
        if (r.root) add_bind(*r.root, mount_step::kind::bind_writable);
        for (const auto& path : r.extra.write)
            add_bind(path, mount_step::kind::bind_writable);
    }
    const std::size_t writable = steps.size();
    if (writable > max_writable) throw std::runtime_error("too many writable paths");
    // The private places: a folder inside another one (or not a folder of its own: /var/run
    // is a symlink to /run) is covered by it.
    std::vector<fs::path> places;
    static const std::vector<fs::path> none;
    const bool off = switched_off("private-places"); // bench (k) measures their cost
    for (const auto* list :
         {off ? &none : &default_private_places(), off ? &none : &r.private_places})
        for (const auto& raw : *list) {
            if (raw.empty() || !raw.is_absolute()) continue;
            const fs::path place = raw.lexically_normal();
            if (fs::is_symlink(fs::symlink_status(place, ec)) || !fs::is_directory(place, ec))
                continue;
            places.push_back(place);
        }
    for (const auto& place : places)
        if (std::none_of(
                places.begin(), places.end(),
                [&](const fs::path& other) { return other != place && within(place, other); }) &&
            std::none_of(steps.begin(), steps.end(),
                         [&](const mount_step& s) { return s.path == place.string(); }))
            steps.push_back({mount_step::kind::mask, place.string(), {}, {}});
    // What the process needs inside them, read-only.
    std::vector<fs::path> kept{r.program, r.cwd, r.start_dir, r.tmp_dir, r.empty_file};
    if (!init.empty()) kept.push_back(init);
    if (r.root) kept.push_back(*r.root);
    for (const auto* list :
         {&r.given, &r.extra.read, &r.extra.exec, &r.extra.sockets, &r.extra.write})
        kept.insert(kept.end(), list->begin(), list->end());
    if (!r.program.empty())
        for (const auto& i : interpreters_of(r.program, program_search_path()))
            kept.push_back(i);
    if (fs::is_symlink(fs::symlink_status("/etc/resolv.conf", ec)))
        kept.push_back(fs::canonical("/etc/resolv.conf", ec));
    // A script it was given, or its program, needs what lies beside it (Python's sys.path[0],
    // Node's node_modules and relative imports, a checkout's other folders): the folder it
    // lives in directly under the private place (/tmp/project for /tmp/project/x/tool.mjs) is
    // kept whole, read-only. The private place itself is never kept whole.
    std::vector<fs::path> scripts = r.given;
    scripts.push_back(r.program);
    for (const auto& raw : scripts) {
        if (raw.empty() || !raw.is_absolute()) continue;
        const fs::path script = raw.lexically_normal();
        const mount_step* in = enclosing_step(steps, script);
        if (in == nullptr || in->what != mount_step::kind::mask) continue;
        const fs::path rel = script.lexically_relative(in->path);
        if (rel.empty() || std::next(rel.begin()) == rel.end()) continue; // directly in it
        kept.push_back(fs::path(in->path) / *rel.begin());
    }
    for (const auto& raw : kept) {
        if (raw.empty() || !raw.is_absolute()) continue;
        const fs::path path = raw.lexically_normal();
        // Only what a mask would take away (it lies in one, or is one), and not what a bind
        // already brings back.
        const auto same = std::find_if(steps.begin(), steps.end(), [&](const mount_step& s) {
            return s.path == path.string();
        });
        const mount_step* in = enclosing_step(steps, path);
        if (same != steps.end() ? same->what != mount_step::kind::mask
                                : in == nullptr || in->what != mount_step::kind::mask)
            continue;
        add_bind(path, mount_step::kind::bind_read_only);
    }
    // A read-only bind inside another bind is carried by that bind's clone.
    std::vector<mount_step> kept_steps;
    for (const auto& s : steps) {
        const mount_step* in = enclosing_step(steps, s.path, &s);
        if (s.what == mount_step::kind::bind_read_only && in != nullptr &&
            in->what != mount_step::kind::mask)
            continue;
        kept_steps.push_back(s);
    }
    steps = std::move(kept_steps);
    if (steps.size() > max_writable * 2) throw std::runtime_error("too many paths to keep");
    // Shallow to deep; at one path a mask before the bind that brings something back.
    std::stable_sort(steps.begin(), steps.end(), [](const mount_step& a, const mount_step& b) {
        const auto da = depth_of(a.path), db = depth_of(b.path);
        if (da != db) return da < db;
        return a.what == mount_step::kind::mask && b.what != mount_step::kind::mask;
    });
    // The mount points of the binds directly inside a mask, made in its tmpfs.
    for (const auto& s : steps) {
        if (s.what == mount_step::kind::mask) continue;
        const mount_step* in = enclosing_step(steps, s.path, &s);
        if (in == nullptr || in->what != mount_step::kind::mask) continue;
        auto& mask = const_cast<mount_step&>(*in);
        fs::path at = mask.path;
        const fs::path rel = fs::path(s.path).lexically_relative(mask.path);
        for (auto it = rel.begin(); it != rel.end(); ++it) {
            at /= *it;
            const bool leaf = std::next(it) == rel.end();
            if (leaf && !fs::is_directory(s.path, ec)) {
                mask.files.push_back(at.string());
            } else if (std::find(mask.dirs.begin(), mask.dirs.end(), at.string()) ==
                       mask.dirs.end()) {
                mask.dirs.push_back(at.string());
            }
        }
    }
    p.steps = std::move(steps);
}

} // namespace detail

namespace {

/// Writes `text` to `path` with raw system calls (no allocation: the vfork child); 0 or errno.
int write_file(const char* path, std::string_view text) noexcept {
    const long fd = ::syscall(SYS_openat, AT_FDCWD, path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) return errno;
    const long n = ::syscall(SYS_write, fd, text.data(), text.size());
    const int e = errno;
    ::syscall(SYS_close, fd);
    return n == static_cast<long>(text.size()) ? 0 : (n < 0 ? e : EIO);
}

long sys_mount(const char* source, const char* target, const char* type, unsigned long flags,
               const char* data) noexcept {
    return ::syscall(SYS_mount, source, target, type, flags, data);
}

/// Mounts an empty tmpfs over `s.path`, makes the mount points of the binds it keeps, and
/// turns it read-only. Raw system calls only. 0, or the errno.
int mask_place(const mount_step& s) noexcept {
    if (sys_mount("none", s.path.c_str(), "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
                  "size=64k,mode=0755") != 0)
        return errno;
    for (const auto& d : s.dirs)
        if (::syscall(SYS_mkdirat, AT_FDCWD, d.c_str(), 0755) != 0 && errno != EEXIST) return errno;
    for (const auto& f : s.files) {
        const long fd = ::syscall(SYS_openat, AT_FDCWD, f.c_str(),
                                  O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
        if (fd < 0) return errno;
        ::syscall(SYS_close, fd);
    }
    mount_attr ro{};
    ro.attr_set = MOUNT_ATTR_RDONLY;
    if (::syscall(SYS_mount_setattr, AT_FDCWD, s.path.c_str(), 0, &ro, sizeof ro) != 0)
        return errno;
    return 0;
}

} // namespace

// Stays whole (~95 lines): one sequence of raw system calls between clone and exec, each step
// depending on the one before (user namespace, maps, mounts, pivot); see plan_mounts.
int enter(const plan& p) noexcept {
    // Raw system calls only: this runs in a child sharing the daemon's address space.
    // Into its cgroups before anything of it can fork ("0": the writer itself).
    if (p.group)
        for (int fd : {p.group->pids_procs_fd, p.group->memory_procs_fd})
            if (fd >= 0 && ::syscall(SYS_write, fd, "0", 1) != 1) return errno;
    if (p.clone_flags == 0) return 0;
    if ((p.clone_flags & CLONE_NEWUSER) != 0) {
        // setgroups first: an unprivileged process may write gid_map only after "deny".
        if (int e = write_file("/proc/self/setgroups", "deny"); e != 0 && e != ENOENT) return e;
        if (int e = write_file("/proc/self/uid_map", p.uid_map)) return e;
        if (int e = write_file("/proc/self/gid_map", p.gid_map)) return e;
        // Its namespace's own inotify bounds (the owner may set them: user_namespaces(7)).
        // Best effort: a container may mount /proc/sys read-only, and a tool that cannot be
        // bounded there still runs (docs/protocol.md §15 "Limits").
        if (!p.inotify_instances.empty()) {
            write_file("/proc/sys/user/max_inotify_instances", p.inotify_instances);
            write_file("/proc/sys/user/max_inotify_watches", p.inotify_watches);
        }
    }
    // Nothing mounted here may reach the daemon's namespace (it may be shared: systemd's /).
    if (sys_mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return errno;
    // The binds (writable roots read-write, kept paths read-only) are cloned before the tree
    // turns read-only and the private places are masked; then, shallow to deep, each mask is
    // mounted with the mount points of what it keeps, and each clone is put back.
    int clones[max_writable * 2];
    if (p.steps.size() > max_writable * 2) return E2BIG; // prepare() refuses more
    const std::size_t steps = p.steps.size();
    int code = 0;
    std::size_t n = 0;
    for (; n < steps && code == 0; ++n) {
        clones[n] = -1;
        const mount_step& s = p.steps[n];
        if (s.what == mount_step::kind::mask) continue;
        const long fd = ::syscall(SYS_open_tree, AT_FDCWD, s.path.c_str(),
                                  OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
        if (fd < 0) {
            code = errno;
            break;
        }
        clones[n] = static_cast<int>(fd);
        if (s.what == mount_step::kind::bind_read_only) {
            mount_attr ro{};
            ro.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID;
            if (::syscall(SYS_mount_setattr, clones[n], "", AT_EMPTY_PATH | AT_RECURSIVE, &ro,
                          sizeof ro) != 0)
                code = errno;
        }
    }
    mount_attr ro{};
    ro.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID;
    if (code == 0 && ::syscall(SYS_mount_setattr, AT_FDCWD, "/", AT_RECURSIVE, &ro, sizeof ro) != 0)
        code = errno;
    for (std::size_t i = 0; i < n; ++i) {
        const mount_step& s = p.steps[i];
        if (code == 0 && s.what == mount_step::kind::mask) code = mask_place(s);
        if (code == 0 && clones[i] >= 0 &&
            ::syscall(SYS_move_mount, clones[i], "", AT_FDCWD, s.path.c_str(),
                      MOVE_MOUNT_F_EMPTY_PATH) != 0)
            code = errno;
        if (clones[i] >= 0) ::syscall(SYS_close, clones[i]);
    }
    if (code != 0) return code;
    // Inside them: pinned folders (a mount point cannot be renamed or removed), then the
    // protected paths, each a clone of itself made read-only (mount_setattr adds the flag and
    // keeps the ones a user namespace may not drop).
    for (const auto& path : p.pinned)
        if (int e = remount_over_itself(path.c_str(), false)) return e;
    for (const auto& path : p.read_only)
        if (int e = remount_over_itself(path.c_str(), true)) return e;
    // Hidden after the writable roots are back, so a hidden path inside one stays hidden.
    // A path gone since the plan was made has nothing left to hide (ENOENT is no failure).
    for (const auto& d : p.hidden_dirs)
        if (int e = hide_folder(d.c_str())) return e;
    for (const auto& f : p.hidden_files)
        if (int e = hide_file(f.c_str(), p.empty_file.c_str())) return e;
    // A /proc of this PID namespace only: no other process's environ, cmdline or fds.
    if ((p.clone_flags & CLONE_NEWPID) != 0 &&
        sys_mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0)
        return errno;
    // Its own bounded temporary folder: filling it fills no disk of the daemon's.
    if (!p.tmp_dir.empty() && sys_mount("none", p.tmp_dir.c_str(), "tmpfs", MS_NOSUID | MS_NODEV,
                                        p.tmp_options.c_str()) != 0)
        return errno;
    return 0;
}

} // namespace meith::sandbox
