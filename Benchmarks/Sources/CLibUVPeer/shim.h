#ifndef OVERTIME_BENCH_UV_SHIM_H
#define OVERTIME_BENCH_UV_SHIM_H
#include <uv.h>
#include <sys/syscall.h>
#include <unistd.h>

// The kernel's ID of the calling thread, to read its counters in /proc/self/task.
static inline int bench_gettid(void) { return (int)syscall(SYS_gettid); }
#endif
