/* Python call sites, reading memory that may be gone: safe reads (the
 * check's, the writer's) and the strings of code objects (tr_py_code_info,
 * tr_py_code_matches). Interface in tr_python.h; what the files of the frame
 * reader share: tr_python_int.h. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "tr_core.h"
#include "tr_python.h"
#include "tr_python_int.h"

/* ---- safe reads ----------------------------------------------------------------- */

static int g_mem_fd = -2;   /* /proc/self/mem: -2 not opened yet, -1 unavailable */
static pid_t g_mem_pid;     /* the process that opened it (a forked child reopens) */
static pthread_mutex_t g_mem_mu = PTHREAD_MUTEX_INITIALIZER;
_Atomic int tr_py_g_vm_ok = 1;      /* not static: the test hooks of tr_python_init.c */

/* Copies n bytes at address src of this process into dst without faulting:
 * 1 when all were read, 0 otherwise (unmapped, unreadable). */
int tr_py_safe_read(void *dst, uintptr_t src, size_t n)
{
    if (!n) return 1;
    if (!src || src + n < src) return 0;
    if (atomic_load_explicit(&tr_py_g_vm_ok, memory_order_relaxed)) {
        struct iovec l = {dst, n}, r = {(void *)src, n};
        ssize_t got = process_vm_readv(getpid(), &l, 1, &r, 1, 0);
        if (got == (ssize_t)n) return 1;
        if (got >= 0 || errno == EFAULT) return 0;
        /* ENOSYS, EPERM (seccomp, ptrace policy): /proc/self/mem from now on */
        atomic_store_explicit(&tr_py_g_vm_ok, 0, memory_order_relaxed);
    }
    pthread_mutex_lock(&g_mem_mu);
    if (g_mem_fd != -2 && g_mem_pid != getpid()) {
        /* opened by the parent: that file reads the parent's memory */
        if (g_mem_fd >= 0) close(g_mem_fd);
        g_mem_fd = -2;
    }
    if (g_mem_fd == -2) {
        g_mem_fd = open("/proc/self/mem", O_RDONLY | O_CLOEXEC);
        g_mem_pid = getpid();
    }
    int fd = g_mem_fd;
    ssize_t got = -1;
    if (fd >= 0 && src <= (uintptr_t)INT64_MAX) got = pread(fd, dst, n, (off_t)src);
    pthread_mutex_unlock(&g_mem_mu);
    return got == (ssize_t)n;
}

/* (rd, rd_ptr, rd_i32, the direct or safe reads of the walk: tr_python_int.h) */

/* ---- strings ------------------------------------------------------------------------ */

