/* format/crc32c.c: CRC32C (Castagnoli), the per-image checksum of the shards.
 * zlib only has the IEEE CRC, so this carries its own: the SSE4.2 crc32
 * instruction (8 bytes per step) when the CPU has it, else a slice-by-1
 * table. Both give the standard value (crc32c("123456789") = 0xE3069283). */
#include <stdint.h>
#include <string.h>

#include "data/format/tdata_format.h"

#if defined(__x86_64__)
#include <cpuid.h>
#include <nmmintrin.h>
#define _HAVE_X86 1
#endif

static uint32_t _table[256];
static int _table_ready;

static void _init_table(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        _table[i] = c;
    }
    __atomic_store_n(&_table_ready, 1, __ATOMIC_RELEASE);
}

uint32_t tdata_crc32c_sw(uint32_t crc, const void *buf, size_t len)
{
    const uint8_t *p = buf;
    if (!__atomic_load_n(&_table_ready, __ATOMIC_ACQUIRE))
        _init_table(); /* idempotent: racing threads write the same table */
    crc = ~crc;
    while (len--)
        crc = _table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
    return ~crc;
}

#ifdef _HAVE_X86
__attribute__((target("sse4.2"))) static uint32_t
_crc32c_hw(uint32_t crc, const void *buf, size_t len)
{
    const uint8_t *p = buf;
    uint64_t c = ~crc;
    while (len && ((uintptr_t)p & 7)) {
        c = _mm_crc32_u8((uint32_t)c, *p++);
        len--;
    }
    while (len >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        c = _mm_crc32_u64(c, v);
        p += 8;
        len -= 8;
    }
    while (len--)
        c = _mm_crc32_u8((uint32_t)c, *p++);
    return ~(uint32_t)c;
}

static int _have_sse42(void)
{
    static int cached = -1;
    int v = __atomic_load_n(&cached, __ATOMIC_RELAXED);
    if (v < 0) {
        unsigned a, b, c, d;
        v = __get_cpuid(1, &a, &b, &c, &d) && (c & bit_SSE4_2);
        __atomic_store_n(&cached, v, __ATOMIC_RELAXED);
    }
    return v;
}
#endif

uint32_t tdata_crc32c(uint32_t crc, const void *buf, size_t len)
{
#ifdef _HAVE_X86
    if (_have_sse42())
        return _crc32c_hw(crc, buf, len);
#endif
    return tdata_crc32c_sw(crc, buf, len);
}
