// Huge-page tables (huge_pages.h).
#include "huge_pages.h"

#include <cstdint>
#include <cstdlib>

#if defined(__linux__)
#include <sys/mman.h>
#include <unistd.h>
#endif

namespace gputok {

namespace {

constexpr size_t kHuge = size_t(2) << 20;

#if defined(__linux__)
size_t page_round(size_t bytes) {
  const size_t page = size_t(sysconf(_SC_PAGESIZE));
  return (bytes + page - 1) / page * page;
}
bool mapped(size_t bytes) { return bytes >= kHugeMinBytes && bytes <= (size_t(1) << 48); }
#ifdef MADV_POPULATE_WRITE
constexpr int kPopulateWrite = MADV_POPULATE_WRITE;
#else
constexpr int kPopulateWrite = 23;  // its value since Linux 5.14
#endif
#endif

}  // namespace

void* huge_alloc(size_t bytes) {
  if (bytes == 0) bytes = 1;
#if defined(__linux__)
  if (mapped(bytes)) {
    // Map one huge page more than asked, keep the 2 MiB-aligned part, give back the ends.
    const size_t size = page_round(bytes);
    void* m =
        mmap(nullptr, size + kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) throw std::bad_alloc();
    const uintptr_t base = reinterpret_cast<uintptr_t>(m);
    const uintptr_t aligned = (base + kHuge - 1) & ~uintptr_t(kHuge - 1);
    const uintptr_t end = base + size + kHuge;
    if (aligned > base) munmap(m, aligned - base);
    if (end > aligned + size) munmap(reinterpret_cast<void*>(aligned + size), end - aligned - size);
    // Advice only: where the kernel has no huge pages the table works on small ones.
    madvise(reinterpret_cast<void*>(aligned), size, MADV_HUGEPAGE);
    // Fault the table in now, while it is built: a hash table's first lookups land all over it,
    // and a first touch of a 2 MiB page zeroes all of it (with compaction where memory is
    // fragmented), so a tokenizer's first 64-token call took 1-6 ms on a fresh 64 MiB pretoken
    // cache (warm: under 2 us). Prefaulted here, its construction takes that time instead.
    // Linux 5.14+; elsewhere (EINVAL) pages fault on first touch as before.
    // Not above kPopulateMaxBytes: a larger cache asked for stays lazy (RSS as it fills).
    if (size <= kPopulateMaxBytes) madvise(reinterpret_cast<void*>(aligned), size, kPopulateWrite);
    return reinterpret_cast<void*>(aligned);
  }
#endif
  void* p = std::calloc(1, bytes);
  if (!p) throw std::bad_alloc();
  return p;
}

void advise_huge_pages(void* p, size_t bytes, size_t min_bytes) noexcept {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  if (!p || bytes < min_bytes) return;
  const uintptr_t a = (reinterpret_cast<uintptr_t>(p) + kHuge - 1) & ~uintptr_t(kHuge - 1);
  const uintptr_t b = (reinterpret_cast<uintptr_t>(p) + bytes) & ~uintptr_t(kHuge - 1);
  if (b > a) madvise(reinterpret_cast<void*>(a), b - a, MADV_HUGEPAGE);  // advice: may fail
#else
  (void)p;
  (void)bytes;
  (void)min_bytes;
#endif
}

void huge_free(void* p, size_t bytes) noexcept {
  if (!p) return;
  if (bytes == 0) bytes = 1;
#if defined(__linux__)
  if (mapped(bytes)) {
    munmap(p, page_round(bytes));
    return;
  }
#endif
  std::free(p);
}

}  // namespace gputok
