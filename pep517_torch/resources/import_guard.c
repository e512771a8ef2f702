/* pep517_torch's import check, compiled into every guarded artifact (core/postlink/import_guard.py).

   The build includes this file from a generated one that defines the parameters:
     GUARD_MODULE     "pkg._C"            the module (dotted)
     GUARD_TORCH      "2.14.1+cu130"      the torch it was built against
     GUARD_STABLE     "2.10" or NULL      its stable-ABI target: every torch from there on passes
     GUARD_CUDA       "13" or NULL        the CUDA major its binaries need (torch's CUDA variant)
     GUARD_BUILT_FOR  "torch 2.14.1+cu130" how messages name what it was built for
     GUARD_CUDA_ADVICE "..."              what a user without that CUDA does about it

   After linking, core/postlink/guard_patch.py rewires the file: torch's symbols become weak and torch's
   CUDA libraries leave DT_NEEDED, so that loading succeeds whatever torch runs; DT_INIT_ARRAY
   holds guard_init alone, which checks the running torch and only then runs the library's own
   initialisers (its operator registrations); PyInit_<name> enters through guard_pyinit. A
   refused library thus registers nothing and calls nothing of torch: Python gets one
   ImportError naming both torches (or, without Python, one line on stderr). Plain C, no
   Python headers: every Python function is a weak reference (a C++ program loading the
   library has none). */

#include <elf.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef struct _object PyObject;
#define WEAK __attribute__((weak))
extern int Py_IsInitialized(void) WEAK;
extern int PyGILState_Check(void) WEAK;
extern PyObject *PyImport_GetModuleDict(void) WEAK;
extern PyObject *PyDict_GetItemString(PyObject *, const char *) WEAK;
extern PyObject *PyObject_GetAttrString(PyObject *, const char *) WEAK;
extern PyObject *PyObject_Str(PyObject *) WEAK;
extern int PyObject_IsTrue(PyObject *) WEAK;
extern const char *PyUnicode_AsUTF8AndSize(PyObject *, ptrdiff_t *) WEAK;
extern void Py_DecRef(PyObject *) WEAK;
extern PyObject *PyErr_Occurred(void) WEAK;
extern void PyErr_SetString(PyObject *, const char *) WEAK;
extern void PyErr_Clear(void) WEAK;
extern void *PyEval_GetFrame(void) WEAK;
extern PyObject *PyFrame_GetCode(void *) WEAK;
extern PyObject *PyExc_ImportError WEAK;

#define HIDDEN __attribute__((visibility("hidden")))
#define WEAK_BEFORE_CAPACITY 256

/* What guard_patch.py writes (virtual addresses, as linked; 0: none). It finds the block by
   its magic and the three functions by the relocations of ``functions``. */
struct guard_block {
    char magic[16];
    uint64_t layout;
    uint64_t self;                  /* this block's address: 0 until patched (then inert) */
    uint64_t init_array, init_count, fini_array, fini_count;
    uint64_t pyinit;                /* the library's own PyInit_<name> */
    uint64_t dynsym, dynsym_count, dynstr;
    uint64_t rela, rela_count, jmprel, jmprel_count;
    uint64_t weak_before_count;     /* more than the capacity: no symbol check */
    uint32_t weak_before[WEAK_BEFORE_CAPACITY];
    void *functions[3];             /* guard_init, guard_fini, guard_pyinit */
};

typedef void (*init_function)(int, char **, char **);
typedef void (*fini_function)(void);
typedef PyObject *(*pyinit_function)(void);

HIDDEN void pep517_torch_guard_init(int argc, char **argv, char **envp);
HIDDEN void pep517_torch_guard_fini(void);
HIDDEN PyObject *pep517_torch_guard_pyinit(void);

HIDDEN __attribute__((used, aligned(16))) struct guard_block pep517_torch_guard_block = {
    {'p', 'e', 'p', '5', '1', '7', '_', 't', 'o', 'r', 'c', 'h', 'G', 'R', 'D', '1'},
    1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, {0},
    {(void *)pep517_torch_guard_init, (void *)pep517_torch_guard_fini,
     (void *)pep517_torch_guard_pyinit},
};

