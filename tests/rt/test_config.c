/* TRSIM_DEVICE_COUNT and TRSIM_DEVICE_MEM parsing. The test registrations
 * set those variables and what to expect:
 *   EXPECT_COUNT  device count, EXPECT_MEM  capacity in bytes,
 *   EXPECT_WARNINGS  how many "trsim:" lines stderr gets. */
#include "rttest.h"

int main(void)
{
    rt_watchdog(30);
    int want_count = trtest_env_int("EXPECT_COUNT", 8);
    const char *mem = getenv("EXPECT_MEM");
    size_t want_mem = mem ? strtoull(mem, NULL, 10) : (size_t)80 << 30;
    int want_warnings = trtest_env_int("EXPECT_WARNINGS", 0);

    /* Catch what the library prints while it reads its configuration. */
    fflush(stderr);
    int saved = dup(2);
    FILE *capture = tmpfile();
    if (saved < 0 || !capture)
        FAIL("cannot capture stderr");
    dup2(fileno(capture), 2);

    int count = -1;
    struct cudaDeviceProp prop;
    size_t free_b = 0, total_b = 0;
    cudaError_t e1 = cudaGetDeviceCount(&count);
    cudaError_t e2 = cudaGetDeviceProperties(&prop, count - 1);
    cudaError_t e3 = cudaMemGetInfo(&free_b, &total_b);
    cudaError_t e4 = cudaSetDevice(count);

    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    char text[4096] = "";
    rewind(capture);
    size_t n = fread(text, 1, sizeof text - 1, capture);
    text[n] = '\0';
    fputs(text, stderr);        /* keep it visible in the test log */

    EXPECT(e1 == cudaSuccess && e2 == cudaSuccess && e3 == cudaSuccess, "queries succeed");
    EXPECT(e4 == cudaErrorInvalidDevice, "device %d is past the end", count);
    EXPECT(count == want_count, "count %d, expected %d", count, want_count);
    EXPECT(prop.totalGlobalMem == want_mem, "capacity %zu, expected %zu", prop.totalGlobalMem, want_mem);
    EXPECT(total_b == want_mem && free_b == want_mem, "cudaMemGetInfo %zu/%zu", free_b, total_b);
    int warnings = 0;
    for (const char *p = text; (p = strstr(p, "trsim: ")); p++)
        warnings++;
    EXPECT(warnings == want_warnings, "%d warnings, expected %d", warnings, want_warnings);
    printf("config OK: %d devices of %zu bytes\n", count, want_mem);
    return 0;
}
