/* Communicator functions of NCCL 2.29-2.32 on 4 ranks: ncclCommGrow from 2
 * to 4 ranks (ncclCommGetUniqueId) and an AllReduce over the grown
 * communicator; ncclCommSuspend / ncclCommResume (collectives refused with
 * ncclInvalidUsage meanwhile) and ncclCommMemStats; ncclGroupSimulateEnd
 * (the group's operations dropped: ranks simulating different groups still
 * match afterwards; an estimate); ncclCommQueryProperties, teams; the
 * parameter API over NCCL_* variables; ncclSetEncryption; the pnccl*
 * names; the device-API set-up failing loudly (one trsim: line per
 * function). */
#include <dlfcn.h>
#include "nccl232.h"

static int rank, world;
static cudaStream_t stream;

static int32_t index_times(size_t i, int arg)
{
    return (int32_t)i * arg;
}

/* AllReduce (sum) of n ints, rank q contributing (q+1)*i: sum_q (q+1) * i */
static void allreduce_check(ncclComm_t comm, int n, const char *what)
{
    int nranks, me;
    NCCLCHECK(ncclCommCount(comm, &nranks));
    NCCLCHECK(ncclCommUserRank(comm, &me));
    int32_t *buf = test_dev_ints((size_t)n);
    test_put_ints(buf, (size_t)n, index_times, me + 1);
    NCCLCHECK(ncclAllReduce(buf, buf, (size_t)n, ncclInt32, ncclSum, comm, stream));
    CUDACHECK(cudaStreamSynchronize(stream));
    test_expect_ints(buf, (size_t)n, index_times, nranks * (nranks + 1) / 2, what);
    CUDACHECK(cudaFree(buf));
}

/* Runs f with stderr going to a file; returns what it printed. */
static char *capture_stderr(void (*f)(void))
{
    char path[4096];
    snprintf(path, sizeof path, "%s/stderr.%d", getenv("TRSIM_RDZV"), rank);
    fflush(stderr);
    int saved = dup(2);
    int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0600);
    if (saved < 0 || fd < 0 || dup2(fd, 2) < 0) FAIL("cannot redirect stderr to %s", path);
    close(fd);
    f();
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    FILE *in = fopen(path, "r");
    if (!in) FAIL("cannot read %s", path);
    char *text = calloc(1, 65536);
    size_t len = fread(text, 1, 65535, in);
    text[len] = 0;
    fclose(in);
    return text;
}

static int count_lines(const char *text, const char *line)
{
    int n = 0;
    for (const char *p = text; (p = strstr(p, line)) != NULL; p += strlen(line)) n++;
    return n;
}

/* ---- the device API's set-up, as the real signatures (nccl_device/host.h) */
typedef struct ncclDevCommRequirements ncclDevCommRequirements_t;
typedef struct ncclDevComm ncclDevComm_t;
ncclResult_t ncclDevCommCreate(ncclComm_t comm, const ncclDevCommRequirements_t *reqs, ncclDevComm_t *outDevComm);
ncclResult_t ncclGetPeerDevicePointer(ncclWindow_t window, size_t offset, int peer, void **outPtr);
ncclResult_t ncclLsaBarrierCreateRequirement(ncclTeam_t team, int nBarriers, void *outHandle, void *outReq);
ncclTeam_t ncclTeamCft(ncclComm_t comm, ncclCftTeamMode_t mode);
int ncclLLA2ACalcSlots(int maxElts, int maxEltSize);

static ncclComm_t stub_comm;
static ncclResult_t stub_results[6];
static ncclTeam_t stub_team;
static int stub_slots;

