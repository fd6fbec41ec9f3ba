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

   message_links(previous, messages, prefixes, covered, other) -> (hashes, cum_bytes) | None
     The same links from the decoded message Structs themselves (proxy/parse.py's, read through
     their `role` and `content` member slots) or (role, content) tuples, where a content may be
     the raw JSON of a string (a buffer starting with a quote: msgspec.Raw), unescaped here into
     the hashed bytes. Any other message goes to `other(role, content)`, which returns the bytes
     hashed after the previous digest and the text bytes they cover, or None. None when a message
     is neither (the caller then decodes the body the strict way).
     Why: msgspec decoding every content into a str cost ~2.5x the raw decode on a 32 KiB chat
     (87 vs 34 us), and building the (role, content) pairs in Python ~8 us more.

   message_links(..., other, memo) -> (hashes, cum_bytes, digests, entry, reused) | None
     With `memo`, a list of earlier chats' entries (h0, covered, messages, digests, hashes,
     cum_bytes) as memo.ChainMemo keeps them: the leading messages an entry repeats (the same
     h0, and per message the same role and content bytes) take that entry's links instead of
     being unescaped and hashed again, from the entry repeating the most. Returns also every
     link's whole digest (32 bytes each), the entry used (None) and how many links it gave.
     Why: a chat's every turn sends the conversation so far again; on compare.py's 32 KiB chats
     193 of 194 messages repeat the previous request's.
*/
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <dlfcn.h>
#include <structmember.h>
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

/* Stores link i: the digest's first 8 bytes as the hash, and the bytes covered so far. */
static int put_link(PyObject *hashes, PyObject *cum_bytes, Py_ssize_t i,
                    const unsigned char *digest, Py_ssize_t covered) {
    PyObject *link = PyLong_FromUnsignedLongLong(get_u64_be(digest));
    if (link == NULL) {
        return -1;
    }
    PyTuple_SET_ITEM(hashes, i, link);
    PyObject *so_far = PyLong_FromSsize_t(covered);
    if (so_far == NULL) {
        return -1;
    }
    PyTuple_SET_ITEM(cum_bytes, i, so_far);
    return 0;
}

/* (hashes, cum_bytes), stealing both; None (the Python loop's turn) when `fallback`. */
static PyObject *finish_links(PyObject *hashes, PyObject *cum_bytes, int fallback) {
    if (fallback) {
        Py_DECREF(hashes);
        Py_DECREF(cum_bytes);
        Py_RETURN_NONE;
    }
    return Py_BuildValue("(NN)", hashes, cum_bytes);
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
        if (put_link(hashes, cum_bytes, i, digest, covered) < 0) {
            goto fail;
        }
    }
    PyMem_Free(buffer);
    Py_DECREF(seq);
    return finish_links(hashes, cum_bytes, fallback);
fail:
    PyMem_Free(buffer);
    Py_DECREF(seq);
    Py_XDECREF(hashes);
    Py_XDECREF(cum_bytes);
    return NULL;
}


