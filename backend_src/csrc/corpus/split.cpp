#include "split.h"

#include <cstring>
#include <stdexcept>

namespace gputok {

std::vector<int64_t> find_separators(const uint8_t* data, size_t n, const uint8_t* sep, size_t k) {
  if (k == 0) throw std::invalid_argument("text separator must not be empty");
  std::vector<int64_t> at;
  size_t p = 0;
  while (p <= n && n - p >= k) {
    const void* hit;
    if (k <= kMemchrMaxSep) {
      // The last place a match can start is n - k: memchr need not look past it.
      hit = std::memchr(data + p, sep[0], n - p - k + 1);
      if (hit && std::memcmp(static_cast<const uint8_t*>(hit) + 1, sep + 1, k - 1) != 0) {
        p = size_t(static_cast<const uint8_t*>(hit) - data) + 1;
        continue;
      }
    } else {
      hit = memmem(data + p, n - p, sep, k);
    }
    if (!hit) break;
    const size_t i = size_t(static_cast<const uint8_t*>(hit) - data);
    at.push_back(int64_t(i));
    p = i + k;
  }
  return at;
}

}  // namespace gputok