static void call_stubs(void)
{
    char devcomm[256];
    void *ptr = &ptr;
    for (int k = 0; k < 2; k++) {   /* twice: one line per function all the same */
        stub_results[0] = ncclDevCommCreate(stub_comm, NULL, (ncclDevComm_t *)devcomm);
        stub_results[1] = ncclGetPeerDevicePointer(NULL, 0, 1, &ptr);
        stub_results[2] = ncclLsaBarrierCreateRequirement(ncclTeamWorld(stub_comm), 1, NULL, NULL);
        stub_team = ncclTeamCft(stub_comm, NCCL_CFT_TEAM_FLAT);
        stub_slots = ncclLLA2ACalcSlots(1024, 8);
    }
}

static void dump_params(void)
{
    /* ncclParamDumpAll writes to stdout (NCCL's log): send it to stderr */
    fflush(stdout);
    int saved = dup(1);
    dup2(2, 1);
    ncclParamDumpAll();
    fflush(stdout);
    dup2(saved, 1);
    close(saved);
}

static void params(void)
{
    ncclParamHandle_t h = NULL, h2 = NULL;
    int8_t i8;
    int16_t i16;
    int32_t i32;
    int64_t i64;
    uint8_t u8;
    uint16_t u16;
    uint32_t u32;
    uint64_t u64;
    const char *str;
    int len;

    setenv("NCCL_TRSIM_TEST_PARAM", "300", 1);
    NCCLCHECK(ncclParamBind(&h, "NCCL_TRSIM_TEST_PARAM"));
    NCCLCHECK(ncclParamBind(&h2, "NCCL_TRSIM_TEST_PARAM"));
    EXPECT(h == h2 && h != NULL, "one handle per parameter");
    NCCLCHECK(ncclParamGetI32(h, &i32));
    EXPECT(i32 == 300, "I32 %d", i32);
    NCCLCHECK(ncclParamGetI16(h, &i16));
    NCCLCHECK(ncclParamGetU16(h, &u16));
    NCCLCHECK(ncclParamGetU32(h, &u32));
    NCCLCHECK(ncclParamGetI64(h, &i64));
    NCCLCHECK(ncclParamGetU64(h, &u64));
    EXPECT(i16 == 300 && u16 == 300 && u32 == 300 && i64 == 300 && u64 == 300, "typed reads of 300");
    EXPECT(ncclParamGetI8(h, &i8) == ncclInvalidArgument, "300 does not fit int8");
    EXPECT(ncclParamGetU8(h, &u8) == ncclInvalidArgument, "300 does not fit uint8");
    NCCLCHECK(ncclParamGetStr(h, &str));
    EXPECT(!strcmp(str, "300"), "string %s", str);
    /* live: the environment is read on every access */
    setenv("NCCL_TRSIM_TEST_PARAM", "-5", 1);
    NCCLCHECK(ncclParamGetI8(h, &i8));
    EXPECT(i8 == -5, "I8 %d", i8);
    EXPECT(ncclParamGetU32(h, &u32) == ncclInvalidArgument, "-5 is not unsigned");
    setenv("NCCL_TRSIM_TEST_PARAM", "0x10", 1);
    NCCLCHECK(ncclParamGetU8(h, &u8));
    EXPECT(u8 == 16, "hexadecimal %u", u8);
    setenv("NCCL_TRSIM_TEST_PARAM", "TRUE", 1);
    NCCLCHECK(ncclParamGetI32(h, &i32));
    EXPECT(i32 == 1, "TRUE is %d", i32);
    setenv("NCCL_TRSIM_TEST_PARAM", "eth0", 1);
    EXPECT(ncclParamGetI32(h, &i32) == ncclInvalidArgument, "not a number");
    char raw[16];
    NCCLCHECK(ncclParamGet(h, raw, sizeof raw, &len));
    EXPECT(len == 5 && !memcmp(raw, "eth0", 5), "raw string of %d bytes", len);
    NCCLCHECK(ncclParamGetParameter("NCCL_TRSIM_TEST_PARAM", &str, &len));
    EXPECT(!strcmp(str, "eth0") && len == 4, "by key: %s (%d)", str, len);

    /* a known parameter at NCCL's default, typed raw value */
    unsetenv("NCCL_BUFFSIZE");
    ncclParamHandle_t b;
    NCCLCHECK(ncclParamBind(&b, "NCCL_BUFFSIZE"));
    NCCLCHECK(ncclParamGetI64(b, &i64));
    EXPECT(i64 == 4194304, "NCCL_BUFFSIZE default %lld", (long long)i64);
    EXPECT(ncclParamGet(b, raw, 4, &len) == ncclInvalidArgument && len == 8, "raw int64 needs 8 bytes (%d)", len);
    NCCLCHECK(ncclParamGet(b, raw, sizeof raw, &len));
    memcpy(&i64, raw, sizeof i64);
    EXPECT(len == 8 && i64 == 4194304, "raw int64 %lld", (long long)i64);
    setenv("NCCL_BUFFSIZE", "1048576", 1);
    NCCLCHECK(ncclParamGetI64(b, &i64));
    EXPECT(i64 == 1048576, "NCCL_BUFFSIZE set %lld", (long long)i64);

    /* unknown parameters */
    ncclParamHandle_t none = (ncclParamHandle_t)&none;
    EXPECT(ncclParamBind(&none, "NCCL_NO_SUCH_PARAMETER_X") == ncclInvalidArgument, "unknown key");
    EXPECT(none == (ncclParamHandle_t)&none, "out unmodified on failure");
    EXPECT(ncclParamBind(&none, "HOME") == ncclInvalidArgument, "not an NCCL parameter");
    EXPECT(ncclParamGetParameter("NCCL_NO_SUCH_PARAMETER_X", &str, &len) == ncclInvalidArgument, "unknown key");
    EXPECT(ncclParamGetI32(NULL, &i32) == ncclInvalidArgument, "NULL handle");

    const char **keys;
    int nkeys, found = 0, buffsize = 0;
    NCCLCHECK(ncclParamGetAllParameterKeys(&keys, &nkeys));
    for (int i = 0; i < nkeys; i++) {
        found += !strcmp(keys[i], "NCCL_TRSIM_TEST_PARAM");
        buffsize += !strcmp(keys[i], "NCCL_BUFFSIZE");
    }
    EXPECT(found == 1 && buffsize == 1, "all keys: test %d, NCCL_BUFFSIZE %d of %d", found, buffsize, nkeys);

    char *dump = capture_stderr(dump_params);
    EXPECT(strstr(dump, "NCCL_TRSIM_TEST_PARAM Current value=eth0 set_by=Environment") != NULL, "dump: %s", dump);
    EXPECT(strstr(dump, "NCCL_DEBUG_SUBSYS Current value=INIT,BOOTSTRAP,ENV set_by=Default") != NULL ||
               getenv("NCCL_DEBUG_SUBSYS"), "dump: %s", dump);
    free(dump);
}

