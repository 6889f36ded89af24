/* Helpers for the runtime tests: gates that hold a stream's worker inside a
 * host function until the test opens them (so a test can look at a stream
 * while it provably has pending work), an execution-order log, and a
 * watchdog that turns a hang into a failure with a message. */
#ifndef RTTEST_H
#define RTTEST_H

#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdatomic.h>
#include "../common/trtest.h"

/* trtest.h's EXPECT puts the condition's text after the caller's format
 * arguments, so it only works without arguments; this one takes printf
 * arguments in order. */
#undef EXPECT
#define EXPECT(cond, ...) do { if (!(cond)) { \
    fprintf(stderr, "FAIL %s:%d: expected %s: ", __FILE__, __LINE__, #cond); \
    fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); exit(1); } } while (0)

/* The call returns exactly want. */
#define EXPECT_ERR(call, want) do { cudaError_t e_ = (call); \
    if (e_ != (want)) FAIL("%s -> %s, expected %s", #call, cudaGetErrorName(e_), \
                           cudaGetErrorName(want)); } while (0)

static inline void rt_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static inline void rt_watchdog_fired(int sig)
{
    (void)sig;
    static const char msg[] = "FAIL: watchdog: the test is stuck (a call blocked that should not)\n";
    ssize_t n = write(2, msg, sizeof msg - 1);
    (void)n;
    _exit(1);
}

/* Fails the test when it runs longer than seconds. */
static inline void rt_watchdog(unsigned seconds)
{
    signal(SIGALRM, rt_watchdog_fired);
    alarm(seconds);
}

typedef struct {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int open;
    int entered;            /* a worker is (or was) waiting in it */
} rt_gate;

static inline void rt_gate_init(rt_gate *g)
{
    pthread_mutex_init(&g->lock, NULL);
    pthread_cond_init(&g->cond, NULL);
    g->open = 0;
    g->entered = 0;
}

/* Host function: blocks the stream until the gate opens. */
static inline void rt_gate_pass(void *arg)
{
    rt_gate *g = arg;
    pthread_mutex_lock(&g->lock);
    g->entered = 1;
    pthread_cond_broadcast(&g->cond);
    while (!g->open)
        pthread_cond_wait(&g->cond, &g->lock);
    pthread_mutex_unlock(&g->lock);
}

static inline void rt_gate_open(rt_gate *g)
{
    pthread_mutex_lock(&g->lock);
    g->open = 1;
    pthread_cond_broadcast(&g->cond);
    pthread_mutex_unlock(&g->lock);
}

/* Waits until a worker reached the gate. */
static inline void rt_gate_wait_entered(rt_gate *g)
{
    pthread_mutex_lock(&g->lock);
    while (!g->entered)
        pthread_cond_wait(&g->cond, &g->lock);
    pthread_mutex_unlock(&g->lock);
}

/* An order log: host functions append their tag. */
#define RT_LOG_MAX 4096
typedef struct {
    atomic_int n;
    int tags[RT_LOG_MAX];
} rt_log;

typedef struct {
    rt_log *log;
    int tag;
} rt_log_entry;

static inline void rt_log_append(void *arg)
{
    rt_log_entry *e = arg;
    int i = atomic_fetch_add(&e->log->n, 1);
    if (i < RT_LOG_MAX)
        e->log->tags[i] = e->tag;
}

/* Returns the position of tag in the log, -1 when absent. */
static inline int rt_log_pos(rt_log *log, int tag)
{
    int n = atomic_load(&log->n);
    for (int i = 0; i < n && i < RT_LOG_MAX; i++)
        if (log->tags[i] == tag)
            return i;
    return -1;
}

#endif
