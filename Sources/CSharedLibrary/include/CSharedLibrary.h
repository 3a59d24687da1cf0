#ifndef OVERTIME_CSHAREDLIBRARY_H
#define OVERTIME_CSHAREDLIBRARY_H
// Loading a system library on first use (dlopen), for the loaders of libcurl and librelp:
// a program that never uses a sink does not load the library behind it.
#include <stddef.h>

/// A symbol to find, and where its address goes.
struct overtime_symbol {
    const char *name;
    void **slot;
};

/// Opens `library` and fills every symbol's slot: 0, or -1 with the reason in `failure`
/// (NUL-terminated, cut to `capacity`).
int overtime_load_library(
    const char *library, const struct overtime_symbol *symbols, size_t count, char *failure, size_t capacity);

/// What a loader answers: 0 when `failure` is empty, else -1 with it copied into `error`
/// (NUL-terminated, cut to `capacity`).
int overtime_load_outcome(const char *failure, char *error, size_t capacity);
#endif
