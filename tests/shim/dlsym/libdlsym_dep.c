/* A dependency of libdlsym_plugin.so only: in the plugin's scope, not the
 * global one. */
__attribute__((visibility("default"))) int dep_only(void)
{
    return 7;
}
