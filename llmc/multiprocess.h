/*
Multi-process (data-parallel) support through MPI, shared by both trainers. Built
without USE_MPI, everything here is the single-process identity, so the trainers
need no MPI to build. With MPI, `mpirun -np N ./train_gpt2 ...` runs N ranks that
each read their slice of every batch and average gradients with MPI_Allreduce.

A rank that fails calls fatal(), which here aborts the whole job (MPI_Abort) with a
message naming the rank: never a hang of the others in a collective.
*/
#ifndef LLMC_MULTIPROCESS_H
#define LLMC_MULTIPROCESS_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#ifdef USE_MPI
#include <mpi.h>
#endif
#include "utils.h"

typedef struct {
    int rank;
    int world;
} MultiProcess;

#ifdef USE_MPI
static void mp_abort(int code) { MPI_Abort(MPI_COMM_WORLD, code); }
#endif

static void mp_init(MultiProcess* mp, int* argc, char*** argv) {
    mp->rank = 0;
    mp->world = 1;
#ifdef USE_MPI
    MPI_Init(argc, argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &mp->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &mp->world);
    if (mp->world > 1) {
        fatal_rank = mp->rank;
        fatal_abort = mp_abort;
    }
#else
    (void)argc; (void)argv;
#endif
}

static void mp_finalize(void) {
#ifdef USE_MPI
    MPI_Finalize();
#endif
}

// in-place sum over all ranks of a float or double buffer
static void mp_allreduce_sum_f32(float* buf, size_t n) {
#ifdef USE_MPI
    while (n > 0) { // MPI counts are int: go in chunks of 2^30
        int chunk = n > (1u << 30) ? (1 << 30) : (int)n;
        MPI_Allreduce(MPI_IN_PLACE, buf, chunk, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        buf += chunk;
        n -= chunk;
    }
#else
    (void)buf; (void)n;
#endif
}

static void mp_allreduce_sum_f64(double* buf, size_t n) {
#ifdef USE_MPI
    while (n > 0) {
        int chunk = n > (1u << 30) ? (1 << 30) : (int)n;
        MPI_Allreduce(MPI_IN_PLACE, buf, chunk, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        buf += chunk;
        n -= chunk;
    }
#else
    (void)buf; (void)n;
#endif
}

static void mp_barrier(void) {
#ifdef USE_MPI
    MPI_Barrier(MPI_COMM_WORLD);
#endif
}

// Start-up check that every rank has the same `text` (the flags it was started with, the
// build it runs, the model it built): compares a hash of it across ranks and stops the job,
// naming the first rank that differs and, with `show`, what that rank and rank 0 have
// (the first MP_SHOW_BYTES bytes of each text).
#define MP_SHOW_BYTES 256
static void mp_check_same(const char* text, const char* what, int show) {
#ifdef USE_MPI
    uint64_t h = 1469598103934665603ull; // FNV-1a
    for (const unsigned char* p = (const unsigned char*)text; *p != '\0'; p++) { h = (h ^ *p) * 1099511628211ull; }
    int world, rank;
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    uint64_t* all = (uint64_t*)malloc_check((size_t)world * sizeof(uint64_t));
    MPI_Allgather(&h, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, MPI_COMM_WORLD);
    int r = 1;
    while (r < world && all[r] == all[0]) { r++; }
    free(all);
    if (r == world) { return; }
    // every rank has seen the difference: all take part in gathering the texts for the message
    char mine[MP_SHOW_BYTES];
    snprintf(mine, sizeof(mine), "%s", text);
    char* texts = (char*)malloc_check((size_t)world * MP_SHOW_BYTES);
    MPI_Allgather(mine, MP_SHOW_BYTES, MPI_CHAR, texts, MP_SHOW_BYTES, MPI_CHAR, MPI_COMM_WORLD);
    if (rank == 0) {
        if (show) { fatal("rank %d was started with a different %s than rank 0: %s on rank %d, %s on rank 0", r, what, texts + (size_t)r * MP_SHOW_BYTES, r, texts); }
        fatal("rank %d was started with a different %s than rank 0", r, what);
    }
    MPI_Barrier(MPI_COMM_WORLD); // rank 0 aborts the job
#else
    (void)text; (void)what; (void)show;
#endif
}

#endif // LLMC_MULTIPROCESS_H
