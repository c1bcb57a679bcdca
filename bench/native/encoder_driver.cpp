// A driver around gputok's C++ Encoder alone (no Python, no bindings): one thread, process
// CPU time, for A/B runs of the CPU path on a shared machine (bench/bench_encoder_ab.py builds
// it against each tree and alternates them). Not a test.
//
//   encoder_driver TOKENS DOCS MB batch   -> "cold C warm W1 W2 MB/s ids N hash H"
//   encoder_driver TOKENS DOCS MB one     -> "one B bytes N ids: T us/call" (first MB)
//   encoder_driver TOKENS DOCS MB wall S1,S2,...
//       -> per size S (bytes): "wall S bytes N ids: split T1 one T2 sporadic T3 us" (one
//          text of the documents joined, cut to S bytes; wall time, median of 7 loops of
//          back-to-back calls: encode_one, which may split it across the cores, and
//          encode_batch on one thread; then encode_one alone, each call 1 ms after the last,
//          when the pool's workers sleep: the median call; the ids compared first)
//
// DOCS holds documents separated by 0x1E; the first MB megabytes are used. "cold" is a fresh
// Encoder's first encode_batch (empty pretoken cache), W1 and W2 the next two. H is a rolling
// hash of every id of the cold pass (h = h * 1000003 + id, mod 2^64): the A/B script checks it
// against tiktoken's ids, so every timed tree is exact.
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
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

// Wall time of one call of `f`, back to back: the median over 7 loops of about 3 ms each
// (spin windows and caches behave as in a stream of calls).
template <typename F>
double wall_us(F f, size_t bytes) {
  const long reps = std::max<long>(20, long(3e6 / double(bytes + 1)));
  std::vector<double> t;
  for (int r = 0; r < 7; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    for (long i = 0; i < reps; ++i) f();
    const std::chrono::duration<double, std::micro> d = std::chrono::steady_clock::now() - t0;
    t.push_back(d.count() / double(reps));
  }
  std::sort(t.begin(), t.end());
  return t[3];
}

// Mode "wall": one text of each size (the documents joined): encode_one in a stream, encode_batch
// on one thread, encode_one alone.
int wall_mode(const std::shared_ptr<Vocab>& vocab_tokens, const std::vector<std::string>& docs,
              const char* sizes) {
  std::string all;
  for (const auto& d : docs) all += d;
  Encoder enc(vocab_tokens);
  const SpecialPolicy policy;
  for (const char* p = sizes; *p;) {
    size_t n = std::strtoul(p, nullptr, 10);
    while (n < all.size() && (uint8_t(all[n]) & 0xC0) == 0x80) ++n;  // a whole character
    const std::string text = all.substr(0, n);
    const TextInput t{text, true};
    IdVector out;
    EncodeResult one;
    for (int i = 0; i < 20; ++i) {  // warm: the pretoken cache and the pool
      out.clear();
      enc.encode_one(t, policy, Utf8Policy::kStrict, out);
    }
    one = enc.encode_batch({t}, policy, Utf8Policy::kStrict, 1);
    if (!std::equal(out.begin(), out.end(), one.ids.begin(), one.ids.end()) || out.empty()) {
      std::printf("wall %zu bytes: encode_one and encode_batch differ\n", text.size());
      return 1;
    }
    const double split = wall_us(
        [&] {
          out.clear();
          enc.encode_one(t, policy, Utf8Policy::kStrict, out);
        },
        text.size());
    const double alone =
        wall_us([&] { one = enc.encode_batch({t}, policy, Utf8Policy::kStrict, 1); }, text.size());
    std::vector<double> lone;  // sporadic calls: the pool's spin window has passed
    for (int i = 0; i < 41; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      out.clear();
      const auto t0 = std::chrono::steady_clock::now();
      enc.encode_one(t, policy, Utf8Policy::kStrict, out);
      const std::chrono::duration<double, std::micro> d = std::chrono::steady_clock::now() - t0;
      lone.push_back(d.count());
    }
    std::sort(lone.begin(), lone.end());
    std::printf("wall %zu bytes %zu ids: split %.2f one %.2f sporadic %.2f us\n", text.size(),
                out.size(), split, alone, lone[20]);
    p = std::strchr(p, ',');
    if (!p) break;
    ++p;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: %s TOKENS DOCS MB batch|one|wall [SIZES]\n", argv[0]);
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
  if (std::strcmp(argv[4], "wall") == 0)
    return wall_mode(vocab, docs, argc > 5 ? argv[5] : "32768");
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
