/* An unrelated library that happens to define a function named like one the
 * shim wraps (and nothing else of NCCL): a lookup of it must return it, not
 * the shim's wrapper (test_dlsym.py case "lookups"). */
__attribute__((visibility("default"))) int ncclAllReduce(void)
{
    return 42;
}
