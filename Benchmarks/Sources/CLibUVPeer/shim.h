#ifndef OVERTIME_BENCH_UV_SHIM_H
#define OVERTIME_BENCH_UV_SHIM_H
#include <uv.h>
#include <sys/syscall.h>
#include <unistd.h>

// The kernel's ID of the calling thread, to read its counters in /proc/self/task.
#endif
