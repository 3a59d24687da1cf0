// Loads librelp.so.0 on first use and calls it through the pointers found (see the header).
#include "CLibRelp.h"
#include <CSharedLibrary.h>
#include <pthread.h>

static struct {
    relpRetVal (*engine_construct)(relpEngine_t **);
    relpRetVal (*engine_destruct)(relpEngine_t **);
    relpRetVal (*engine_set_dbgprint)(relpEngine_t *, void (*)(char *, ...));
    relpRetVal (*engine_set_enable_cmd)(relpEngine_t *, unsigned char *, relpCmdEnaState_t);
    void (*engine_set_shutdown_immediate)(relpEngine_t *, int *);
    relpRetVal (*engine_set_on_error)(relpEngine_t *, void (*)(void *, char *, char *, relpRetVal));
    relpRetVal (*engine_client_construct)(relpEngine_t *, relpClt_t **);
    relpRetVal (*engine_client_destruct)(relpEngine_t *, relpClt_t **);
    relpRetVal (*client_set_timeout)(relpClt_t *, unsigned);
    relpRetVal (*client_set_connect_timeout)(relpClt_t *, int);
    relpRetVal (*client_set_user_pointer)(relpClt_t *, void *);
    relpRetVal (*client_connect)(relpClt_t *, int, unsigned char *, unsigned char *);
    relpRetVal (*client_send_syslog)(relpClt_t *, unsigned char *, size_t);
} relp;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static char failure[256];

static void load(void) {
    struct overtime_symbol symbols[] = {
        {"relpEngineConstruct", (void **)&relp.engine_construct},
        {"relpEngineDestruct", (void **)&relp.engine_destruct},
        {"relpEngineSetDbgprint", (void **)&relp.engine_set_dbgprint},
        {"relpEngineSetEnableCmd", (void **)&relp.engine_set_enable_cmd},
        {"relpEngineSetShutdownImmdtPtr", (void **)&relp.engine_set_shutdown_immediate},
        {"relpEngineSetOnErr", (void **)&relp.engine_set_on_error},
        {"relpEngineCltConstruct", (void **)&relp.engine_client_construct},
        {"relpEngineCltDestruct", (void **)&relp.engine_client_destruct},
        {"relpCltSetTimeout", (void **)&relp.client_set_timeout},
        {"relpCltSetConnTimeout", (void **)&relp.client_set_connect_timeout},
        {"relpCltSetUsrPtr", (void **)&relp.client_set_user_pointer},
        {"relpCltConnect", (void **)&relp.client_connect},
        {"relpCltSendSyslog", (void **)&relp.client_send_syslog},
    };
    size_t count = sizeof symbols / sizeof symbols[0];
    if (overtime_load_library("librelp.so.0", symbols, count, failure, sizeof failure) != 0) return;
}

int overtime_relp_load(char *error, size_t capacity) {
    pthread_once(&once, load);
    return overtime_load_outcome(failure, error, capacity);
}

relpRetVal overtime_relp_engine_construct(relpEngine_t **engine) { return relp.engine_construct(engine); }
relpRetVal overtime_relp_engine_destruct(relpEngine_t **engine) { return relp.engine_destruct(engine); }
relpRetVal overtime_relp_engine_silence(relpEngine_t *engine) { return relp.engine_set_dbgprint(engine, NULL); }
relpRetVal overtime_relp_engine_set_enable_cmd(relpEngine_t *engine, unsigned char *command, relpCmdEnaState_t state) {
    return relp.engine_set_enable_cmd(engine, command, state);
}
void overtime_relp_engine_set_shutdown_immediate(relpEngine_t *engine, int *flag) {
    relp.engine_set_shutdown_immediate(engine, flag);
}
relpRetVal overtime_relp_engine_set_on_error(
    relpEngine_t *engine, void (*callback)(void *user, char *object, char *message, relpRetVal code)) {
    return relp.engine_set_on_error(engine, callback);
}
relpRetVal overtime_relp_engine_client_construct(relpEngine_t *engine, relpClt_t **client) {
    return relp.engine_client_construct(engine, client);
}
relpRetVal overtime_relp_engine_client_destruct(relpEngine_t *engine, relpClt_t **client) {
    return relp.engine_client_destruct(engine, client);
}
relpRetVal overtime_relp_client_set_timeout(relpClt_t *client, unsigned timeout) {
    return relp.client_set_timeout(client, timeout);
}
relpRetVal overtime_relp_client_set_connect_timeout(relpClt_t *client, int timeout) {
    return relp.client_set_connect_timeout(client, timeout);
}
relpRetVal overtime_relp_client_set_user_pointer(relpClt_t *client, void *user) {
    return relp.client_set_user_pointer(client, user);
}
relpRetVal overtime_relp_client_connect(relpClt_t *client, int family, unsigned char *port, unsigned char *host) {
    return relp.client_connect(client, family, port, host);
}
relpRetVal overtime_relp_client_send_syslog(relpClt_t *client, unsigned char *message, size_t length) {
    return relp.client_send_syslog(client, message, length);
}
