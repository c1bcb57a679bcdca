// A driver around gputok's C++ Encoder alone (no Python, no bindings): one thread, process
// CPU time, for A/B runs of the CPU path on a shared machine (bench/bench_encoder_ab.py builds
// it against each tree and alternates them). Not a test.
//
//   encoder_driver TOKENS DOCS MB batch   -> "cold C warm W1 W2 MB/s ids N hash H"
//   encoder_driver TOKENS DOCS MB one     -> "one B bytes N ids: T us/call" (first MB)
//
// DOCS holds documents separated by 0x1E; the first MB megabytes are used. "cold" is a fresh
// Encoder's first encode_batch (empty pretoken cache), W1 and W2 the next two. H is a rolling
// hash of every id of the cold pass (h = h * 1000003 + id, mod 2^64): the A/B script checks it
// against tiktoken's ids, so every timed tree is exact.
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "encoder.h"
#include "tokens_file.h"
#include "vocab.h"

using namespace gputok;

namespace {

double cpu_seconds() {
  timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return double(t.tv_sec) + double(t.tv_nsec) * 1e-9;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: %s TOKENS DOCS MB batch|one\n", argv[0]);
    return 2;
  }
  const auto vocab = load_tokens_file(argv[1]);
  std::ifstream in(argv[2], std::ios::binary);
  std::stringstream buf;
  buf << in.rdbuf();
  const std::string all = buf.str();
  const double mb = std::atof(argv[3]);
  std::vector<std::string> docs;
  size_t start = 0, total = 0;
  while (start < all.size() && double(total) < mb * 1e6) {
    size_t end = all.find('\x1e', start);
    if (end == std::string::npos) end = all.size();
    docs.push_back(all.substr(start, end - start));
    total += end - start;
    start = end + 1;
  }
  std::vector<TextInput> texts;
  for (const auto& d : docs) texts.push_back(TextInput{d, true});
  const SpecialPolicy policy;
  if (std::strcmp(argv[4], "one") == 0) {
    std::string text;
    for (const auto& d : docs) text += d;
    Encoder enc(vocab);
    IdVector out;
    const TextInput t{text, true};
    for (int i = 0; i < 3; ++i) {  // warm: the pretoken cache holds the text's pieces
      out.clear();
      enc.encode_one(t, policy, Utf8Policy::kStrict, out);
    }
    const long reps = std::max<long>(1, long(2e7 / double(text.size() + 1)));
    const double t0 = cpu_seconds();
    for (long i = 0; i < reps; ++i) {
      out.clear();
      enc.encode_one(t, policy, Utf8Policy::kStrict, out);
    }
    std::printf("one %zu bytes %zu ids: %.3f us/call\n", text.size(), out.size(),
                (cpu_seconds() - t0) / double(reps) * 1e6);
    return 0;
  }
  Encoder enc(vocab);
  double t[4];
  t[0] = cpu_seconds();
  const EncodeResult cold = enc.encode_batch(texts, policy, Utf8Policy::kStrict, 1);
  t[1] = cpu_seconds();
  const EncodeResult warm1 = enc.encode_batch(texts, policy, Utf8Policy::kStrict, 1);
  t[2] = cpu_seconds();
  const EncodeResult warm2 = enc.encode_batch(texts, policy, Utf8Policy::kStrict, 1);
  t[3] = cpu_seconds();
  // The warm passes answer from the pretoken cache: they must give the cold pass's ids.
  if (warm1.ids != cold.ids || warm2.ids != cold.ids) {
    std::printf("warm ids differ from the cold pass's\n");
    return 1;
  }
  uint64_t h = 0;
  for (const int32_t id : cold.ids) h = h * 1000003u + uint64_t(int64_t(id));
  const double m = double(total) / 1e6;
  std::printf("cold %.1f warm %.1f %.1f MB/s ids %zu hash %llx\n", m / (t[1] - t[0]),
              m / (t[2] - t[1]), m / (t[3] - t[2]), cold.ids.size(), (unsigned long long)h);
  return 0;
}
