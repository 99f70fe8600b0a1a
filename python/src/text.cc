// Fingerprints and the similarity: neardup.fingerprint, fingerprints,
// distance, similarity.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <vector>

#include "binding.h"
#include "neardup/dedup/pair_rule.h"
#include "neardup/text/shingles.h"
#include "neardup/util/parallel.h"

namespace neardup::python {
namespace {

uint64_t Fingerprint(const py::handle& text, const std::string& tokenizer, int cjk_ngram,
                     const std::optional<std::string>& idf) {
  const Fingerprinter fp = FingerprinterOf(tokenizer, cjk_ngram, idf);
  const std::string_view view = TextOf(text);
  py::gil_scoped_release unlocked;
  return fp.Compute(view);
}

py::array_t<uint64_t> Fingerprints(const py::handle& texts, const std::string& tokenizer, int cjk_ngram,
                                   const std::optional<std::string>& idf, int threads) {
  const Fingerprinter fp = FingerprinterOf(tokenizer, cjk_ngram, idf);
  const int workers = ResolveThreads(threads);
  const Texts t = TextsOf(texts);
  py::array_t<uint64_t> out(static_cast<py::ssize_t>(t.views.size()));
  uint64_t* dst = out.mutable_data();
  {
    py::gil_scoped_release unlocked;
    ParallelFor(t.views.size(), workers, [&](size_t begin, size_t end) {
      for (size_t i = begin; i < end; ++i) dst[i] = fp.Compute(t.views[i]);
    });
  }
  return out;
}

double Similarity(const py::handle& a, const py::handle& b, int shingle_size) {
  if (shingle_size < kMinShingleSize || shingle_size > kMaxShingleSize) {
    throw StatusError(Status::InvalidArgument("shingle_size must be in [" + std::to_string(kMinShingleSize) +
                                              ", " + std::to_string(kMaxShingleSize) + "]"));
  }
  const std::string_view va = TextOf(a), vb = TextOf(b);
  py::gil_scoped_release unlocked;
  std::vector<uint64_t> sa, sb;
  ShingleHashes(va, shingle_size, &sa);
  ShingleHashes(vb, shingle_size, &sb);
  return Jaccard(sa, sb);
}

}  // namespace

void BindText(py::module_& m) {
  m.def("fingerprint", &Fingerprint, py::arg("text"), py::kw_only(), py::arg("tokenizer") = DefaultTokenizer(),
        py::arg("cjk_ngram") = DefaultCjkNgram(), py::arg("idf") = py::none(),
        "The 64-bit simhash of one text (str or UTF-8 bytes), as `neardup fingerprint` computes it\n"
        "(docs/fingerprint.md). A text without features (empty, punctuation only) gives 0.\n"
        "tokenizer: \"mixed\" or \"icu-words\"; cjk_ngram: n of the n-grams over Han/Kana/Hangul runs;\n"
        "idf: path of an IDF table from `neardup idf build` (weights tokens by tf*idf; read per call).");
  m.def("fingerprints", &Fingerprints, py::arg("texts"), py::kw_only(), py::arg("tokenizer") = DefaultTokenizer(),
        py::arg("cjk_ngram") = DefaultCjkNgram(), py::arg("idf") = py::none(), py::arg("threads") = 0,
        "fingerprint() of every text of an iterable, as a numpy uint64 array, computed on `threads`\n"
        "threads (0 = every core) without holding the GIL.");
  m.def("distance", [](uint64_t a, uint64_t b) { return HammingDistance(a, b); }, py::arg("a"), py::arg("b"),
        "The Hamming distance (differing bits, 0..64) of two fingerprints.");
  m.def("similarity", &Similarity, py::arg("a"), py::arg("b"), py::kw_only(),
        py::arg("shingle_size") = RecheckOptions{}.shingle_size,
        "The similarity neardup decides on (text/shingles.h, docs/ACCURACY.md): the Jaccard index of\n"
        "the two texts' sets of character n-grams (n = shingle_size) after NFKC case folding and\n"
        "white-space collapsing, punctuation kept; 1.0 for two empty texts.");
}

}  // namespace neardup::python
