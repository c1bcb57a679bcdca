// Split: where a text corpus file's documents end (`gputok corpus --text-separator`).
// The reader of a text shard finds every separator in the file before its first batch. numpy
// did it with a byte compare into a file-sized temporary, then a filter per further byte of
// the separator; here memchr finds the candidates, with the GIL released and no temporary.
//
// Performance notes (2026-11-25, 2-core dev VM, the 85 MB bench corpus joined with each
// separator, CPU ns per byte, numpy warmed / native): "\x1e\n" (12k documents) 0.20 / 0.034;
// "\n\n" (252k) 0.88 / 0.27; "\n" (2.3M) 0.61 / 0.37. A first numpy call on fresh memory took
// 0.92. glibc's memmem, which takes separators longer than kMemchrMaxSep, ran 0.48-0.51 on all
// three. read_text over the file, reading included: 0.69-0.75 -> 0.52-0.55 CPU s per GB.
// One H100 host, text shards, new and old alternating: the pipeline with no tokenizer on 4
// Dask workers 3.87 / 5.06 against 3.28 / 3.96 GB/s
// (bench/results/2026-11-25-benchmarks-history.md, 2026-11-25).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace gputok {

// Separators up to this many bytes are found by memchr on their first byte and a compare of
// the rest: at most this many byte compares per byte of text even where the first byte is
// common. Longer ones go to memmem (glibc's two-way search: linear in the text whatever the
// separator), so a long separator over a run of its own prefix cannot take quadratic time.
constexpr size_t kMemchrMaxSep = 8;

// Start offsets of the non-overlapping occurrences of sep[0, k) in data[0, n), left to right,
// as bytes.split finds them (after a match the search resumes at its end). k must be > 0.
std::vector<int64_t> find_separators(const uint8_t* data, size_t n, const uint8_t* sep, size_t k);

}  // namespace gputok
