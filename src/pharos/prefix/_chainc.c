/* The chat chain's links in C (issue 13): prefix/chain.py's loop, byte for byte.

   Why: on a 194-message 32 KiB chat the Python loop spent ~170-230 us, ~0.5 us of it per
   link in hashlib's object, update and digest calls alone; here each link is OpenSSL's SHA256_Init,
   _Update and _Final over one reused buffer. chain.py keeps the Python loop as the
   fallback and checks this module against it at import.

   SHA256 comes from the libcrypto Python's own hashlib already loaded (dlopen of its soname),
   so the build needs only Python's headers and a C compiler, like mypyc's: no OpenSSL
   headers. Without libcrypto the import fails and chain.py runs the Python loop.

   chat_links(previous, messages, prefixes, covered) -> (hashes, cum_bytes) | None
     previous: h0, 32 bytes; messages: a sequence of (role, content) tuples;
     prefixes: {role: role field + text tag} of the usual roles; covered: text bytes so far.
   None when any message is not a str content under a role in `prefixes`, or its text is not
   strict UTF-8 (a lone surrogate): the caller then runs the Python loop for the whole chain.
*/
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <dlfcn.h>
#include <stdint.h>
#include <string.h>

/* OpenSSL's SHA256_CTX (sha.h, unchanged from 1.0 to 3.x: 112 bytes), with room to spare. */
typedef union {
    struct {
        unsigned int h[8];
        unsigned int Nl, Nh;
        unsigned int data[16];
        unsigned int num, md_len;
    } ctx;
    unsigned char spare[256];
} sha256_ctx;

typedef int (*sha256_init_fn)(sha256_ctx *ctx);
typedef int (*sha256_update_fn)(sha256_ctx *ctx, const void *data, size_t len);
typedef int (*sha256_final_fn)(unsigned char *md, sha256_ctx *ctx);

static sha256_init_fn sha256_init = NULL;
static sha256_update_fn sha256_update = NULL;
static sha256_final_fn sha256_final = NULL;

/* The low-level calls, not the one-shot SHA256(): in OpenSSL 3 that one fetches the digest
   by name on every call (EVP_Q_digest), as slow as hashlib. */
static void sha256(const unsigned char *data, size_t len, unsigned char *md) {
    sha256_ctx ctx;
    sha256_init(&ctx);
    sha256_update(&ctx, data, len);
    sha256_final(md, &ctx);
}

static int load_sha256(void) {
    static const char *const names[] = {"libcrypto.so.3", "libcrypto.so.1.1", "libcrypto.so"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        void *lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (lib == NULL) {
            continue;
        }
        sha256_init = (sha256_init_fn)dlsym(lib, "SHA256_Init");
        sha256_update = (sha256_update_fn)dlsym(lib, "SHA256_Update");
        sha256_final = (sha256_final_fn)dlsym(lib, "SHA256_Final");
        if (sha256_init != NULL && sha256_update != NULL && sha256_final != NULL) {
            static const unsigned char abc_digest[32] = {
                0xba, 0x78, 0x16, 0xbf, 0x8f, 0x01, 0xcf, 0xea, 0x41, 0x41, 0x40,
                0xde, 0x5d, 0xae, 0x22, 0x23, 0xb0, 0x03, 0x61, 0xa3, 0x96, 0x17,
                0x7a, 0x9c, 0xb4, 0x10, 0xff, 0x61, 0xf2, 0x00, 0x15, 0xad};
            unsigned char md[32];
            sha256((const unsigned char *)"abc", 3, md);
            if (memcmp(md, abc_digest, sizeof(abc_digest)) == 0) {
                return 0;
            }
        }
        sha256_init = NULL;
        dlclose(lib);
    }
    return -1;
}

static void put_u64_be(unsigned char *out, uint64_t value) {
    for (int i = 7; i >= 0; i--) {
        out[i] = (unsigned char)(value & 0xff);
        value >>= 8;
    }
}

static uint64_t get_u64_be(const unsigned char *in) {
    uint64_t value = 0;
    for (int i = 0; i < 8; i++) {
        value = (value << 8) | in[i];
    }
    return value;
}

