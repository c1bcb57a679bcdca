// Token ids -> a Python list of ints (encode(), encode_batch()). Conversion only: included by
// core_bindings.cpp, called with the GIL held.
//
// Why it is built this way (bench/bench_call_overhead.py; figures in
// bench/results/2026-11-25-call-overhead.md):
// - The ids' int objects are made once per process, 0 .. the largest vocabulary seen, and never
//   die, so an item of a list is one pointer store, with no refcount write when the list is
//   built nor, on 3.12+, when it is freed. Before, each item was an incref of a table int
//   (a write to one of 50K objects spread over 1.6 MB) and PyList_New zero-filled the array
//   first: 1.1-3.2 ns an id up to 1M ids on the 2-core machine, now 0.3-1.0; a new int per
//   id (PyLong_FromLong, ndarray.tolist()) costs 5-22 ns there.
//   * CPython >= 3.12 (PEP 683): the table's ints are made immortal, as CPython makes its
//     own small ints; Py_INCREF / Py_DECREF skip them (64-bit builds: the low 32 bits of the
//     refcount, read as int32, are negative). A check at start-up confirms it on the running
//     interpreter; if it fails, every item is increfed as before.
//   * CPython 3.10 / 3.11 (no immortal objects): their refcount is set to 2^62. A list made
//     here holds them without an incref, and list_dealloc's Py_DECREF takes one per item when
//     it is freed, so the count only moves down, one per freed item: reaching 0 takes 2^62
//     freed items (146 years at one a nanosecond). Everything else increfs and decrefs them
//     in pairs as usual.
//   An id's int is an ordinary int either way: ==, hash and `is` behave as for any int.
//   Cost: the table, ~2 MB per process (50,257 ints and their pointers), never freed.
// - The list's item array is PyMem_Malloc'd and filled directly (PyList_New would zero it
//   first: a memset of 8 bytes an id where glibc reuses memory); list_dealloc frees it with
//   PyMem_Free as it frees any list's.
// - Large lists are filled by several threads while the caller holds the GIL: the workers
//   touch no Python object, they only store pointers into an array that no Python code can
//   see before this returns (the GIL serializes fills, so one pool serves them all).
// - Free-threaded builds (Py_GIL_DISABLED) take the plain path: PyList_New and an incref per
//   item.
#pragma once

#include <pybind11/pybind11.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "../csrc/thread_pool.h"

namespace gputok::bind {

namespace py = pybind11;

#if !defined(Py_GIL_DISABLED) && PY_VERSION_HEX >= 0x030C0000
#if defined(_Py_IMMORTAL_INITIAL_REFCNT)
constexpr Py_ssize_t kTableRefcount = Py_ssize_t(_Py_IMMORTAL_INITIAL_REFCNT);  // 3.14+
#else
constexpr Py_ssize_t kTableRefcount = Py_ssize_t(_Py_IMMORTAL_REFCNT);  // 3.12, 3.13
#endif
#else
constexpr Py_ssize_t kTableRefcount = Py_ssize_t(1) << 62;  // 3.10, 3.11: see above
#endif

// A list of at least this many ids is filled on several threads, each given at least this
// many (2 MB of pointers): below it the hand-off costs more than the stores.
constexpr size_t kIdsPerFillThread = size_t(1) << 18;

class IdList {
 public:
  // The process's table, holding at least ints 0 .. n - 1. GIL held.
  static IdList& at_least(size_t n) {
    static IdList* table = new IdList();  // never freed: its ints never die
    table->grow(n);
    return *table;
  }

