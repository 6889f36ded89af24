/* The wheel's toolchain (packaging/zigcc.py): <libunwind/libunwind.h>, as
 * Debian's libunwind-14-dev lays it out, is zig's bundled LLVM libunwind
 * header (zig's lib/libunwind/include, searched after this folder). */
#include <libunwind.h>
