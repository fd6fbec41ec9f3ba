/* The prefix index's per-link loops in C (issue 13): prefix/links.py's functions, same results.

   Why: a 194-link chat's lookup read every link in ~970 instructions each (a tuple index, a
   mask, a bound get, an int hash), most of it the interpreter's; record paid as much again
   per link for its get and move_to_end. Here a link is an int hash and a dict probe. The
   shards stay OrderedDicts: reads go to the dict under them, a new key goes through the
   OrderedDict's own setitem, popitem and move_to_end so its order is kept; only a held key's
   new value is stored straight into the dict (see touch).

   scan(shards, mask, hashes, i, previous) -> (j, packed) | None
   touch(shards, moves, mask, cap, hashes, fresh, update[, runs]) -> None
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

/* The moves of run[0:upto], deferred while the chain's links matched the shard's run. */
static int flush(PyObject *move, PyObject *run, Py_ssize_t upto) {
    for (Py_ssize_t k = 0; k < upto; k++) {
        PyObject *moved = PyObject_CallOneArg(move, PyTuple_GET_ITEM(run, k));
        if (moved == NULL) return -1;
        Py_DECREF(moved);
    }
    return 0;
}

/* `runs` (optional, a list with one item per shard): the links the last touch left at the end
   of each shard, in its order, or None when unknown (the index sets None on every other write).
   A shard whose links in this chain begin with its whole run needs none of those moves: moving
   the same keys to the end in the same order a second time leaves the order as it was. Their
   moves are deferred while the links match and made at the first mismatch, so the order is
   always what the plain loop leaves. 194-link chat recorded again: ~97k instructions of
   move_to_end calls a record fewer (callgrind). Each link's int is read and hashed once, for
   the shard, the get and the store. */
