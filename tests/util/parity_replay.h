// Sequential parity with the embedded store: the same stream of documents
// replayed through a reference engine (testing::OpenReferenceEngine) and a
// shared-store engine (Redis Cluster, PostgreSQL) must get the same answers:
// stored, duplicate, matched ids, distances, similarities. Used by
// redis_parity_test.cc and pg_engine_test.cc.
#ifndef NEARDUP_TESTS_PARITY_REPLAY_H_
#define NEARDUP_TESTS_PARITY_REPLAY_H_

#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "neardup/engine/engine.h"
#include "util/variant_texts.h"

namespace neardup::testing {

struct ParityDoc {
  std::string id, text;
};

// One sequential set: `variants` edited copies of a natural text (the first
// unedited) with `negatives` templated texts at random places.
inline std::vector<ParityDoc> SequentialSet(std::mt19937_64& rng, bool chinese, size_t variants, size_t negatives) {
  static const std::vector<std::string> zh = NaturalTexts("zh-short", 30, 150);
  static const std::vector<std::string> en = NaturalTexts("en-long", 400, 1500);
  const std::vector<std::string>& pool = chinese ? zh : en;
  std::vector<ParityDoc> docs;
  if (pool.empty()) return docs;
  const std::string base = pool[rng() % pool.size()];
  for (size_t i = 0; i < variants; ++i) {
    const int edits = i == 0 ? 0 : 1 + static_cast<int>(rng() % (chinese ? 3 : 6));
    docs.push_back({"v" + std::to_string(i), EditedVariant(base, rng, edits)});
  }
  const std::vector<std::string> neg = TemplatedTexts(rng, negatives, chinese);
  for (size_t i = 0; i < neg.size(); ++i) {
    const size_t at = 1 + rng() % docs.size();
    docs.insert(docs.begin() + static_cast<std::ptrdiff_t>(at), ParityDoc{"t" + std::to_string(i), neg[i]});
  }
  return docs;
}

// Differences between two answers to the same document ("" if none).
inline std::string AnswerDiff(const CheckOutcome& l, const CheckOutcome& r) {
  std::string d;
  if (l.stored != r.stored) d += " stored " + std::to_string(l.stored) + "/" + std::to_string(r.stored);
  if (l.duplicate != r.duplicate) d += " duplicate " + std::to_string(l.duplicate) + "/" + std::to_string(r.duplicate);
  if (l.matches.size() != r.matches.size()) {
    d += " matches " + std::to_string(l.matches.size()) + "/" + std::to_string(r.matches.size());
    return d;
  }
  for (size_t i = 0; i < l.matches.size(); ++i) {
    const MatchedDocument &a = l.matches[i], &b = r.matches[i];
    if (a.id != b.id || a.distance != b.distance || a.exact != b.exact || a.similarity != b.similarity ||
        a.similarity_exact != b.similarity_exact) {
      auto show = [](const MatchedDocument& m) {
        char buf[160];
        std::snprintf(buf, sizeof buf, "%s@%.17g d%d%s%s", m.id.c_str(), m.similarity, m.distance,
                      m.exact ? " exact" : "", m.similarity_exact ? " sim_exact" : "");
        return std::string(buf);
      };
      d += " match " + std::to_string(i) + " " + show(a) + " / " + show(b);
    }
  }
  return d;
}

struct ParityResult {
  int docs = 0, mismatches = 0, kept_reference = 0, kept_other = 0;
  std::string first;  // the first difference
};

// Every document checked (check-and-insert) by `reference`, then by `other`.
inline ParityResult ReplayBoth(Engine* reference, Engine* other, const std::string& ns,
                               const std::vector<ParityDoc>& docs) {
  ParityResult s;
  for (const ParityDoc& d : docs) {
    auto l = reference->Check(ns, {d.id, d.text, std::nullopt}, CheckMode::kCheckAndInsert);
    auto r = other->Check(ns, {d.id, d.text, std::nullopt}, CheckMode::kCheckAndInsert);
    ++s.docs;
    if (!l.ok() || !r.ok()) {
      ++s.mismatches;
      if (s.first.empty()) s.first = d.id + ": " + l.status().ToString() + " / " + r.status().ToString();
      continue;
    }
    s.kept_reference += l->stored;
    s.kept_other += r->stored;
    const std::string diff = AnswerDiff(*l, *r);
    if (!diff.empty()) {
      ++s.mismatches;
      if (s.first.empty()) s.first = d.id + ":" + diff;
    }
  }
  return s;
}

}  // namespace neardup::testing

#endif  // NEARDUP_TESTS_PARITY_REPLAY_H_
