// C++ unit test of the device merge table against the CPU table (each device rank equals the
// CPU's), and a small GPU == CPU encode check that compute-sanitizer can run without Python.
//
// Build (scripts/gpu_check.sh does): nvcc -std=c++17 -O2 -arch=sm_90 -I backend_src/csrc
//   backend_src/csrc/cuda/tests/test_device_tables.cu <build>/libgputok_core.a -o
//   test_device_tables
// Run: test_device_tables backend_src/gputok/data/gpt2.tiktoken [small]   (small: for sanitizers)
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "../common.cuh"
#include "../device_tables.cuh"
#include "gpu_encoder.h"
#include "merge.h"
#include "pretokenize.h"
#include "vocab.h"

using namespace gputok;

static std::string b64decode(const std::string& s) {
  static int T[256];
  static bool init = false;
  if (!init) {
    for (int& t : T) t = -1;
    const char* A = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (int i = 0; i < 64; ++i) T[uint8_t(A[i])] = i;
    init = true;
  }
  std::string out;
  int val = 0, bits = -8;
  for (unsigned char c : s) {
    if (T[c] < 0) break;
    val = (val << 6) + T[c];
    bits += 6;
    if (bits >= 0) {
      out.push_back(char((val >> bits) & 0xFF));
      bits -= 8;
    }
  }
  return out;
}

__global__ void probe_kernel(PairTableView t, const uint32_t* left, const uint32_t* right, size_t n,
                             uint64_t* out) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    out[i] = pair_lookup(t, left[i], right[i]);
}

// gpt2.tiktoken (base64 token, space, rank per line) -> the vocabulary, <|endoftext|> 50256.
static std::shared_ptr<Vocab> load_vocab(const char* path) {
  std::ifstream f(path);
  std::vector<std::string> tokens;
  std::string line;
  while (std::getline(f, line)) {
    const auto sp = line.find(' ');
    if (sp == std::string::npos) continue;
    const size_t rank = std::stoul(line.substr(sp + 1));
    if (tokens.size() <= rank) tokens.resize(rank + 1);
    tokens[rank] = b64decode(line.substr(0, sp));
  }
  return std::make_shared<Vocab>(Vocab::from_ranks(tokens, {SpecialToken{"<|endoftext|>", 50256}}));
}

// 1. Device hash table == CPU hash table: every stored key, plus random misses.
// Both the CPU layout (sparser 0) and the re-spread device copy (sparser 1, 2) must answer
// every probe as the CPU table does. Returns the mismatches, summed over the layouts.
static size_t check_device_tables(const Vocab& vocab) {
  uint64_t allocs = 0;
  size_t bad = 0, misses = 0, n_hits = 0, n = 0;
  for (int sparser = 0; sparser <= 2; ++sparser) {
    cuda_detail::DeviceTables dt;
    dt.build(vocab, allocs, sparser);
    std::vector<uint32_t> L, R;
    for (size_t s = 0; s < vocab.pair_capacity(); ++s) {
      const uint64_t k = vocab.pair_slots()[2 * s];
      if (k == kEmptyKey) continue;
      L.push_back(uint32_t(k >> 32));
      R.push_back(uint32_t(k));
    }
    n_hits = L.size();
    std::mt19937_64 rng(1);
    for (int i = 0; i < 1000000; ++i) {
      L.push_back(uint32_t(rng() % 50300));
      R.push_back(uint32_t(rng() % 50300));
    }
    n = L.size();
    uint32_t *dl, *dr;
    uint64_t* dout;
    GPUTOK_CUDA(cudaMalloc(&dl, n * 4));
    GPUTOK_CUDA(cudaMalloc(&dr, n * 4));
    GPUTOK_CUDA(cudaMalloc(&dout, n * 8));
    GPUTOK_CUDA(cudaMemcpy(dl, L.data(), n * 4, cudaMemcpyHostToDevice));
    GPUTOK_CUDA(cudaMemcpy(dr, R.data(), n * 4, cudaMemcpyHostToDevice));
    probe_kernel<<<1024, 256>>>(dt.vocab().pairs, dl, dr, n, dout);
    GPUTOK_LAUNCHED("probe_kernel");
    std::vector<uint64_t> got(n);
    GPUTOK_CUDA(cudaMemcpy(got.data(), dout, n * 8, cudaMemcpyDeviceToHost));
    misses = 0;
    for (size_t i = 0; i < n; ++i) {
      const uint64_t want = pair_lookup(vocab.pair_view(), L[i], R[i]);
      if (got[i] != want) ++bad;
      if (i < n_hits && want == kEmptyKey) ++bad;  // every stored key must be found
      if (want == kEmptyKey) ++misses;
    }
    std::printf(
        "device table (sparser %d): %zu probes (%zu stored keys, %zu misses), %zu mismatches\n",
        sparser, n, n_hits, misses, bad);
    cudaFree(dl);
    cudaFree(dr);
    cudaFree(dout);
  }
  return bad;
}

// The texts of the encode check: literals, runs, scripts, and a paragraph repeated `reps` times.
static std::vector<std::string> encode_texts(int reps) {
  std::vector<std::string> texts = {"hello world",
                                    "a   b",
                                    "DON'T it's we'll they've",
                                    "a \n\nb",
                                    "   ",
                                    std::string(700, 'a'),
                                    std::string(100, '7') + " x",
                                    "日本語のテキスト、です。 Привет!",
                                    "x" + std::string(40, '!') + "'s",
                                    ""};
  std::string para;
  for (int i = 0; i < reps; ++i) para += "The quick brown fox's 12345 jumps over\tthe lazy dog. ";
  texts.push_back(para);
  return texts;
}

