/* rankzero.data.native._passes: passes.c's functions for Python, built by setup.py when rankzero is installed.
 *
 *     _passes.word_hashes(codes, offsets, table, expansions, most_words, astral_codes, astral_folds, words, counts)
 *     _passes.shingle_hashes(words, per_text, position, shingle_words, out, out_per_text)
 *     _passes.scan(codes, offsets, table, expansions, astral, astral_folds, n, window, step, hashing, bits, kinds,
 *                  grams, gram_owners, windows, window_owners, marks, runs, slow, counts)
 *     _passes.CONSTANTS            # {name: value} of passes_constants.h, as this build was compiled with them
 *     _passes.SOURCE_DIGEST        # sha256 of the C sources it was built from (native.source_digest())
 *
 * Arrays come in through the buffer protocol (numpy's, C-contiguous) and each one's element type is checked against
 * the one passes.h declares, writable where the pass writes; the lengths passes.c is given are taken from the arrays
 * themselves, and the offsets and output sizes are checked against them, so a call the Python gets wrong in shape is
 * a TypeError or a ValueError, not a write past an array. The tables' contents (folds, expansions, the astral code
 * points of the batch) are the callers' own (dedup/kernel.py, screen/scan.py) and trusted. The GIL is released for
 * each pass: the stage's encode threads run.
 * native/__init__.py says what each function returns (passes.c, above each function, in detail).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdlib.h>
#include <string.h>

#include "passes.h"

enum { SCALAR, U8, U32, U64, I64 };
static const char *const TYPE_NAMES[] = {"int", "uint8", "uint32", "uint64", "int64"};
static const Py_ssize_t TYPE_SIZES[] = {0, 1, 4, 8, 8};

typedef struct {
    const char *name;
    int type;
    int written;  /* the pass writes it: a read-only buffer is refused */
} Parameter;

typedef struct {
    Py_buffer view;
    int64_t value;  /* a SCALAR's */
    int held;
} Argument;

#define DATA(arguments, i, c_type) ((c_type *)(arguments)[i].view.buf)
#define LENGTH(arguments, i) ((int64_t)((arguments)[i].view.len / (arguments)[i].view.itemsize))

static void release(Argument *arguments, Py_ssize_t count) {
    for (Py_ssize_t i = 0; i < count; i++)
        if (arguments[i].held) {
            PyBuffer_Release(&arguments[i].view);
            arguments[i].held = 0;
        }
}

/* Whether a buffer's struct format is an integer of `type`: the last character says which ('<', '=' and '@' only
 * say native order and alignment, which numpy's native arrays have). */
static int of_type(const Py_buffer *view, int type) {
    const char *format = view->format ? view->format : "B";
    size_t length = strlen(format);
    if (length == 0 || length > 2 || (length == 2 && !strchr("@=<", format[0])) || view->itemsize != TYPE_SIZES[type])
        return 0;
#if PY_BIG_ENDIAN
    if (format[0] == '<') return 0;
#endif
    char code = format[length - 1];
    return type == U8 || type == U32 || type == U64 ? strchr("BHILQN", code) != NULL : strchr("bhilqn", code) != NULL;
}

/* The call's arguments as `parameters` say, or -1 with a TypeError that names the function and the argument. */
static int take(const char *function, const Parameter *parameters, Py_ssize_t count, PyObject *const *objects,
                Py_ssize_t given, Argument *arguments) {
    if (given != count) {
        PyErr_Format(PyExc_TypeError, "%s() takes %zd arguments (%zd given)", function, count, given);
        return -1;
    }
    for (Py_ssize_t i = 0; i < count; i++) arguments[i].held = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        const Parameter *parameter = &parameters[i];
        if (parameter->type == SCALAR) {
            arguments[i].value = PyLong_AsLongLong(objects[i]);
            if (arguments[i].value == -1 && PyErr_Occurred()) goto failed;
            continue;
        }
        int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (parameter->written ? PyBUF_WRITABLE : 0);
        if (PyObject_GetBuffer(objects[i], &arguments[i].view, flags) < 0) goto failed;
        arguments[i].held = 1;
        if (!of_type(&arguments[i].view, parameter->type)) {
            PyErr_Format(PyExc_TypeError, "%s(): %s must be a C-contiguous %s array, not one of format '%s'", function,
                         parameter->name, TYPE_NAMES[parameter->type],
                         arguments[i].view.format ? arguments[i].view.format : "B");
            goto failed;
        }
        continue;
    failed:
        if (!PyErr_ExceptionMatches(PyExc_MemoryError)) {  /* numpy refuses a read-only array with a ValueError */
            PyObject *type, *value, *traceback;
            PyErr_Fetch(&type, &value, &traceback);
            PyErr_NormalizeException(&type, &value, &traceback);
            PyErr_Format(PyExc_TypeError, "%s(), argument %s: %S", function, parameter->name, value);
            Py_XDECREF(type);
            Py_XDECREF(value);
            Py_XDECREF(traceback);
        }
        release(arguments, count);
        return -1;
    }
    return 0;
}

