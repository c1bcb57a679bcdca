// Small JSONL shards read together (`gputok corpus`, JSONL format, group.py's joined calls):
// every file of a joined call read into one buffer and the one string field taken out of
// each record in one native call, with the GIL released once, instead of a call of Arrow's
// JSON reader per file, which parses every field of every record on its thread pool.
//
// Exactness: the reference is readers._read_jsonl_python (json.loads of each line). This
// reader takes only what it parses the same way, and hands anything else back undecided
// (error kJsonlNotPlain): a record that is not an object on one line, a field missing,
// repeated or not a string, a lone surrogate escape, NaN or Infinity,
// invalid UTF-8 anywhere in the file, nesting deeper than kJsonlMaxDepth, any byte outside
// JSON's grammar. Such a file goes to readers.read_jsonl (Arrow, then the Python path),
// which decides and names the line. Tested against json.loads (tests/corpus/
// test_corpus_read_jsonl.py) and fuzzed under ASan+UBSan (fuzz/fuzz_jsonl_files.py).
//
// Performance notes: see read_jsonl.cpp.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gputok {

// read_jsonl_files' error for a file this reader does not decide (not an errno: negative).
constexpr int kJsonlNotPlain = -1;
// Objects and arrays nested deeper than this, in a record, are handed back undecided.
constexpr int kJsonlMaxDepth = 64;

struct JsonlFiles {
  std::vector<uint8_t> data;      // every document's text (UTF-8, unescaped), one after another
  std::vector<int64_t> spans;     // [start, end) pairs into data: every document, file by file
  std::vector<int64_t> docs;      // per file read: how many of spans are its documents
  std::vector<int64_t> sizes;     // per file read: its size in bytes
  std::vector<int64_t> mtime_ns;  // per file read: its modification time
  int64_t failed = -1;            // the first file not read (nor any after it), or -1
  int error = 0;                  // why: its errno (read_files.h's), or kJsonlNotPlain
  int64_t offset = -1;            // with kJsonlNotPlain: the byte of that file it stopped at
};

// Reads paths in order until one fails or all are read; each file's documents are the string
// ``field`` of its records, in order (blank lines have none). The files' bytes never exceed
// max_bytes; reserve is a hint for the buffer's first size.
JsonlFiles read_jsonl_files(const std::vector<std::string>& paths, const std::string& field,
                            int64_t max_bytes, int64_t reserve);

// One file's bytes, parsed in place: documents' text is written over buf from its start
// (never past the byte being read), out_bytes of it, and their spans appended (relative to
// buf). False where the file is not decided here (kJsonlNotPlain), stop then saying where.
bool jsonl_extract(uint8_t* buf, size_t buf_size, const std::string& field,
                   std::vector<int64_t>& spans, size_t& out_bytes, size_t& stop);

}  // namespace gputok