// The CPU path's ids of `segs` (pretokenize, merge) and each segment's end in them.
static void cpu_encode(const Vocab& vocab, const std::vector<std::string_view>& segs,
                       std::vector<int32_t>& want, std::vector<int64_t>& want_ends) {
  MergeScratch scratch;
  for (const auto& t : segs) {
    std::vector<Piece> pieces;
    pretokenize(unicode_table(), reinterpret_cast<const uint8_t*>(t.data()), t.size(), pieces);
    for (const auto& p : pieces)
      merge_piece(vocab.view(), reinterpret_cast<const uint8_t*>(t.data()) + p.start, p.len, want,
                  scratch);
    want_ends.push_back(int64_t(want.size()));
  }
}

// One GPU encode of `segs` as int32 and as uint16 (segment k moved k places on, a separator slot
// after each) against the CPU's ids; prints the run's line. True when both match.
static bool gpu_encode_matches(const std::shared_ptr<Vocab>& vocab,
                               const std::vector<std::string_view>& segs, Algorithm a,
                               bool gpu_pretok, const GpuTuning& tuning,
                               const std::vector<int32_t>& want,
                               const std::vector<int64_t>& want_ends, int run, size_t bytes) {
  GpuOptions o;
  o.gpu_pretokenize = gpu_pretok;
  GpuEncoder g(vocab, o, tuning);
  IdVector ids;
  std::vector<int64_t> ends;
  GpuOutput out;
  out.ids32 = &ids;
  const float ms = g.encode(segs, a, out, ends);
  bool ok = std::equal(ids.begin(), ids.end(), want.begin(), want.end()) && ends == want_ends &&
            out.tokens == int64_t(want.size());
  // The same as uint16, segment k moved k places on (a separator slot after each).
  U16Vector ids16;
  std::vector<int64_t> shift(segs.size()), ends16;
  for (size_t k = 0; k < segs.size(); ++k) shift[k] = int64_t(k);
  GpuOutput out16;
  out16.ids16 = &ids16;
  out16.shift = shift.data();
  g.encode(segs, a, out16, ends16);
  bool ok16 = ends16 == want_ends && out16.first_bad < 0;
  for (size_t k = 0, i = 0; ok16 && k < segs.size(); ++k)
    for (; i < size_t(want_ends[k]); ++i)
      ok16 = ok16 && i + k < ids16.size() && ids16[i + k] == uint16_t(want[i]);
  std::printf(
      "run %d: encode %zu bytes, algorithm %d, gpu_pretokenize %d: %zu ids, %.3f ms kernels: "
      "%s, uint16 %s\n",
      run, bytes, int(a), int(gpu_pretok), ids.size(), ms, ok ? "ok" : "MISMATCH",
      ok16 ? "ok" : "MISMATCH");
  return ok && ok16;
}

// 2. A small GPU == CPU encode per algorithm (for compute-sanitizer). Four runs: the texts as
// they are (one chunk under 4 KB: per_word's fused one-block path), repeated 10x (~20 KB: the
// fused cooperative path), repeated 10x with the fused path off (GpuTuning::fused_max_bytes 0:
// the multi-kernel pipeline), and repeated 10x in chunks of 4 KiB, two lanes in flight (the
// large-call pipeline, stitched). Returns the failed encodes.
static int check_encodes(const std::shared_ptr<Vocab>& vocab,
                         const std::vector<std::string>& texts) {
  int failures = 0;
  for (int run = 0; run < 4; ++run) {
    const int rep = run == 0 ? 1 : 10;
    GpuTuning tuning;
    if (run == 2) tuning.fused_max_bytes = 0;
    if (run == 3) {
      tuning.chunk_bytes = 4096;
      tuning.lanes = 2;
    }
    std::vector<std::string_view> segs;
    for (int r = 0; r < rep; ++r) segs.insert(segs.end(), texts.begin(), texts.end());
    size_t bytes = 0;
    for (auto sv : segs) bytes += sv.size();
    std::vector<int32_t> want;
    std::vector<int64_t> want_ends;
    cpu_encode(*vocab, segs, want, want_ends);
    for (Algorithm a : {Algorithm::kPerWord, Algorithm::kBlockBpe, Algorithm::kBlockBpeOptimized}) {
      if (rep > 1 && a != Algorithm::kPerWord) continue;  // blockbpe has no fused path
      for (bool gpu_pretok : {true, false})
        if (!gpu_encode_matches(vocab, segs, a, gpu_pretok, tuning, want, want_ends, run, bytes))
          failures++;
    }
  }
  return failures;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s gpt2.tiktoken\n", argv[0]);
    return 2;
  }
  const auto vocab = load_vocab(argv[1]);
  std::printf("vocab: %zu ids, %zu pairs, table capacity %zu\n", vocab->n_vocab(), vocab->n_pairs(),
              vocab->pair_capacity());
  const size_t bad = check_device_tables(*vocab);
  const bool small = argc > 2 && std::string(argv[2]) == "small";
  int failures = bad ? 1 : 0;
  failures += check_encodes(vocab, encode_texts(small ? 12 : 200));
  std::printf("%s\n", failures ? "FAILED" : "PASSED");
  return failures ? 1 : 0;
}