  // ids[0, n) as a new list. threads: 0 = by size (kIdsPerFillThread), else at most that
  // many. Ids outside the table (none come out of the encoder) become new ints.
  py::list list(const int32_t* ids, size_t n, size_t threads = 0) const {
#ifdef Py_GIL_DISABLED
    const bool plain = true;
#else
    const bool plain = !steal_;
#endif
    if (plain) return list_plain(ids, n);
    py::list out = py::reinterpret_steal<py::list>(PyList_New(0));
    if (!out) throw py::error_already_set();
    if (n == 0) return out;
    if (n > size_t(PY_SSIZE_T_MAX) / sizeof(PyObject*)) throw std::bad_alloc();
    auto** items = static_cast<PyObject**>(PyMem_Malloc(n * sizeof(PyObject*)));
    if (items == nullptr) throw std::bad_alloc();
    const bool missing = fill(items, ids, n, threads);
    auto* l = reinterpret_cast<PyListObject*>(out.ptr());
    l->ob_item = items;
    l->allocated = Py_ssize_t(n);
    Py_SET_SIZE(l, Py_ssize_t(n));
    // Out-of-table ids (none come out of the encoder) were left nullptr: made here, with the
    // GIL. On a failure the list goes, and list_dealloc skips the nullptrs.
    for (size_t i = 0; missing && i < n; ++i)
      if (items[i] == nullptr && (items[i] = PyLong_FromLong(ids[i])) == nullptr)
        throw py::error_already_set();
    return out;
  }

  bool immortal() const { return immortal_; }

 private:
  IdList() = default;

  void grow(size_t n) {
    ints_.reserve(n);
    while (ints_.size() < n) {
      PyObject* o = PyLong_FromSsize_t(Py_ssize_t(ints_.size()));
      if (o == nullptr) throw py::error_already_set();
      keep(o);
      ints_.push_back(o);
    }
  }

  // Makes o one of the table's ints that never die (see the file's comment).
  void keep(PyObject* o) {
#ifndef Py_GIL_DISABLED
    Py_SET_REFCNT(o, kTableRefcount);  // a no-op on an int that is already immortal
#if PY_VERSION_HEX >= 0x030C0000
    const Py_ssize_t before = Py_REFCNT(o);
    Py_INCREF(o);
    if (Py_REFCNT(o) != before) {  // not immortal on this interpreter: incref every item
      Py_DECREF(o);
      steal_ = immortal_ = false;
    }
#endif
#else
    (void)o;
#endif
  }

  // Stores ids' ints into items; true when an id was outside the table (left nullptr).
  bool fill(PyObject** items, const int32_t* ids, size_t n, size_t threads) const {
    const size_t by_size = std::max<size_t>(1, n / kIdsPerFillThread);
    threads = std::min({threads ? threads : by_size, by_size, hardware_threads()});
    if (threads <= 1) return fill_range(items, ids, 0, n);
    // GIL held: no race. A forked child has the pool's object but none of its threads: it
    // makes its own (the parent's is left, never joined).
    static ThreadPool* pool = nullptr;
    static pid_t pool_pid = 0;
    if (pool == nullptr || pool_pid != getpid()) {
      pool = new ThreadPool(hardware_threads());
      pool_pid = getpid();
    }
    std::atomic<bool> missing{false};
    const size_t per = (n + threads - 1) / threads;
    pool->parallel_for(threads, threads, [&](size_t t) {
      const size_t begin = std::min(n, t * per), end = std::min(n, begin + per);
      if (fill_range(items, ids, begin, end)) missing.store(true, std::memory_order_relaxed);
    });
    return missing.load();
  }

  bool fill_range(PyObject** items, const int32_t* ids, size_t begin, size_t end) const {
    PyObject* const* table = ints_.data();
    const uint32_t size = uint32_t(ints_.size());
    bool missing = false;
    for (size_t i = begin; i < end; ++i) {
      const uint32_t id = uint32_t(ids[i]);
      const bool in = id < size;
      items[i] = in ? table[id] : nullptr;
      missing |= !in;
    }
    return missing;
  }

  py::list list_plain(const int32_t* ids, size_t n) const {
    py::list out(n);
    for (size_t i = 0; i < n; ++i) {
      const uint32_t id = uint32_t(ids[i]);
      PyObject* o = id < ints_.size() ? ints_[id] : PyLong_FromLong(ids[i]);
      if (o == nullptr) throw py::error_already_set();
      if (id < ints_.size()) Py_INCREF(o);
      PyList_SET_ITEM(out.ptr(), Py_ssize_t(i), o);
    }
    return out;
  }

  std::vector<PyObject*> ints_;
  bool steal_ = true;  // items stored without an incref
  bool immortal_ = PY_VERSION_HEX >= 0x030C0000;
};

}  // namespace gputok::bind