enum { NOT_RUN, PASSED, REFUSED };
static int state = NOT_RUN;
static char message[1536];

static char *base(void) {
    return (char *)&pep517_torch_guard_block - pep517_torch_guard_block.self;
}

static int python_here(void) {
    return Py_IsInitialized && PyGILState_Check && Py_IsInitialized() && PyGILState_Check()
        && PyImport_GetModuleDict && PyDict_GetItemString && PyObject_GetAttrString
        && PyObject_Str && PyObject_IsTrue && PyUnicode_AsUTF8AndSize && Py_DecRef
        && PyErr_Occurred && PyErr_SetString && PyErr_Clear && &PyExc_ImportError;
}

/* str(getattr(object, name)) into out; "" when it has none; None as "". */
static void attribute_text(PyObject *object, const char *name, char *out, size_t size) {
    out[0] = 0;
    PyObject *value = object ? PyObject_GetAttrString(object, name) : NULL;
    if (value == NULL) {
        PyErr_Clear();
        return;
    }
    if (PyObject_IsTrue(value) == 1) {
        PyObject *text = PyObject_Str(value);
        const char *utf8 = text ? PyUnicode_AsUTF8AndSize(text, NULL) : NULL;
        if (utf8 != NULL)
            snprintf(out, size, "%s", utf8);
        if (text != NULL)
            Py_DecRef(text);
    }
    PyErr_Clear();
    Py_DecRef(value);
}

/* The running torch (torch.__version__, torch.version.cuda), if Python has imported it. */
static int running_torch(char *version, size_t version_size, char *cuda, size_t cuda_size) {
    if (!python_here())
        return 0;
    PyObject *torch = PyDict_GetItemString(PyImport_GetModuleDict(), "torch");  /* borrowed */
    if (torch == NULL)
        return 0;
    attribute_text(torch, "__version__", version, version_size);
    PyObject *torch_version = PyObject_GetAttrString(torch, "version");
    if (torch_version == NULL)
        PyErr_Clear();
    attribute_text(torch_version, "cuda", cuda, cuda_size);
    if (torch_version != NULL)
        Py_DecRef(torch_version);
    return version[0] != 0;
}

/* major * 1000 + minor of "2.13.1+cu130" ("v2.13" too); -1 when it names none. */
static long major_minor(const char *text) {
    while (*text == ' ')
        text++;
    if (*text == 'v')
        text++;
    long major = 0, minor = 0;
    const char *start = text;
    while (*text >= '0' && *text <= '9')
        major = major * 10 + (*text++ - '0');
    if (text == start || *text++ != '.')
        return -1;
    start = text;
    while (*text >= '0' && *text <= '9')
        minor = minor * 10 + (*text++ - '0');
    return text == start ? -1 : major * 1000 + minor;
}

static long cuda_major(const char *cuda) {
    long major = major_minor(cuda);
    if (major >= 0)
        return major / 1000;
    major = 0;
    if (*cuda < '0' || *cuda > '9')
        return -1;
    while (*cuda >= '0' && *cuda <= '9')
        major = major * 10 + (*cuda++ - '0');
    return major;
}

/* torch's own label (2.14.1+cu130), or one made from its CUDA version (a source build). */
static void variant(const char *version, const char *cuda, char *out, size_t size) {
    if (strchr(version, '+') != NULL || cuda[0] == 0) {
        snprintf(out, size, "%s%s", version, strchr(version, '+') ? "" : "+cpu");
        return;
    }
    char digits[16];
    size_t used = 0;
    for (const char *c = cuda; *c && used + 1 < sizeof digits; c++)
        if (*c != '.')
            digits[used++] = *c;
    digits[used] = 0;
    snprintf(out, size, "%s+cu%s", version, digits);
}