/* ValueError, unless `holds`. */
static int check(int holds, const char *function, const char *what) {
    if (!holds) PyErr_Format(PyExc_ValueError, "%s(): %s", function, what);
    return holds;
}

/* Offsets of `texts` texts into `count` code points: from 0, never falling, ending inside. */
static int offsets_fit(const int64_t *offsets, int64_t texts, int64_t count) {
    if (texts < 0 || offsets[0] < 0 || offsets[texts] > count) return 0;
    for (int64_t i = 0; i < texts; i++)
        if (offsets[i + 1] < offsets[i]) return 0;
    return 1;
}

enum { W_CODES, W_OFFSETS, W_TABLE, W_EXPANSIONS, W_MOST, W_ASTRAL, W_ASTRAL_FOLDS, W_WORDS, W_COUNTS, W_COUNT };
static const Parameter WORD_HASHES[W_COUNT] = {
    {"codes", U32, 0}, {"offsets", I64, 0}, {"table", U32, 0}, {"expansions", U32, 0}, {"most_words", SCALAR, 0},
    {"astral_codes", U32, 0}, {"astral_folds", U32, 0}, {"words", U64, 1}, {"counts", I64, 1}};

static PyObject *py_word_hashes(PyObject *module, PyObject *const *objects, Py_ssize_t given) {
    Argument a[W_COUNT];
    if (take("word_hashes", WORD_HASHES, W_COUNT, objects, given, a) < 0) return NULL;
    int64_t units = LENGTH(a, W_OFFSETS) - 1, written = 0;
    if (check(units >= 0 && offsets_fit(DATA(a, W_OFFSETS, int64_t), units, LENGTH(a, W_CODES)), "word_hashes",
              "offsets must rise from 0 to at most len(codes)") &&
        check(LENGTH(a, W_TABLE) >= 0x10000, "word_hashes", "table must hold every code point below 0x10000") &&
        check(LENGTH(a, W_ASTRAL_FOLDS) == LENGTH(a, W_ASTRAL), "word_hashes",
              "astral_codes and astral_folds differ in length") &&
        check(LENGTH(a, W_COUNTS) >= units, "word_hashes", "counts is shorter than the units") &&
        check(a[W_MOST].value >= 1, "word_hashes", "most_words must be at least 1")) {
        Py_BEGIN_ALLOW_THREADS
        written = word_hashes(DATA(a, W_CODES, uint32_t), DATA(a, W_OFFSETS, int64_t), units,
                              DATA(a, W_TABLE, uint32_t), DATA(a, W_EXPANSIONS, uint32_t), a[W_MOST].value,
                              DATA(a, W_ASTRAL, uint32_t), LENGTH(a, W_ASTRAL), DATA(a, W_ASTRAL_FOLDS, uint32_t),
                              DATA(a, W_WORDS, uint64_t), LENGTH(a, W_WORDS), DATA(a, W_COUNTS, int64_t));
        Py_END_ALLOW_THREADS
        release(a, W_COUNT);
        return PyLong_FromLongLong(written);
    }
    release(a, W_COUNT);
    return NULL;
}

enum { S_WORDS, S_PER_TEXT, S_POSITION, S_SHINGLE_WORDS, S_OUT, S_OUT_PER_TEXT, S_COUNT };
static const Parameter SHINGLE_HASHES[S_COUNT] = {
    {"words", U64, 0}, {"per_text", I64, 0}, {"position", U64, 0}, {"shingle_words", SCALAR, 0}, {"out", U64, 1},
    {"out_per_text", I64, 1}};

