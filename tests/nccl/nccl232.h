/* For the tests of the NCCL 2.29-2.32 functions: NCCL 2.32.3's API from
 * trshim/nccl_abi.h (the toolkit's nccl.h is 2.28's), through trtest.h's
 * TRTEST_NCCL_ABI. Also the initializers of nccl.h that nccl_abi.h leaves
 * out, and small helpers on int32 device buffers. */
#ifndef TRSIM_TEST_NCCL232_H
#define TRSIM_TEST_NCCL232_H

#define TRTEST_NCCL_ABI
#include "../common/trtest.h"

#define TEST_COLLCONFIG_INITIALIZER                                                            \
    {sizeof(ncclCollConfig_t), NCCL_API_MAGIC, NCCL_VERSION_CODE, NULL, NCCL_CONFIG_UNDEF_INT,  \
     NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NULL, 1,              \
     NCCL_CONFIG_UNDEF_INT, 0, NULL}
#define TEST_SIM_INFO_INITIALIZER {sizeof(ncclSimInfo_t), 0x74685283, NCCL_VERSION_CODE, NCCL_UNDEF_FLOAT}
#define TEST_PROPERTIES_INITIALIZER \
    {.size = sizeof(ncclCommProperties_t), .magic = NCCL_API_MAGIC, .version = NCCL_VERSION_CODE}
#define TEST_ENCRYPTION_INITIALIZER \
    {sizeof(ncclEncryptionConfig_t), NCCL_API_MAGIC, NCCL_VERSION_CODE, NCCL_ENCRYPTION_MODE_NONE, NULL}

static inline int32_t *test_dev_ints(size_t n)
{
    int32_t *p;
    CUDACHECK(cudaMalloc((void **)&p, (n ? n : 1) * sizeof *p));
    return p;
}

/* dev[i] = f(i, arg) */
static inline void test_put_ints(int32_t *dev, size_t n, int32_t (*f)(size_t i, int arg), int arg)
{
    int32_t *h = malloc((n ? n : 1) * sizeof *h);
    for (size_t i = 0; i < n; i++) h[i] = f(i, arg);
    CUDACHECK(cudaMemcpy(dev, h, n * sizeof *h, cudaMemcpyHostToDevice));
    free(h);
}

/* dev[i] == f(i, arg) for every i < n, or FAIL naming what */
static inline void test_expect_ints(const int32_t *dev, size_t n, int32_t (*f)(size_t i, int arg), int arg,
                                    const char *what)
{
    int32_t *h = malloc((n ? n : 1) * sizeof *h);
    CUDACHECK(cudaMemcpy(h, dev, n * sizeof *h, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < n; i++)
        if (h[i] != f(i, arg)) FAIL("%s: element %zu is %d, expected %d", what, i, h[i], f(i, arg));
    free(h);
}

/* Rank `from` tells the others that it reached `tag` (a file in the
 * launcher's rendezvous folder); they wait for it. */
static inline void test_flag_set(const char *tag)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.flag", getenv("TRSIM_RDZV"), tag);
    FILE *f = fopen(path, "w");
    if (!f) FAIL("cannot create %s", path);
    fclose(f);
}

static inline void test_flag_wait(const char *tag)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.flag", getenv("TRSIM_RDZV"), tag);
    trtest_wait_file(path, 2);
}

#endif
