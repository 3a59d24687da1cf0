#ifndef OVERTIME_CCOMPRESSION_H
#define OVERTIME_CCOMPRESSION_H
// zstd (libzstd.so.1) and gzip (zlib, libz.so.1) for segments on their way to a collector,
// each library loaded on first use (dlopen): a program that uploads uncompressed loads
// neither. Whole buffers in, whole buffers out: a segment is a few MiB at most.
#include <stddef.h>

/// The codecs.
enum overtime_codec { OVERTIME_CODEC_ZSTD = 1, OVERTIME_CODEC_GZIP = 2 };

/// Loads the codec's library once (later calls return the first outcome): 0 when loaded,
/// else -1 and the reason in `error` (NUL-terminated, cut to `capacity`).
int overtime_codec_load(enum overtime_codec codec, char *error, size_t capacity);

/// The most bytes compressing `length` bytes can take.
size_t overtime_codec_bound(enum overtime_codec codec, size_t length);

/// Compresses `length` bytes at `level` into `output` (room for `overtime_codec_bound`):
/// 0 with the size in `written`, or -1.
int overtime_codec_compress(
    enum overtime_codec codec, int level, const void *input, size_t length, void *output, size_t capacity,
    size_t *written);

/// Decompresses every frame (zstd) or member (gzip) of `input` into `output`: 0 with the size
/// in `written`; 1 when `output` fills before the end (give it one byte more than the longest
/// content you accept); -1 when `input` is not a valid, complete stream.
int overtime_codec_decompress(
    enum overtime_codec codec, const void *input, size_t length, void *output, size_t capacity, size_t *written);
#endif
