/* Hashing shared by the shim's parts (header only, everything inline). Part
 * of base/'s boundary: included through tr_core.h. */
#ifndef TR_HASH_H
#define TR_HASH_H

#include <stddef.h>
#include <stdint.h>

/* MurmurHash3's 64-bit finalizer: hash table slots (stacks, symbols, live
 * allocations, the per-thread stack cache). */
static inline uint64_t tr_fmix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

/* Combines v into h: communicator ids (identical on every member rank, so
 * this must never change). */
static inline uint64_t tr_mix64(uint64_t h, uint64_t v)
{
    uint64_t z = h ^ (v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2));
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* FNV-1a of p[0..n), combined into h with tr_mix64. */
static inline uint64_t tr_hash_bytes(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    uint64_t f = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) f = (f ^ b[i]) * 0x100000001b3ull;
    return tr_mix64(h, f);
}

#endif
