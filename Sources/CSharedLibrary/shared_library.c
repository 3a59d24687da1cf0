// Opens a system library and finds its symbols (see the header).
#include "CSharedLibrary.h"
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

int overtime_load_library(
    const char *library, const struct overtime_symbol *symbols, size_t count, char *failure, size_t capacity) {
    void *handle = dlopen(library, RTLD_NOW | RTLD_LOCAL);
    if (handle == NULL) {
        snprintf(failure, capacity, "cannot load %s: %s", library, dlerror());
        return -1;
    }
    for (size_t index = 0; index < count; index++) {
        *symbols[index].slot = dlsym(handle, symbols[index].name);
        if (*symbols[index].slot == NULL) {
            snprintf(failure, capacity, "%s has no %s", library, symbols[index].name);
            return -1;
        }
    }
    return 0;
}

int overtime_load_outcome(const char *failure, char *error, size_t capacity) {
    if (failure[0] == '\0') return 0;
    if (capacity > 0) {
        strncpy(error, failure, capacity - 1);
        error[capacity - 1] = '\0';
    }
    return -1;
}
