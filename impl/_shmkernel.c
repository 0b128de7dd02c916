/* The compiled hot path of impl/shm.py: the progress counters (post, wait)
 * and the whole one-shot / two-shot all-reduce of one tensor, for the
 * element types and ops that need no Python (see shm.py for the protocol).
 *
 * The layout and the protocol are shm.py's, word for word: this file only
 * moves the loop out of the interpreter. A counter is an int32 at the start
 * of its own 64-byte line; the int32 after it counts the processes sleeping
 * on it. A waiter announces itself there (sequentially consistent
 * increment), re-reads the counter and only then sleeps on the futex; a
 * poster stores the counter (sequentially consistent) and calls FUTEX_WAKE
 * only when the sleeper count is not zero. Both sides order a store before
 * a load with a full fence, so either the poster sees the sleeper or the
 * sleeper sees the new value: no lost wake-up, and no system call when
 * nobody sleeps.
 *
 * Reductions fold the parts in rank order, one element-wise pass per part,
 * with the same operation numpy's ufunc performs (IEEE add and multiply on
 * the element type, integer wrap-around, numpy's NaN rule for min and max),
 * so the bits equal shm.py's numpy path and the spec's fold. Build with
 * -ffp-contract=off (no fused multiply-add) and without -ffast-math.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#ifdef __FAST_MATH__
#error "build _shmkernel without -ffast-math: its folds must give numpy's bits"
#endif

#include <errno.h>
#include <linux/futex.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <sched.h>
#include <unistd.h>

enum { STAGED = 0, REDUCED = 1, GATHERED = 2 };
enum { F32, F64, I8, U8, I16, I32, I64, TYPES };
enum { SUM, PROD, MIN, MAX, OPS };
enum { ONE_SHOT = 0, TWO_SHOT = 1 };
#define WORDS_PER_FLAG 16 /* FLAG_BYTES / 4 */
/* two-shot cuts a message into at least this many chunks (staging, reducing
 * and copying out overlap across ranks), each of at least MIN_PIECE_BYTES */
#define PIPELINE_PIECES 4
#define MAX_WORLD 4096 /* bounds the per-call array of part pointers on the stack */
#define MIN_PIECE_BYTES (64 << 10)

static const int64_t ELEMENT_SIZE[TYPES] = {4, 8, 1, 1, 2, 4, 8};

/* -- counters ------------------------------------------------------------ */

static inline int reached(int32_t seen, int32_t wanted) { return (uint32_t)seen - (uint32_t)wanted < 0x80000000u; }

static inline int64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static inline void relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* Sleeps on a counter so far, and those of them that ended by their timeout
 * rather than a wake-up or a changed value (a diagnostic: in a healthy run
 * every sleeper is woken by a post). */
static int64_t sleeps, expired;

static void post(int32_t *word, int32_t value) {
    __atomic_store_n(word, value, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(word + 1, __ATOMIC_SEQ_CST) != 0)
        syscall(SYS_futex, word, FUTEX_WAKE, INT32_MAX, NULL, NULL, 0);
}

/* 0 once *word has reached value; -1 after timeout_ns without it;
 * INTERRUPTED when a signal handler raised while it slept. Polls for
 * spin_ns, then yields the core up to `yields` times (with fewer cores than
 * ranks the peer being waited for is often next in this core's run queue:
 * a yield hands it the core without the cost of a sleep and a wake-up),
 * then sleeps on the futex. */
#define INTERRUPTED (-3)

/* A futex sleep ended by a signal: run Python's signal handlers (taking the
 * GIL back for a moment through *tstate, which the caller saved with
 * PyEval_SaveThread); INTERRUPTED when one raised (Ctrl-C), the exception
 * then pending in the thread state. */
static int check_signals(PyThreadState **tstate) {
    if (tstate == NULL) return 0;
    PyEval_RestoreThread(*tstate);
    int raised = PyErr_CheckSignals();
    *tstate = PyEval_SaveThread();
    return raised ? INTERRUPTED : 0;
}

