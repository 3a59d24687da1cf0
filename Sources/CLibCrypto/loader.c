// Loads libcrypto.so.3 on first use and calls it through the pointers found (see the header).
// OpenSSL's types stay opaque here: only pointers to them cross, so no OpenSSL headers are needed.
#include "CLibCrypto.h"
#include <CSharedLibrary.h>
#include <pthread.h>

static struct {
    const void *(*sha256)(void);
    int (*digest)(const void *, size_t, unsigned char *, unsigned int *, const void *, void *);
    unsigned char *(*hmac)(const void *, const void *, int, const unsigned char *, size_t, unsigned char *,
                           unsigned int *);
} crypto;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static char failure[256];

static void load(void) {
    struct overtime_symbol symbols[] = {
        {"EVP_sha256", (void **)&crypto.sha256},
        {"EVP_Digest", (void **)&crypto.digest},
        {"HMAC", (void **)&crypto.hmac},
    };
    overtime_load_library("libcrypto.so.3", symbols, sizeof symbols / sizeof symbols[0], failure, sizeof failure);
}

int overtime_crypto_load(char *error, size_t capacity) {
    pthread_once(&once, load);
    return overtime_load_outcome(failure, error, capacity);
}

int overtime_sha256(const void *data, size_t length, uint8_t *digest) {
    unsigned int written = 0;
    return crypto.digest(data, length, digest, &written, crypto.sha256(), NULL) == 1 && written == 32 ? 0 : -1;
}

int overtime_hmac_sha256(const void *key, size_t keyLength, const void *data, size_t length, uint8_t *mac) {
    unsigned int written = 0;
    if (keyLength > 0x7fffffff) return -1;
    return crypto.hmac(crypto.sha256(), key, (int)keyLength, data, length, mac, &written) && written == 32 ? 0 : -1;
}
