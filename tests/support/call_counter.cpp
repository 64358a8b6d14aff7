// call_counter: an LD_PRELOAD library for the hot-path budget test (tests/e2e/budget_test.cpp).
// It counts, in the process it is loaded into, every allocation (malloc, calloc, realloc,
// memalign and friends: operator new comes through malloc) and every write-family system call
// (write, writev, pwrite, pwritev, send, sendto, sendmsg, sendmmsg). On SIGUSR2 it writes
// "ALLOCATIONS WRITES\n" to the file $MEITH_COUNT_FILE names (async-signal-safe: raw system
// calls, no allocation). Counters, not clocks: the test compares counts per call, so it cannot
// flake on a slow machine. glibc only (__libc_malloc and friends); not with the sanitizers,
// which bring their own allocator.
#include <cerrno>
#include <csignal>
#include <cstddef>
#include <cstdlib>
#include <cstring>

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

extern "C" {
void* __libc_malloc(std::size_t);
void* __libc_calloc(std::size_t, std::size_t);
void* __libc_realloc(void*, std::size_t);
void* __libc_memalign(std::size_t, std::size_t);
void __libc_free(void*);
}

namespace {

unsigned long allocations = 0, writes = 0;
char count_file[512];

void count(unsigned long& c) {
    __atomic_fetch_add(&c, 1, __ATOMIC_RELAXED);
}

/// Appends the decimal digits of `v` at `p`; returns the end.
char* digits(char* p, unsigned long v) {
    char tmp[24];
    int n = 0;
    do {
        tmp[n++] = static_cast<char>('0' + v % 10);
        v /= 10;
    } while (v != 0);
    while (n > 0)
        *p++ = tmp[--n];
    return p;
}

void on_usr2(int) {
    const int saved = errno;
    char line[64];
    char* p = digits(line, __atomic_load_n(&allocations, __ATOMIC_RELAXED));
    *p++ = ' ';
    p = digits(p, __atomic_load_n(&writes, __ATOMIC_RELAXED));
    *p++ = '\n';
    // Written whole to a temporary name, then renamed: a reader never sees half a line.
    char tmp[520];
    std::size_t n = std::strlen(count_file);
    std::memcpy(tmp, count_file, n);
    std::memcpy(tmp + n, ".t", 3);
    const long fd =
        ::syscall(SYS_openat, AT_FDCWD, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd >= 0) {
        ::syscall(SYS_write, fd, line, static_cast<std::size_t>(p - line));
        ::syscall(SYS_close, fd);
        ::syscall(SYS_renameat, AT_FDCWD, tmp, AT_FDCWD, count_file);
    }
    errno = saved;
}

__attribute__((constructor)) void install() {
    const char* f = std::getenv("MEITH_COUNT_FILE");
    if (f == nullptr || std::strlen(f) >= sizeof count_file - 8) return;
    std::strcpy(count_file, f);
    struct sigaction sa {};
    sa.sa_handler = on_usr2;
    sa.sa_flags = SA_RESTART;
    ::sigaction(SIGUSR2, &sa, nullptr);
}

} // namespace

extern "C" {

void* malloc(std::size_t n) {
    count(allocations);
    return __libc_malloc(n);
}
void* calloc(std::size_t n, std::size_t size) {
    count(allocations);
    return __libc_calloc(n, size);
}
void* realloc(void* p, std::size_t n) {
    count(allocations);
    return __libc_realloc(p, n);
}
void free(void* p) {
    __libc_free(p);
}
void* memalign(std::size_t align, std::size_t n) {
    count(allocations);
    return __libc_memalign(align, n);
}
void* aligned_alloc(std::size_t align, std::size_t n) {
    count(allocations);
    return __libc_memalign(align, n);
}
int posix_memalign(void** out, std::size_t align, std::size_t n) {
    count(allocations);
    void* p = __libc_memalign(align, n);
    if (p == nullptr) return ENOMEM;
    *out = p;
    return 0;
}

ssize_t write(int fd, const void* buf, std::size_t n) {
    count(writes);
    return ::syscall(SYS_write, fd, buf, n);
}
ssize_t writev(int fd, const struct iovec* iov, int n) {
    count(writes);
    return ::syscall(SYS_writev, fd, iov, n);
}
ssize_t pwrite64(int fd, const void* buf, std::size_t n, off_t off) {
    count(writes);
    return ::syscall(SYS_pwrite64, fd, buf, n, off);
}
ssize_t pwrite(int fd, const void* buf, std::size_t n, off_t off) {
    count(writes);
    return ::syscall(SYS_pwrite64, fd, buf, n, off);
}
ssize_t send(int fd, const void* buf, std::size_t n, int flags) {
    count(writes);
    return ::syscall(SYS_sendto, fd, buf, n, flags, nullptr, 0);
}
ssize_t sendto(int fd, const void* buf, std::size_t n, int flags, const struct sockaddr* to,
               socklen_t len) {
    count(writes);
    return ::syscall(SYS_sendto, fd, buf, n, flags, to, len);
}
ssize_t sendmsg(int fd, const struct msghdr* msg, int flags) {
    count(writes);
    return ::syscall(SYS_sendmsg, fd, msg, flags);
}
}
