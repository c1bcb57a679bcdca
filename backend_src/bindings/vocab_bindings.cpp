// The _core module's Vocab and the stages' reference entry points, for tests: pretokenization,
// the merges, the Unicode classes, UTF-8 checks and the byte classifier, each alone.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "../csrc/ascii_classify.h"
#include "../csrc/merge.h"
#include "../csrc/pretokenize.h"
#include "../csrc/utf8.h"
#include "../csrc/vocab.h"
#include "convert.h"
#include "core_module.h"
#include "py_buffers.h"

namespace py = pybind11;
using namespace gputok;

namespace gputok::bind {

// The vocabulary, and its stages on one text for tests: pieces, merge_reference, merge.
void bind_vocab(py::module_& m) {
  py::class_<Vocab, std::shared_ptr<Vocab>>(m, "Vocab")
      .def_static(
          "from_ranks",
          [](const py::sequence& tokens, const py::dict& specials) {
            auto t = to_token_list(tokens);
            auto s = to_specials(specials);
            py::gil_scoped_release release;
            return std::make_shared<Vocab>(Vocab::from_ranks(std::move(t), std::move(s)));
          },
          py::arg("tokens"), py::arg("specials"))
      .def_static(
          "from_merges",
          [](const py::sequence& tokens,
             const std::vector<std::pair<std::string, std::string>>& merges,
             const py::dict& specials) {
            auto t = to_token_list(tokens);
            auto s = to_specials(specials);
            py::gil_scoped_release release;
            return std::make_shared<Vocab>(Vocab::from_merges(std::move(t), merges, std::move(s)));
          },
          py::arg("tokens"), py::arg("merges"), py::arg("specials"))
      .def_property_readonly("n_vocab", &Vocab::n_vocab)
      .def_property_readonly("n_pairs", &Vocab::n_pairs)
      .def_property_readonly("table_capacity", [](const Vocab& v) { return v.pair_capacity(); })
      .def("pair",
           [](const Vocab& v, uint32_t left, uint32_t right) -> py::object {
             const uint64_t value = pair_lookup(v.pair_view(), left, right);
             if (value == kEmptyKey) return py::none();
             return py::make_tuple(pair_merged(value), pair_rank(value));
           })
      .def("token_bytes",
           [](const Vocab& v, int64_t id) {
             try {
               return py::bytes(std::string(v.token_bytes(id)));
             } catch (const std::out_of_range& e) {
               throw py::value_error(e.what());
             }
           })
      .def("pieces",
           [](const Vocab&, const py::bytes& text) {
             // Pretokenization alone, for tests: list of (start, length). The scanner reads
             // a lead byte's whole sequence, so invalid UTF-8 is refused before it runs.
             std::string s = text;
             if (s.size() > UINT32_MAX) throw py::value_error("pieces() takes < 4 GiB");
             const auto* p = reinterpret_cast<const uint8_t*>(s.data());
             const size_t bad = utf8_first_invalid(p, s.size());
             if (bad < s.size()) throw Utf8Error(0, bad, p[bad]);
             std::vector<Piece> pieces;
             pretokenize(unicode_table(), reinterpret_cast<const uint8_t*>(s.data()), s.size(),
                         pieces);
             py::list out;
             for (const auto& p : pieces) out.append(py::make_tuple(p.start, p.len));
             return out;
           })
      .def("merge_reference",
           [](const Vocab& v, const py::bytes& piece) {
             std::string s = piece;
             if (s.empty()) throw py::value_error("empty piece");
             // The reference merge is O(n^2): a bound keeps a test hook from hanging.
             if (s.size() > 8192) throw py::value_error("merge_reference takes <= 8192 bytes");
             std::vector<int32_t> out;
             merge_piece_reference(v.view(), reinterpret_cast<const uint8_t*>(s.data()), s.size(),
                                   out);
             return out;
           })
      .def("merge", [](const Vocab& v, const py::bytes& piece) {
        std::string s = piece;
        if (s.empty()) throw py::value_error("empty piece");
        if (s.size() > INT32_MAX) throw py::value_error("a piece must be < 2 GiB");  // int32 links
        std::vector<int32_t> out;
        MergeScratch scratch;
        {
          py::gil_scoped_release release;
          merge_piece(v.view(), reinterpret_cast<const uint8_t*>(s.data()), s.size(), out, scratch);
        }
        return out;
      });
}

// Each stage's entry point alone: the Unicode class of a code point, UTF-8 repair and checks, the
// pretokenizer's scanners and the byte classifier.
void bind_stages(py::module_& m) {
  m.def("char_class", [](uint32_t cp) {
    if (cp > kMaxCodepoint) throw py::value_error("code point out of range");
    return int(char_class(unicode_table(), cp));
  });
  m.def("utf8_replace", [](const py::bytes& b) {
    std::string s = b;
    return py::bytes(utf8_replace_invalid(reinterpret_cast<const uint8_t*>(s.data()), s.size()));
  });
  // Bytes-like in, offset out; no copy of the buffer (the GIL is released while scanning).
  m.def("utf8_first_invalid", [](const py::object& data) {
    const ByteBuffer buf(data);
    py::gil_scoped_release release;
    return utf8_first_invalid(static_cast<const uint8_t*>(buf.view.buf), size_t(buf.view.len));
  });
  // The pretokenizer's fast scanner (use_masks) or its reference, for tests: piece lengths.
  m.def(
      "scan_pieces",
      [](const py::bytes& text, bool use_masks, size_t many) {
        const std::string s = text;
        const auto* data = reinterpret_cast<const uint8_t*>(s.data());
        if (utf8_first_invalid(data, s.size()) != s.size())
          throw py::value_error("scan_pieces needs valid UTF-8");
        py::gil_scoped_release release;
        return scan_piece_lengths(unicode_table(), data, s.size(), use_masks, many);
      },
      py::arg("text"), py::arg("use_masks") = true, py::arg("many") = 32);
  // Byte class masks of up to 64 bytes (AVX2 where the CPU has it, or the portable twin).
  m.def(
      "classify64",
      [](const py::bytes& text, bool portable) {
        const std::string s = text;
        const auto* p = reinterpret_cast<const uint8_t*>(s.data());
        const size_t n = s.size() < 64 ? s.size() : 64;
        const AsciiMasks a = portable ? classify64_portable(p, n) : classify64(p, n);
        return py::make_tuple(a.letter, a.digit, a.space, a.nonascii);
      },
      py::arg("text"), py::arg("portable") = false);
  m.def("classify_has_avx2", &classify_has_avx2);
  m.def("utf8_first_invalid_reference", [](const py::object& data) {
    const ByteBuffer buf(data);
    py::gil_scoped_release release;
    return utf8_first_invalid_reference(static_cast<const uint8_t*>(buf.view.buf),
                                        size_t(buf.view.len));
  });
}

}  // namespace gputok::bind
