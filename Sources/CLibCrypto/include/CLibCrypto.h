#ifndef OVERTIME_CLIBCRYPTO_H
#define OVERTIME_CLIBCRYPTO_H
// SHA-256 and HMAC-SHA256 from the system's OpenSSL (libcrypto.so.3), loaded on first use
// (dlopen), for the S3 sink's request signatures. Debian's libcurl4 is built on OpenSSL,
// so a program that signs requests already maps libcrypto through libcurl: the signer
// adds no library to the process, and nothing is linked into programs that never sign.
#include <stddef.h>
#include <stdint.h>

/// Loads libcrypto once (later calls return the first outcome): 0 when loaded, else -1 and
/// the reason in `error` (NUL-terminated, cut to `capacity`).
int overtime_crypto_load(char *error, size_t capacity);

/// SHA-256 of `length` bytes into `digest` (32 bytes): 0, or -1 if libcrypto failed.
int overtime_sha256(const void *data, size_t length, uint8_t *digest);

/// HMAC-SHA256 of `length` bytes under `key` into `mac` (32 bytes): 0, or -1.
int overtime_hmac_sha256(const void *key, size_t keyLength, const void *data, size_t length, uint8_t *mac);
#endif