static int wait_word(int32_t *word, int32_t value, int64_t spin_ns, int yields, int64_t timeout_ns, PyThreadState **tstate) {
    if (reached(__atomic_load_n(word, __ATOMIC_ACQUIRE), value)) return 0;
    if (spin_ns > 0) {
        int64_t until = now_ns() + spin_ns;
        for (unsigned i = 1;; i++) {
            if (reached(__atomic_load_n(word, __ATOMIC_ACQUIRE), value)) return 0;
            relax();
            if ((i & 63) == 0 && now_ns() >= until) break;
        }
    }
    for (int i = 0; i < yields; i++) {
        sched_yield();
        if (reached(__atomic_load_n(word, __ATOMIC_ACQUIRE), value)) return 0;
    }
    int64_t deadline = now_ns() + timeout_ns;
    for (;;) {
        __atomic_fetch_add(word + 1, 1, __ATOMIC_SEQ_CST);
        int32_t seen = __atomic_load_n(word, __ATOMIC_SEQ_CST);
        int64_t left = deadline - now_ns();
        if (!reached(seen, value) && left > 0) {
            struct timespec t = {left / 1000000000, left % 1000000000};
            __atomic_fetch_add(&sleeps, 1, __ATOMIC_RELAXED);
            int woke = (int)syscall(SYS_futex, word, FUTEX_WAIT, seen, &t, NULL, 0), why = errno;
            if (woke == -1 && why == ETIMEDOUT) __atomic_fetch_add(&expired, 1, __ATOMIC_RELAXED);
            if (woke == -1 && why == EINTR && check_signals(tstate) == INTERRUPTED) {
                __atomic_fetch_sub(word + 1, 1, __ATOMIC_SEQ_CST);
                return INTERRUPTED;
            }
        }
        __atomic_fetch_sub(word + 1, 1, __ATOMIC_SEQ_CST);
        if (reached(__atomic_load_n(word, __ATOMIC_ACQUIRE), value)) return 0;
        if (now_ns() >= deadline) return -1;
    }
}

/* -- one segment, as shm.SharedMemory lays it out ------------------------ */

typedef struct {
    char *base;
    int rank, world, depth;
    int64_t capacity, staging_at, result_at, spin_ns, timeout_ns;
    int yields;
    PyThreadState *tstate; /* saved while the GIL is released, for signal checks */
    /* where a wait timed out, for the error message */
    int failed_counter, failed_rank;
    int32_t failed_value;
} Segment;

static inline int32_t *counter_word(const Segment *s, int counter, int rank) {
    return (int32_t *)s->base + ((int64_t)counter * s->world + rank) * WORDS_PER_FLAG;
}

static inline void post_mine(Segment *s, int counter, int64_t value) { post(counter_word(s, counter, s->rank), (int32_t)(uint32_t)value); }

/* Wait until every other rank's counter has reached value; -1 on a timeout,
 * INTERRUPTED on a signal that raised. */
static int wait_all(Segment *s, int counter, int64_t value) {
    int32_t wanted = (int32_t)(uint32_t)value;
    for (int r = 0; r < s->world; r++) {
        if (r == s->rank) continue;
        int rc = wait_word(counter_word(s, counter, r), wanted, s->spin_ns, s->yields, s->timeout_ns, &s->tstate);
        if (rc != 0) {
            s->failed_counter = counter, s->failed_rank = r, s->failed_value = wanted;
            return rc;
        }
    }
    return 0;
}

static inline char *staging(const Segment *s, int rank, int64_t g) { return s->base + s->staging_at + ((int64_t)rank * s->depth + g % s->depth) * s->capacity; }
static inline char *result(const Segment *s, int64_t g) { return s->base + s->result_at + (g % s->depth) * s->capacity; }

/* -- the reductions ------------------------------------------------------- */

/* out = parts[0] op parts[1] op ... (n elements), one pass per part. */
typedef void (*Fold)(char *out, char *const *parts, int count, int64_t n);

#define FLOAT_OPS(T)                                                         \
    static inline T sum_##T(T a, T b) { return a + b; }                      \
    static inline T prod_##T(T a, T b) { return a * b; }                     \
    static inline T min_##T(T a, T b) { return (a < b || a != a) ? a : b; } \
    static inline T max_##T(T a, T b) { return (a > b || a != a) ? a : b; }

#define INT_OPS(T, U)                                                                 \
    static inline T sum_##T(T a, T b) { return (T)(U)((uint64_t)(U)a + (uint64_t)(U)b); } \
    static inline T prod_##T(T a, T b) { return (T)(U)((uint64_t)(U)a * (uint64_t)(U)b); } \
    static inline T min_##T(T a, T b) { return a < b ? a : b; }                       \
    static inline T max_##T(T a, T b) { return a > b ? a : b; }

