/* Stand-ins for the shim's wrappers, built like the shim (frame pointers):
 * they call tr_stack_capture directly, or through a helper. */
#include "tr_core.h"
#include "stack_test.h"
#include "tr_stacks.h"

NOIPA int32_t tw_capture(void)
{
    int32_t r = tr_stack_capture();
    NOTAIL;
    return r;
}

static NOIPA int32_t helper(void)
{
    int32_t r = tr_stack_capture_skip(1);
    NOTAIL;
    return r;
}

NOIPA int32_t tw_capture_helper(void)
{
    int32_t r = helper();
    NOTAIL;
    return r;
}