static PyObject *chat_links(PyObject *self, PyObject *args) {
    (void)self;
    const char *previous;
    Py_ssize_t previous_len;
    PyObject *messages;
    PyObject *prefixes;
    Py_ssize_t covered;
    if (!PyArg_ParseTuple(args, "y#OO!n", &previous, &previous_len, &messages, &PyDict_Type,
                          &prefixes, &covered)) {
        return NULL;
    }
    if (previous_len != 32) {
        PyErr_SetString(PyExc_ValueError, "previous must be a 32-byte digest");
        return NULL;
    }
    PyObject *seq = PySequence_Fast(messages, "messages must be a sequence");
    if (seq == NULL) {
        return NULL;
    }
    Py_ssize_t count = PySequence_Fast_GET_SIZE(seq);
    PyObject **items = PySequence_Fast_ITEMS(seq);
    PyObject *hashes = PyTuple_New(count);
    PyObject *cum_bytes = PyTuple_New(count);
    unsigned char *buffer = NULL;
    size_t capacity = 0;
    unsigned char digest[32];
    memcpy(digest, previous, 32);
    int fallback = 0;
    if (hashes == NULL || cum_bytes == NULL) {
        goto fail;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *pair = items[i];
        if (!PyTuple_CheckExact(pair) || PyTuple_GET_SIZE(pair) != 2) {
            fallback = 1;
            break;
        }
        PyObject *content = PyTuple_GET_ITEM(pair, 1);
        if (!PyUnicode_CheckExact(content)) {
            fallback = 1;
            break;
        }
        PyObject *prefix = PyDict_GetItemWithError(prefixes, PyTuple_GET_ITEM(pair, 0));
        if (prefix == NULL) {
            if (PyErr_Occurred()) {
                goto fail;
            }
            fallback = 1;
            break;
        }
        if (!PyBytes_CheckExact(prefix)) {
            fallback = 1;
            break;
        }
        Py_ssize_t data_len;
        const char *data = PyUnicode_AsUTF8AndSize(content, &data_len);
        if (data == NULL) {
            if (PyErr_ExceptionMatches(PyExc_UnicodeEncodeError)) {
                PyErr_Clear();
                fallback = 1;
                break;
            }
            goto fail;
        }
        Py_ssize_t prefix_len = PyBytes_GET_SIZE(prefix);
        size_t need = 32 + (size_t)prefix_len + 8 + (size_t)data_len;
        if (need > capacity) {
            size_t grown = need > 2 * capacity ? need : 2 * capacity;
            unsigned char *bigger = PyMem_Realloc(buffer, grown);
            if (bigger == NULL) {
                PyErr_NoMemory();
                goto fail;
            }
            buffer = bigger;
            capacity = grown;
        }
        unsigned char *at = buffer;
        memcpy(at, digest, 32);
        at += 32;
        memcpy(at, PyBytes_AS_STRING(prefix), (size_t)prefix_len);
        at += prefix_len;
        put_u64_be(at, (uint64_t)data_len);
        at += 8;
        memcpy(at, data, (size_t)data_len);
        sha256(buffer, need, digest);
        covered += data_len;
        PyObject *link = PyLong_FromUnsignedLongLong(get_u64_be(digest));
        if (link == NULL) {
            goto fail;
        }
        PyTuple_SET_ITEM(hashes, i, link);
        PyObject *so_far = PyLong_FromSsize_t(covered);
        if (so_far == NULL) {
            goto fail;
        }
        PyTuple_SET_ITEM(cum_bytes, i, so_far);
    }
    PyMem_Free(buffer);
    Py_DECREF(seq);
    if (fallback) {
        Py_DECREF(hashes);
        Py_DECREF(cum_bytes);
        Py_RETURN_NONE;
    }
    return Py_BuildValue("(NN)", hashes, cum_bytes);
fail:
    PyMem_Free(buffer);
    Py_DECREF(seq);
    Py_XDECREF(hashes);
    Py_XDECREF(cum_bytes);
    return NULL;
}

static PyMethodDef methods[] = {
    {"chat_links", chat_links, METH_VARARGS,
     "(hashes, cum_bytes) of a chat's links, or None for the Python loop"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "pharos.prefix._chainc",
    "The chat chain's links in C; prefix/chain.py is the fallback.", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__chainc(void) {
    if (load_sha256() != 0) {
        PyErr_SetString(PyExc_ImportError, "no libcrypto with SHA256 to load");
        return NULL;
    }
    return PyModule_Create(&module);
}
