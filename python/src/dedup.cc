// neardup.Deduplicator: the kept documents of one stream under string ids,
// decided by NearDupSet (near_dup_set.h), the rule `neardup dedup` and the
// service's namespaces decide by. check/query/insert answer like the
// service's routes of those names (docs/http-api.md, "The answer to a
// document"), minus timestamps and retention.
//
// Settings are keyword arguments named after the `neardup dedup` flags (k,
// tokenizer, cjk_ngram, and RecheckSettingTable() with '-' read as '_'),
// checked by that table: defaults and ranges are stated there only.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "binding.h"
#include "neardup/dedup/near_dup_set.h"
#include "neardup/dedup/setting.h"
#include "neardup/util/parallel.h"

namespace neardup::python {
namespace {

struct MatchAnswer {
  std::string id;
  int distance = 0;
  double similarity = 0;
  bool similarity_exact = false;
  bool exact = false;
};

struct Answer {
  std::string id;
  bool duplicate = false;
  bool stored = false;
  bool replay = false;
  std::vector<MatchAnswer> matches;  // best first
  uint64_t fingerprint = 0;
  bool has_features = false;
};

enum class Mode { kCheck, kQuery, kInsert };

std::string KeywordOf(const SettingSpec& spec) {
  std::string k = spec.flag;
  std::replace(k.begin(), k.end(), '-', '_');
  return k;
}

// The Python value as the setting's alternative of SettingValue; a value of
// another type becomes a wrong alternative, which CheckSettingValue words.
SettingValue SettingValueOf(const SettingSpec& spec, const py::handle& v) {
  const bool is_bool = py::isinstance<py::bool_>(v);
  const bool is_int = py::isinstance<py::int_>(v) && !is_bool;
  switch (spec.type) {
    case SettingType::kBool:
      if (is_bool) return v.cast<bool>();
      break;
    case SettingType::kInt:
    case SettingType::kDuration:
      if (is_int) return v.cast<int64_t>();
      break;
    case SettingType::kDouble:
      if (is_int || py::isinstance<py::float_>(v)) return v.cast<double>();
      break;
    case SettingType::kChoice:
      if (py::isinstance<py::str>(v)) return v.cast<std::string>();
      return false;
  }
  return std::string();
}

RecheckOptions RecheckOf(const py::kwargs& kwargs) {
  RecheckOptions r;
  const auto table = RecheckSettingTable();
  for (const auto& [key, value] : kwargs) {
    const std::string name = key.cast<std::string>();
    const auto it = std::find_if(table.begin(), table.end(), [&](const auto& d) { return KeywordOf(d) == name; });
    if (it == table.end()) throw StatusError(Status::InvalidArgument("unknown setting \"" + name + "\""));
    const SettingValue v = SettingValueOf(*it, value);
    ThrowIfError(CheckSettingValue(*it, v));
    it->set(r, v);
  }
  return r;
}

std::string IdOf(const py::handle& id) {
  if (py::isinstance<py::str>(id)) return id.cast<std::string>();
  // As the service does: an integer id (also a numpy integer) is its decimal string.
  if (PyIndex_Check(id.ptr()) && !py::isinstance<py::bool_>(id)) return std::string(py::str(py::int_(py::reinterpret_borrow<py::object>(id))));
  throw StatusError(Status::InvalidArgument("an id must be str or int"));
}

std::vector<std::string> IdsOf(const py::handle& ids) {
  std::vector<std::string> out;
  for (const py::handle id : ids) out.push_back(IdOf(id));
  return out;
}

class Dedup {
 public:
  Dedup(int k, const std::string& tokenizer, int cjk_ngram, const std::optional<std::string>& idf, int threads,
        const py::kwargs& recheck)
      : fingerprinter_(FingerprinterOf(tokenizer, cjk_ngram, idf)),
        threads_(ResolveThreads(threads)) {
    NearDupOptions o;
    o.k = k;
    o.recheck = RecheckOf(recheck);
    set_ = ValueOrThrow(NearDupSet::Create(o));
    tokenizer_ = tokenizer;
    cjk_ngram_ = cjk_ngram;
    idf_ = idf;
  }

  // all_matches = false lists the best match only: a document with an
  // exact copy kept then skips the fingerprint and anchor searches, as the
  // CLI does.
  std::vector<Answer> Process(Mode mode, std::vector<std::string> ids, const Texts& texts, bool all_matches) {
    if (ids.size() != texts.views.size()) {
      throw StatusError(Status::InvalidArgument("ids and texts differ in length"));
    }
    py::gil_scoped_release unlocked;
    std::vector<DocSignature> sigs = Signatures(texts.views);
    std::vector<Answer> out(sigs.size());
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = 0; i < sigs.size(); ++i) out[i] = Decide(mode, std::move(ids[i]), sigs[i], all_matches);
    return out;
  }

