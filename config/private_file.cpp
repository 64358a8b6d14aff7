#include "config/private_file.hpp"

#include <cerrno>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace meith::config {

private_file_read read_private_file(const std::filesystem::path& file, std::size_t max_bytes) {
    private_file_read r;
    const int fd = ::open(file.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        r.st = errno == ENOENT ? private_file_read::status::missing
                               : private_file_read::status::unreadable;
        r.error = errno;
        return r;
    }
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != ::geteuid() ||
        (st.st_mode & 022) != 0 || static_cast<std::size_t>(st.st_size) > max_bytes) {
        ::close(fd);
        r.st = private_file_read::status::untrusted;
        return r;
    }
    char buf[16384];
    for (;;) {
        const auto n = ::read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            r.error = errno;
            ::close(fd);
            r.st = private_file_read::status::unreadable;
            r.text.clear();
            return r;
        }
        if (n == 0) break;
        r.text.append(buf, static_cast<std::size_t>(n));
    }
    ::close(fd);
    r.st = private_file_read::status::ok;
    return r;
}

bool write_private_file(const std::filesystem::path& file, std::string_view text) {
    const std::string tmp = file.string() + ".tmp";
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    bool ok = fd >= 0;
    std::size_t done = 0;
    while (ok && done < text.size()) {
        const auto n = ::write(fd, text.data() + done, text.size() - done);
        if (n < 0 && errno == EINTR) continue;
        ok = n > 0;
        if (ok) done += static_cast<std::size_t>(n);
    }
    // The data reaches the disk before the rename makes it the file, and the rename reaches it
    // before we say it is saved (rename(2) alone orders nothing: a crash could leave an empty
    // file under the name).
    if (ok) ok = ::fsync(fd) == 0;
    if (fd >= 0) ok = (::close(fd) == 0) && ok;
    if (ok && ::rename(tmp.c_str(), file.c_str()) == 0) {
        const auto folder =
            file.parent_path().empty() ? std::filesystem::path(".") : file.parent_path();
        const int dir = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dir >= 0) {
            ::fsync(dir); // best effort: the file is already in place
            ::close(dir);
        }
        return true;
    }
    const int saved = errno;
    ::unlink(tmp.c_str());
    errno = saved;
    return false;
}

} // namespace meith::config
