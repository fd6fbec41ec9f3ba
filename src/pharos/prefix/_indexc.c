/* The prefix index's per-link loops in C (issue 13): prefix/links.py's functions, same results.

   Why: a 194-link chat's lookup read every link in ~970 instructions each (a tuple index, a
   mask, a bound get, an int hash), most of it the interpreter's; record paid as much again
   per link for its get and move_to_end. Here a link is an int hash and a dict probe. The
   shards stay OrderedDicts: reads go to the dict under them, a new key goes through the
   OrderedDict's own setitem, popitem and move_to_end so its order is kept; only a held key's
   new value is stored straight into the dict (see touch).

   scan(shards, mask, hashes, i, previous) -> (j, packed) | None
   touch(shards, moves, mask, cap, hashes, fresh, update) -> None
   (docstrings in links.py)
*/
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

static PyObject *str_popitem;

static int same_bytes(PyObject *a, PyObject *b) {
    Py_ssize_t size = PyBytes_GET_SIZE(a);
    return size == PyBytes_GET_SIZE(b) &&
           memcmp(PyBytes_AS_STRING(a), PyBytes_AS_STRING(b), (size_t)size) == 0;
}

static PyObject *shard_of(PyObject *shards, PyObject *hash, unsigned long long mask) {
    unsigned long long low = PyLong_AsUnsignedLongLongMask(hash);
    if (low == (unsigned long long)-1 && PyErr_Occurred()) return NULL;
    Py_ssize_t number = (Py_ssize_t)(low & mask);
    if (number >= PyTuple_GET_SIZE(shards)) {
        PyErr_SetString(PyExc_ValueError, "mask selects a shard that does not exist");
        return NULL;
    }
    PyObject *shard = PyTuple_GET_ITEM(shards, number);
    if (!PyDict_Check(shard)) {
        PyErr_SetString(PyExc_TypeError, "a shard must be a dict");
        return NULL;
    }
    return shard;
}

static PyObject *scan(PyObject *self, PyObject *args) {
    PyObject *shards, *hashes, *previous;
    unsigned long long mask;
    Py_ssize_t i;
    if (!PyArg_ParseTuple(args, "O!KO!nO!", &PyTuple_Type, &shards, &mask, &PyTuple_Type,
                          &hashes, &i, &PyBytes_Type, &previous))
        return NULL;
    if (i >= PyTuple_GET_SIZE(hashes)) i = PyTuple_GET_SIZE(hashes) - 1;
    for (; i >= 0; i--) {
        PyObject *hash = PyTuple_GET_ITEM(hashes, i);
        PyObject *shard = shard_of(shards, hash, mask);
        if (shard == NULL) return NULL;
        PyObject *packed = PyDict_GetItemWithError(shard, hash);  /* borrowed */
        if (packed == NULL) {
            if (PyErr_Occurred()) return NULL;
            continue;
        }
        if (!PyBytes_Check(packed)) {
            PyErr_SetString(PyExc_TypeError, "an entry must be bytes");
            return NULL;
        }
        if (same_bytes(packed, previous)) continue;
        return Py_BuildValue("(nO)", i, packed);
    }
    Py_RETURN_NONE;
}

static PyObject *touch(PyObject *self, PyObject *args) {
    PyObject *shards, *moves, *hashes_in, *fresh, *update;
    unsigned long long mask;
    Py_ssize_t cap;
    if (!PyArg_ParseTuple(args, "O!O!KnOO!O", &PyTuple_Type, &shards, &PyTuple_Type, &moves,
                          &mask, &cap, &hashes_in, &PyBytes_Type, &fresh, &update))
        return NULL;
    if (PyTuple_GET_SIZE(moves) != PyTuple_GET_SIZE(shards)) {
        PyErr_SetString(PyExc_ValueError, "one move_to_end per shard");
        return NULL;
    }
    PyObject *hashes = PySequence_Fast(hashes_in, "hashes must be a sequence");
    if (hashes == NULL) return NULL;
    PyObject *before = NULL, *after = NULL; /* owned: the last entry updated, and its update */
    Py_ssize_t count = PySequence_Fast_GET_SIZE(hashes);
    PyObject *result = NULL;
    for (Py_ssize_t n = 0; n < count; n++) {
        PyObject *hash = PySequence_Fast_GET_ITEM(hashes, n);
        PyObject *shard = shard_of(shards, hash, mask);
        if (shard == NULL) goto done;
        PyObject *packed = PyDict_GetItemWithError(shard, hash);
        if (packed == NULL) {
            if (PyErr_Occurred()) goto done;
            if (PyDict_GET_SIZE(shard) >= cap) {
                PyObject *evicted = PyObject_CallMethodOneArg(shard, str_popitem, Py_False);
                if (evicted == NULL) goto done;
                Py_DECREF(evicted);
            }
            if (PyObject_SetItem(shard, hash, fresh) < 0) goto done;
            continue;
        }
        PyObject *held = packed; /* compared by identity only, never read after a write */
        Py_INCREF(packed);
        if (!PyBytes_Check(packed)) {
            Py_DECREF(packed);
            PyErr_SetString(PyExc_TypeError, "an entry must be bytes");
            goto done;
        }
        if (before == NULL || !same_bytes(packed, before)) {
            PyObject *updated = PyObject_CallOneArg(update, packed);
            if (updated == NULL) {
                Py_DECREF(packed);
                goto done;
            }
            Py_XSETREF(before, packed);
            Py_XSETREF(after, updated);
        } else {
            Py_DECREF(packed);
        }
        /* The key is held: the dict under the OrderedDict takes the new value in place. For a
           key it holds, OrderedDict's own setitem is this same dict store plus a second lookup
           that finds the node already there (no resize, no new node, its order untouched):
           712 -> ~250 instructions a link (callgrind). New keys still go through its setitem. */
        if (after != held && PyDict_SetItem(shard, hash, after) < 0) goto done;
        Py_ssize_t number = (Py_ssize_t)(PyLong_AsUnsignedLongLongMask(hash) & mask);
        PyObject *moved = PyObject_CallOneArg(PyTuple_GET_ITEM(moves, number), hash);
        if (moved == NULL) goto done;
        Py_DECREF(moved);
    }
    result = Py_None;
    Py_INCREF(result);
done:
    Py_XDECREF(before);
    Py_XDECREF(after);
    Py_DECREF(hashes);
    return result;
}

static PyMethodDef methods[] = {
    {"scan", scan, METH_VARARGS, "links.py's python_scan"},
    {"touch", touch, METH_VARARGS, "links.py's python_touch"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "pharos.prefix._indexc",
    "The prefix index's per-link loops in C; prefix/links.py is the fallback.", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__indexc(void) {
    str_popitem = PyUnicode_InternFromString("popitem");
    if (str_popitem == NULL) return NULL;
    return PyModule_Create(&module);
}
