/* Error names and strings (runtime and driver) and last-error semantics. */
#include <cuda.h>
#include "rttest.h"

static void *other_thread(void *arg)
{
    (void)arg;
    /* The last error is per thread: the main thread's error is not here. */
    EXPECT(cudaPeekAtLastError() == cudaSuccess, "a new thread starts without an error");
    EXPECT_ERR(cudaSetDevice(-1), cudaErrorInvalidDevice);
    EXPECT(cudaGetLastError() == cudaErrorInvalidDevice, "its own error");
    return NULL;
}

int main(void)
{
    rt_watchdog(30);

    /* Names and strings are CUDA's own. */
    EXPECT(strcmp(cudaGetErrorName(cudaSuccess), "cudaSuccess") == 0, "name");
    EXPECT(strcmp(cudaGetErrorString(cudaSuccess), "no error") == 0, "string");
    EXPECT(strcmp(cudaGetErrorName(cudaErrorInvalidValue), "cudaErrorInvalidValue") == 0, "name");
    EXPECT(strcmp(cudaGetErrorString(cudaErrorInvalidValue), "invalid argument") == 0, "string");
    EXPECT(strcmp(cudaGetErrorString(cudaErrorMemoryAllocation), "out of memory") == 0, "string");
    EXPECT(strcmp(cudaGetErrorString(cudaErrorInvalidDevice), "invalid device ordinal") == 0, "string");
    EXPECT(strcmp(cudaGetErrorString(cudaErrorNotReady), "device not ready") == 0, "string");
    EXPECT(strcmp(cudaGetErrorName(cudaErrorInvalidResourceHandle),
                  "cudaErrorInvalidResourceHandle") == 0, "name");
    EXPECT(strcmp(cudaGetErrorString(cudaErrorInvalidResourceHandle),
                  "invalid resource handle") == 0, "string");
    EXPECT(strcmp(cudaGetErrorString(cudaErrorInvalidMemcpyDirection),
                  "invalid copy direction for memcpy") == 0, "string");
    EXPECT(strcmp(cudaGetErrorString(cudaErrorPeerAccessAlreadyEnabled),
                  "peer access is already enabled") == 0, "string");
    EXPECT(strcmp(cudaGetErrorName(cudaErrorHostMemoryNotRegistered),
                  "cudaErrorHostMemoryNotRegistered") == 0, "name");
    EXPECT(strcmp(cudaGetErrorString(cudaErrorUnknown), "unknown error") == 0, "string");
    EXPECT(strcmp(cudaGetErrorName(cudaErrorApiFailureBase), "cudaErrorApiFailureBase") == 0, "name");
    EXPECT(strcmp(cudaGetErrorName((cudaError_t)10), "unrecognized error code") == 0, "unknown");
    EXPECT(strcmp(cudaGetErrorString((cudaError_t)123456), "unrecognized error code") == 0, "unknown");

    /* Every value of the enum the runtime can return has its own name. */
    static const cudaError_t codes[] = {
        cudaErrorInvalidValue, cudaErrorMemoryAllocation, cudaErrorInitializationError,
        cudaErrorInvalidPitchValue, cudaErrorInvalidMemcpyDirection, cudaErrorInvalidDevice,
        cudaErrorNoDevice, cudaErrorInvalidResourceHandle, cudaErrorNotReady,
        cudaErrorPeerAccessAlreadyEnabled, cudaErrorPeerAccessNotEnabled,
        cudaErrorHostMemoryAlreadyRegistered, cudaErrorHostMemoryNotRegistered,
        cudaErrorUnsupportedLimit, cudaErrorNotSupported, cudaErrorIllegalAddress,
        cudaErrorLaunchFailure, cudaErrorStreamCaptureUnsupported, cudaErrorTimeout,
        cudaErrorInsufficientDriver, cudaErrorSymbolNotFound, cudaErrorUnknown,
    };
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++) {
        EXPECT(strncmp(cudaGetErrorName(codes[i]), "cudaError", 9) == 0, "code %d", codes[i]);
        EXPECT(strcmp(cudaGetErrorString(codes[i]), "unrecognized error code") != 0, "code %d", codes[i]);
    }

    /* Last error: set by a failing call, kept by successful ones, read and
     * reset by cudaGetLastError, read only by cudaPeekAtLastError. */
    EXPECT(cudaGetLastError() == cudaSuccess, "clean start");
    int count;
    CUDACHECK(cudaGetDeviceCount(&count));
    EXPECT_ERR(cudaSetDevice(count), cudaErrorInvalidDevice);
    CUDACHECK(cudaSetDevice(0));
    EXPECT(cudaPeekAtLastError() == cudaErrorInvalidDevice, "success keeps the error");
    EXPECT(cudaPeekAtLastError() == cudaErrorInvalidDevice, "peek does not reset");
    EXPECT(cudaGetLastError() == cudaErrorInvalidDevice, "get returns it");
    EXPECT(cudaGetLastError() == cudaSuccess, "get reset it");
    EXPECT_ERR(cudaMalloc(NULL, 16), cudaErrorInvalidValue);
    EXPECT_ERR(cudaMemcpy(NULL, NULL, 1, (enum cudaMemcpyKind)7), cudaErrorInvalidMemcpyDirection);
    EXPECT(cudaGetLastError() == cudaErrorInvalidMemcpyDirection, "the latest error wins");

    pthread_t t;
    EXPECT_ERR(cudaSetDevice(-5), cudaErrorInvalidDevice);
    pthread_create(&t, NULL, other_thread, NULL);
    pthread_join(t, NULL);
    EXPECT(cudaGetLastError() == cudaErrorInvalidDevice, "the other thread left ours alone");

    /* The driver's names and strings. */
    const char *s = NULL;
    EXPECT(cuGetErrorName(CUDA_ERROR_OUT_OF_MEMORY, &s) == CUDA_SUCCESS && strcmp(s, "CUDA_ERROR_OUT_OF_MEMORY") == 0, "driver name");
    EXPECT(cuGetErrorString(CUDA_ERROR_OUT_OF_MEMORY, &s) == CUDA_SUCCESS && strcmp(s, "out of memory") == 0, "driver string");
    EXPECT(cuGetErrorName(CUDA_ERROR_INVALID_HANDLE, &s) == CUDA_SUCCESS && strcmp(s, "CUDA_ERROR_INVALID_HANDLE") == 0, "driver name");
    EXPECT(cuGetErrorString(CUDA_ERROR_NOT_INITIALIZED, &s) == CUDA_SUCCESS && strcmp(s, "initialization error") == 0, "driver string");
    EXPECT(cuGetErrorName(CUDA_SUCCESS, &s) == CUDA_SUCCESS && strcmp(s, "CUDA_SUCCESS") == 0, "driver name");
    s = "unchanged";
    EXPECT(cuGetErrorName((CUresult)12345, &s) == CUDA_ERROR_INVALID_VALUE && s == NULL, "unknown driver code");
    EXPECT(cuGetErrorString((CUresult)12345, &s) == CUDA_ERROR_INVALID_VALUE && s == NULL, "unknown driver code");
    EXPECT(cuGetErrorName(CUDA_SUCCESS, NULL) == CUDA_ERROR_INVALID_VALUE, "NULL out");
    printf("errors OK\n");
    return 0;
}
