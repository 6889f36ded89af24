/* libcuda.so.1: the simulated driver under the name a CUDA program loads.
 *
 * PyTorch (c10's driver-API lazy loading) dlopens "libcuda.so.1" and looks
 * its functions up on that handle. This library defines nothing of its own:
 * it depends on libtrsim.so, and dlsym on a handle searches the handle's
 * dependencies, so every cu* lookup finds the simulator's. Preloaded (or
 * found through the library path), it also keeps a real driver from being
 * loaded beside the simulator. */
#include <cuda.h>

/* a reference to the simulator, so that the link records the dependency */
CUresult (*const trsim_driver_alias)(unsigned int) = cuInit;