/* Appends code point cp as UTF-8 if it fits (with the final NUL); 0 if not. */
static int put_utf8(char *out, size_t cap, size_t *len, uint32_t cp)
{
    char b[4];
    size_t k;
    if (cp >= 0xd800 && cp <= 0xdfff) cp = '?';    /* lone surrogates (surrogateescape) */
    if (cp < 0x80) {
        b[0] = (char)cp;
        k = 1;
    } else if (cp < 0x800) {
        b[0] = (char)(0xc0 | (cp >> 6));
        b[1] = (char)(0x80 | (cp & 0x3f));
        k = 2;
    } else if (cp < 0x10000) {
        b[0] = (char)(0xe0 | (cp >> 12));
        b[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        b[2] = (char)(0x80 | (cp & 0x3f));
        k = 3;
    } else if (cp < 0x110000) {
        b[0] = (char)(0xf0 | (cp >> 18));
        b[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
        b[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
        b[3] = (char)(0x80 | (cp & 0x3f));
        k = 4;
    } else {
        b[0] = '?';
        k = 1;
    }
    if (*len + k + 1 > cap) return 0;
    memcpy(out + *len, b, k);
    *len += k;
    return 1;
}

/* The str object at obj as UTF-8 into out (cap > 0), safe reads. Returns the
 * length written, -1 if obj is not a readable str. */
int tr_py_unicode_utf8(uintptr_t obj, char *out, size_t cap)
{
    uintptr_t type = 0, data = 0;
    int64_t length = 0;
    uint32_t state = 0;
    if (!cap) return -1;
    out[0] = 0;
    if (!obj || (obj & 7) || !tr_py_safe_read(&type, obj + 8, 8) || type != tr_py_g_unicode_type ||
        !tr_py_safe_read(&length, obj + tr_py_off.uni_length, 8) ||
        !tr_py_safe_read(&state, obj + tr_py_off.uni_state, 4) || length < 0)
        return -1;
    unsigned kind = (state >> 2) & 7, compact = (state >> 5) & 1, ascii = (state >> 6) & 1;
    if (tr_py_off.uni_has_ready && !((state >> 7) & 1)) return -1;     /* a legacy string not made ready */
    if (kind != 1 && kind != 2 && kind != 4) return -1;
    if (ascii && kind != 1) return -1;
    if (compact) data = obj + (ascii ? tr_py_off.uni_ascii_size : tr_py_off.uni_compact_size);
    else if (!tr_py_safe_read(&data, obj + tr_py_off.uni_data_any, 8) || !data) return -1;
    /* at most cap - 1 characters can be needed */
    size_t nch = (size_t)length < cap - 1 ? (size_t)length : cap - 1;
    size_t len = 0;
    unsigned char buf[1024];
    size_t per = sizeof buf / kind;
    for (size_t done = 0; done < nch;) {
        size_t k = nch - done < per ? nch - done : per;
        if (!tr_py_safe_read(buf, data + done * kind, k * kind)) return -1;
        for (size_t i = 0; i < k; i++) {
            uint32_t cp;
            if (kind == 1) cp = buf[i];
            else if (kind == 2) cp = (uint32_t)buf[2 * i] | (uint32_t)buf[2 * i + 1] << 8;
            else memcpy(&cp, buf + 4 * i, 4);
            if (ascii && cp >= 0x80) return -1;
            if (!put_utf8(out, cap, &len, cp)) goto done;
        }
        done += k;
    }
done:
    out[len] = 0;
    return (int)len;
}

static int code_ok(uintptr_t code)
{
    int st = tr_py_state();
    uintptr_t type = 0;
    return (st == TR_PY_READY || st == TR_PY_PENDING) && code && !(code & 7) &&
           tr_py_safe_read(&type, code + 8, 8) && type == tr_py_g_code_type;
}

int tr_py_code_info(uintptr_t code, char *file, size_t file_cap, char *qualname, size_t qual_cap,
                    int *firstlineno)
{
    if (!code_ok(code)) return -1;
    uintptr_t f = 0, q = 0;
    int32_t first = 0;
    if (!tr_py_safe_read(&f, code + tr_py_off.co_filename, 8) || !tr_py_safe_read(&q, code + tr_py_off.co_name, 8) ||
        !tr_py_safe_read(&first, code + tr_py_off.co_firstlineno, 4))
        return -1;
    if (file && file_cap && tr_py_unicode_utf8(f, file, file_cap) < 0) return -1;
    if (qualname && qual_cap && tr_py_unicode_utf8(q, qualname, qual_cap) < 0) return -1;
    if (firstlineno) *firstlineno = first;
    return 0;
}

int tr_py_code_matches(uintptr_t code, uint64_t key)
{
    if (!code_ok(code)) return 0;
    uintptr_t f = 0, q = 0, t = 0;
    if (!tr_py_safe_read(&f, code + tr_py_off.co_filename, 8) || !tr_py_safe_read(&q, code + tr_py_off.co_name, 8) ||
        !tr_py_safe_read(&t, code + tr_py_off.co_linetable, 8))
        return 0;
    return (tr_mix64(tr_mix64(tr_mix64(tr_fmix64(code), f), q), t) | 1) == key;
}