static PyObject *py_shingle_hashes(PyObject *module, PyObject *const *objects, Py_ssize_t given) {
    Argument a[S_COUNT];
    if (take("shingle_hashes", SHINGLE_HASHES, S_COUNT, objects, given, a) < 0) return NULL;
    int64_t texts = LENGTH(a, S_PER_TEXT), words = 0, shingles = 0, size = a[S_SHINGLE_WORDS].value, fits = 1;
    const int64_t *per_text = DATA(a, S_PER_TEXT, int64_t);
    for (int64_t text = 0; text < texts; text++) {
        fits &= per_text[text] >= 0;
        words += per_text[text];
        shingles += per_text[text] >= size ? per_text[text] - size + 1 : 0;
    }
    if (check(size >= 1 && LENGTH(a, S_POSITION) >= size, "shingle_hashes",
              "position needs shingle_words (>= 1) values") &&
        check(fits && words <= LENGTH(a, S_WORDS), "shingle_hashes", "per_text counts more words than words holds") &&
        check(LENGTH(a, S_OUT) >= shingles && LENGTH(a, S_OUT_PER_TEXT) >= texts, "shingle_hashes",
              "out or out_per_text is too short")) {
        Py_BEGIN_ALLOW_THREADS
        shingle_hashes(DATA(a, S_WORDS, uint64_t), per_text, texts, DATA(a, S_POSITION, uint64_t), size,
                       DATA(a, S_OUT, uint64_t), DATA(a, S_OUT_PER_TEXT, int64_t));
        Py_END_ALLOW_THREADS
        release(a, S_COUNT);
        Py_RETURN_NONE;
    }
    release(a, S_COUNT);
    return NULL;
}

enum { C_CODES, C_OFFSETS, C_TABLE, C_EXPANSIONS, C_ASTRAL, C_ASTRAL_FOLDS, C_N, C_WINDOW, C_STEP, C_HASHING, C_BITS,
       C_KINDS, C_GRAMS, C_GRAM_OWNERS, C_WINDOWS, C_WINDOW_OWNERS, C_MARKS, C_RUNS, C_SLOW, C_COUNTS, C_COUNT };
static const Parameter SCAN[C_COUNT] = {
    {"codes", U32, 0}, {"offsets", I64, 0}, {"table", U32, 0}, {"expansions", U32, 0}, {"astral", U32, 0},
    {"astral_folds", U32, 0}, {"n", SCALAR, 0}, {"window", SCALAR, 0}, {"step", SCALAR, 0}, {"hashing", SCALAR, 0},
    {"bits", U64, 0}, {"kinds", U8, 0}, {"grams", U64, 1}, {"gram_owners", I64, 1}, {"windows", U64, 1},
    {"window_owners", I64, 1}, {"marks", U8, 1}, {"runs", I64, 1}, {"slow", U8, 1}, {"counts", I64, 1}};

