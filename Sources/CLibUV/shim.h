#ifndef OVERTIME_CLIBUV_SHIM_H
#define OVERTIME_CLIBUV_SHIM_H
// Swift calls libuv directly; this header brings it in (and timerfd, for deadlines
// finer than libuv's milliseconds), plus the calls Swift cannot make itself.
#include <uv.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/timerfd.h>

/// Names the calling thread (at most 15 bytes are kept), for `top -H`, gdb and perf.
static inline int overtime_set_thread_name(const char *name) {
    return prctl(PR_SET_NAME, (unsigned long)name, 0, 0, 0);
}
/// The user ID of the process at the other end of a connected Unix socket
/// (SO_PEERCRED; `struct ucred` itself needs _GNU_SOURCE, so its layout is spelled out).
static inline int overtime_peer_uid(int fd, unsigned int *uid) {
    struct { int pid; unsigned int uid; unsigned int gid; } credentials;
    socklen_t length = sizeof(credentials);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &length) != 0) return -1;
    *uid = credentials.uid;
    return 0;
}
/// `accept4`: Swift's Glibc module lacks it (it needs _GNU_SOURCE), and `accept` plus
/// `fcntl` would leave a moment in which a child spawned by another thread inherits the
/// client. Declared under its own name, bound to the C library's symbol, so it never
/// clashes with the _GNU_SOURCE prototype.
extern int overtime_accept4(int fd, void *address, void *length, int flags) __asm__("accept4");
/// 0 when epoll (libuv's backend) can watch `fd` — for urgent data (`POLLPRI`, what a
/// pressure stall information file reports) or for reading — else the errno: a plain file
/// is EPERM.
#include <errno.h>
#include <sys/epoll.h>
#include <unistd.h>
static inline int overtime_check_pollable(int fd, int urgent) {
    int probe = epoll_create1(EPOLL_CLOEXEC);
    if (probe < 0) return errno;
    struct epoll_event event = { .events = urgent ? EPOLLPRI : EPOLLIN };
    int result = epoll_ctl(probe, EPOLL_CTL_ADD, fd, &event) == 0 ? 0 : errno;
    close(probe);
    return result;
}
/// A ring of io_uring that holds a reference to `fd`'s open file (registered as its fixed
/// file), else -1 with errno set (io_uring turned off, or refused by a seccomp filter, as
/// container runtimes' default profiles do). Closing the ring ends that reference on a kernel
/// worker, after the caller's close returns; so a last close that waits for a kernel grace
/// period (a pressure stall information trigger's, libuv's inotify descriptor's: 5-20 ms) is
/// off the process's stop and exit paths. Nothing is ever submitted to the ring.
#include <string.h>
#include <sys/syscall.h>
#if defined(__NR_io_uring_setup) && defined(__NR_io_uring_register)
#include <linux/io_uring.h>
static inline int overtime_hold_in_io_uring(int fd) {
    struct io_uring_params parameters;
    memset(&parameters, 0, sizeof(parameters));
    int ring = (int)syscall(__NR_io_uring_setup, 1, &parameters);
    if (ring < 0) return -1;
    if (syscall(__NR_io_uring_register, ring, IORING_REGISTER_FILES, &fd, 1) != 0) {
        int code = errno;
        close(ring);
        errno = code;
        return -1;
    }
    return ring;
}
#else
static inline int overtime_hold_in_io_uring(int fd) {
    (void)fd;
    errno = ENOSYS;
    return -1;
}
#endif
#if defined(__GLIBC__)
#include <malloc.h>
/// Returns the free memory at the top of glibc's heaps to the system (after a memory
/// warning); musl returns it itself, so there it does nothing.
static inline void overtime_return_freed_memory(void) { (void)malloc_trim(0); }
#else
static inline void overtime_return_freed_memory(void) {}
#endif
#endif
