/* ELF modules as dl_iterate_phdr reports them (tr_symbols.h): their GNU
 * build id, read from the PT_NOTE in memory, and their path. Used by the
 * ring file (its module blobs, tr_ring.c) and by the symbolizer
 * (tr_symbols.c). base/: libc only. */
#include <elf.h>
#include <link.h>
#include <stdio.h>
#include <string.h>
#include <sys/auxv.h>
#include <unistd.h>

#include "tr_modules.h"

/* Scans the notes p[0..left) for the GNU build id; writes it in hex to out
 * and returns 1 when found. */
int tr_note_build_id(const unsigned char *p, size_t left, char *out, size_t outlen)
{
    while (left >= sizeof(ElfW(Nhdr))) {
        const ElfW(Nhdr) *nh = (const ElfW(Nhdr) *)p;
        size_t nsz = (nh->n_namesz + 3) & ~(size_t)3, dsz = (nh->n_descsz + 3) & ~(size_t)3;
        if (sizeof *nh + nsz + dsz > left) break;
        if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 && memcmp(p + sizeof *nh, "GNU", 4) == 0 &&
            nh->n_descsz > 0 && nh->n_descsz * 2 < outlen) {
            const unsigned char *d = p + sizeof *nh + nsz;
            for (unsigned k = 0; k < nh->n_descsz; k++) snprintf(out + 2 * k, 3, "%02x", d[k]);
            return 1;
        }
        p += sizeof *nh + nsz + dsz;
        left -= sizeof *nh + nsz + dsz;
    }
    return 0;
}

void tr_module_build_id(const struct dl_phdr_info *info, char *out, size_t outlen)
{
    out[0] = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_NOTE) continue;
        if (tr_note_build_id((const unsigned char *)(info->dlpi_addr + ph->p_vaddr), ph->p_memsz, out, outlen))
            return;
    }
}

const char *tr_module_path(const struct dl_phdr_info *info, int first, char *buf, size_t cap)
{
    const char *name = info->dlpi_name;
    if (name && *name) return name;
    if (!first) return info->dlpi_addr == getauxval(AT_SYSINFO_EHDR) ? "[vdso]" : "[unknown]";
    ssize_t k = cap > 1 ? readlink("/proc/self/exe", buf, cap - 1) : -1;
    if (k <= 0) return "[exe]";
    buf[k] = 0;
    return buf;
}
