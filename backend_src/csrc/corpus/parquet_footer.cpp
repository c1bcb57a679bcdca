// Parquet footers (row groups' column chunk metadata) and single page headers, for the corpus
// reader's checks before it reads a file (parquet.h). Thrift compact protocol: parquet_thrift.h.
#include <algorithm>
#include <climits>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "parquet.h"
#include "parquet_thrift.h"

namespace gputok {

using namespace parquet_detail;

// ------------------------------------------------------------------ the footer

namespace {

void read_column_meta(Thrift& t, ParquetColumnChunkMeta& m) {
  const int16_t saved = t.enter();
  int16_t id;
  int type;
  while (t.field(id, type)) {
    if (id == 1 && type == 5) {
      m.type = int32_field(t, type);
    } else if (id == 3 && type == 9) {
      int elem;
      const uint64_t n = t.list(elem);
      if (elem != 8) corrupt("path_in_schema is not a list of strings");
      m.path.clear();
      for (uint64_t i = 0; i < n; ++i) {
        if (i) m.path += '.';
        m.path += t.binary();
        if (m.path.size() > 4096) corrupt("path_in_schema too long");
      }
    } else if (id == 4 && type == 5) {
      m.codec = int32_field(t, type);
    } else if (id == 5 && type == 6) {
      m.num_values = t.integer(type);
    } else if (id == 7 && type == 6) {
      m.compressed = t.integer(type);
    } else if (id == 9 && type == 6) {
      m.data_page_offset = t.integer(type);
    } else if (id == 11 && type == 6) {
      m.dictionary_page_offset = t.integer(type);
    } else {
      t.skip(type);
    }
  }
  t.leave(saved);
}

// ColumnChunk: its meta_data (3); a file_path (1) or encryption (8, 9) is not for this reader.
ParquetColumnChunkMeta read_column_chunk(Thrift& t) {
  ParquetColumnChunkMeta m;
  bool meta = false, elsewhere = false;
  const int16_t saved = t.enter();
  int16_t id;
  int type;
  while (t.field(id, type)) {
    if (id == 3 && type == 12) {
      read_column_meta(t, m);
      meta = true;
    } else {
      elsewhere |= id == 1 || id == 8 || id == 9;
      t.skip(type);
    }
  }
  t.leave(saved);
  if (elsewhere) throw ParquetUnsupported("an encrypted or external column chunk");
  if (!meta) corrupt("a column chunk without metadata");
  return m;
}

ParquetColumnChunkMeta read_row_group(Thrift& t, int leaf) {
  ParquetColumnChunkMeta m;
  bool found = false;
  const int16_t saved = t.enter();
  int16_t id;
  int type;
  while (t.field(id, type)) {
    if (id == 1 && type == 9) {
      int elem;
      const uint64_t n = t.list(elem);
      if (elem != 12) corrupt("row group columns are not structs");
      for (uint64_t i = 0; i < n; ++i) {
        if (i == uint64_t(leaf)) {
          const ParquetColumnChunkMeta c = read_column_chunk(t);
          m.codec = c.codec;
          m.type = c.type;
          m.num_values = c.num_values;
          m.compressed = c.compressed;
          m.data_page_offset = c.data_page_offset;
          m.dictionary_page_offset = c.dictionary_page_offset;
          m.path = c.path;
          found = true;
        } else {
          t.skip_element(12);
        }
      }
    } else if (id == 2 && type == 6) {
      m.rg_bytes = t.integer(type);
    } else if (id == 3 && type == 6) {
      m.rg_rows = t.integer(type);
    } else {
      t.skip(type);
    }
  }
  t.leave(saved);
  if (!found) corrupt("a row group lacks the column");
  return m;
}

struct SchemaElement {
  std::string name;
  int32_t type = -1, repetition = -1, converted = -1, logical = -1;
  int64_t children = 0;
};

// LogicalType is a union: the id of the one field it holds.
int32_t read_logical(Thrift& t) {
  int32_t member = -1;
  const int16_t saved = t.enter();
  int16_t id;
  int type;
  while (t.field(id, type)) {
    if (member < 0) member = id;
    t.skip(type);
  }
  t.leave(saved);
  return member;
}

SchemaElement read_schema_element(Thrift& t) {
  SchemaElement e;
  const int16_t saved = t.enter();
  int16_t id;
  int type;
  while (t.field(id, type)) {
    if (id == 1 && type == 5) {
      e.type = int32_field(t, type);
    } else if (id == 3 && type == 5) {
      e.repetition = int32_field(t, type);
    } else if (id == 4 && type == 8) {
      e.name = t.binary();
    } else if (id == 5 && type == 5) {
      e.children = int32_field(t, type);
      if (e.children < 0) corrupt("a negative child count");
    } else if (id == 6 && type == 5) {
      e.converted = int32_field(t, type);
    } else if (id == 10 && type == 12) {
      e.logical = read_logical(t);
    } else {
      t.skip(type);
    }
  }
  t.leave(saved);
  return e;
}

}  // namespace

ParquetColumnSchema parquet_schema(const uint8_t* footer, size_t n, const std::string& column) {
  std::vector<SchemaElement> el;
  Thrift t(footer, footer + n);
  int16_t id;
  int type;
  while (t.field(id, type)) {
    if (id == 2 && type == 9) {
      int elem;
      const uint64_t k = t.list(elem);
      if (elem != 12) corrupt("schema elements are not structs");
      for (uint64_t i = 0; i < k; ++i) el.push_back(read_schema_element(t));  // >= 1 byte each
    } else {
      t.skip(type);
    }
  }
  if (el.empty()) corrupt("no schema");
  ParquetColumnSchema out;
  // Depth-first: each element is followed by its children's subtrees. `open` counts the
  // subtrees still to come at each level; leaves are numbered in this order.
  size_t i = 1;
  int64_t leaves = 0;
  for (int64_t c = 0; c < el[0].children; ++c) {
    if (i >= el.size()) corrupt("the schema's root claims more columns than it lists");
    const SchemaElement& top = el[i];
    out.names.push_back(top.name);
    if (top.children == 0 && top.name == column && out.leaf < 0) {
      if (leaves > INT32_MAX) corrupt("more leaf columns than a leaf index holds");
      out.leaf = int32_t(leaves);
      out.type = top.type;
      out.repetition = top.repetition;
      out.converted = top.converted;
      out.logical = top.logical;
    }
    int64_t open = 1;  // top's own subtree
    while (open > 0) {
      if (i >= el.size()) corrupt("a schema group claims more children than are listed");
      if (el[i].children == 0) ++leaves;
      open += el[i].children - 1;  // children <= INT32_MAX
      ++i;
      // Every child still to come is an element still to read: no more than are left (which
      // also keeps `open` far from overflowing).
      if (open > int64_t(el.size() - i))
        corrupt("a schema group claims more children than are listed");
    }
  }
  return out;
}

bool parquet_plain_string(const ParquetColumnSchema& s) {
  return s.leaf >= 0 && s.type == 6 && (s.repetition == 0 || s.repetition == 1) &&
         (s.converted == -1 || s.converted == 0) && (s.logical == -1 || s.logical == 1);
}

ParquetFooter parquet_footer(const uint8_t* footer, size_t n, int leaf) {
  if (leaf < 0) throw std::invalid_argument("leaf must be >= 0");
  ParquetFooter out;
  Thrift t(footer, footer + n);
  int16_t id;
  int type;
  // Every element read takes at least one byte, so a list's claimed size cannot make this
  // loop (or its memory) outgrow the footer.
  while (t.field(id, type)) {
    if (id == 3 && type == 6) {
      out.num_rows = t.integer(type);
    } else if (id == 4 && type == 9) {
      int elem;
      const uint64_t k = t.list(elem);
      if (elem != 12) corrupt("row groups are not structs");
      for (uint64_t i = 0; i < k; ++i) out.chunks.push_back(read_row_group(t, leaf));
    } else {
      t.skip(type);
    }
  }
  return out;
}

ParquetPageHeader parquet_page_header(const uint8_t* buf, size_t n) {
  Thrift t(buf, buf + n);
  const Header h = read_header(t);
  if (h.type < 0 || h.compressed < 0 || h.uncompressed < 0) corrupt("page header lacks sizes");
  return {h.type, h.uncompressed, h.compressed, h.num_values, h.encoding, t.pos() - buf};
}

int64_t parquet_plain_max_length(const uint8_t* page, size_t n, int64_t num_values) {
  if (num_values < 0 || uint64_t(num_values) > n / 4) corrupt("more values than the page holds");
  size_t p = 0;
  int64_t longest = 0;
  for (int64_t i = 0; i < num_values; ++i)
    longest = std::max<int64_t>(longest, plain_value(page, n, p));
  return longest;
}

}  // namespace gputok
