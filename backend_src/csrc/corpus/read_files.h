// Small text shards read together (`gputok corpus`, text format, group.py's joined calls):
// every file of a joined call read into one buffer and split into documents in one native
// call, with the GIL released once, instead of a Python open, read and separator search per
// file, each of which gave the GIL up and waited to take it back.
//
// Performance notes (H100 host, 2026-11-27 23:25, whole `gputok corpus` commands on 1 GB of
// text, 3 alternated rounds, medians; bench/results/2026-11-27-corpus-writer-h100.md §4): in
// 1 MB shards 2.50 s with the files read one at a time, 2.16 s read together (2.64 before the
// leaner writer too); in 20 MB shards, which do not join, 1.40-1.42 either way. The buffer is
// advised onto huge pages before it is touched: 200 MB of text in 190 files read and split in
// 173 -> 47 ms (2-core dev VM, best of 5; 4 KiB pages took one fault each, 51K of them); the
// 1 MB-shard command above 2.16 -> 1.85 s (H100 host, 23:42, another host, same method).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gputok {

struct TextFiles {
  std::vector<uint8_t> data;      // the files' bytes, one after another
  std::vector<int64_t> ends;      // per file read: where its bytes end in data
  std::vector<int64_t> mtime_ns;  // per file read: its modification time
  std::vector<int64_t> spans;     // [start, end) pairs into data: every document, file by file
  std::vector<int64_t> docs;      // per file read: how many of spans are its documents
  int64_t failed = -1;            // the first file not read (nor any after it), or -1
  int error = 0;                  // why: its errno; EINVAL not a regular file or a bad path,
                                  // EFBIG past max_bytes
};

// Appends the bytes of the regular file at path to out (out never past limit bytes) and sets
// mtime_ns: 0, or an errno (EINVAL not a regular file or a bad path, EFBIG past limit).
int read_file_append(const std::string& path, std::vector<uint8_t>& out, size_t limit,
                     int64_t& mtime_ns);

// Reads paths in order until one fails or all are read. Each file's documents are as
// readers.read_text makes them: with split, the pieces between non-overlapping occurrences of
// sep (bytes.split's), a final empty piece dropped unless it is the only one; without, the
// whole file. data never holds more than max_bytes; reserve is a hint for its first size.
// sep must not be empty when split is set (std::invalid_argument).
TextFiles read_text_files(const std::vector<std::string>& paths, const std::string& sep, bool split,
                          int64_t max_bytes, int64_t reserve);

}  // namespace gputok