static int version_problem(const char *version, const char *cuda) {
    long running = major_minor(version);
    char running_variant[128];
    variant(version, cuda, running_variant, sizeof running_variant);
    if (GUARD_STABLE != NULL && running < major_minor(GUARD_STABLE)) {
        snprintf(message, sizeof message,
                 "%s uses torch's stable ABI %s: it needs torch>=%s, but torch %s is installed,"
                 " which is older. Install a newer torch: `pip install 'torch>=%s'`.",
                 GUARD_MODULE, GUARD_STABLE, GUARD_STABLE, version, GUARD_STABLE);
        return 1;
    }
    if (GUARD_STABLE == NULL && running != major_minor(GUARD_TORCH)) {
        char release[64];
        snprintf(release, sizeof release, "%s", GUARD_TORCH);
        release[strcspn(release, "+")] = 0;
        snprintf(message, sizeof message,
                 "%s was built against torch %s, but torch %s is installed. Install a build of"
                 " this package made for your torch (or build it from source with"
                 " `--no-build-isolation`), or install the torch it was built for:"
                 " `pip install torch==%s`.",
                 GUARD_MODULE, GUARD_TORCH, version, release);
        return 1;
    }
    if (GUARD_CUDA != NULL && (cuda[0] == 0 || cuda_major(cuda) != cuda_major(GUARD_CUDA))) {
        snprintf(message, sizeof message, "%s was built for %s, this is torch %s: %s",
                 GUARD_MODULE, GUARD_BUILT_FOR, running_variant, GUARD_CUDA_ADVICE);
        return 1;
    }
    return 0;
}

static int was_weak(uint32_t index) {
    const struct guard_block *block = &pep517_torch_guard_block;
    for (uint64_t i = 0; i < block->weak_before_count; i++)
        if (block->weak_before[i] == index)
            return 1;
    return 0;
}

#if defined(__x86_64__)
#define SYMBOL_RELOCATION(type) ((type) == R_X86_64_GLOB_DAT || (type) == R_X86_64_JUMP_SLOT || (type) == R_X86_64_64)
#elif defined(__aarch64__)
#define SYMBOL_RELOCATION(type) ((type) == R_AARCH64_GLOB_DAT || (type) == R_AARCH64_JUMP_SLOT || (type) == R_AARCH64_ABS64)
#else
#error "pep517_torch's import check supports x86_64 and aarch64"
#endif

/* The first symbol the patch made weak that nothing in this process defines (its slot was
   left as its addend), or NULL. A lazily bound PLT slot still points into this library: not
   judged here (Python's imports and ctypes bind immediately). */
static const char *missing_symbol(const Elf64_Rela *relocations, uint64_t count) {
    const struct guard_block *block = &pep517_torch_guard_block;
    const Elf64_Sym *symbols = (const Elf64_Sym *)(base() + block->dynsym);
    const char *names = base() + block->dynstr;
    for (uint64_t i = 0; i < count; i++) {
        uint32_t index = ELF64_R_SYM(relocations[i].r_info);
        if (index == 0 || index >= block->dynsym_count || !SYMBOL_RELOCATION(ELF64_R_TYPE(relocations[i].r_info)))
            continue;
        const Elf64_Sym *symbol = &symbols[index];
        if (symbol->st_shndx != SHN_UNDEF || ELF64_ST_BIND(symbol->st_info) != STB_WEAK
            || ELF64_ST_TYPE(symbol->st_info) == STT_TLS || was_weak(index))
            continue;
        uint64_t value = *(const uint64_t *)(base() + relocations[i].r_offset);
        if (value == (uint64_t)relocations[i].r_addend)
            return names + symbol->st_name;
    }
    return NULL;
}

