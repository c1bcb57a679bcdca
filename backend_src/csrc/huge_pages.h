// Memory for the CPU path's large random-access tables (the pretoken cache, the token index,
// the pair table) on 2 MiB pages where the kernel allows them: transparent huge pages asked
// for with madvise (most distributions default to "madvise", so nothing is given unasked).
// Every lookup into these tables is a random access; on 4 KiB pages each also misses the
// TLB (a 32 MiB table is 8K pages), and inside a VM a TLB miss is a two-dimensional walk.
//
// Performance notes (2-core dev VM, AMD EPYC, 2026-11-27; one thread, CPU time, warm batch
// over 10 MB of the bench corpus, best of 6 alternated runs): the pretoken cache and the
// tables on huge pages, with the key stores below, 133 -> 161 MB/s (`encoder.cpp`).
#pragma once

#include <cstddef>
#include <new>

namespace gputok {

// Zeroed memory of `bytes` bytes: from kHugeMinBytes up, mapped, 2 MiB-aligned, advised
// onto huge pages and, up to 256 MiB, faulted in at once (never more than `bytes`, rounded up
// to 4 KiB pages); calloc below that.
// Throws std::bad_alloc.
void* huge_alloc(size_t bytes);
// Frees what huge_alloc(bytes) returned, given the same `bytes`.
void huge_free(void* p, size_t bytes) noexcept;
constexpr size_t kHugeMinBytes = size_t(1) << 20;
// huge_alloc faults in at once what is no larger than this; larger stays lazy.
constexpr size_t kPopulateMaxBytes = size_t(256) << 20;

// Advises the 2 MiB-aligned part of [p, p + bytes) onto transparent huge pages, before any
// of it is touched, when bytes >= min_bytes (advice: refused or unsupported, nothing
// changes). Fresh output buffers then fault once per 2 MiB instead of once per 4 KiB.
void advise_huge_pages(void* p, size_t bytes, size_t min_bytes) noexcept;
// The same over a vector's whole capacity (a fresh result buffer, reserved, not yet written).
template <class Vec>
void advise_huge_pages(Vec& v, size_t min_bytes) noexcept {
  advise_huge_pages(v.data(), v.capacity() * sizeof(typename Vec::value_type), min_bytes);
}

// std::vector's allocator over huge_alloc.
template <class T>
struct HugePageAllocator {
  using value_type = T;
  HugePageAllocator() = default;
  template <class U>
  HugePageAllocator(const HugePageAllocator<U>&) noexcept {}
  T* allocate(size_t n) {
    if (n > size_t(-1) / sizeof(T)) throw std::bad_alloc();
    return static_cast<T*>(huge_alloc(n * sizeof(T)));
  }
  void deallocate(T* p, size_t n) noexcept { huge_free(p, n * sizeof(T)); }
  template <class U>
  bool operator==(const HugePageAllocator<U>&) const noexcept {
    return true;
  }
  template <class U>
  bool operator!=(const HugePageAllocator<U>&) const noexcept {
    return false;
  }
};

}  // namespace gputok
