/* Handle tables: the opaque handles the application holds for streams and
 * events. A handle encodes the table's kind, a slot and the slot's
 * generation, so a destroyed object's handle stays detectably invalid even
 * after its slot is reused, and a handle of one kind never resolves as
 * another. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "sim_internal.h"

/* A handle encodes the table's kind, a slot and the slot's generation;
 * removing an object bumps the generation, so a stale handle no longer
 * resolves even after the slot was reused:
 *   bits 40..63 generation, 8..39 slot + 1, 4..7 kind, 0..3 zero.
 * Handles are never 0, 1 or 2 (the values of the NULL stream,
 * cudaStreamLegacy and cudaStreamPerThread). */
struct handle_slot { void *obj; uint32_t gen; uint32_t next_free; };

struct trsim_handles {
    pthread_mutex_t lock;
    unsigned kind;
    struct handle_slot *slots;
    uint32_t nslots, cap;
    uint32_t free_head;         /* slot index + 1; 0: none free */
};

#define HANDLE_GEN_BITS 24

trsim_handles *trsim_handles_new(unsigned kind)
{
    trsim_handles *t = calloc(1, sizeof *t);
    if (t) {
        pthread_mutex_init(&t->lock, NULL);
        t->kind = kind & 0xf;
    }
    return t;
}

uintptr_t trsim_handle_add(trsim_handles *t, void *obj)
{
    uint32_t slot;
    pthread_mutex_lock(&t->lock);
    if (t->free_head) {
        slot = t->free_head - 1;
        t->free_head = t->slots[slot].next_free;
    } else {
        if (t->nslots == t->cap) {
            uint32_t cap = t->cap ? t->cap * 2 : 64;
            struct handle_slot *slots = realloc(t->slots, cap * sizeof *slots);
            if (!slots) {
                pthread_mutex_unlock(&t->lock);
                return 0;
            }
            t->slots = slots;
            t->cap = cap;
        }
        slot = t->nslots++;
        t->slots[slot].gen = 1;
    }
    t->slots[slot].obj = obj;
    uintptr_t h = ((((uintptr_t)t->slots[slot].gen << 32) | (slot + 1u)) << 8) | (t->kind << 4);
    pthread_mutex_unlock(&t->lock);
    return h;
}

static struct handle_slot *handle_slot(trsim_handles *t, uintptr_t h)
{
    if ((h & 0xff) != t->kind << 4)
        return NULL;
    uint64_t slot = (h >> 8) & 0xffffffffu, gen = h >> 40;
    if (slot == 0 || slot > t->nslots)
        return NULL;
    struct handle_slot *hs = &t->slots[slot - 1];
    return hs->obj && hs->gen == gen ? hs : NULL;
}

void *trsim_handle_get(trsim_handles *t, uintptr_t h)
{
    pthread_mutex_lock(&t->lock);
    struct handle_slot *hs = handle_slot(t, h);
    void *obj = hs ? hs->obj : NULL;
    pthread_mutex_unlock(&t->lock);
    return obj;
}

void *trsim_handle_remove(trsim_handles *t, uintptr_t h)
{
    pthread_mutex_lock(&t->lock);
    struct handle_slot *hs = handle_slot(t, h);
    void *obj = NULL;
    if (hs) {
        obj = hs->obj;
        hs->obj = NULL;
        hs->gen = hs->gen % ((1u << HANDLE_GEN_BITS) - 1) + 1;
        hs->next_free = t->free_head;
        t->free_head = (uint32_t)(hs - t->slots) + 1;
    }
    pthread_mutex_unlock(&t->lock);
    return obj;
}
