#ifndef OVERTIME_CLIBRELP_SHIM_H
#define OVERTIME_CLIBRELP_SHIM_H
// librelp (Debian: librelp-dev), rsyslog's RELP client, used as it is.
#include <stddef.h>
#include <librelp.h>
#endif