/* Ensures `*buffer` holds `need` bytes. */
static int reserve(unsigned char **buffer, size_t *capacity, size_t need) {
    if (need <= *capacity) {
        return 0;
    }
    size_t grown = need > 2 * *capacity ? need : 2 * *capacity;
    unsigned char *bigger = PyMem_Realloc(*buffer, grown);
    if (bigger == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    *buffer = bigger;
    *capacity = grown;
    return 0;
}

static signed char hex_digits[256];

static void init_hex_digits(void) {
    memset(hex_digits, -1, sizeof(hex_digits));
    for (int i = 0; i < 10; i++) {
        hex_digits['0' + i] = (signed char)i;
    }
    for (int i = 0; i < 6; i++) {
        hex_digits['a' + i] = (signed char)(10 + i);
        hex_digits['A' + i] = (signed char)(10 + i);
    }
}

static long hex4(const unsigned char *in) {
    int a = hex_digits[in[0]], b = hex_digits[in[1]], c = hex_digits[in[2]], d = hex_digits[in[3]];
    if ((a | b | c | d) < 0) {
        return -1;
    }
    return ((long)a << 12) | ((long)b << 8) | ((long)c << 4) | (long)d;
}

static size_t put_utf8(unsigned char *out, long code) {
    if (code < 0x80) {
        out[0] = (unsigned char)code;
        return 1;
    }
    if (code < 0x800) {
        out[0] = (unsigned char)(0xC0 | (code >> 6));
        out[1] = (unsigned char)(0x80 | (code & 0x3F));
        return 2;
    }
    if (code < 0x10000) {
        out[0] = (unsigned char)(0xE0 | (code >> 12));
        out[1] = (unsigned char)(0x80 | ((code >> 6) & 0x3F));
        out[2] = (unsigned char)(0x80 | (code & 0x3F));
        return 3;
    }
    out[0] = (unsigned char)(0xF0 | (code >> 18));
    out[1] = (unsigned char)(0x80 | ((code >> 12) & 0x3F));
    out[2] = (unsigned char)(0x80 | ((code >> 6) & 0x3F));
    out[3] = (unsigned char)(0x80 | (code & 0x3F));
    return 4;
}

#define ONES 0x0101010101010101ULL
#define HIGHS 0x8080808080808080ULL

/* The first backslash in [at, end), or end. Eight bytes a step (a zero-byte test of x ^ '\\'):
   a byte loop cost ~4 instructions a byte, memchr a call per escape, and escapes come in runs
   (\u0440\u0438) a few bytes apart. */
static const unsigned char *find_backslash(const unsigned char *at, const unsigned char *end) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    while (end - at >= 8) {
        uint64_t chunk;
        memcpy(&chunk, at, 8);
        uint64_t x = chunk ^ (ONES * '\\');
        uint64_t found = (x - ONES) & ~x & HIGHS; /* the lowest flag is a real one */
        if (found != 0) {
            return at + __builtin_ctzll(found) / 8;
        }
        at += 8;
    }
#endif
    while (at < end && *at != '\\') {
        at++;
    }
    return at;
}

/* The text of the JSON string in[0..len) (its quotes included) into out, as msgspec decodes it
   and Python encodes it to UTF-8; its length, or -1 for what msgspec refuses to decode alone (a
   lone surrogate escape, a bad escape, no closing quote). The string is one msgspec accepted
   (a Raw of the body it decoded: valid UTF-8, no raw control bytes), so only escapes are read:
   memchr finds each backslash, and the runs between them are copied whole. */
static Py_ssize_t unescape_json_string(const unsigned char *in, size_t len, unsigned char *out) {
    if (len < 2 || in[0] != '"' || in[len - 1] != '"') {
        return -1;
    }
    const unsigned char *at = in + 1;
    const unsigned char *end = in + len - 1; /* the closing quote */
    unsigned char *start = out;
    while (at < end) {
        if (*at != '\\') {
            const unsigned char *slash = find_backslash(at, end);
            size_t run = (size_t)(slash - at);
            memcpy(out, at, run);
            out += run;
            at = slash;
            if (at == end) {
                break;
            }
        }
        if (at + 1 >= end) {
            return -1; /* the closing quote is escaped: the string never ends */
        }
        unsigned char e = at[1];
        at += 2;
        switch (e) {
        case '"':
        case '\\':
        case '/':
            *out++ = e;
            continue;
        case 'b':
            *out++ = '\b';
            continue;
        case 'f':
            *out++ = '\f';
            continue;
        case 'n':
            *out++ = '\n';
            continue;
        case 'r':
            *out++ = '\r';
            continue;
        case 't':
            *out++ = '\t';
            continue;
        case 'u':
            break;
        default:
            return -1;
        }
        if (end - at < 4) {
            return -1;
        }
        long code = hex4(at);
        at += 4;
        if (code < 0 || (code >= 0xDC00 && code <= 0xDFFF)) {
            return -1;
        }
        if (code >= 0xD800 && code <= 0xDBFF) {
            if (end - at < 6 || at[0] != '\\' || at[1] != 'u') {
                return -1;
            }
            long low = hex4(at + 2);
            if (low < 0xDC00 || low > 0xDFFF) {
                return -1;
            }
            at += 6;
            code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
        }
        out += put_utf8(out, code);
    }
    return (Py_ssize_t)(out - start);
}

static PyObject *role_name = NULL;
static PyObject *content_name = NULL;

/* The offset of a member slot holding an object (a msgspec Struct field, a __slots__ entry). */
static Py_ssize_t member_offset(PyTypeObject *type, PyObject *name) {
    PyObject *descr = _PyType_Lookup(type, name);
    if (descr == NULL || !Py_IS_TYPE(descr, &PyMemberDescr_Type)) {
        return -1;
    }
    PyMemberDef *member = ((PyMemberDescrObject *)descr)->d_member;
    return member->type == T_OBJECT_EX || member->type == T_OBJECT ? member->offset : -1;
}

