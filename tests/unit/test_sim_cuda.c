/*
 * test_sim_cuda.c — the CUDA backend. Where a driver and a GPU exist it
 * must give the CPU backend's bits; elsewhere (CI, machines without a GPU,
 * builds without nvcc) opening it must fail cleanly with SIM_ENOBACKEND
 * or SIM_ENODEVICE and a message, never crash, and the tests that need a
 * device are reported as skipped with that message, never as passed.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sim/sim.h"
#include "base/json.h"

static sim_job *job_json(const char *kernel, const char *json, uint64_t seed)
{
    msgpack_sbuffer b;
    sim_job *job = NULL;
    char err[256];
    msgpack_sbuffer_init(&b);
    int rc = sf_json_to_msgpack(json, strlen(json), &b, err, sizeof err);
    if (rc == 0)
        rc = sim_job_create(&job, kernel, b.data, b.size, seed, err, sizeof err);
    msgpack_sbuffer_destroy(&b);
    cr_assert_eq(rc, 0, "%s: %s", json, err);
    return job;
}

/* A refusal to open (no nvcc at build time, no driver, no GPU) is clean:
 * SIM_ENOBACKEND or SIM_ENODEVICE with a message that names CUDA. */
static void assert_clean_refusal(int rc, const char *err)
{
    cr_assert(rc == SIM_ENOBACKEND || rc == SIM_ENODEVICE, "rc %d: %s", rc, err);
    cr_assert_gt(strlen(err), 0, "no message");
    cr_assert(strstr(err, "CUDA") != NULL, "%s", err);
}

Test(sim_cuda, bits_match_the_cpu, .timeout = 120)
{
    sim_cuda *cu = NULL;
    char err[512] = "";
    int rc = sim_cuda_create(&cu, err, sizeof err);
    if (rc != 0) {
        assert_clean_refusal(rc, err);
        cr_skip_test("no CUDA device to compare with the CPU: %s", err);
    }
    const char *sets[][2] = {
        { "option", "{\"S0\": 100, \"K\": 100, \"r\": 0.05, \"sigma\": 0.2, \"T\": 1}" },
        { "option", "{\"style\": \"asian_arithmetic\", \"S0\": 100, \"K\": 95, \"sigma\": 0.3, \"T\": 1, \"steps\": 52, \"greeks\": true}" },
        { "option", "{\"style\": \"barrier\", \"barrier\": 120, \"barrier_type\": \"up_in\", \"S0\": 100, \"K\": 100, \"sigma\": 0.25, \"T\": 1, \"steps\": 50, \"antithetic\": true}" },
        { "combat", "{\"power\": 5000, \"crit\": 2000, \"haste\": 1500, \"stat_weights\": true, \"abilities\": [{\"coefficient\": 2, \"cooldown\": 8}, {\"coefficient\": 0.6}]}" },
    };
    for (int s = 0; s < 4; s++) {
        sim_job *job = job_json(sets[s][0], sets[s][1], 100 + (uint64_t)s);
        sim_stats cpu[SIM_MAX_OUT], dev[SIM_MAX_OUT];
        cr_assert_eq(sim_run_cpu(job, 3, 5001, cpu), 0);
        cr_assert_eq(sim_cuda_run(cu, job, 3, 5001, dev), 0);
        for (int o = 0; o < sim_job_nout(job); o++)
            cr_assert(sim_stats_equal(&cpu[o], &dev[o]), "%s output %d", sets[s][1], o);
        sim_job_destroy(job);
    }
    sim_cuda_destroy(cu);
}

/* sim_cuda_create with the environment variable var set to value. */
static int create_with(const char *var, const char *value, sim_cuda **cu, char *err, size_t len)
{
    setenv(var, value, 1);
    int rc = sim_cuda_create(cu, err, len);
    unsetenv(var);
    return rc;
}

/* SIMFARM_CUDA_THREADS (threads per launch, for measuring launch sizes):
 * a value that is not a multiple of 128 up to 2^20 is refused by name,
 * with or without a driver. */
Test(sim_cuda, bad_launch_size_is_refused, .timeout = 120)
{
    sim_cuda *cu = NULL;
    char err[512] = "";
    const char *bad[] = { "100", "0", "", "128x", "-128", "2097152" };
    for (int i = 0; i < 6; i++) {
        int rc = create_with("SIMFARM_CUDA_THREADS", bad[i], &cu, err, sizeof err);
        if (rc == SIM_ENOBACKEND)
            cr_skip_test("built without nvcc, nothing reads SIMFARM_CUDA_THREADS: %s", err);
        cr_assert_eq(rc, SIM_EINVAL, "'%s': rc %d: %s", bad[i], rc, err);
        cr_assert(strstr(err, "SIMFARM_CUDA_THREADS") != NULL, "%s", err);
    }
}

/* A good SIMFARM_CUDA_THREADS changes no bit. */
Test(sim_cuda, launch_size_keeps_the_bits, .timeout = 120)
{
    sim_cuda *cu = NULL;
    char err[512] = "";
    int rc = create_with("SIMFARM_CUDA_THREADS", "256", &cu, err, sizeof err);
    if (rc != 0) {
        assert_clean_refusal(rc, err);
        cr_skip_test("no CUDA device to compare with the CPU: %s", err);
    }
    /* 256 threads over many more groups: each thread takes several */
    sim_job *job = job_json("option", "{\"S0\": 100, \"K\": 100, \"r\": 0.05, \"sigma\": 0.2, \"T\": 1}", 9);
    sim_stats cpu[SIM_MAX_OUT], dev[SIM_MAX_OUT];
    cr_assert_eq(sim_run_cpu(job, 5, 100003, cpu), 0);
    cr_assert_eq(sim_cuda_run(cu, job, 5, 100003, dev), 0);
    cr_assert(sim_stats_equal(&cpu[0], &dev[0]));
    sim_job_destroy(job);
    sim_cuda_destroy(cu);
}

/* SIMFARM_CUDA_MODULE (a module built for an older driver): a file that
 * cannot be read is refused, naming the variable and the file, before any
 * driver is looked for. */
Test(sim_cuda, module_file_from_the_environment, .timeout = 120)
{
    sim_cuda *cu = NULL;
    char err[512] = "";
    char empty[] = "/tmp/simfarm-empty-module-XXXXXX";
    int fd = mkstemp(empty);
    cr_assert_geq(fd, 0);
    close(fd);
    const char *bad[] = { "/nonexistent/kernels.fatbin", empty, "/tmp" };
    const char *why[] = { "No such file", "empty", "Is a directory" };
    for (int i = 0; i < 3; i++) {
        int rc = create_with("SIMFARM_CUDA_MODULE", bad[i], &cu, err, sizeof err);
        if (rc == SIM_ENOBACKEND) {
            unlink(empty);
            cr_skip_test("built without nvcc, nothing reads SIMFARM_CUDA_MODULE: %s", err);
        }
        cr_assert_eq(rc, SIM_EINVAL, "'%s': rc %d: %s", bad[i], rc, err);
        cr_assert(strstr(err, "SIMFARM_CUDA_MODULE: cannot read ") != NULL, "%s", err);
        cr_assert(strstr(err, bad[i]) != NULL && strstr(err, why[i]) != NULL, "%s", err);
    }
    unlink(empty);
}
