// The vocabulary of a TOKENS file, for the native tools built against backend_src/csrc alone
// (bench/native/encoder_driver.cpp, tests/core/native/no_alloc.cpp): every token's bytes in
// rank order, each after its little-endian uint16 length (bench/bench_encoder_ab.py and
// tests/core/test_no_allocation.py write it from the tiktoken file). <|endoftext|> follows
// them, with the next id.
#pragma once

#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "vocab.h"

namespace gputok {

inline std::shared_ptr<Vocab> load_tokens_file(const char* path) {
  std::ifstream f(path, std::ios::binary);
  std::vector<std::string> tokens;
  unsigned char len[2];
  while (f.read(reinterpret_cast<char*>(len), 2)) {
    std::string t(size_t(len[0]) | (size_t(len[1]) << 8), '\0');
    if (!f.read(t.data(), std::streamsize(t.size()))) break;
    tokens.push_back(std::move(t));
  }
  const int32_t eot = int32_t(tokens.size());
  return std::make_shared<Vocab>(Vocab::from_ranks(tokens, {SpecialToken{"<|endoftext|>", eot}}));
}

}  // namespace gputok
