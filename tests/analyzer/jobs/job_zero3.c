/* Catalog: a module is skipped on one rank under ZeRO stage 3: every step
 * all-gathers each layer's parameters before using it (layers of different
 * sizes). In step 1 rank 2 skips layer 2 (forward_layers()), so its
 * all-gather #7 fetches layer 3 while its peers fetch layer 2: rank 2 falls
 * out of step at all-gather #7. */
#include "job.h"

static const int layer_elems[4] = {4096, 2048, 1024, 512};

static NOINLINE void fetch_layer_params(int layer)
{
    NCCLCHECK(ncclAllGather(buf, buf + 65536, layer_elems[layer], ncclFloat32, wcomm, stream));
}

static NOINLINE void forward_layers(int step)
{
    for (int layer = 0; layer < 4; layer++) {
        if (rank == 2 && step == 1 && layer == 2) continue;   /* this module is skipped */
        fetch_layer_params(layer);
    }
}

int main(void)
{
    job_setup();
    for (int step = 0; step < 4; step++) {
        forward_layers(step);
        job_sync();
    }
    job_finish();
    return 0;
}
