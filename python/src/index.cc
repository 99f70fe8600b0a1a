// neardup.Index: a HammingIndex of fingerprints under integer ids, saved
// and loaded in the format of index_io.h, tied to the fingerprint scheme
// of the options it was made with.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <mutex>
#include <shared_mutex>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "binding.h"
#include "neardup/dedup/pair_rule.h"
#include "neardup/index/index_io.h"
#include "neardup/index/multi_index.h"

namespace neardup::python {
namespace {

using Hits = std::vector<std::pair<uint64_t, int>>;  // (id, distance)

// Lock order: the GIL is released before mu_ is taken, and never taken
// while mu_ is held, so Python threads cannot deadlock on an Index.
class Index {
 public:
  Index(const std::string& tokenizer, int cjk_ngram, const std::optional<std::string>& idf, int blocks)
      : scheme_id_(FingerprinterOf(tokenizer, cjk_ngram, idf).scheme_id()) {
    options_.blocks = blocks;
    index_ = ValueOrThrow(NewMultiIndex(options_));
  }

  static std::unique_ptr<Index> Load(const std::string& path, const std::string& tokenizer, int cjk_ngram,
                                     const std::optional<std::string>& idf, int blocks) {
    auto index = std::make_unique<Index>(tokenizer, cjk_ngram, idf, blocks);
    py::gil_scoped_release unlocked;
    index->index_ = ValueOrThrow(LoadIndex(path, index->scheme_id_, index->options_));
    return index;
  }

  void Save(const std::string& path) const {
    py::gil_scoped_release unlocked;
    std::shared_lock lock(mu_);
    ThrowIfError(SaveIndex(*index_, scheme_id_, path));
  }

  void Add(uint64_t fingerprint, uint64_t id) {
    py::gil_scoped_release unlocked;
    std::unique_lock lock(mu_);
    ThrowIfError(index_->Add(fingerprint, id));
  }

  void AddBatch(py::array_t<uint64_t, py::array::c_style | py::array::forcecast> fingerprints,
                py::array_t<uint64_t, py::array::c_style | py::array::forcecast> ids) {
    if (fingerprints.ndim() != 1 || ids.ndim() != 1 || fingerprints.size() != ids.size()) {
      throw StatusError(Status::InvalidArgument("add_batch: fingerprints and ids must be 1-d arrays of one length"));
    }
    std::vector<Entry> entries(static_cast<size_t>(ids.size()));
    for (size_t i = 0; i < entries.size(); ++i) entries[i] = Entry{fingerprints.data()[i], ids.data()[i]};
    py::gil_scoped_release unlocked;
    std::unique_lock lock(mu_);
    ThrowIfError(index_->AddBatch(entries));
  }

  bool Remove(uint64_t id) {
    py::gil_scoped_release unlocked;
    std::unique_lock lock(mu_);
    return index_->Remove(id);
  }

  uint64_t Get(uint64_t id) const {
    py::gil_scoped_release unlocked;
    std::shared_lock lock(mu_);
    return ValueOrThrow(index_->Get(id));
  }

  Hits Search(uint64_t fingerprint, int k) const {
    std::vector<Match> matches;
    {
      py::gil_scoped_release unlocked;
      std::shared_lock lock(mu_);
      ThrowIfError(index_->Search(fingerprint, k, &matches));
    }
    return ToHits(matches);
  }

  std::vector<Hits> SearchBatch(py::array_t<uint64_t, py::array::c_style | py::array::forcecast> fingerprints,
                                int k, int threads) const {
    if (fingerprints.ndim() != 1) throw StatusError(Status::InvalidArgument("search_batch: a 1-d array"));
    const std::span<const uint64_t> queries(fingerprints.data(), static_cast<size_t>(fingerprints.size()));
    const int workers = ResolveThreads(threads);
    std::vector<std::vector<Match>> matches;
    {
      py::gil_scoped_release unlocked;
      std::shared_lock lock(mu_);
      ThrowIfError(index_->SearchBatch(queries, k, &matches, workers));
    }
    std::vector<Hits> out;
    out.reserve(matches.size());
    for (const auto& m : matches) out.push_back(ToHits(m));
    return out;
  }

  size_t size() const {
    py::gil_scoped_release unlocked;
    std::shared_lock lock(mu_);
    return index_->size();
  }
  uint64_t scheme_id() const { return scheme_id_; }

 private:
  static Hits ToHits(const std::vector<Match>& matches) {
    Hits hits;
    hits.reserve(matches.size());
    for (const Match& m : matches) hits.emplace_back(m.id, m.distance);
    return hits;
  }

  uint64_t scheme_id_;
  MultiIndexOptions options_;
  std::unique_ptr<HammingIndex> index_;
  mutable std::shared_mutex mu_;
};

}  // namespace

void BindIndex(py::module_& m) {
  const int k = NearDupOptions{}.k;
  py::class_<Index>(m, "Index",
                    "Fingerprints under integer ids (uint64), searched by Hamming distance.\n"
                    "Saved files (docs/index-format.md) record the fingerprint scheme of the options the\n"
                    "Index was made with; load() refuses a file of another scheme (FailedPrecondition).\n"
                    "Searches may run from many threads at once; changes wait for them.")
      .def(py::init<const std::string&, int, const std::optional<std::string>&, int>(), py::kw_only(),
           py::arg("tokenizer") = DefaultTokenizer(), py::arg("cjk_ngram") = DefaultCjkNgram(),
           py::arg("idf") = py::none(), py::arg("blocks") = MultiIndexOptions{}.blocks,
           "An empty index for fingerprints made with these fingerprint options (blocks: tables of\n"
           "the multi-index, 2..8, 0 = the measured default).")
      .def_static("load", &Index::Load, py::arg("path"), py::kw_only(), py::arg("tokenizer") = DefaultTokenizer(),
                  py::arg("cjk_ngram") = DefaultCjkNgram(), py::arg("idf") = py::none(),
                  py::arg("blocks") = MultiIndexOptions{}.blocks,
                  "An index read from a file written by save() (or `neardup`), checksum and scheme checked.")
      .def("save", &Index::Save, py::arg("path"), "Writes the index atomically (a temporary file, fsync, rename).")
      .def("add", &Index::Add, py::arg("fingerprint"), py::arg("id"), "Adds one entry; AlreadyExists if id is present.")
      .def("add_batch", &Index::AddBatch, py::arg("fingerprints"), py::arg("ids"),
           "Adds numpy uint64 arrays of fingerprints and ids; all or nothing (AlreadyExists).")
      .def("remove", &Index::Remove, py::arg("id"), "Removes an entry; False if there was none.")
      .def("get", &Index::Get, py::arg("id"), "The fingerprint stored under id (NotFound).")
      .def("search", &Index::Search, py::arg("fingerprint"), py::arg("k") = k,
           "Every (id, distance) within Hamming distance k (0..8), nearest first, then by id.")
      .def("search_batch", &Index::SearchBatch, py::arg("fingerprints"), py::arg("k") = k, py::kw_only(),
           py::arg("threads") = 0,
           "search() for each fingerprint of a numpy uint64 array, on `threads` threads (0 = every\n"
           "core) without holding the GIL; a list of lists.")
      .def("__len__", &Index::size)
      .def_property_readonly("scheme_id", &Index::scheme_id, "The fingerprint scheme's id (docs/fingerprint.md).");
}

}  // namespace neardup::python
