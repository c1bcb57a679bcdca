// A joined call's shard files written together (`gputok corpus`, group.py's writer): every
// file of every shard of the call created, written, closed and renamed into place in one
// native call with the GIL released once, instead of a Python create, write, close and rename
// per file, each of which gave the GIL up and waited to take it back (the twin of
// read_files.h on the reading side).
//
// Performance notes: bench/results/2026-11-29-corpus-writer-h200.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace gputok {

struct OutBytes {
  const uint8_t* data;
  size_t size;
};

// One output file: written under tmp (created, never an existing file), renamed to final.
struct OutFile {
  std::string tmp;
  std::string final_path;
  std::vector<OutBytes> parts;  // written in order
};

// Why a shard's files were not all written: error is 0, or the errno of the first failure
// (EINVAL for a path that is empty or holds a NUL byte); file is the index of the file it
// failed on, or -1.
struct WriteResult {
  int error = 0;
  int64_t file = -1;
};

// Writes one shard's files: each to its tmp name (all its parts, fsynced first when fsync is
// set, closed), then renamed to its final name in order, so the last file (the shard's entry)
// appears only after the others are in place; with fsync, the last file's directory is
// fsynced after its rename. On a failure, every tmp file of the shard not yet renamed is
// removed; files already renamed stay (an entry never appears without them).
WriteResult write_shard_files(const std::vector<OutFile>& files, bool fsync);

}  // namespace gputok