int main(void)
{
    trtest_init(&rank, &world);
    if (world != 4) FAIL("runs on 4 ranks");
    CUDACHECK(cudaStreamCreate(&stream));

    /* ---- grow: ranks 0 and 1 make a communicator, ranks 2 and 3 join it */
    ncclComm_t base = NULL, grown = NULL;
    ncclUniqueId id, growId;
    if (rank < 2) {
        trtest_exchange_id(&id, rank == 0, "base");
        NCCLCHECK(ncclCommInitRank(&base, 2, id, rank));
        allreduce_check(base, 1000, "AllReduce before the grow");
        if (rank == 0) {
            NCCLCHECK(ncclCommGetUniqueId(base, &growId));
            EXPECT(ncclCommGetUniqueId(base, &id) == ncclInvalidUsage, "a second id before the grow");
            char path[4096], tmp[4200];
            snprintf(path, sizeof path, "%s/grow.id", getenv("TRSIM_RDZV"));
            snprintf(tmp, sizeof tmp, "%s.tmp", path);
            FILE *f = fopen(tmp, "wb");
            if (!f || fwrite(&growId, sizeof growId, 1, f) != 1 || fclose(f) != 0 || rename(tmp, path) != 0)
                FAIL("cannot publish the grow id");
            EXPECT(ncclCommGrow(base, 4, &growId, 0, &grown, NULL) == ncclInvalidArgument,
                   "an existing rank passes rank -1");
            NCCLCHECK(ncclCommGrow(base, 4, &growId, -1, &grown, NULL));
            /* consumed: a new one can be made now */
            NCCLCHECK(ncclCommGetUniqueId(base, &id));
        } else {
            NCCLCHECK(ncclCommGrow(base, 4, NULL, -1, &grown, NULL));
        }
    } else {
        trtest_exchange_id(&growId, 0, "grow");
        NCCLCHECK(ncclCommGrow(NULL, 4, &growId, rank, &grown, NULL));
    }
    int n, me;
    NCCLCHECK(ncclCommCount(grown, &n));
    NCCLCHECK(ncclCommUserRank(grown, &me));
    EXPECT(n == 4 && me == rank, "grown communicator: rank %d of %d", me, n);
    allreduce_check(grown, 3000, "AllReduce over the grown communicator");
    if (base) allreduce_check(base, 10, "AllReduce over the old communicator after the grow");
    ncclComm_t comm = grown;

    /* ---- properties and teams */
    ncclCommProperties_t props = TEST_PROPERTIES_INITIALIZER;
    NCCLCHECK(ncclCommQueryProperties(comm, &props));
    int dev;
    CUDACHECK(cudaGetDevice(&dev));
    EXPECT(props.rank == rank && props.nRanks == 4 && props.cudaDev == dev && props.nvmlDev == dev &&
               !props.deviceApiSupport && !props.multimemSupport && props.hostRmaSupport && props.nLsaTeams == 4 &&
               props.ginType == NCCL_GIN_TYPE_NONE && props.commHash != 0 && !props.cftSupport,
           "properties: rank %d nRanks %d dev %d lsaTeams %d", props.rank, props.nRanks, props.cudaDev,
           props.nLsaTeams);
    ncclCommProperties_t small = TEST_PROPERTIES_INITIALIZER;
    small.size = offsetof(ncclCommProperties_t, cudaDev);
    small.cudaDev = -7;
    NCCLCHECK(ncclCommQueryProperties(comm, &small));
    EXPECT(small.nRanks == 4 && small.cudaDev == -7, "only the fields the size covers are written");
    ncclCommProperties_t bad = TEST_PROPERTIES_INITIALIZER;
    bad.magic = 0;
    EXPECT(ncclCommQueryProperties(comm, &bad) == ncclInvalidArgument, "properties without the magic");
    ncclTeam_t wt = ncclTeamWorld(comm), lt = ncclTeamLsa(comm);
    EXPECT(wt.nRanks == 4 && wt.rank == rank && wt.stride == 1, "world team");
    EXPECT(lt.nRanks == 1 && lt.rank == 0, "LSA team");
    EXPECT(ncclTeamRankToWorld(comm, wt, 3) == 3 && ncclTeamRankToLsa(comm, lt, 0) == 0, "team ranks");

    /* ---- suspend and resume */
    uint64_t total, persist, susp, suspended;
    NCCLCHECK(ncclCommMemStats(comm, ncclStatGpuMemTotal, &total));
    NCCLCHECK(ncclCommMemStats(comm, ncclStatGpuMemPersist, &persist));
    NCCLCHECK(ncclCommMemStats(comm, ncclStatGpuMemSuspend, &susp));
    NCCLCHECK(ncclCommMemStats(comm, ncclStatGpuMemSuspended, &suspended));
    EXPECT(total > 0 && persist > 0 && susp > 0 && total == persist + susp && suspended == 0,
           "memory stats: total %llu persist %llu suspend %llu suspended %llu", (unsigned long long)total,
           (unsigned long long)persist, (unsigned long long)susp, (unsigned long long)suspended);
    EXPECT(ncclCommMemStats(comm, (ncclCommMemStat_t)9, &total) == ncclInvalidArgument, "unknown statistic");
    EXPECT(ncclCommResume(comm) == ncclInvalidUsage, "resume of a communicator not suspended");
    NCCLCHECK(ncclCommSuspend(comm, 0));   /* no NCCL_SUSPEND_MEM: nothing happens */
    allreduce_check(comm, 100, "AllReduce after ncclCommSuspend(0)");
    NCCLCHECK(ncclCommSuspend(comm, NCCL_SUSPEND_MEM));
    NCCLCHECK(ncclCommMemStats(comm, ncclStatGpuMemSuspended, &suspended));
    EXPECT(suspended == 1, "suspended stat %llu", (unsigned long long)suspended);
    int32_t *buf = test_dev_ints(16);
    EXPECT(ncclAllReduce(buf, buf, 16, ncclInt32, ncclSum, comm, stream) == ncclInvalidUsage,
           "AllReduce on a suspended communicator");
    EXPECT(strstr(ncclGetLastError(NULL), "suspended") != NULL, "%s", ncclGetLastError(NULL));
    EXPECT(ncclSend(buf, 16, ncclInt32, (rank + 1) % 4, comm, stream) == ncclInvalidUsage, "Send while suspended");
    EXPECT(ncclCommSuspend(comm, NCCL_SUSPEND_MEM) == ncclInvalidUsage, "suspend twice");
    NCCLCHECK(ncclCommResume(comm));
    NCCLCHECK(ncclCommMemStats(comm, ncclStatGpuMemSuspended, &suspended));
    EXPECT(suspended == 0, "resumed stat %llu", (unsigned long long)suspended);
    allreduce_check(comm, 2000, "AllReduce after ncclCommResume");

    /* ---- ncclGroupSimulateEnd drops the group: ranks simulate different
     * groups (rank r: r collectives and a send), then all really match */
    ncclSimInfo_t sim = TEST_SIM_INFO_INITIALIZER;
    NCCLCHECK(ncclGroupStart());
    for (int k = 0; k < rank; k++) NCCLCHECK(ncclAllReduce(buf, buf, 16 + k, ncclInt32, ncclSum, comm, stream));
    NCCLCHECK(ncclSend(buf, 16, ncclInt32, (rank + 1) % 4, comm, stream));
    NCCLCHECK(ncclGroupSimulateEnd(&sim));
    EXPECT(sim.estimatedTime > 0, "estimate %g", (double)sim.estimatedTime);
    float one_op = sim.estimatedTime;
    ncclSimInfo_t sim2 = TEST_SIM_INFO_INITIALIZER;
    NCCLCHECK(ncclGroupStart());
    NCCLCHECK(ncclAllReduce(buf, buf, 1 << 20, ncclInt32, ncclSum, comm, stream));
    NCCLCHECK(ncclGroupSimulateEnd(&sim2));
    EXPECT(sim2.estimatedTime > 0 && (rank > 0 || sim2.estimatedTime > one_op), "estimate %g (small group %g)",
           (double)sim2.estimatedTime, (double)one_op);
    ncclSimInfo_t badsim = TEST_SIM_INFO_INITIALIZER;
    badsim.magic = 1;
    NCCLCHECK(ncclGroupStart());
    NCCLCHECK(ncclAllReduce(buf, buf, 16, ncclInt32, ncclSum, comm, stream));
    EXPECT(ncclGroupSimulateEnd(&badsim) == ncclInvalidArgument, "a simInfo without its magic");
    EXPECT(badsim.estimatedTime == NCCL_UNDEF_FLOAT, "no estimate for an invalid simInfo");
    EXPECT(ncclGroupSimulateEnd(&sim) == ncclInvalidUsage, "ncclGroupSimulateEnd outside a group");
    /* a recv pending from the simulated send would make this hang */
    int32_t *ring = test_dev_ints(16);
    NCCLCHECK(ncclGroupStart());
    NCCLCHECK(ncclSend(buf, 16, ncclInt32, (rank + 1) % 4, comm, stream));
    NCCLCHECK(ncclRecv(ring, 16, ncclInt32, (rank + 3) % 4, comm, stream));
    NCCLCHECK(ncclGroupEnd());
    allreduce_check(comm, 500, "AllReduce after simulated groups");
    /* with a NULL simInfo, NCCL launches the group: so does the simulator */
    int32_t *x = test_dev_ints(8);
    test_put_ints(x, 8, index_times, rank + 1);
    NCCLCHECK(ncclGroupStart());
    NCCLCHECK(ncclAllReduce(x, x, 8, ncclInt32, ncclSum, comm, stream));
    NCCLCHECK(ncclGroupSimulateEnd(NULL));
    CUDACHECK(cudaStreamSynchronize(stream));
    test_expect_ints(x, 8, index_times, 10, "a group ended by ncclGroupSimulateEnd(NULL)");

    /* ---- the pnccl* names are the same functions */
    typedef ncclResult_t (*allreduce_t)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
                                        cudaStream_t);
    allreduce_t p = (allreduce_t)dlsym(RTLD_DEFAULT, "pncclAllReduce");
    EXPECT(p != NULL, "pncclAllReduce is exported");
    test_put_ints(x, 8, index_times, rank + 1);
    NCCLCHECK(p(x, x, 8, ncclInt32, ncclSum, comm, stream));
    CUDACHECK(cudaStreamSynchronize(stream));
    test_expect_ints(x, 8, index_times, 10, "pncclAllReduce");

    /* ---- settings, parameters, loud stubs (one rank is enough) */
    if (rank == 0) {
        ncclEncryptionConfig_t enc = TEST_ENCRYPTION_INITIALIZER;
        NCCLCHECK(ncclSetEncryption(&enc));
        enc.mode = NCCL_ENCRYPTION_MODE_PSK;
        EXPECT(ncclSetEncryption(&enc) == ncclInvalidArgument, "PSK without a key");
        enc.psk = "secret";
        NCCLCHECK(ncclSetEncryption(&enc));
        enc.magic = 0;
        EXPECT(ncclSetEncryption(&enc) == ncclInvalidArgument, "encryption config without the magic");
        ncclResetDebugInit();

        params();

        stub_comm = comm;
        char *err = capture_stderr(call_stubs);
        for (int k = 0; k < 3; k++) EXPECT(stub_results[k] == ncclInvalidUsage, "stub %d gave %d", k, stub_results[k]);
        EXPECT(stub_team.nRanks == 0 && stub_slots == -1, "stubs returning a team, slots");
        static const char *const lines[] = {
            "trsim: ncclDevCommCreate is not supported by the simulator\n",
            "trsim: ncclGetPeerDevicePointer is not supported by the simulator\n",
            "trsim: ncclLsaBarrierCreateRequirement is not supported by the simulator\n",
            "trsim: ncclTeamCft is not supported by the simulator\n",
            "trsim: ncclLLA2ACalcSlots is not supported by the simulator\n",
        };
        for (int k = 0; k < 5; k++) EXPECT(count_lines(err, lines[k]) == 1, "once: %s in:\n%s", lines[k], err);
        EXPECT(strstr(ncclGetLastError(NULL), "ncclLLA2ACalcSlots is not supported") != NULL, "%s",
               ncclGetLastError(NULL));
        free(err);
    }

    trtest_file_barrier("end", rank, world);
    CUDACHECK(cudaFree(buf));
    NCCLCHECK(ncclCommDestroy(comm));
    if (base) NCCLCHECK(ncclCommDestroy(base));
    if (rank == 0) printf("NCCL 2.29-2.32 communicator functions on %d ranks: ok\n", world);
    return 0;
}
