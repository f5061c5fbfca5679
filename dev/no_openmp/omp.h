/* Single-threaded stand-ins for the OpenMP runtime calls the CPU trainer makes, for
   builds without OpenMP (make NO_OPENMP=1, and the fuzz harnesses): the pragmas are
   ignored and everything runs on one thread. */
#ifndef NO_OPENMP_OMP_H
#define NO_OPENMP_OMP_H
static inline int omp_get_thread_num(void) { return 0; }
static inline int omp_get_max_threads(void) { return 1; }
static inline int omp_get_num_threads(void) { return 1; }
#endif