typedef float f32;
typedef double f64;
FLOAT_OPS(f32)
FLOAT_OPS(f64)
INT_OPS(int8_t, uint8_t)
INT_OPS(uint8_t, uint8_t)
INT_OPS(int16_t, uint16_t)
INT_OPS(int32_t, uint32_t)
INT_OPS(int64_t, uint64_t)

/* Blocked: each block of the output stays in L1 while every part is folded
 * into it, so memory sees each part read once and the output written once;
 * per element the operations and their order are those of whole passes. */
#define FOLD_BLOCK 1024
#define FOLD(OP, T)                                                                       \
    static void fold_##OP##_##T(char *out_, char *const *parts, int count, int64_t n) {   \
        T *out = (T *)out_;                                                               \
        if (count == 1) {                                                                 \
            if (out_ != parts[0]) memmove(out, parts[0], (size_t)n * sizeof(T));          \
            return;                                                                       \
        }                                                                                 \
        for (int64_t at = 0; at < n; at += FOLD_BLOCK) {                                  \
            int64_t end = n - at < FOLD_BLOCK ? n : at + FOLD_BLOCK;                      \
            const T *a = (const T *)parts[0], *b = (const T *)parts[1];                   \
            for (int64_t i = at; i < end; i++) out[i] = OP##_##T(a[i], b[i]);             \
            for (int k = 2; k < count; k++) {                                             \
                const T *p = (const T *)parts[k];                                         \
                for (int64_t i = at; i < end; i++) out[i] = OP##_##T(out[i], p[i]);       \
            }                                                                             \
        }                                                                                 \
    }

#define FOLDS(T) FOLD(sum, T) FOLD(prod, T) FOLD(min, T) FOLD(max, T)
FOLDS(f32)
FOLDS(f64)
FOLDS(int8_t)
FOLDS(uint8_t)
FOLDS(int16_t)
FOLDS(int32_t)
FOLDS(int64_t)

#define ROW(T) {fold_sum_##T, fold_prod_##T, fold_min_##T, fold_max_##T}
static const Fold FOLDS_BY_TYPE[TYPES][OPS] = {ROW(f32), ROW(f64), ROW(int8_t), ROW(uint8_t), ROW(int16_t), ROW(int32_t), ROW(int64_t)};

/* -- the all-reduce ---------------------------------------------------------- */

/* Where piece k of `size` elements cut into `parts` starts: the cut of
 * impl/cells.py's near_equal (longer pieces first), as shm.py's numpy path
 * cuts its two-shot slices. */
static int64_t near_equal_edge(int64_t size, int parts, int k) {
    int64_t base = size / parts, extra = size % parts;
    return k * base + (k < extra ? k : extra);
}

/* One-shot: per chunk, stage it, wait for everyone's, fold them all. */
static int one_shot(Segment *s, int64_t *seq, char *data, int64_t n, int type, Fold fold) {
    int64_t size = ELEMENT_SIZE[type], step = s->capacity / size;
    int rc;
    char *parts[s->world];
    for (int64_t at = 0; at < n; at += step) {
        int64_t g = (*seq)++, rows = n - at < step ? n - at : step;
        char *piece = data + at * size;
        if ((rc = wait_all(s, REDUCED, g - s->depth + 1))) return rc;
        memcpy(staging(s, s->rank, g), piece, (size_t)(rows * size));
        post_mine(s, STAGED, g + 1);
        if ((rc = wait_all(s, STAGED, g + 1))) return rc;
        for (int r = 0; r < s->world; r++) parts[r] = staging(s, r, g);
        fold(piece, parts, s->world, rows);
        post_mine(s, REDUCED, g + 1);
        post_mine(s, GATHERED, g + 1);
    }
    return 0;
}

/* Two-shot, pipelined as shm.SharedMemory._two_shot: in step i stage chunk
 * i (but this rank's slice), reduce this rank's slice of chunk i - 1 into
 * the result buffer, copy chunk i - 2 out. */
