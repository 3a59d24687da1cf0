#ifndef OVERTIME_CSQLITE_SHIM_H
#define OVERTIME_CSQLITE_SHIM_H
// The schedule store calls the system's SQLite directly; this header brings it in, plus
// the destructor constant Swift cannot spell (SQLITE_TRANSIENT is a cast of -1).
#include <sqlite3.h>

/// SQLite copies a bound string or blob before the bind call returns.
static inline sqlite3_destructor_type overtime_sqlite_transient(void) { return SQLITE_TRANSIENT; }
#endif