/* A message's role and content: a (role, content) tuple's items, or a Struct's member slots
   (the offsets cached per type in *type, *role_offset, *content_offset). -1: neither. */
static int message_fields(PyObject *item, PyTypeObject **type, Py_ssize_t *role_offset,
                          Py_ssize_t *content_offset, PyObject **role, PyObject **content) {
    if (PyTuple_CheckExact(item)) {
        if (PyTuple_GET_SIZE(item) != 2) {
            return -1;
        }
        *role = PyTuple_GET_ITEM(item, 0);
        *content = PyTuple_GET_ITEM(item, 1);
        return 0;
    }
    if (Py_TYPE(item) != *type) {
        *type = Py_TYPE(item);
        *role_offset = member_offset(*type, role_name);
        *content_offset = member_offset(*type, content_name);
    }
    if (*role_offset < 0 || *content_offset < 0) {
        return -1;
    }
    *role = *(PyObject **)((char *)item + *role_offset);
    *content = *(PyObject **)((char *)item + *content_offset);
    return *role == NULL || *content == NULL ? -1 : 0;
}

/* 1 when two contents are the same bytes for certain (two buffers, msgspec.Raw, or two exact
   strs), so their links after the same digest and role are equal; 0 when not known equal. */
static int same_content(PyObject *a, PyObject *b) {
    if (a == b) {
        return 1;
    }
    if (PyUnicode_CheckExact(a) && PyUnicode_CheckExact(b)) {
        return PyUnicode_Compare(a, b) == 0;
    }
    if (!PyObject_CheckBuffer(a) || !PyObject_CheckBuffer(b)) {
        return 0;
    }
    Py_buffer left, right;
    if (PyObject_GetBuffer(a, &left, PyBUF_SIMPLE) < 0) {
        PyErr_Clear();
        return 0;
    }
    if (PyObject_GetBuffer(b, &right, PyBUF_SIMPLE) < 0) {
        PyErr_Clear();
        PyBuffer_Release(&left);
        return 0;
    }
    int same = left.len == right.len && memcmp(left.buf, right.buf, (size_t)left.len) == 0;
    PyBuffer_Release(&left);
    PyBuffer_Release(&right);
    return same;
}

static int same_role(PyObject *a, PyObject *b) {
    return a == b ||
           (PyUnicode_CheckExact(a) && PyUnicode_CheckExact(b) && PyUnicode_Compare(a, b) == 0);
}

/* How many leading messages of items[0..count) an earlier chat's entry repeats: the same h0 and
   tools bytes, and per message the same role and the same content bytes. An entry is
   (h0, covered, messages, digests, hashes, cum_bytes) as memo.ChainMemo keeps it; -1 when it
   isn't one (the caller then ignores it). */
static Py_ssize_t repeated(PyObject *entry, const char *previous, Py_ssize_t covered,
                           PyObject **items, Py_ssize_t count) {
    if (!PyTuple_CheckExact(entry) || PyTuple_GET_SIZE(entry) != 6) {
        return -1;
    }
    PyObject *root = PyTuple_GET_ITEM(entry, 0);
    PyObject *old_messages = PyTuple_GET_ITEM(entry, 2);
    PyObject *digests = PyTuple_GET_ITEM(entry, 3);
    PyObject *hashes = PyTuple_GET_ITEM(entry, 4);
    PyObject *cum_bytes = PyTuple_GET_ITEM(entry, 5);
    if (!PyBytes_CheckExact(root) || PyBytes_GET_SIZE(root) != 32 ||
        !PyTuple_CheckExact(old_messages) || !PyBytes_CheckExact(digests) ||
        !PyTuple_CheckExact(hashes) || !PyTuple_CheckExact(cum_bytes)) {
        return -1;
    }
    Py_ssize_t old_count = PyTuple_GET_SIZE(old_messages);
    if (PyTuple_GET_SIZE(hashes) != old_count || PyTuple_GET_SIZE(cum_bytes) != old_count ||
        PyBytes_GET_SIZE(digests) != 32 * old_count) {
        return -1;
    }
    Py_ssize_t old_covered = PyLong_AsSsize_t(PyTuple_GET_ITEM(entry, 1));
    if (old_covered == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        return -1;
    }
    if (old_covered != covered || memcmp(PyBytes_AS_STRING(root), previous, 32) != 0) {
        return 0;
    }
    PyTypeObject *new_type = NULL, *old_type = NULL;
    Py_ssize_t new_role = -1, new_content = -1, old_role = -1, old_content = -1;
    Py_ssize_t limit = count < old_count ? count : old_count;
    Py_ssize_t k = 0;
    for (; k < limit; k++) {
        PyObject *role, *content, *was_role, *was_content;
        if (message_fields(items[k], &new_type, &new_role, &new_content, &role, &content) < 0 ||
            message_fields(PyTuple_GET_ITEM(old_messages, k), &old_type, &old_role,
                           &old_content, &was_role, &was_content) < 0 ||
            !same_role(role, was_role) || !same_content(content, was_content)) {
            break;
        }
    }
    return k;
}