static int two_shot(Segment *s, int64_t *seq, char *data, int64_t n, int type, Fold fold) {
    int64_t size = ELEMENT_SIZE[type], step = s->capacity / size;
    int64_t piece = (n + PIPELINE_PIECES - 1) / PIPELINE_PIECES, smallest = MIN_PIECE_BYTES / size;
    if (piece < smallest) piece = smallest;
    if (piece < step) step = piece; /* a message of one buffer or less still flows in a pipeline */
    int64_t chunks = (n + step - 1) / step, first = *seq;
    int r = s->rank, world = s->world, rc;
    char *parts[world];
    *seq += chunks;
    for (int64_t i = 0; i < chunks + 2; i++) {
        if (i < chunks) {
            int64_t rows = n - i * step < step ? n - i * step : step;
            int64_t a = near_equal_edge(rows, world, r), b = near_equal_edge(rows, world, r + 1);
            char *piece = data + i * step * size, *buffer = staging(s, r, first + i);
            if ((rc = wait_all(s, REDUCED, first + i - s->depth + 1))) return rc;
            memcpy(buffer, piece, (size_t)(a * size));
            memcpy(buffer + b * size, piece + b * size, (size_t)((rows - b) * size));
            post_mine(s, STAGED, first + i + 1);
        }
        if (1 <= i && i <= chunks) {
            int64_t g = first + i - 1, c = i - 1;
            int64_t rows = n - c * step < step ? n - c * step : step;
            int64_t a = near_equal_edge(rows, world, r), b = near_equal_edge(rows, world, r + 1);
            if ((rc = wait_all(s, STAGED, g + 1)) || (rc = wait_all(s, GATHERED, g - s->depth + 1))) return rc;
            for (int j = 0; j < world; j++) parts[j] = (j == r ? data + c * step * size : staging(s, j, g)) + a * size;
            fold(result(s, g) + a * size, parts, world, b - a);
            post_mine(s, REDUCED, g + 1);
        }
        if (i >= 2) {
            int64_t g = first + i - 2, c = i - 2;
            int64_t rows = n - c * step < step ? n - c * step : step;
            if ((rc = wait_all(s, REDUCED, g + 1))) return rc;
            memcpy(data + c * step * size, result(s, g), (size_t)(rows * size));
            post_mine(s, GATHERED, g + 1);
        }
    }
    return 0;
}

/* -- Python ---------------------------------------------------------------------- */

static PyObject *timeout_error(const Segment *s) {
    static const char *names[] = {"STAGED", "REDUCED", "GATHERED"};
    char *seconds = PyOS_double_to_string((double)s->timeout_ns / 1e9, 'g', 6, 0, NULL);
    if (seconds == NULL) return NULL;
    PyErr_Format(PyExc_TimeoutError, "shm: rank %d waited %s s for rank %d's %s to reach %d; did a rank die?", s->rank, seconds,
                 s->failed_rank, names[s->failed_counter], (int)s->failed_value);
    PyMem_Free(seconds);
    return NULL;
}

static int read_segment(PyObject *const *args, Segment *s) {
    /* (base, rank, world, depth, capacity, staging_at, result_at, spin_ns, yields, timeout_ns) */
    s->base = (char *)PyLong_AsVoidPtr(args[0]);
    s->rank = (int)PyLong_AsLong(args[1]);
    s->world = (int)PyLong_AsLong(args[2]);
    s->depth = (int)PyLong_AsLong(args[3]);
    s->capacity = PyLong_AsLongLong(args[4]);
    s->staging_at = PyLong_AsLongLong(args[5]);
    s->result_at = PyLong_AsLongLong(args[6]);
    s->spin_ns = PyLong_AsLongLong(args[7]);
    s->yields = (int)PyLong_AsLong(args[8]);
    s->timeout_ns = PyLong_AsLongLong(args[9]);
    return PyErr_Occurred() ? -1 : 0;
}

PyDoc_STRVAR(all_reduce_doc,
             "all_reduce(segment, seq, address, count, type, op, mode) -> seq\n\n"
             "All-reduce ``count`` elements at ``address`` in place; ``segment`` is the tuple\n"
             "(base, rank, world, depth, capacity, staging_at, result_at, spin_ns, yields, timeout_ns),\n"
             "``seq`` the next chunk number; returns the next one after this call's chunks.\n"
             "``type`` indexes TYPES, ``op`` OPS, ``mode`` 0 one-shot / 1 two-shot.\n"
             "Raises TimeoutError naming the rank and counter waited for.");

