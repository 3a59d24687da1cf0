#ifndef OVERTIME_CLIBRELP_SHIM_H
#define OVERTIME_CLIBRELP_SHIM_H
// librelp (Debian: librelp-dev), rsyslog's RELP client, used as it is.
#include <stddef.h>
#include <librelp.h>

// A new engine has no debug printer and calls it anyway; its setter takes a variadic
// function pointer, which Swift cannot spell: NULL selects librelp's silent one.
static inline relpRetVal overtime_relp_engine_silence(relpEngine_t *engine) {
    return relpEngineSetDbgprint(engine, NULL);
}
#endif