static PyObject *py_scan(PyObject *module, PyObject *const *objects, Py_ssize_t given) {
    Argument a[C_COUNT];
    if (take("scan", SCAN, C_COUNT, objects, given, a) < 0) return NULL;
    int64_t texts = LENGTH(a, C_OFFSETS) - 1, room = LENGTH(a, C_GRAMS), bit_words = LENGTH(a, C_BITS);
    int64_t n = a[C_N].value, window = a[C_WINDOW].value;
    if (check(texts >= 0 && offsets_fit(DATA(a, C_OFFSETS, int64_t), texts, LENGTH(a, C_CODES)), "scan",
              "offsets must rise from 0 to at most len(codes)") &&
        check(LENGTH(a, C_TABLE) >= 0x10000 && LENGTH(a, C_KINDS) >= 0x10000, "scan",
              "table and kinds must hold every code point below 0x10000") &&
        check(LENGTH(a, C_ASTRAL_FOLDS) == LENGTH(a, C_ASTRAL), "scan", "astral and astral_folds differ in length") &&
        check(n >= 1 && window >= 1 && a[C_STEP].value >= 1, "scan", "n, window and step must be at least 1") &&
        check(a[C_HASHING].value >= 0 && a[C_HASHING].value <= 2, "scan", "hashing must be 0, 1 or 2") &&
        check(bit_words >= 1 && (bit_words & (bit_words - 1)) == 0, "scan", "bits must be a power of two long") &&
        check(LENGTH(a, C_GRAM_OWNERS) == room && LENGTH(a, C_WINDOWS) == room && LENGTH(a, C_WINDOW_OWNERS) == room,
              "scan", "grams, gram_owners, windows and window_owners differ in length") &&
        check(LENGTH(a, C_MARKS) >= texts && LENGTH(a, C_SLOW) >= texts && LENGTH(a, C_RUNS) >= 2 * texts &&
              LENGTH(a, C_COUNTS) >= 3, "scan", "marks, slow, runs (2 a text) or counts (3) is too short")) {
        /* The rings of a text's last n word hashes and `window` letters: scratch, one allocation. */
        uint64_t *rings = malloc((size_t)(n + window) * sizeof(uint64_t));
        if (rings == NULL) {
            release(a, C_COUNT);
            return PyErr_NoMemory();
        }
        Py_BEGIN_ALLOW_THREADS
        scan(DATA(a, C_CODES, uint32_t), DATA(a, C_OFFSETS, int64_t), texts, DATA(a, C_TABLE, uint32_t),
             DATA(a, C_EXPANSIONS, uint32_t), DATA(a, C_ASTRAL, uint32_t), LENGTH(a, C_ASTRAL),
             DATA(a, C_ASTRAL_FOLDS, uint32_t), n, window, a[C_STEP].value, a[C_HASHING].value,
             DATA(a, C_BITS, uint64_t), bit_words, DATA(a, C_KINDS, uint8_t), rings, rings + n, room,
             DATA(a, C_GRAMS, uint64_t), DATA(a, C_GRAM_OWNERS, int64_t), DATA(a, C_WINDOWS, uint64_t),
             DATA(a, C_WINDOW_OWNERS, int64_t), DATA(a, C_MARKS, uint8_t), DATA(a, C_RUNS, int64_t),
             DATA(a, C_SLOW, uint8_t), DATA(a, C_COUNTS, int64_t));
        Py_END_ALLOW_THREADS
        free(rings);
        release(a, C_COUNT);
        Py_RETURN_NONE;
    }
    release(a, C_COUNT);
    return NULL;
}

static PyMethodDef METHODS[] = {
    {"word_hashes", (PyCFunction)(void (*)(void))py_word_hashes, METH_FASTCALL,
     "Near dedup's word hashes (dedup/kernel.py); the number written, or -1 when `words` is too short."},
    {"shingle_hashes", (PyCFunction)(void (*)(void))py_shingle_hashes, METH_FASTCALL,
     "Near dedup's word 5-gram hashes (dedup/kernel.py)."},
    {"scan", (PyCFunction)(void (*)(void))py_scan, METH_FASTCALL,
     "Decontamination's hashes and the PII masker's marks (screen/scan.py)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef MODULE = {PyModuleDef_HEAD_INIT, "_passes", "passes.c, built at install (module.c).", -1,
                                    METHODS};

PyMODINIT_FUNC PyInit__passes(void) {
    PyObject *module = PyModule_Create(&MODULE);
    PyObject *constants = PyDict_New();
    if (module == NULL || constants == NULL) goto failed;
    /* PASSES_CONSTANTS(X) applies X to every name of passes_constants.h */
#define ADD(name)                                                                            \
    {                                                                                        \
        PyObject *value = PyLong_FromUnsignedLongLong((unsigned long long)(name));           \
        if (value == NULL || PyDict_SetItemString(constants, #name, value) < 0) {            \
            Py_XDECREF(value);                                                               \
            goto failed;                                                                     \
        }                                                                                    \
        Py_DECREF(value);                                                                    \
    }
    PASSES_CONSTANTS(ADD)
#undef ADD
    if (PyModule_AddObject(module, "CONSTANTS", constants) < 0) goto failed;
    constants = NULL;  /* the module's now */
    if (PyModule_AddStringConstant(module, "SOURCE_DIGEST", PASSES_SOURCE_DIGEST) < 0) goto failed;
    return module;
failed:
    Py_XDECREF(constants);
    Py_XDECREF(module);
    return NULL;
}
