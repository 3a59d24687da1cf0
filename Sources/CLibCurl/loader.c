// Loads libcurl.so.4 on first use and calls it through the pointers found (see the header).
#include "CLibCurl.h"
#include <CSharedLibrary.h>
#include <pthread.h>
#include <stdio.h>

static struct {
    CURLcode (*global_init)(long);
    CURL *(*easy_init)(void);
    void (*easy_cleanup)(CURL *);
    const char *(*easy_strerror)(CURLcode);
    CURLcode (*easy_setopt)(CURL *, CURLoption, ...);
    CURLcode (*easy_getinfo)(CURL *, CURLINFO, ...);
    CURLM *(*multi_init)(void);
    CURLMcode (*multi_cleanup)(CURLM *);
    CURLMcode (*multi_add_handle)(CURLM *, CURL *);
    CURLMcode (*multi_remove_handle)(CURLM *, CURL *);
    CURLMcode (*multi_assign)(CURLM *, curl_socket_t, void *);
    CURLMcode (*multi_socket_action)(CURLM *, curl_socket_t, int, int *);
    CURLMsg *(*multi_info_read)(CURLM *, int *);
    const char *(*multi_strerror)(CURLMcode);
    CURLMcode (*multi_setopt)(CURLM *, CURLMoption, ...);
    struct curl_slist *(*slist_append)(struct curl_slist *, const char *);
    void (*slist_free_all)(struct curl_slist *);
} curl;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static char failure[256];

static void load(void) {
    struct overtime_symbol symbols[] = {
        {"curl_global_init", (void **)&curl.global_init},
        {"curl_easy_init", (void **)&curl.easy_init},
        {"curl_easy_cleanup", (void **)&curl.easy_cleanup},
        {"curl_easy_strerror", (void **)&curl.easy_strerror},
        {"curl_easy_setopt", (void **)&curl.easy_setopt},
        {"curl_easy_getinfo", (void **)&curl.easy_getinfo},
        {"curl_multi_init", (void **)&curl.multi_init},
        {"curl_multi_cleanup", (void **)&curl.multi_cleanup},
        {"curl_multi_add_handle", (void **)&curl.multi_add_handle},
        {"curl_multi_remove_handle", (void **)&curl.multi_remove_handle},
        {"curl_multi_assign", (void **)&curl.multi_assign},
        {"curl_multi_socket_action", (void **)&curl.multi_socket_action},
        {"curl_multi_info_read", (void **)&curl.multi_info_read},
        {"curl_multi_strerror", (void **)&curl.multi_strerror},
        {"curl_multi_setopt", (void **)&curl.multi_setopt},
        {"curl_slist_append", (void **)&curl.slist_append},
        {"curl_slist_free_all", (void **)&curl.slist_free_all},
    };
    size_t count = sizeof symbols / sizeof symbols[0];
    if (overtime_load_library("libcurl.so.4", symbols, count, failure, sizeof failure) != 0) return;
    // Once, before any other thread can use it (curl_global_init is not thread-safe).
    CURLcode code = curl.global_init(CURL_GLOBAL_DEFAULT);
    if (code != CURLE_OK) snprintf(failure, sizeof failure, "curl_global_init: %s", curl.easy_strerror(code));
}

int overtime_curl_load(char *error, size_t capacity) {
    pthread_once(&once, load);
    return overtime_load_outcome(failure, error, capacity);
}

CURLcode overtime_curl_global_init(long flags) { return curl.global_init(flags); }
CURL *overtime_curl_easy_init(void) { return curl.easy_init(); }
void overtime_curl_easy_cleanup(CURL *handle) { curl.easy_cleanup(handle); }
const char *overtime_curl_easy_strerror(CURLcode code) { return curl.easy_strerror(code); }
CURLM *overtime_curl_multi_init(void) { return curl.multi_init(); }
CURLMcode overtime_curl_multi_cleanup(CURLM *multi) { return curl.multi_cleanup(multi); }
CURLMcode overtime_curl_multi_add_handle(CURLM *multi, CURL *handle) { return curl.multi_add_handle(multi, handle); }
CURLMcode overtime_curl_multi_remove_handle(CURLM *multi, CURL *handle) {
    return curl.multi_remove_handle(multi, handle);
}
CURLMcode overtime_curl_multi_assign(CURLM *multi, curl_socket_t socket, void *pointer) {
    return curl.multi_assign(multi, socket, pointer);
}
CURLMcode overtime_curl_multi_socket_action(CURLM *multi, curl_socket_t socket, int mask, int *running) {
    return curl.multi_socket_action(multi, socket, mask, running);
}
CURLMsg *overtime_curl_multi_info_read(CURLM *multi, int *left) { return curl.multi_info_read(multi, left); }
const char *overtime_curl_multi_strerror(CURLMcode code) { return curl.multi_strerror(code); }
struct curl_slist *overtime_curl_slist_append(struct curl_slist *list, const char *string) {
    return curl.slist_append(list, string);
}
void overtime_curl_slist_free_all(struct curl_slist *list) { curl.slist_free_all(list); }

CURLcode overtime_easy_setopt_long(CURL *handle, CURLoption option, long value) {
    return curl.easy_setopt(handle, option, value);
}
CURLcode overtime_easy_setopt_offset(CURL *handle, CURLoption option, curl_off_t value) {
    return curl.easy_setopt(handle, option, value);
}
CURLcode overtime_easy_setopt_pointer(CURL *handle, CURLoption option, void *value) {
    return curl.easy_setopt(handle, option, value);
}
CURLcode overtime_easy_setopt_string(CURL *handle, CURLoption option, const char *value) {
    return curl.easy_setopt(handle, option, value);
}
CURLcode overtime_easy_setopt_read_function(CURL *handle, size_t (*function)(char *, size_t, size_t, void *)) {
    return curl.easy_setopt(handle, CURLOPT_READFUNCTION, function);
}
CURLcode overtime_easy_setopt_seek_function(CURL *handle, int (*function)(void *, curl_off_t, int)) {
    return curl.easy_setopt(handle, CURLOPT_SEEKFUNCTION, function);
}
CURLcode overtime_easy_setopt_header_function(CURL *handle, size_t (*function)(char *, size_t, size_t, void *)) {
    return curl.easy_setopt(handle, CURLOPT_HEADERFUNCTION, function);
}
CURLcode overtime_easy_setopt_write_function(CURL *handle, size_t (*function)(char *, size_t, size_t, void *)) {
    return curl.easy_setopt(handle, CURLOPT_WRITEFUNCTION, function);
}
CURLcode overtime_easy_getinfo_response_code(CURL *handle, long *code) {
    return curl.easy_getinfo(handle, CURLINFO_RESPONSE_CODE, code);
}
CURLcode overtime_easy_getinfo_private(CURL *handle, char **pointer) {
    return curl.easy_getinfo(handle, CURLINFO_PRIVATE, pointer);
}
CURLMcode overtime_multi_setopt_pointer(CURLM *multi, CURLMoption option, void *value) {
    return curl.multi_setopt(multi, option, value);
}
CURLMcode overtime_multi_setopt_socket_function(CURLM *multi, int (*function)(CURL *, curl_socket_t, int, void *, void *)) {
    return curl.multi_setopt(multi, CURLMOPT_SOCKETFUNCTION, function);
}
CURLMcode overtime_multi_setopt_timer_function(CURLM *multi, int (*function)(CURLM *, long, void *)) {
    return curl.multi_setopt(multi, CURLMOPT_TIMERFUNCTION, function);
}
