// NearDupSet::SliceCandidates against its oracle: a NearDupSet holding
// exactly the kept documents of the slice under their indexed anchors (the
// threaded decision's former in-order half), searched with the probed
// anchors. Random slices of texts that share most of their words, so that
// many pairs are found by an anchor only, with random kept sets, random
// stop keys (which shift the indexed anchors past the first ones) and random
// probed anchors, until a kept document's indexed anchors reach past the
// ones the slice looked at.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "neardup/dedup/dedup.h"
#include "neardup/dedup/near_dup_set.h"

namespace neardup {
namespace {

// Texts drawn from a small pool of words: near-duplicates by n-grams whose
// fingerprints are often far apart, and some exact repeats.
std::vector<std::string> Texts(std::mt19937_64& rng, size_t n) {
  const std::vector<std::string> pool = {"river", "stone", "bright", "market", "winter", "copper", "garden",
                                         "silent", "harbor", "lantern", "meadow", "orbit", "pepper", "quartz"};
  std::vector<std::string> texts;
  for (size_t i = 0; i < n; ++i) {
    if (i > 0 && rng() % 10 == 0) {
      texts.push_back(texts[rng() % i]);
      continue;
    }
    if (i > 0 && rng() % 3 == 0) {  // an edited copy
      std::string t = texts[rng() % i];
      t.insert(rng() % (t.size() + 1), pool[rng() % pool.size()] + " ");
      texts.push_back(t);
      continue;
    }
    std::string t;
    const size_t words = 4 + rng() % 10;
    for (size_t w = 0; w < words; ++w) t += pool[rng() % pool.size()] + (rng() % 7 == 0 ? ", " : " ");
    if (rng() % 40 == 0) t = "!!! ... ???";  // no features
    texts.push_back(t);
  }
  return texts;
}

// The anchors a document is indexed under when `stopped` are stop keys: the
// first `count` of its anchors that are not.
std::vector<uint32_t> FirstNotIn(const DocSignature& doc, const std::vector<uint32_t>& stopped, size_t count) {
  std::vector<uint32_t> out;
  for (uint32_t a : doc.sketch.anchors) {
    if (out.size() == count) break;
    if (std::find(stopped.begin(), stopped.end(), a) == stopped.end()) out.push_back(a);
  }
  return out;
}

struct Variant {
  const char* name;
  void (*set)(DedupOptions*);
};

// Returns how many documents had an answer.
size_t CheckAgainstOracle(const DedupOptions& options, uint64_t seed) {
  std::mt19937_64 rng(seed);
  auto dedup = Deduplicator::Create(options);
  EXPECT_TRUE(dedup.ok());
  if (!dedup.ok()) return 0;
  NearDupOptions set_options;
  set_options.k = options.k;
  set_options.exact_fast_path = options.exact_fast_path;
  set_options.recheck = options.recheck;
  auto set = NearDupSet::Create(set_options);  // empty: every anchor is live at Prepare
  EXPECT_TRUE(set.ok());
  if (!set.ok()) return 0;
  size_t found = 0;
  const size_t indexed_count = std::max(options.recheck.anchors, RecheckOptions{}.anchors);
  const bool probes = options.recheck.enabled && options.recheck.anchors > 0;
  for (int round = 0; round < 30; ++round) {
    const std::vector<std::string> texts = Texts(rng, 40 + rng() % 100);
    std::vector<DocSignature> docs;
    for (const std::string& t : texts) docs.push_back(dedup.value()->Signature(t));
    const DocId first_id = 1000 * round;
    NearDupSet::SliceCandidates slice;
    slice.Reset(*set.value(), docs.size(), first_id);
    std::vector<uint32_t> at_prepare;  // every anchor is live: checked in the test below
    for (size_t i = 0; i < docs.size(); ++i) slice.Prepare(i, docs[i], &at_prepare);
    slice.Index();
    // Stop keys made during the slice: its most common anchors, as in a
    // real run, so that indexed and probed anchors reach past the first ones.
    std::map<uint32_t, int> uses;
    for (const DocSignature& d : docs) {
      for (uint32_t a : d.sketch.anchors) ++uses[a];
    }
    std::vector<std::pair<int, uint32_t>> by_uses;
    for (auto [a, n] : uses) by_uses.emplace_back(-n, a);
    std::sort(by_uses.begin(), by_uses.end());
    std::vector<uint32_t> stopped;
    const size_t stops = 2 + rng() % 10;
    for (size_t s = 0; s < by_uses.size() && s < stops; ++s) stopped.push_back(by_uses[s].second);
    std::vector<std::vector<uint32_t>> probed(docs.size());
    for (size_t j = 0; j < docs.size(); ++j) {
      if (probes && docs[j].has_sketch()) {
        probed[j] = FirstNotIn(docs[j], rng() % 2 ? stopped : std::vector<uint32_t>{}, options.recheck.anchors);
      }
      slice.Find(j, probed[j]);
    }
    NearDupOptions oracle_options = set_options;
    oracle_options.recheck.anchor_max_postings = kMaxAnchorPostings;
    auto oracle = NearDupSet::Create(oracle_options);
    EXPECT_TRUE(oracle.ok());
    if (!oracle.ok()) return found;
    for (size_t j = 0; j < docs.size(); ++j) {
      DocSignature query = docs[j];
      query.sketch.anchors = probed[j];
      std::optional<DuplicateMatch> want;
      EXPECT_TRUE(oracle.value()->FindDuplicate(query, &want).ok());
      const std::optional<DuplicateMatch> got = slice.Best(j, probed[j]);
      EXPECT_EQ(got.has_value(), want.has_value()) << "round " << round << " doc " << j;
      if (want && got) {
        EXPECT_EQ(got->id, want->id) << "round " << round << " doc " << j;
        EXPECT_EQ(got->distance, want->distance);
        EXPECT_EQ(got->exact, want->exact);
        EXPECT_EQ(got->similarity, want->similarity);
        ++found;
      }
      if (rng() % 3 == 0) continue;  // not kept
      // Kept: indexed past the stop keys made so far (some of them).
      std::vector<uint32_t> indexed;
      if (docs[j].has_sketch() && docs[j].num_chars <= static_cast<uint32_t>(options.recheck.sketch_max_chars)) {
        indexed = FirstNotIn(docs[j], rng() % 2 ? stopped : std::vector<uint32_t>{}, indexed_count);
      }
      DocSignature kept = docs[j];
      kept.sketch.anchors = indexed;
      EXPECT_TRUE(oracle.value()->Insert(first_id + j, kept).ok());
      // Kept says whether later answers still hold: it must say no when
      // the indexed anchors reach past the ones Find looked at.
      const std::vector<uint32_t> looked = FirstNotIn(docs[j], {}, indexed_count + NearDupSet::SliceCandidates::kMarginAnchors);
      const bool covered = indexed.empty() || std::find(looked.begin(), looked.end(), indexed.back()) != looked.end();
      EXPECT_EQ(slice.Kept(j, indexed), covered) << "round " << round << " doc " << j;
      if (!covered) break;
    }
  }
  return found;
}

TEST(SliceCandidates, BestIsTheAnswerOfASetOfTheKeptDocuments) {
  const Variant variants[] = {
      {"default", [](DedupOptions*) {}},
      {"k=0 short_k=0 (anchors only)", [](DedupOptions* o) { o->k = 0, o->recheck.short_k = 0; }},
      {"anchors=3 threshold=0.4", [](DedupOptions* o) { o->recheck.anchors = 3, o->recheck.threshold = 0.4; }},
      {"sketch_max_chars=40", [](DedupOptions* o) { o->recheck.sketch_max_chars = 40; }},
      {"no exact fast path", [](DedupOptions* o) { o->exact_fast_path = false; }},
      {"re-check off", [](DedupOptions* o) { o->recheck.enabled = false; }},
  };
  uint64_t seed = 1;
  for (const Variant& v : variants) {
    SCOPED_TRACE(v.name);
    DedupOptions options;
    v.set(&options);
    size_t found = 0;
    for (int s = 0; s < 3; ++s) found += CheckAgainstOracle(options, seed++);
    EXPECT_GT(found, 200u);
  }
}

// Prepare takes the probed anchors from the record it builds, which holds
// the first live ones: they must be ProbedAnchors' answer on a set that has
// stop keys, for documents with and without a kept sketch.
TEST(SliceCandidates, PrepareGivesTheProbedAnchors) {
  const Variant variants[] = {
      {"default", [](DedupOptions*) {}},
      {"anchors=3", [](DedupOptions* o) { o->recheck.anchors = 3; }},
      {"anchors=0", [](DedupOptions* o) { o->recheck.anchors = 0; }},
      {"sketch_max_chars=40", [](DedupOptions* o) { o->recheck.sketch_max_chars = 40; }},
      {"re-check off", [](DedupOptions* o) { o->recheck.enabled = false; }},
  };
  for (const Variant& v : variants) {
    SCOPED_TRACE(v.name);
    DedupOptions options;
    v.set(&options);
    options.recheck.anchor_max_postings = 3;  // many stop keys
    auto dedup = Deduplicator::Create(options);
    ASSERT_TRUE(dedup.ok());
    NearDupOptions set_options;
    set_options.recheck = options.recheck;
    auto set = NearDupSet::Create(set_options);
    ASSERT_TRUE(set.ok());
    std::mt19937_64 rng(7);
    DocId id = 0;
    for (const std::string& t : Texts(rng, 400)) ASSERT_TRUE(set.value()->Insert(id++, dedup.value()->Signature(t)).ok());
    ASSERT_GT(set.value()->stop_keys_made(), 10u);
    std::vector<DocSignature> docs;
    for (const std::string& t : Texts(rng, 200)) docs.push_back(dedup.value()->Signature(t));
    NearDupSet::SliceCandidates slice;
    slice.Reset(*set.value(), docs.size(), id);
    size_t stopped_some = 0;
    for (size_t i = 0; i < docs.size(); ++i) {
      std::vector<uint32_t> got{12345};  // replaced, not appended to
      std::vector<uint32_t> want;
      slice.Prepare(i, docs[i], &got);
      set.value()->ProbedAnchors(docs[i], &want);
      EXPECT_EQ(got, want) << "doc " << i;
      stopped_some += want != FirstNotIn(docs[i], {}, want.size());
    }
    if (options.recheck.enabled && options.recheck.anchors > 0) {
      EXPECT_GT(stopped_some, 10u);
    }
  }
}

}  // namespace
}  // namespace neardup
