/* White-box test of tr_memory.c's live-allocation table (included here):
 * random insertions, replacements and removals against a reference, on one
 * thread and on several at once (shards grow while others use them). */
#include "tr_memory.c"

#include <pthread.h>

static int failures;
#define CHECK(cond, ...) do { if (!(cond)) { \
    fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
    fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); if (++failures > 20) exit(1); } } while (0)

static uint64_t rnd(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static uint64_t table_count(mt_table *t)
{
    uint64_t n = 0;
    for (unsigned i = 0; i < MT_SHARDS; i++)
        n += t->shard[i].count;
    return n;
}

/* keys: addresses 256 apart (as an allocator hands them out) in region r */
static uintptr_t key_of(int region, uint32_t i)
{
    return ((uintptr_t)(region + 1) << 40) + (uintptr_t)i * 256;
}

typedef struct {
    mt_table *t;
    int region;
    uint32_t keys;
    long ops;
    uint64_t seed;
    uint64_t live;             /* entries it holds at the end */
} job_t;

static void *run(void *arg)
{
    job_t *job = arg;
    uint64_t *ref = calloc(job->keys, sizeof *ref);   /* size + 1, 0: absent */
    uint64_t seed = job->seed;
    for (long op = 0; op < job->ops; op++) {
        uint64_t r = rnd(&seed);
        uint32_t i = (uint32_t)(r % job->keys);
        uintptr_t key = key_of(job->region, i);
        mt_slot got;
        if ((r >> 32) % 3 != 0) {
            mt_slot v = {key, (r >> 40) & 0xffff, (int32_t)(i % 7), MT_DEVICE};
            int rc = mt_put(job->t, &v, &got);
            CHECK(rc == (ref[i] ? 1 : 0), "put %#lx: %d", (unsigned long)key, rc);
            if (rc == 1)
                CHECK(got.key == key && got.size + 1 == ref[i] && got.device == (int32_t)(i % 7),
                      "replaced entry");
            ref[i] = v.size + 1;
        } else {
            int rc = mt_take(job->t, key, &got);
            CHECK(rc == (ref[i] ? 1 : 0), "take %#lx: %d", (unsigned long)key, rc);
            if (rc)
                CHECK(got.key == key && got.size + 1 == ref[i], "taken entry");
            ref[i] = 0;
        }
    }
    job->live = 0;
    for (uint32_t i = 0; i < job->keys; i++) {
        if (!ref[i])
            continue;
        job->live++;
        mt_slot got;
        if (i % 2) {   /* half removed here, half left for the caller to count */
            CHECK(mt_take(job->t, key_of(job->region, i), &got) == 1 && got.size + 1 == ref[i],
                  "final take");
            job->live--;
        }
    }
    free(ref);
    return NULL;
}

int main(void)
{
    static mt_table t1, t2;
    job_t one = {&t1, 0, 50000, 2000000, 88172645463325252ull, 0};
    run(&one);
    CHECK(table_count(&t1) == one.live, "count %lu, expected %lu",
          (unsigned long)table_count(&t1), (unsigned long)one.live);

    enum { N = 4 };
    job_t jobs[N];
    pthread_t th[N];
    for (int i = 0; i < N; i++) {
        jobs[i] = (job_t){&t2, i, 40000 + 10000 * (uint32_t)i, 600000, 0x1234567ull * (uint64_t)(i + 3), 0};
        pthread_create(&th[i], NULL, run, &jobs[i]);
    }
    uint64_t expect = 0;
    for (int i = 0; i < N; i++) {
        pthread_join(th[i], NULL);
        expect += jobs[i].live;
    }
    CHECK(table_count(&t2) == expect, "count %lu, expected %lu",
          (unsigned long)table_count(&t2), (unsigned long)expect);
    /* probe runs stay short: load factor at most 1/2 */
    for (unsigned s = 0; s < MT_SHARDS; s++)
        CHECK(!t2.shard[s].slots || (uint64_t)t2.shard[s].count * 2 <= (uint64_t)t2.shard[s].mask + 1,
              "shard %u load", s);
    printf("table: %s\n", failures ? "FAILED" : "ok");
    return failures ? 1 : 0;
}
