#ifndef OVERTIME_CLIBCURL_SHIM_H
#define OVERTIME_CLIBCURL_SHIM_H
// libcurl's setopt functions are variadic, which Swift cannot call: these typed
// wrappers are the only shims; everything else is called directly.
#include <curl/curl.h>

static inline CURLcode overtime_easy_setopt_long(CURL *handle, CURLoption option, long value) {
    return curl_easy_setopt(handle, option, value);
}
static inline CURLcode overtime_easy_setopt_offset(CURL *handle, CURLoption option, curl_off_t value) {
    return curl_easy_setopt(handle, option, value);
}
static inline CURLcode overtime_easy_setopt_pointer(CURL *handle, CURLoption option, void *value) {
    return curl_easy_setopt(handle, option, value);
}
static inline CURLcode overtime_easy_setopt_string(CURL *handle, CURLoption option, const char *value) {
    return curl_easy_setopt(handle, option, value);
}
static inline CURLcode overtime_easy_setopt_read_function(
    CURL *handle, size_t (*function)(char *, size_t, size_t, void *)) {
    return curl_easy_setopt(handle, CURLOPT_READFUNCTION, function);
}
static inline CURLcode overtime_easy_setopt_header_function(
    CURL *handle, size_t (*function)(char *, size_t, size_t, void *)) {
    return curl_easy_setopt(handle, CURLOPT_HEADERFUNCTION, function);
}
static inline CURLcode overtime_easy_setopt_write_function(
    CURL *handle, size_t (*function)(char *, size_t, size_t, void *)) {
    return curl_easy_setopt(handle, CURLOPT_WRITEFUNCTION, function);
}
static inline CURLcode overtime_easy_getinfo_response_code(CURL *handle, long *code) {
    return curl_easy_getinfo(handle, CURLINFO_RESPONSE_CODE, code);
}
static inline CURLcode overtime_easy_getinfo_private(CURL *handle, char **pointer) {
    return curl_easy_getinfo(handle, CURLINFO_PRIVATE, pointer);
}
static inline CURLMcode overtime_multi_setopt_pointer(CURLM *multi, CURLMoption option, void *value) {
    return curl_multi_setopt(multi, option, value);
}
static inline CURLMcode overtime_multi_setopt_socket_function(
    CURLM *multi, int (*function)(CURL *, curl_socket_t, int, void *, void *)) {
    return curl_multi_setopt(multi, CURLMOPT_SOCKETFUNCTION, function);
}
static inline CURLMcode overtime_multi_setopt_timer_function(
    CURLM *multi, int (*function)(CURLM *, long, void *)) {
    return curl_multi_setopt(multi, CURLMOPT_TIMERFUNCTION, function);
}
#endif