  // Lock order: the GIL is released before mu_ is taken and never taken
  // while mu_ is held, so threads cannot deadlock on a Deduplicator.
  void Remove(const std::string& id) {
    py::gil_scoped_release unlocked;
    std::lock_guard<std::mutex> lock(mu_);
    const auto it = ids_.find(id);
    if (it == ids_.end()) throw StatusError(Status::NotFound("no document \"" + id + "\""));
    Kept& kept = kept_[it->second];
    set_->Remove(it->second, kept.Signature());
    kept.id = std::string();
    ids_.erase(it);
  }

  size_t size() const {
    py::gil_scoped_release unlocked;
    std::lock_guard<std::mutex> lock(mu_);
    return ids_.size();
  }
  bool Contains(const std::string& id) const {
    py::gil_scoped_release unlocked;
    std::lock_guard<std::mutex> lock(mu_);
    return ids_.count(id) != 0;
  }

  // Every setting by its keyword, as the Deduplicator was made.
  py::dict Settings() const {
    py::dict d;
    d["k"] = set_->options().k;
    d["tokenizer"] = tokenizer_;
    d["cjk_ngram"] = cjk_ngram_;
    d["idf"] = idf_;
    d["threads"] = threads_;
    for (const auto& s : RecheckSettingTable()) {
      std::visit([&](const auto& v) { d[KeywordOf(s).c_str()] = v; }, s.get(set_->options().recheck));
    }
    return d;
  }

 private:
  std::vector<DocSignature> Signatures(const std::vector<std::string_view>& texts) const {
    std::vector<DocSignature> sigs(texts.size());
    const int shingle_size = set_->options().recheck.shingle_size;
    ParallelFor(texts.size(), threads_, [&](size_t begin, size_t end) {
      TextAnalysis analysis;  // reused across the chunk
      for (size_t i = begin; i < end; ++i) {
        fingerprinter_.Analyze(texts[i], &analysis);
        sigs[i] = MakeSignature(analysis, texts[i], shingle_size);
      }
    });
    return sigs;
  }

  Answer Decide(Mode mode, std::string id, const DocSignature& sig, bool all_matches) {
    Answer a;
    a.fingerprint = sig.fingerprint;
    a.has_features = sig.has_features;
    if (const auto it = ids_.find(id); mode != Mode::kQuery && it != ids_.end()) {
      // A stored id is not decided again: nothing changes (the service's replay).
      const Kept& stored = kept_[it->second];
      a.fingerprint = stored.fingerprint;
      a.has_features = stored.has_features;
      a.stored = a.replay = true;
      a.id = std::move(id);
      return a;
    }
    std::optional<DuplicateMatch> best;
    std::vector<DuplicateMatch> all;
    ThrowIfError(set_->FindDuplicate(sig, &best, all_matches ? &all : nullptr));
    a.duplicate = best.has_value();
    if (!all_matches && best) all.push_back(*best);
    for (const DuplicateMatch& m : all) {
      a.matches.push_back(
          MatchAnswer{kept_[m.id].id, m.distance, m.similarity, SimilarityIsExact(m), m.exact});
    }
    if (mode == Mode::kInsert || (mode == Mode::kCheck && !a.duplicate)) {
      const DocId internal = kept_.size();
      ThrowIfError(set_->Insert(internal, sig));
      kept_.push_back(Kept{id, sig.content_hash, sig.fingerprint, sig.has_features});
      ids_.emplace(id, internal);
      a.stored = true;
    }
    a.id = std::move(id);
    return a;
  }

  const Fingerprinter fingerprinter_;
  const int threads_;
  std::string tokenizer_;
  int cjk_ngram_ = 0;
  std::optional<std::string> idf_;
  mutable std::mutex mu_;  // the kept documents below; taken without the GIL
  std::unique_ptr<NearDupSet> set_;
  std::unordered_map<std::string, DocId> ids_;
  // Kept documents by internal id (their insertion order; a removed one
  // stays with an empty id): the id, and what NearDupSet::Remove needs.
  struct Kept {
    std::string id;
    uint64_t content_hash = 0;
    uint64_t fingerprint = 0;
    bool has_features = false;
    DocSignature Signature() const { return DocSignature{content_hash, fingerprint, has_features, 0, {}}; }
  };
  std::vector<Kept> kept_;
};

std::string SettingsDoc() {
  std::string doc =
      "The streaming first-wins decision of `neardup dedup` and of the service's namespaces\n"
      "(NearDupSet, docs/ACCURACY.md) over documents with string ids (an int id is its decimal\n"
      "string). Thread-safe: batches analyse on every core without the GIL, then decide in order.\n\n"
      "Keyword arguments, as the flags of `neardup dedup` (defaults as there):\n"
      "  k: largest Hamming distance of a near-duplicate between long texts (0..8)\n"
      "  tokenizer: \"mixed\" or \"icu-words\"; cjk_ngram: n-grams over Han/Kana/Hangul runs\n"
      "  idf: path of an IDF table from `neardup idf build` (--idf)\n"
      "  threads: threads of a batch (0 = every core)\n";
  const RecheckOptions defaults;
  for (const auto& s : RecheckSettingTable()) {
    doc += "  " + KeywordOf(s) + " (default " + SettingValueText(s.get(defaults)) + "): " + s.doc + "\n";
  }
  return doc;
}

// One binding per mode, single and batch.
template <Mode mode>
Answer One(Dedup& d, const py::handle& id, const py::handle& text) {
  py::list texts;
  texts.append(text);
  return std::move(d.Process(mode, {IdOf(id)}, TextsOf(texts), /*all_matches=*/true).front());
}
template <Mode mode>
std::vector<Answer> Many(Dedup& d, const py::handle& ids, const py::handle& texts, bool all_matches) {
  const Texts t = TextsOf(texts);
  return d.Process(mode, IdsOf(ids), t, all_matches);
}

}  // namespace