static PyObject *touch(PyObject *self, PyObject *args) {
    PyObject *shards, *moves, *hashes_in, *fresh, *update, *runs = Py_None;
    unsigned long long mask;
    Py_ssize_t cap;
    if (!PyArg_ParseTuple(args, "O!O!KnOO!O|O", &PyTuple_Type, &shards, &PyTuple_Type, &moves,
                          &mask, &cap, &hashes_in, &PyBytes_Type, &fresh, &update, &runs))
        return NULL;
    Py_ssize_t nshards = PyTuple_GET_SIZE(shards);
    if (PyTuple_GET_SIZE(moves) != nshards) {
        PyErr_SetString(PyExc_ValueError, "one move_to_end per shard");
        return NULL;
    }
    if (runs == Py_None) {
        runs = NULL;
    } else if (!PyList_CheckExact(runs) || PyList_GET_SIZE(runs) != nshards) {
        PyErr_SetString(PyExc_ValueError, "runs must be a list with one item per shard");
        return NULL;
    }
    PyObject *hashes = PySequence_Fast(hashes_in, "hashes must be a sequence");
    if (hashes == NULL) return NULL;
    /* per shard: matched run links (deferred moves; -1 none pending), links seen, evicted */
    Py_ssize_t *cursor = NULL, *seen = NULL, *numbers = NULL;
    char *evicted = NULL;
    if (runs != NULL) {
        cursor = PyMem_Calloc((size_t)nshards, sizeof(Py_ssize_t));
        seen = PyMem_Calloc((size_t)nshards, sizeof(Py_ssize_t));
        evicted = PyMem_Calloc((size_t)nshards, 1);
        if (cursor == NULL || seen == NULL || evicted == NULL) {
            PyErr_NoMemory();
            PyMem_Free(cursor);
            PyMem_Free(seen);
            PyMem_Free(evicted);
            Py_DECREF(hashes);
            return NULL;
        }
        for (Py_ssize_t s = 0; s < nshards; s++) {
            PyObject *run = PyList_GET_ITEM(runs, s);
            cursor[s] = PyTuple_CheckExact(run) && PyTuple_GET_SIZE(run) > 0 ? 0 : -1;
        }
    }
    PyObject *before = NULL, *after = NULL; /* owned: the last entry updated, and its update */
    Py_ssize_t count = PySequence_Fast_GET_SIZE(hashes);
    PyObject *result = NULL;
    int building = 0; /* the new runs are being built: nothing is deferred any more */
    /* each link's shard, found once (the runs are rebuilt from them below) */
    numbers = PyMem_Malloc((size_t)(count > 0 ? count : 1) * sizeof(Py_ssize_t));
    if (numbers == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t n = 0; n < count; n++) {
        PyObject *hash = PySequence_Fast_GET_ITEM(hashes, n);
        /* shard_of's steps, the int read once (it was read three times a link) */
        unsigned long long low = PyLong_AsUnsignedLongLongMask(hash);
        if (low == (unsigned long long)-1 && PyErr_Occurred()) goto done;
        Py_ssize_t number = (Py_ssize_t)(low & mask);
        if (number >= nshards) {
            PyErr_SetString(PyExc_ValueError, "mask selects a shard that does not exist");
            goto done;
        }
        PyObject *shard = PyTuple_GET_ITEM(shards, number);
        if (!PyDict_Check(shard)) {
            PyErr_SetString(PyExc_TypeError, "a shard must be a dict");
            goto done;
        }
        numbers[n] = number;
        /* the key's hash once, for both the get and the store (a link was hashed twice) */
        Py_hash_t known = PyObject_Hash(hash);
        if (known == -1) goto done;
        PyObject *move = PyTuple_GET_ITEM(moves, number);
        PyObject *run = runs == NULL ? NULL : PyList_GET_ITEM(runs, number);
        if (runs != NULL) seen[number]++;
        PyObject *packed = _PyDict_GetItem_KnownHash(shard, hash, known);
        if (packed == NULL) {
            if (PyErr_Occurred()) goto done;
            if (runs != NULL && cursor[number] >= 0) {
                Py_ssize_t upto = cursor[number];
                cursor[number] = -1;
                if (flush(move, run, upto) < 0) goto done;
            }
            if (PyDict_GET_SIZE(shard) >= cap) {
                PyObject *gone = PyObject_CallMethodOneArg(shard, str_popitem, Py_False);
                if (gone == NULL) goto done;
                Py_DECREF(gone);
                if (runs != NULL) evicted[number] = 1;
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
        if (after != held && _PyDict_SetItem_KnownHash(shard, hash, after, known) < 0) goto done;
        if (runs != NULL && cursor[number] >= 0) {
            Py_ssize_t at = cursor[number];
            int same = PyObject_RichCompareBool(PyTuple_GET_ITEM(run, at), hash, Py_EQ);
            if (same < 0) goto done;
            if (same) {
                /* the whole run matched: its moves would have changed nothing */
                cursor[number] = at + 1 == PyTuple_GET_SIZE(run) ? -1 : at + 1;
                continue;
            }
            cursor[number] = -1;
            if (flush(move, run, at) < 0) goto done;
        }
        PyObject *moved = PyObject_CallOneArg(move, hash);
        if (moved == NULL) goto done;
        Py_DECREF(moved);
    }
    if (runs != NULL) {
        for (Py_ssize_t s = 0; s < nshards; s++) {
            if (cursor[s] > 0) {
                Py_ssize_t upto = cursor[s];
                cursor[s] = -1;
                if (flush(PyTuple_GET_ITEM(moves, s), PyList_GET_ITEM(runs, s), upto) < 0)
                    goto done;
            }
        }
        /* each touched shard's new run: this chain's links there, in chain order */
        building = 1;
        for (Py_ssize_t s = 0; s < nshards; s++) {
            if (seen[s] == 0) continue;
            PyObject *run = Py_None;
            Py_INCREF(run);
            if (!evicted[s]) {
                Py_DECREF(run);
                run = PyTuple_New(seen[s]);
                if (run == NULL) goto done;
            }
            PyList_SetItem(runs, s, run); /* steals */
            cursor[s] = 0;
        }
        for (Py_ssize_t n = 0; n < count; n++) {
            PyObject *hash = PySequence_Fast_GET_ITEM(hashes, n);
            Py_ssize_t s = numbers[n];
            PyObject *run = PyList_GET_ITEM(runs, s);
            if (run == Py_None) continue;
            Py_INCREF(hash);
            PyTuple_SET_ITEM(run, cursor[s]++, hash);
        }
    }
    result = Py_None;
    Py_INCREF(result);
done:
    if (result == NULL && runs != NULL) {
        /* make the deferred moves (the plain loop had made them), then forget every run */
        PyObject *type, *value, *traceback;
        PyErr_Fetch(&type, &value, &traceback);
        for (Py_ssize_t s = 0; !building && s < nshards; s++) {
            if (cursor[s] > 0 && PyTuple_CheckExact(PyList_GET_ITEM(runs, s)) &&
                flush(PyTuple_GET_ITEM(moves, s), PyList_GET_ITEM(runs, s), cursor[s]) < 0)
                PyErr_Clear();
        }
        for (Py_ssize_t s = 0; s < nshards; s++) {
            Py_INCREF(Py_None);
            PyList_SetItem(runs, s, Py_None);
        }
        PyErr_Restore(type, value, traceback);
    }
    PyMem_Free(numbers);
    PyMem_Free(cursor);
    PyMem_Free(seen);
    PyMem_Free(evicted);
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