static PyObject *message_links(PyObject *self, PyObject *args) {
    (void)self;
    const char *previous;
    Py_ssize_t previous_len;
    PyObject *messages;
    PyObject *prefixes;
    Py_ssize_t covered;
    PyObject *other;
    PyObject *memo = NULL;
    if (!PyArg_ParseTuple(args, "y#OO!nO|O!", &previous, &previous_len, &messages, &PyDict_Type,
                          &prefixes, &covered, &other, &PyList_Type, &memo)) {
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
    PyTypeObject *struct_type = NULL;
    Py_ssize_t role_offset = -1, content_offset = -1;
    PyObject *digests = NULL;  /* with a memo: every link's whole digest, for the next chat */
    PyObject *reused_from = NULL;  /* owned: the memo entry the first `start` links came from */
    Py_ssize_t start = 0;
    if (hashes == NULL || cum_bytes == NULL) {
        goto fail;
    }
    if (memo != NULL) {
        digests = PyBytes_FromStringAndSize(NULL, 32 * count);
        if (digests == NULL) {
            goto fail;
        }
        Py_ssize_t entries = PyList_GET_SIZE(memo);
        for (Py_ssize_t e = 0; e < entries && start < count - 1; e++) {
            PyObject *entry = PyList_GET_ITEM(memo, e);
            Py_ssize_t k = repeated(entry, previous, covered, items, count);
            if (k > start) {
                start = k;
                Py_INCREF(entry);
                Py_XSETREF(reused_from, entry);
            }
        }
        if (start > 0) {
            PyObject *old_hashes = PyTuple_GET_ITEM(reused_from, 4);
            PyObject *old_cum = PyTuple_GET_ITEM(reused_from, 5);
            memcpy(PyBytes_AS_STRING(digests), PyBytes_AS_STRING(PyTuple_GET_ITEM(reused_from, 3)),
                   (size_t)(32 * start));
            for (Py_ssize_t i = 0; i < start; i++) {
                PyObject *link = PyTuple_GET_ITEM(old_hashes, i);
                PyObject *so_far = PyTuple_GET_ITEM(old_cum, i);
                Py_INCREF(link);
                Py_INCREF(so_far);
                PyTuple_SET_ITEM(hashes, i, link);
                PyTuple_SET_ITEM(cum_bytes, i, so_far);
            }
            memcpy(digest, PyBytes_AS_STRING(digests) + 32 * (start - 1), 32);
            covered = PyLong_AsSsize_t(PyTuple_GET_ITEM(old_cum, start - 1));
            if (covered == -1 && PyErr_Occurred()) {
                goto fail;
            }
        }
    }
    for (Py_ssize_t i = start; i < count && !fallback; i++) {
        PyObject *item = items[i];
        PyObject *role;
        PyObject *content;
        if (message_fields(item, &struct_type, &role_offset, &content_offset, &role, &content) <
            0) {
            fallback = 1;
            break;
        }
        PyObject *prefix = NULL;
        if (PyUnicode_CheckExact(role)) {
            prefix = PyDict_GetItemWithError(prefixes, role);
            if (prefix == NULL && PyErr_Occurred()) {
                goto fail;
            }
            if (prefix != NULL && !PyBytes_CheckExact(prefix)) {
                prefix = NULL;
            }
        }
        Py_ssize_t data_len = -1;
        if (prefix != NULL && PyUnicode_CheckExact(content)) {
            const char *data = PyUnicode_AsUTF8AndSize(content, &data_len);
            if (data == NULL) {
                if (!PyErr_ExceptionMatches(PyExc_UnicodeEncodeError)) {
                    goto fail;
                }
                PyErr_Clear();
                data_len = -1;  /* a lone surrogate: `other` hashes it as the Python loop does */
            } else {
                Py_ssize_t prefix_len = PyBytes_GET_SIZE(prefix);
                size_t head = 32 + (size_t)prefix_len + 8;
                if (reserve(&buffer, &capacity, head + (size_t)data_len) < 0) {
                    goto fail;
                }
                memcpy(buffer + 32, PyBytes_AS_STRING(prefix), (size_t)prefix_len);
                put_u64_be(buffer + 32 + prefix_len, (uint64_t)data_len);
                memcpy(buffer + head, data, (size_t)data_len);
                memcpy(buffer, digest, 32);
                sha256(buffer, head + (size_t)data_len, digest);
                covered += data_len;
            }
        } else if (prefix != NULL && PyObject_CheckBuffer(content)) {
            Py_buffer view;
            if (PyObject_GetBuffer(content, &view, PyBUF_SIMPLE) < 0) {
                goto fail;
            }
            const unsigned char *raw = view.buf;
            if (view.len >= 2 && raw[0] == '"') {
                Py_ssize_t prefix_len = PyBytes_GET_SIZE(prefix);
                size_t head = 32 + (size_t)prefix_len + 8;
                if (reserve(&buffer, &capacity, head + (size_t)view.len) < 0) {
                    PyBuffer_Release(&view);
                    goto fail;
                }
                data_len = unescape_json_string(raw, (size_t)view.len, buffer + head);
                if (data_len >= 0) {
                    memcpy(buffer + 32, PyBytes_AS_STRING(prefix), (size_t)prefix_len);
                    put_u64_be(buffer + 32 + prefix_len, (uint64_t)data_len);
                    memcpy(buffer, digest, 32);
                    sha256(buffer, head + (size_t)data_len, digest);
                    covered += data_len;
                }
            }
            PyBuffer_Release(&view);
        }
        if (data_len < 0) {
            if (other == Py_None) {
                fallback = 1;
                break;
            }
            PyObject *tail = PyObject_CallFunctionObjArgs(other, role, content, NULL);
            if (tail == NULL) {
                goto fail;
            }
            if (tail == Py_None) {
                Py_DECREF(tail);
                fallback = 1;
                break;
            }
            if (!PyTuple_CheckExact(tail) || PyTuple_GET_SIZE(tail) != 2 ||
                !PyBytes_CheckExact(PyTuple_GET_ITEM(tail, 0)) ||
                !PyLong_CheckExact(PyTuple_GET_ITEM(tail, 1))) {
                Py_DECREF(tail);
                PyErr_SetString(PyExc_TypeError, "other must return (bytes, int) or None");
                goto fail;
            }
            PyObject *tail_bytes = PyTuple_GET_ITEM(tail, 0);
            Py_ssize_t text_bytes = PyLong_AsSsize_t(PyTuple_GET_ITEM(tail, 1));
            size_t tail_len = (size_t)PyBytes_GET_SIZE(tail_bytes);
            if ((text_bytes == -1 && PyErr_Occurred()) ||
                reserve(&buffer, &capacity, 32 + tail_len) < 0) {
                Py_DECREF(tail);
                goto fail;
            }
            memcpy(buffer, digest, 32);
            memcpy(buffer + 32, PyBytes_AS_STRING(tail_bytes), tail_len);
            Py_DECREF(tail);
            sha256(buffer, 32 + tail_len, digest);
            covered += text_bytes;
        }
        if (digests != NULL) {
            memcpy(PyBytes_AS_STRING(digests) + 32 * i, digest, 32);
        }
        if (put_link(hashes, cum_bytes, i, digest, covered) < 0) {
            goto fail;
        }
    }
    PyMem_Free(buffer);
    Py_DECREF(seq);
    if (digests == NULL || fallback) {
        Py_XDECREF(digests);
        Py_XDECREF(reused_from);
        return finish_links(hashes, cum_bytes, fallback);
    }
    if (reused_from == NULL) {
        reused_from = Py_None;
        Py_INCREF(reused_from);
    }
    return Py_BuildValue("(NNNNn)", hashes, cum_bytes, digests, reused_from, start);
fail:
    PyMem_Free(buffer);
    Py_DECREF(seq);
    Py_XDECREF(hashes);
    Py_XDECREF(cum_bytes);
    Py_XDECREF(digests);
    Py_XDECREF(reused_from);
    return NULL;
}


/* ---- Where a body's messages end, for memo.ChainMemo's repeat cut (proxy/parse.py). ----

   message_ends(body, start) -> (first, ends) | None
     start 0: `body` is a whole JSON object; `first` is the offset just after the `[` of its
     "messages" array, `ends` each message's end offset (just after its `}`).
     start > 0: `start` is a message end inside the array (the prefix before it is a kept body's,
     already scanned); `first` is the offset of the next message or of the `]`, `ends` the ends
     of the messages from there.
   None when the body is not that shape for certain: no "messages" array, two of them, a key
   with an escape (it could spell "messages"), a message that is not an object, a trailing
   comma. The scan only finds structure; msgspec still decodes (and so validates) what is kept.
   Why: parse.py decodes only the messages after a kept body's repeated ones (32 KiB chat:
   the decode of 193 repeated messages was ~50 us of parse_request's ~94). */

static const unsigned char *skip_ws(const unsigned char *at, const unsigned char *end) {
    while (at < end && (*at == ' ' || *at == '\t' || *at == '\n' || *at == '\r')) {
        at++;
    }
    return at;
}

/* `at` on the opening quote: just after the closing quote, or NULL. */
static const unsigned char *skip_string(const unsigned char *at, const unsigned char *end) {
    at++;
    for (;;) {
        const unsigned char *quote = memchr(at, '"', (size_t)(end - at));
        if (quote == NULL) {
            return NULL;
        }
        const unsigned char *back = quote;
        while (back > at && back[-1] == '\\') {
            back--;
        }
        if (((quote - back) & 1) == 0) {
            return quote + 1;
        }
        at = quote + 1;
    }
}

/* `at` on a value's first byte: just after the value, or NULL. */
static const unsigned char *skip_value(const unsigned char *at, const unsigned char *end) {
    if (at >= end) {
        return NULL;
    }
    if (*at == '"') {
        return skip_string(at, end);
    }
    if (*at != '{' && *at != '[') {
        while (at < end && *at != ',' && *at != '}' && *at != ']' && *at != ' ' &&
               *at != '\t' && *at != '\n' && *at != '\r') {
            at++;
        }
        return at;
    }
    Py_ssize_t depth = 0;
    while (at < end) {
        unsigned char c = *at;
        if (c == '"') {
            at = skip_string(at, end);
            if (at == NULL) {
                return NULL;
            }
            continue;
        }
        if (c == '{' || c == '[') {
            depth++;
        } else if (c == '}' || c == ']') {
            if (--depth == 0) {
                return at + 1;
            }
        }
        at++;
    }
    return NULL;
}

static int append_end(PyObject *ends, const unsigned char *at, const unsigned char *base) {
    PyObject *offset = PyLong_FromSsize_t(at - base);
    if (offset == NULL) {
        return -1;
    }
    int failed = PyList_Append(ends, offset);
    Py_DECREF(offset);
    return failed;
}

/* The array's messages from `at` (a message's first byte or `]`; `after` when `at` follows a
   message): returns just after the `]`, or NULL (no exception) when not that shape. */
static const unsigned char *scan_messages(const unsigned char *at, const unsigned char *end,
                                          const unsigned char *base, int after, PyObject *ends,
                                          const unsigned char **first, int *failed) {
    at = skip_ws(at, end);
    if (after) {
        if (at < end && *at == ',') {
            at = skip_ws(at + 1, end);
            if (at >= end || *at != '{') {
                return NULL;
            }
        } else if (at >= end || *at != ']') {
            return NULL;
        }
    }
    *first = at;
    if (at < end && *at == ']') {
        return at + 1;
    }
    for (;;) {
        if (at >= end || *at != '{') {
            return NULL;
        }
        at = skip_value(at, end);
        if (at == NULL) {
            return NULL;
        }
        if (append_end(ends, at, base) < 0) {
            *failed = 1;
            return NULL;
        }
        at = skip_ws(at, end);
        if (at < end && *at == ']') {
            return at + 1;
        }
        if (at >= end || *at != ',') {
            return NULL;
        }
        at = skip_ws(at + 1, end);
    }
}

static PyObject *message_ends(PyObject *self, PyObject *args) {
    (void)self;
    const char *data;
    Py_ssize_t length;
    Py_ssize_t start;
    if (!PyArg_ParseTuple(args, "y#n", &data, &length, &start)) {
        return NULL;
    }
    if (start < 0 || start > length) {
        PyErr_SetString(PyExc_ValueError, "start must be within the body");
        return NULL;
    }
    const unsigned char *base = (const unsigned char *)data;
    const unsigned char *end = base + length;
    const unsigned char *at;
    const unsigned char *first = NULL;
    int found = start > 0;
    int failed = 0;
    PyObject *ends = PyList_New(0);
    if (ends == NULL) {
        return NULL;
    }
    if (start > 0) {
        at = scan_messages(base + start, end, base, 1, ends, &first, &failed);
        if (at == NULL) {
            goto refuse;
        }
        goto after_value;
    }
    at = skip_ws(base, end);
    if (at >= end || *at != '{') {
        goto refuse;
    }
    at = skip_ws(at + 1, end);
    if (at < end && *at == '}') {
        goto refuse;  /* no messages */
    }
    for (;;) {
        if (at >= end || *at != '"') {
            goto refuse;
        }
        const unsigned char *key = at + 1;
        at = skip_string(at, end);
        if (at == NULL || memchr(key, '\\', (size_t)(at - 1 - key)) != NULL) {
            goto refuse;
        }
        int is_messages = at - 1 - key == 8 && memcmp(key, "messages", 8) == 0;
        at = skip_ws(at, end);
        if (at >= end || *at != ':') {
            goto refuse;
        }
        at = skip_ws(at + 1, end);
        if (is_messages) {
            if (found || at >= end || *at != '[') {
                goto refuse;
            }
            found = 1;
            const unsigned char *opened = at + 1;
            at = scan_messages(opened, end, base, 0, ends, &first, &failed);
            first = opened;
        } else {
            at = skip_value(at, end);
        }
        if (at == NULL) {
            goto refuse;
        }
    after_value:
        at = skip_ws(at, end);
        if (at < end && *at == '}') {
            break;
        }
        if (at >= end || *at != ',') {
            goto refuse;
        }
        at = skip_ws(at + 1, end);
    }
    if (!found || skip_ws(at + 1, end) != end) {
        goto refuse;
    }
    PyObject *offsets = PyList_AsTuple(ends);
    Py_DECREF(ends);
    if (offsets == NULL) {
        return NULL;
    }
    return Py_BuildValue("(nN)", (Py_ssize_t)(first - base), offsets);
refuse:
    Py_DECREF(ends);
    if (failed) {
        return NULL;
    }
    Py_RETURN_NONE;
}

/* shared_prefix(a, b[, start]) -> how many leading bytes two bodies share (memcmp in 256-byte
   steps), compared from `start` (the caller knows they share that many). */
static PyObject *shared_prefix(PyObject *self, PyObject *args) {
    (void)self;
    const char *a, *b;
    Py_ssize_t a_len, b_len;
    Py_ssize_t start = 0;
    if (!PyArg_ParseTuple(args, "y#y#|n", &a, &a_len, &b, &b_len, &start)) {
        return NULL;
    }
    Py_ssize_t limit = a_len < b_len ? a_len : b_len;
    Py_ssize_t k = start < 0 ? 0 : (start > limit ? limit : start);
    while (k + 256 <= limit && memcmp(a + k, b + k, 256) == 0) {
        k += 256;
    }
    while (k + 8 <= limit && memcmp(a + k, b + k, 8) == 0) {
        k += 8;
    }
    while (k < limit && a[k] == b[k]) {
        k++;
    }
    return PyLong_FromSsize_t(k);
}

static PyMethodDef methods[] = {
    {"chat_links", chat_links, METH_VARARGS,
     "(hashes, cum_bytes) of a chat's links, or None for the Python loop"},
    {"message_links", message_links, METH_VARARGS,
     "(hashes, cum_bytes) of a chat's links from its message Structs, or None"},
    {"message_ends", message_ends, METH_VARARGS,
     "(first, ends): where a body's messages array opens and each message ends, or None"},
    {"shared_prefix", shared_prefix, METH_VARARGS,
     "how many leading bytes two bodies share (from start)"},
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
    init_hex_digits();
    role_name = PyUnicode_InternFromString("role");
    content_name = PyUnicode_InternFromString("content");
    if (role_name == NULL || content_name == NULL) {
        return NULL;
    }
    return PyModule_Create(&module);
}
