#ifndef OVERTIME_CLIBCURL_H
#define OVERTIME_CLIBCURL_H
// libcurl, loaded when the first HTTP sink needs it (dlopen of libcurl.so.4), not linked:
// a program that never uploads over HTTP does not load libcurl's tree of TLS, Kerberos,
// LDAP and SSH libraries. libcurl's headers give the types; these functions call through
// the pointers the loader found, and wrap the variadic setopt/getinfo Swift cannot call.
#include <stddef.h>
#include <curl/curl.h>

/// Loads libcurl once (later calls return the first outcome): 0 when loaded, else -1 and
/// the reason in `error` (NUL-terminated, cut to `capacity`).
int overtime_curl_load(char *error, size_t capacity);

CURLcode overtime_curl_global_init(long flags);
CURL *overtime_curl_easy_init(void);
void overtime_curl_easy_cleanup(CURL *handle);
const char *overtime_curl_easy_strerror(CURLcode code);
CURLM *overtime_curl_multi_init(void);
CURLMcode overtime_curl_multi_cleanup(CURLM *multi);
CURLMcode overtime_curl_multi_add_handle(CURLM *multi, CURL *handle);
CURLMcode overtime_curl_multi_remove_handle(CURLM *multi, CURL *handle);
CURLMcode overtime_curl_multi_assign(CURLM *multi, curl_socket_t socket, void *pointer);
CURLMcode overtime_curl_multi_socket_action(CURLM *multi, curl_socket_t socket, int mask, int *running);
CURLMsg *overtime_curl_multi_info_read(CURLM *multi, int *left);
const char *overtime_curl_multi_strerror(CURLMcode code);
struct curl_slist *overtime_curl_slist_append(struct curl_slist *list, const char *string);
void overtime_curl_slist_free_all(struct curl_slist *list);

CURLcode overtime_easy_setopt_long(CURL *handle, CURLoption option, long value);
CURLcode overtime_easy_setopt_offset(CURL *handle, CURLoption option, curl_off_t value);
CURLcode overtime_easy_setopt_pointer(CURL *handle, CURLoption option, void *value);
CURLcode overtime_easy_setopt_string(CURL *handle, CURLoption option, const char *value);
CURLcode overtime_easy_setopt_read_function(CURL *handle, size_t (*function)(char *, size_t, size_t, void *));
CURLcode overtime_easy_setopt_seek_function(CURL *handle, int (*function)(void *, curl_off_t, int));
CURLcode overtime_easy_setopt_header_function(CURL *handle, size_t (*function)(char *, size_t, size_t, void *));
CURLcode overtime_easy_setopt_write_function(CURL *handle, size_t (*function)(char *, size_t, size_t, void *));
CURLcode overtime_easy_getinfo_response_code(CURL *handle, long *code);
CURLcode overtime_easy_getinfo_private(CURL *handle, char **pointer);
CURLMcode overtime_multi_setopt_pointer(CURLM *multi, CURLMoption option, void *value);
CURLMcode overtime_multi_setopt_socket_function(CURLM *multi, int (*function)(CURL *, curl_socket_t, int, void *, void *));
CURLMcode overtime_multi_setopt_timer_function(CURLM *multi, int (*function)(CURLM *, long, void *));
#endif
