#ifndef OVERTIME_CRC32C_H
#define OVERTIME_CRC32C_H
#include <stddef.h>
#include <stdint.h>

/// CRC-32C (Castagnoli) of `length` bytes, continuing from `crc` (0 to start).
/// Uses the CPU's crc32 instruction where there is one (x86-64 SSE 4.2, ARMv8 CRC),
/// slicing-by-8 tables otherwise.
uint32_t overtime_crc32c(uint32_t crc, const void *data, size_t length);
#endif
