// Counts the heap allocations of a warm Encoder::encode_one (tests/core/test_no_allocation.py
// builds this against backend_src/csrc and runs it). Global operator new is replaced with a
// counting one; the counter runs only around the timed calls.
//
//   no_alloc TOKENS TEXT...   -> one line per text and policy: "<policy> <allocs> <same>"
//
// TOKENS: the vocabulary, as bench/native/tokens_file.h reads it.
// <allocs> is the allocations of 100 warm calls; <same> is 1 when encode_one's ids equal
// encode_batch's (the general path) for the text.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <new>
#include <sstream>
#include <string>
#include <vector>

#include "encoder.h"
#include "tokens_file.h"
#include "vocab.h"

namespace {
size_t g_allocs = 0;
bool g_counting = false;
}  // namespace

void* operator new(size_t n) {
  if (g_counting) ++g_allocs;
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }

using namespace gputok;

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  const auto vocab = load_tokens_file(argv[1]);
  const int32_t eot = int32_t(vocab->n_vocab()) - 1;  // <|endoftext|>, after the tokens
  Encoder enc(vocab);
  for (int a = 2; a < argc; ++a) {
    std::ifstream in(argv[a], std::ios::binary);
    std::stringstream buf;
    buf << in.rdbuf();
    const std::string text = buf.str();
    for (int disallow = 0; disallow < 2; ++disallow) {
      SpecialPolicy policy;
      if (disallow) policy.disallowed = {eot};
      const TextInput t{text, true};
      IdVector out;
      for (int i = 0; i < 3; ++i) {  // warm: the cache holds the pieces, `out` its room
        out.clear();
        enc.encode_one(t, policy, Utf8Policy::kStrict, out);
      }
      g_allocs = 0;
      g_counting = true;
      for (int i = 0; i < 100; ++i) {
        out.clear();
        enc.encode_one(t, policy, Utf8Policy::kStrict, out);
      }
      g_counting = false;
      const EncodeResult general = enc.encode_batch({t}, policy, Utf8Policy::kStrict, 1);
      const bool same = general.ids.size() == out.size() &&
                        std::equal(out.begin(), out.end(), general.ids.begin());
      std::printf("%s %zu %d\n", disallow ? "disallow" : "ordinary", g_allocs, same ? 1 : 0);
    }
  }
  return 0;
}
