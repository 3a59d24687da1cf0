#ifndef OVERTIME_CLIBRELP_H
#define OVERTIME_CLIBRELP_H
// librelp (Debian: librelp-dev's headers, librelp0 at run time), rsyslog's RELP client,
// loaded when the first RELP session needs it (dlopen of librelp.so.0), not linked: a
// program that never sends RELP does not load it and the TLS stack it brings (GnuTLS,
// OpenSSL, p11-kit). These functions call through the pointers the loader found.
#include <stddef.h>
#include <librelp.h>

/// Loads librelp once (later calls return the first outcome): 0 when loaded, else -1
/// and the reason in `error` (NUL-terminated, cut to `capacity`).
int overtime_relp_load(char *error, size_t capacity);

relpRetVal overtime_relp_engine_construct(relpEngine_t **engine);
relpRetVal overtime_relp_engine_destruct(relpEngine_t **engine);
/// A new engine has no debug printer and calls it anyway; its setter takes a variadic
/// function pointer, which Swift cannot spell: NULL selects librelp's silent one.
relpRetVal overtime_relp_engine_silence(relpEngine_t *engine);
relpRetVal overtime_relp_engine_set_enable_cmd(relpEngine_t *engine, unsigned char *command, relpCmdEnaState_t state);
void overtime_relp_engine_set_shutdown_immediate(relpEngine_t *engine, int *flag);
relpRetVal overtime_relp_engine_set_on_error(
    relpEngine_t *engine, void (*callback)(void *user, char *object, char *message, relpRetVal code));
relpRetVal overtime_relp_engine_client_construct(relpEngine_t *engine, relpClt_t **client);
relpRetVal overtime_relp_engine_client_destruct(relpEngine_t *engine, relpClt_t **client);
relpRetVal overtime_relp_client_set_timeout(relpClt_t *client, unsigned timeout);
relpRetVal overtime_relp_client_set_connect_timeout(relpClt_t *client, int timeout);
relpRetVal overtime_relp_client_set_user_pointer(relpClt_t *client, void *user);
relpRetVal overtime_relp_client_connect(relpClt_t *client, int family, unsigned char *port, unsigned char *host);
relpRetVal overtime_relp_client_send_syslog(relpClt_t *client, unsigned char *message, size_t length);
#endif
