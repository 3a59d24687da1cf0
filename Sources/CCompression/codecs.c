// Loads libzstd and zlib on first use and compresses through the pointers found (see the header).
#include "CCompression.h"
#include <CSharedLibrary.h>
#include <limits.h>
#include <pthread.h>
#include <zlib.h>
#include <zstd.h>

static struct {
    size_t (*compressBound)(size_t);
    size_t (*compress)(void *, size_t, const void *, size_t, int);
    unsigned (*isError)(size_t);
    ZSTD_DCtx *(*createDCtx)(void);
    size_t (*freeDCtx)(ZSTD_DCtx *);
    size_t (*decompressStream)(ZSTD_DCtx *, ZSTD_outBuffer *, ZSTD_inBuffer *);
} zstd;

static struct {
    int (*deflateStart)(z_streamp, int, int, int, int, int, const char *, int);
    int (*deflate)(z_streamp, int);
    int (*deflateEnd)(z_streamp);
    int (*inflateStart)(z_streamp, int, const char *, int);
    int (*inflate)(z_streamp, int);
    int (*inflateReset)(z_streamp);
    int (*inflateEnd)(z_streamp);
} zlib;

static pthread_once_t zstdOnce = PTHREAD_ONCE_INIT, zlibOnce = PTHREAD_ONCE_INIT;
static char zstdFailure[256], zlibFailure[256];

static void loadZstd(void) {
    struct overtime_symbol symbols[] = {
        {"ZSTD_compressBound", (void **)&zstd.compressBound},
        {"ZSTD_compress", (void **)&zstd.compress},
        {"ZSTD_isError", (void **)&zstd.isError},
        {"ZSTD_createDCtx", (void **)&zstd.createDCtx},
        {"ZSTD_freeDCtx", (void **)&zstd.freeDCtx},
        {"ZSTD_decompressStream", (void **)&zstd.decompressStream},
    };
    overtime_load_library("libzstd.so.1", symbols, sizeof symbols / sizeof symbols[0], zstdFailure, sizeof zstdFailure);
}

static void loadZlib(void) {
    struct overtime_symbol symbols[] = {
        {"deflateInit2_", (void **)&zlib.deflateStart},
        {"deflate", (void **)&zlib.deflate},
        {"deflateEnd", (void **)&zlib.deflateEnd},
        {"inflateInit2_", (void **)&zlib.inflateStart},
        {"inflate", (void **)&zlib.inflate},
        {"inflateReset", (void **)&zlib.inflateReset},
        {"inflateEnd", (void **)&zlib.inflateEnd},
    };
    overtime_load_library("libz.so.1", symbols, sizeof symbols / sizeof symbols[0], zlibFailure, sizeof zlibFailure);
}

int overtime_codec_load(enum overtime_codec codec, char *error, size_t capacity) {
    if (codec == OVERTIME_CODEC_ZSTD) {
        pthread_once(&zstdOnce, loadZstd);
        return overtime_load_outcome(zstdFailure, error, capacity);
    }
    pthread_once(&zlibOnce, loadZlib);
    return overtime_load_outcome(zlibFailure, error, capacity);
}

// A gzip stream: deflate's window (15 bits) plus 16 for the gzip header and trailer.
enum { GZIP_WINDOW = 15 + 16 };

size_t overtime_codec_bound(enum overtime_codec codec, size_t length) {
    if (codec == OVERTIME_CODEC_ZSTD) return zstd.compressBound(length);
    return length + (length >> 12) + (length >> 14) + (length >> 25) + 13 + 18;
}

int overtime_codec_compress(
    enum overtime_codec codec, int level, const void *input, size_t length, void *output, size_t capacity,
    size_t *written) {
    if (codec == OVERTIME_CODEC_ZSTD) {
        size_t result = zstd.compress(output, capacity, input, length, level);
        if (zstd.isError(result)) return -1;
        *written = result;
        return 0;
    }
    if (length > UINT_MAX || capacity > UINT_MAX) return -1;
    z_stream stream = {0};
    if (zlib.deflateStart(&stream, level, Z_DEFLATED, GZIP_WINDOW, 8, Z_DEFAULT_STRATEGY, ZLIB_VERSION,
                          (int)sizeof stream) != Z_OK)
        return -1;
    stream.next_in = (Bytef *)input;
    stream.avail_in = (uInt)length;
    stream.next_out = output;
    stream.avail_out = (uInt)capacity;
    int result = zlib.deflate(&stream, Z_FINISH);
    *written = stream.total_out;
    zlib.deflateEnd(&stream);
    return result == Z_STREAM_END ? 0 : -1;
}

static int decompressZstd(const void *input, size_t length, void *output, size_t capacity, size_t *written) {
    ZSTD_DCtx *context = zstd.createDCtx();
    if (context == NULL) return -1;
    ZSTD_inBuffer in = {input, length, 0};
    ZSTD_outBuffer out = {output, capacity, 0};
    int outcome = 0;
    size_t left = 1;  // what the current frame still needs; 0 at a frame's end
    while (in.pos < in.size) {
        left = zstd.decompressStream(context, &out, &in);
        if (zstd.isError(left)) {
            outcome = -1;
            break;
        }
        if (out.pos == out.size && (left != 0 || in.pos < in.size)) {
            outcome = 1;
            break;
        }
    }
    if (outcome == 0 && left != 0) outcome = -1;  // cut short inside a frame, or no frame
    zstd.freeDCtx(context);
    *written = out.pos;
    return outcome;
}

static int decompressGzip(const void *input, size_t length, void *output, size_t capacity, size_t *written) {
    if (length > UINT_MAX || capacity > UINT_MAX) return -1;
    z_stream stream = {0};
    if (zlib.inflateStart(&stream, GZIP_WINDOW, ZLIB_VERSION, (int)sizeof stream) != Z_OK) return -1;
    stream.next_in = (Bytef *)input;
    stream.avail_in = (uInt)length;
    stream.next_out = output;
    stream.avail_out = (uInt)capacity;
    int outcome = 0;
    for (;;) {
        int result = zlib.inflate(&stream, Z_NO_FLUSH);
        if (result == Z_STREAM_END) {
            if (stream.avail_in == 0) break;
            if (stream.avail_out == 0) {
                outcome = 1;
                break;
            }
            zlib.inflateReset(&stream);  // the next member of a concatenated stream
            continue;
        }
        if (result == Z_OK || result == Z_BUF_ERROR) {
            if (stream.avail_out == 0) {
                outcome = 1;
                break;
            }
            if (result == Z_OK) continue;
        }
        outcome = -1;  // damaged, or cut short (no progress with input used up)
        break;
    }
    // Counted from the pointer: inflateReset starts total_out again for each member.
    *written = (size_t)(stream.next_out - (Bytef *)output);
    zlib.inflateEnd(&stream);
    return outcome;
}

int overtime_codec_decompress(
    enum overtime_codec codec, const void *input, size_t length, void *output, size_t capacity, size_t *written) {
    if (codec == OVERTIME_CODEC_ZSTD) return decompressZstd(input, length, output, capacity, written);
    return decompressGzip(input, length, output, capacity, written);
}