void BindDedup(py::module_& m) {
  py::class_<MatchAnswer>(m, "Match", "A kept document a text matches.")
      .def_readonly("id", &MatchAnswer::id)
      .def_readonly("distance", &MatchAnswer::distance, "Hamming distance of the fingerprints")
      .def_readonly("similarity", &MatchAnswer::similarity,
                    "the similarity the decision was made on (neardup.similarity, estimated for long texts)")
      .def_readonly("similarity_exact", &MatchAnswer::similarity_exact, "similarity came from whole n-gram sets")
      .def_readonly("exact", &MatchAnswer::exact, "the normalized texts are identical")
      .def("__repr__", [](const MatchAnswer& a) {
        return "Match(id=" + std::string(py::repr(py::str(a.id))) + ", distance=" + std::to_string(a.distance) +
               ", similarity=" + std::string(py::repr(py::float_(a.similarity))) + ")";
      });
  py::class_<Answer>(m, "Result", "The answer for one document (as the service's answer to a document).")
      .def_readonly("id", &Answer::id)
      .def_readonly("duplicate", &Answer::duplicate, "some kept document matches it")
      .def_readonly("stored", &Answer::stored, "it is kept now, or was already (replay)")
      .def_readonly("replay", &Answer::replay, "its id was already kept: nothing changed, no matches")
      .def_readonly("matches", &Answer::matches, "matching kept documents, best first")
      .def_readonly("fingerprint", &Answer::fingerprint)
      .def_readonly("has_features", &Answer::has_features)
      .def_property_readonly(
          "duplicate_of", [](const Answer& a) { return a.matches.empty() ? py::none() : py::cast(a.matches[0].id); },
          "the best match's id, or None")
      .def_property_readonly(
          "similarity",
          [](const Answer& a) { return a.matches.empty() ? py::none() : py::cast(a.matches[0].similarity); },
          "the best match's similarity, or None")
      .def("__repr__", [](const Answer& a) {
        return "Result(id=" + std::string(py::repr(py::str(a.id))) + ", duplicate=" + (a.duplicate ? "True" : "False") +
               ", stored=" + (a.stored ? "True" : "False") + ", matches=" + std::string(py::repr(py::cast(a.matches))) +
               ")";
      });

  const NearDupOptions defaults;
  const std::string doc = SettingsDoc();
  py::class_<Dedup>(m, "Deduplicator", doc.c_str())
      .def(py::init<int, const std::string&, int, const std::optional<std::string>&, int, const py::kwargs&>(),
           py::kw_only(), py::arg("k") = defaults.k, py::arg("tokenizer") = DefaultTokenizer(),
           py::arg("cjk_ngram") = DefaultCjkNgram(), py::arg("idf") = py::none(), py::arg("threads") = 0)
      .def("check", &One<Mode::kCheck>, py::arg("id"), py::arg("text"),
           "Keeps the text unless it duplicates a kept one; the Result says which. A kept id is a replay.")
      .def("insert", &One<Mode::kInsert>, py::arg("id"), py::arg("text"),
           "Keeps the text even if it duplicates (the matches are still reported).")
      .def("query",
           [](Dedup& d, const py::handle& text, const py::handle& id) { return One<Mode::kQuery>(d, id, text); },
           py::arg("text"), py::arg("id") = "", "The Result check() would give, keeping nothing.")
      .def("check_batch", &Many<Mode::kCheck>, py::arg("ids"), py::arg("texts"), py::kw_only(),
           py::arg("all_matches") = true,
           "check() of each (id, text) in order; analysed in parallel without the GIL. all_matches=False\n"
           "lists only the best match (faster when exact copies are kept).")
      .def("insert_batch", &Many<Mode::kInsert>, py::arg("ids"), py::arg("texts"), py::kw_only(),
           py::arg("all_matches") = true, "insert() of each, in order.")
      .def("query_batch", &Many<Mode::kQuery>, py::arg("ids"), py::arg("texts"), py::kw_only(),
           py::arg("all_matches") = true, "query() of each.")
      .def("remove", [](Dedup& d, const py::handle& id) { d.Remove(IdOf(id)); }, py::arg("id"), "Forgets a kept document (NotFound if it is not kept).")
      .def("__len__", &Dedup::size, "Kept documents.")
      .def("__contains__", [](const Dedup& d, const py::handle& id) { return d.Contains(IdOf(id)); })
      .def_property_readonly("settings", &Dedup::Settings, "Every setting by its keyword.");
}

}  // namespace neardup::python
