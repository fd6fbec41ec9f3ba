/* The upstream stream's byte loops in C (issue 13): proxy/stream_scan.py's functions, same
   results.

   Why: at c=32 on 10-token vLLM streams the wire's chunk loop (one size line, one slice and a
   check per chunk, 13 chunks a reply) and the tap's scans for usage names (CPython's `find`
   reads ~0.7 ns a byte a name; three names a read, four more in the read holding usage) were
   ~10% of `pharos serve`'s samples (py-spy).

   complete_chunks(data, pos) -> (payload, pos)
   first_of(data, needles) -> int
   (docstrings in stream_scan.py)
*/
#define PY_SSIZE_T_CLEAN
#define _GNU_SOURCE
#include <Python.h>
#include <string.h>

static int hex_value(unsigned char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static PyObject *complete_chunks(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer view;
    Py_ssize_t pos;
    if (!PyArg_ParseTuple(args, "y*n", &view, &pos)) return NULL;
    const unsigned char *data = (const unsigned char *)view.buf;
    Py_ssize_t end = view.len;
    if (pos < 0) pos = 0;
    /* first pass: where the complete simple chunks end, and their payload's size */
    Py_ssize_t at = pos, total = 0;
    while (at < end) {
        const unsigned char *crlf = memchr(data + at, '\r', (size_t)(end - at));
        if (crlf == NULL) break;
        Py_ssize_t line_end = crlf - data;
        Py_ssize_t digits = line_end - at;
        if (digits < 1 || digits > 8 || line_end + 1 >= end || data[line_end + 1] != '\n') break;
        long long size = 0;
        int hex = 1;
        for (Py_ssize_t k = at; k < line_end; k++) {
            int v = hex_value(data[k]);
            if (v < 0) {
                hex = 0;
                break;
            }
            size = size * 16 + v;
        }
        if (!hex || size == 0) break;
        Py_ssize_t stop = line_end + 2 + (Py_ssize_t)size;
        if (stop + 2 > end || data[stop] != '\r' || data[stop + 1] != '\n') break;
        total += (Py_ssize_t)size;
        at = stop + 2;
    }
    PyObject *payload = PyBytes_FromStringAndSize(NULL, total);
    if (payload == NULL) {
        PyBuffer_Release(&view);
        return NULL;
    }
    /* second pass: copy them */
    char *out = PyBytes_AS_STRING(payload);
    Py_ssize_t from = pos;
    while (from < at) {
        const unsigned char *crlf = memchr(data + from, '\r', (size_t)(at - from));
        Py_ssize_t line_end = crlf - data;
        long long size = 0;
        for (Py_ssize_t k = from; k < line_end; k++) size = size * 16 + hex_value(data[k]);
        memcpy(out, data + line_end + 2, (size_t)size);
        out += size;
        from = line_end + 2 + (Py_ssize_t)size + 2;
    }
    PyBuffer_Release(&view);
    PyObject *result = Py_BuildValue("(Nn)", payload, at);
    return result;
}

static PyObject *first_of(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer view;
    PyObject *needles;
    if (!PyArg_ParseTuple(args, "y*O!", &view, &PyTuple_Type, &needles)) return NULL;
    Py_ssize_t found = -1;
    Py_ssize_t count = PyTuple_GET_SIZE(needles);
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *needle = PyTuple_GET_ITEM(needles, i);
        if (!PyBytes_Check(needle)) {
            PyBuffer_Release(&view);
            PyErr_SetString(PyExc_TypeError, "needles must be bytes");
            return NULL;
        }
        Py_ssize_t size = PyBytes_GET_SIZE(needle);
        /* a needle starting before `found` ends before found + size */
        Py_ssize_t limit = found < 0 ? view.len : found - 1 + size;
        if (limit > view.len) limit = view.len;
        if (size == 0) {
            found = 0;
            continue;
        }
        if (limit < size) continue;
        const char *hit = memmem(view.buf, (size_t)limit, PyBytes_AS_STRING(needle), (size_t)size);
        if (hit != NULL) found = hit - (const char *)view.buf;
    }
    PyBuffer_Release(&view);
    return PyLong_FromSsize_t(found);
}

static PyMethodDef methods[] = {
    {"complete_chunks", complete_chunks, METH_VARARGS, "stream_scan.py's python_complete_chunks"},
    {"first_of", first_of, METH_VARARGS, "stream_scan.py's python_first_of"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "pharos.proxy._streamc",
    "The upstream stream's byte loops in C; proxy/stream_scan.py is the fallback.", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__streamc(void) { return PyModule_Create(&module); }