static PyObject *py_all_reduce(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 7 || !PyTuple_Check(args[0]) || PyTuple_GET_SIZE(args[0]) != 10) {
        PyErr_SetString(PyExc_TypeError, "all_reduce(segment: 10-tuple, seq, address, count, type, op, mode)");
        return NULL;
    }
    Segment s;
    if (read_segment(&PyTuple_GET_ITEM(args[0], 0), &s)) return NULL;
    int64_t seq = PyLong_AsLongLong(args[1]);
    char *data = (char *)PyLong_AsVoidPtr(args[2]);
    int64_t n = PyLong_AsLongLong(args[3]);
    long type = PyLong_AsLong(args[4]), op = PyLong_AsLong(args[5]), mode = PyLong_AsLong(args[6]);
    if (PyErr_Occurred()) return NULL;
    if (type < 0 || type >= TYPES || op < 0 || op >= OPS || (mode != ONE_SHOT && mode != TWO_SHOT) || n < 0 || s.world < 1 ||
        s.world > MAX_WORLD || s.rank < 0 || s.rank >= s.world || s.depth < 3 || s.yields < 0 || s.capacity < ELEMENT_SIZE[type] * s.world) {
        PyErr_Format(PyExc_ValueError, "all_reduce: bad arguments (type %ld, op %ld, mode %ld, count %lld)", type, op, mode, (long long)n);
        return NULL;
    }
    Fold fold = FOLDS_BY_TYPE[type][op];
    s.tstate = PyEval_SaveThread();
    int rc = (mode == ONE_SHOT ? one_shot : two_shot)(&s, &seq, data, n, (int)type, fold);
    PyEval_RestoreThread(s.tstate);
    if (rc == INTERRUPTED) return NULL; /* the signal handler's exception */
    if (rc) return timeout_error(&s);
    return PyLong_FromLongLong(seq);
}

static PyObject *py_post(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "post(address, value)");
        return NULL;
    }
    int32_t *word = (int32_t *)PyLong_AsVoidPtr(args[0]);
    long long value = PyLong_AsLongLong(args[1]);
    if (PyErr_Occurred()) return NULL;
    post(word, (int32_t)(uint32_t)(uint64_t)value);
    Py_RETURN_NONE;
}

static PyObject *py_wait(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "wait(address, value, spin_ns, yields, timeout_ns)");
        return NULL;
    }
    int32_t *word = (int32_t *)PyLong_AsVoidPtr(args[0]);
    long long value = PyLong_AsLongLong(args[1]), spin = PyLong_AsLongLong(args[2]), timeout = PyLong_AsLongLong(args[4]);
    int yields = (int)PyLong_AsLong(args[3]);
    if (PyErr_Occurred()) return NULL;
    PyThreadState *tstate = PyEval_SaveThread();
    int rc = wait_word(word, (int32_t)(uint32_t)(uint64_t)value, spin, yields, timeout, &tstate);
    PyEval_RestoreThread(tstate);
    if (rc == INTERRUPTED) return NULL;
    return PyBool_FromLong(rc == 0);
}

static PyObject *py_stats(PyObject *self, PyObject *unused) {
    (void)self, (void)unused;
    return Py_BuildValue("{sLsL}", "sleeps", (long long)__atomic_load_n(&sleeps, __ATOMIC_RELAXED), "expired",
                         (long long)__atomic_load_n(&expired, __ATOMIC_RELAXED));
}

static PyMethodDef methods[] = {
    {"stats", py_stats, METH_NOARGS,
     "stats() -> {'sleeps': n, 'expired': m}: futex sleeps in this process so far, and those that ran into their timeout."},
    {"all_reduce", (PyCFunction)(void (*)(void))py_all_reduce, METH_FASTCALL, all_reduce_doc},
    {"post", (PyCFunction)(void (*)(void))py_post, METH_FASTCALL,
     "post(address, value): store the int32 counter at address; wake its sleepers if any announced themselves."},
    {"wait", (PyCFunction)(void (*)(void))py_wait, METH_FASTCALL,
     "wait(address, value, spin_ns, yields, timeout_ns) -> bool: whether the counter reached value (modulo 2**32) in time."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_shmkernel", "The compiled hot path of collspec.impl.shm.", -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__shmkernel(void) {
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    PyObject *types = Py_BuildValue("(sssssss)", "float32", "float64", "int8", "uint8", "int16", "int32", "int64");
    int bad = types == NULL || PyModule_AddObjectRef(m, "TYPES", types) < 0;
    Py_XDECREF(types);
    if (bad) goto fail;
    PyObject *ops = Py_BuildValue("(ssss)", "sum", "prod", "min", "max");
    bad = ops == NULL || PyModule_AddObjectRef(m, "OPS", ops) < 0;
    Py_XDECREF(ops);
    if (bad) goto fail;
    return m;
fail:
    Py_DECREF(m);
    return NULL;
}