static void symbol_problem(const char *symbol, const char *version, const char *cuda) {
    char running_variant[128];
    variant(version, cuda, running_variant, sizeof running_variant);
    if (version[0] != 0)
        snprintf(message, sizeof message,
                 "%s was built for %s and needs %s, which this torch (%s) does not provide:"
                 " rebuild it against this torch (from source, with `--no-build-isolation`).",
                 GUARD_MODULE, GUARD_BUILT_FOR, symbol, running_variant);
    else
        snprintf(message, sizeof message,
                 "%s was built for %s and needs %s, which nothing loaded in this process"
                 " provides: import torch first (the torch it was built for).",
                 GUARD_MODULE, GUARD_BUILT_FOR, symbol);
}

/* Whether the innermost Python frame is the import system's (the import path: guard_pyinit
   raises there) rather than ctypes' (torch.ops.load_library: only this constructor can). */
static int importing(void) {
    if (!PyEval_GetFrame || !PyFrame_GetCode)
        return 0;
    void *frame = PyEval_GetFrame();  /* borrowed */
    PyObject *code = frame ? PyFrame_GetCode(frame) : NULL;
    char filename[128];
    attribute_text(code, "co_filename", filename, sizeof filename);
    if (code != NULL)
        Py_DecRef(code);
    return strncmp(filename, "<frozen importlib._bootstrap", 28) == 0;
}

static void refuse(void) {
    state = REFUSED;
    if (!python_here()) {
        fprintf(stderr, "pep517_torch: %s\n", message);
        return;
    }
    if (pep517_torch_guard_block.pyinit != 0 && importing())
        return;  /* guard_pyinit raises it */
    if (PyErr_Occurred() == NULL)
        PyErr_SetString(PyExc_ImportError, message);
}

static void check(void) {
    const struct guard_block *block = &pep517_torch_guard_block;
    char version[128] = "", cuda[32] = "";
    int known = running_torch(version, sizeof version, cuda, sizeof cuda);
    if (known && version_problem(version, cuda)) {
        refuse();
        return;
    }
    if (block->weak_before_count <= WEAK_BEFORE_CAPACITY) {
        const char *symbol = missing_symbol((const Elf64_Rela *)(base() + block->rela), block->rela_count);
        if (symbol == NULL)
            symbol = missing_symbol((const Elf64_Rela *)(base() + block->jmprel), block->jmprel_count);
        if (symbol != NULL) {
            symbol_problem(symbol, version, cuda);
            refuse();
            return;
        }
    }
    state = PASSED;
}

__attribute__((constructor)) HIDDEN void pep517_torch_guard_init(int argc, char **argv, char **envp) {
    const struct guard_block *block = &pep517_torch_guard_block;
    if (block->self == 0 || state != NOT_RUN)
        return;  /* not patched (a plain constructor then): nothing to guard */
    check();
    if (state != PASSED)
        return;
    const uint64_t *entries = (const uint64_t *)(base() + block->init_array);
    for (uint64_t i = 0; i < block->init_count; i++) {
        init_function function = (init_function)entries[i];
        if (function != pep517_torch_guard_init && entries[i] != 0 && entries[i] != (uint64_t)-1)
            function(argc, argv, envp);
    }
}

__attribute__((destructor)) HIDDEN void pep517_torch_guard_fini(void) {
    const struct guard_block *block = &pep517_torch_guard_block;
    if (block->self == 0 || state != PASSED)
        return;  /* the library's own destructors only after its own initialisers */
    const uint64_t *entries = (const uint64_t *)(base() + block->fini_array);
    for (uint64_t i = block->fini_count; i-- > 0;) {
        fini_function function = (fini_function)entries[i];
        if (function != pep517_torch_guard_fini && entries[i] != 0 && entries[i] != (uint64_t)-1)
            function();
    }
}

HIDDEN PyObject *pep517_torch_guard_pyinit(void) {
    if (state == NOT_RUN)
        pep517_torch_guard_init(0, NULL, NULL);
    if (state != PASSED) {
        if (python_here()) {
            PyErr_Clear();
            PyErr_SetString(PyExc_ImportError, message);
        }
        return NULL;
    }
    return ((pyinit_function)(base() + pep517_torch_guard_block.pyinit))();
}
