#ifndef OVERTIME_CLIBUV_SHIM_H
#define OVERTIME_CLIBUV_SHIM_H
// Swift calls libuv directly; this header brings it in, plus the one call Swift
// cannot make itself (prctl is variadic).
#include <uv.h>
#include <sys/prctl.h>

/// Names the calling thread (at most 15 bytes are kept), for `top -H`, gdb and perf.
static inline int overtime_set_thread_name(const char *name) {
    return prctl(PR_SET_NAME, (unsigned long)name, 0, 0, 0);
}
#endif
