#include "sandbox/mount_steps.hpp"

#include <cerrno>

#include <fcntl.h>
#include <linux/mount.h> // not <sys/mount.h>: the two clash on glibc 2.36; raw calls only
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace meith::sandbox {

namespace {
long raw_mount(const char* source, const char* target, const char* type, unsigned long flags,
               const char* data) noexcept {
    return ::syscall(SYS_mount, source, target, type, flags, data);
}
} // namespace

int remount_over_itself(const char* path, bool read_only) noexcept {
    const long fd = ::syscall(SYS_open_tree, AT_FDCWD, path,
                              OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
    if (fd < 0) return errno == ENOENT ? 0 : errno;
    int code = 0;
    if (read_only) {
        mount_attr ro{};
        ro.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID;
        if (::syscall(SYS_mount_setattr, static_cast<int>(fd), "", AT_EMPTY_PATH | AT_RECURSIVE,
                      &ro, sizeof ro) != 0)
            code = errno;
    }
    if (code == 0 && ::syscall(SYS_move_mount, static_cast<int>(fd), "", AT_FDCWD, path,
                               MOVE_MOUNT_F_EMPTY_PATH) != 0)
        code = errno;
    ::syscall(SYS_close, static_cast<int>(fd));
    return code;
}

int hide_folder(const char* path) noexcept {
    if (raw_mount("none", path, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                  "size=4k,mode=0500") != 0 &&
        errno != ENOENT)
        return errno;
    return 0;
}

int hide_file(const char* path, const char* empty_file) noexcept {
    if (raw_mount(empty_file, path, nullptr, MS_BIND, nullptr) != 0)
        return errno == ENOENT ? 0 : errno;
    if (raw_mount(nullptr, path, nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY, nullptr) != 0)
        return errno;
    return 0;
}

bool is_mount_root(const char* path) noexcept {
    struct statx st {};
    if (::syscall(SYS_statx, AT_FDCWD, path, AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT, 0u, &st) != 0)
        return false;
    return (st.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) != 0 &&
           (st.stx_attributes & STATX_ATTR_MOUNT_ROOT) != 0;
}

} // namespace meith::sandbox
