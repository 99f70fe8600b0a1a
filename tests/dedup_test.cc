// The batch deduplicator (include/neardup/dedup.h).
#include "neardup/dedup/dedup.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "io/jsonl.h"
#include "util/rule_variants.h"
#include "util/sample_texts.h"
#include "util/sanitized.h"

namespace neardup {
namespace {

std::unique_ptr<Deduplicator> MakeDedup(int k = 3, bool exact_fast_path = true, bool recheck = true) {
  DedupOptions options;
  options.k = k;
  options.exact_fast_path = exact_fast_path;
  options.recheck.enabled = recheck;
  auto d = Deduplicator::Create(options);
  EXPECT_TRUE(d.ok()) << d.status().ToString();
  return std::move(d).value();
}

std::vector<DedupDecision> DecideTexts(Deduplicator& d, const std::vector<std::string>& texts, int threads = 1) {
  std::vector<std::string_view> views(texts.begin(), texts.end());
  std::vector<DedupDecision> out;
  Status st = d.ProcessBatch(views, &out, threads);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return out;
}

DocSignature Sig(uint64_t content_hash, uint64_t fingerprint) {
  return DocSignature{content_hash, fingerprint, true};
}

// A mask with the lowest n bits set.
uint64_t Bits(int n) { return n >= 64 ? ~uint64_t{0} : (uint64_t{1} << n) - 1; }

TEST(Dedup, RejectsBadK) {
  DedupOptions options;
  options.k = -1;
  EXPECT_EQ(Deduplicator::Create(options).status().code(), Status::Code::kInvalidArgument);
  options.k = kMaxSupportedK + 1;
  EXPECT_EQ(Deduplicator::Create(options).status().code(), Status::Code::kInvalidArgument);
  options.k = kMaxSupportedK;
  EXPECT_TRUE(Deduplicator::Create(options).ok());
}

TEST(Dedup, ExactRepeatsPointAtTheFirst) {
  auto d = MakeDedup();
  const std::string a = "The quick brown fox jumps over the lazy dog near the river bank.";
  const std::string b = "Completely unrelated sentence about databases and indexing strategies.";
  auto out = DecideTexts(*d, {a, b, a, a, b});
  ASSERT_EQ(out.size(), 5u);
  EXPECT_FALSE(out[0].duplicate);
  EXPECT_FALSE(out[1].duplicate);
  for (int i : {2, 3}) {
    EXPECT_TRUE(out[i].duplicate);
    EXPECT_EQ(out[i].duplicate_of, 0u);
    EXPECT_EQ(out[i].distance, 0);
    EXPECT_TRUE(out[i].exact);
    EXPECT_TRUE(out[i].has_features);
  }
  EXPECT_TRUE(out[4].duplicate);
  EXPECT_EQ(out[4].duplicate_of, 1u);
  EXPECT_TRUE(out[4].exact);
  EXPECT_EQ(d->stats().documents, 5u);
  EXPECT_EQ(d->stats().kept, 2u);
  EXPECT_EQ(d->stats().exact_duplicates, 3u);
  EXPECT_EQ(d->stats().near_duplicates, 0u);
  EXPECT_EQ(d->index().size(), 2u);
}

// A long English text (> 200 characters) for edit experiments.
const char* const kLongText =
    "It is a truth universally acknowledged, that a single man in possession of a good fortune, "
    "must be in want of a wife. However little known the feelings or views of such a man may be "
    "on his first entering a neighbourhood, this truth is so well fixed in the minds of the "
    "surrounding families, that he is considered as the rightful property of some one or other "
    "of their daughters.";

std::string Edit(std::string s, const std::string& from, const std::string& to) {
  s.replace(s.find(from), from.size(), to);
  return s;
}

// The plain rule (re-check off): long texts are near-duplicates exactly when
// their fingerprints are within k.
TEST(Dedup, NearDuplicatesFollowTheFingerprintDistance) {
  const std::string base = kLongText;
  auto edit = [&](const std::string& from, const std::string& to) { return Edit(base, from, to); };
  const std::vector<std::string> edits = {
      edit("rightful", "lawful"), edit("good ", ""), edit("wife", "very rich wife"),
      edit("daughters", "sons"), "RT: " + base, edit("first", "frist"),
      "Completely different: the cat sat on the mat and watched the birds outside all day.",
  };
  int near = 0, kept = 0;
  for (const auto& edited : edits) {
    auto d = MakeDedup(3, true, /*recheck=*/false);
    const int dist = HammingDistance(d->fingerprinter().Compute(base), d->fingerprinter().Compute(edited));
    auto out = DecideTexts(*d, {base, edited});
    EXPECT_FALSE(out[0].duplicate);
    EXPECT_FALSE(out[1].exact);
    if (dist <= 3) {
      ++near;
      EXPECT_TRUE(out[1].duplicate) << edited;
      EXPECT_EQ(out[1].duplicate_of, 0u);
      EXPECT_EQ(out[1].distance, dist);
      EXPECT_EQ(d->stats().near_duplicates, 1u);
    } else {
      ++kept;
      EXPECT_FALSE(out[1].duplicate) << edited;
    }
  }
  EXPECT_GE(near, 3) << "small edits of a long text should mostly stay within k = 3";
  EXPECT_GE(kept, 1) << "an unrelated text must not match";
}

// The default rule (re-check on): every small edit of a long text is a
// near-duplicate, whatever its fingerprint distance, because anchors and the
// shingle re-check find what simhash at k = 3 misses; an unrelated text is not.
TEST(Dedup, RecheckCatchesSmallEditsBeyondK) {
  const std::string base = kLongText;
  auto edit = [&](const std::string& from, const std::string& to) { return Edit(base, from, to); };
  for (const auto& edited : {edit("rightful", "lawful"), edit("daughters", "sons"), "RT: " + base,
                             edit("first", "frist"), edit("good ", "")}) {
    auto d = MakeDedup();
    auto out = DecideTexts(*d, {base, edited});
    EXPECT_TRUE(out[1].duplicate) << edited;
    EXPECT_EQ(out[1].duplicate_of, 0u);
    EXPECT_GE(out[1].similarity, 0.5);
    EXPECT_FALSE(out[1].exact);
  }
  auto d = MakeDedup();
  auto out = DecideTexts(*d, {base, "Completely different: the cat sat on the mat and watched the birds outside."});
  EXPECT_FALSE(out[1].duplicate);
}

TEST(Dedup, NormalizationOnlyChangesAreExact) {
  // Case/whitespace differences normalize away: same content_hash.
  auto d = MakeDedup();
  auto out = DecideTexts(*d, {"Hello   World, this is neardup", "hello world, this is neardup"});
  EXPECT_TRUE(out[1].duplicate);
  EXPECT_EQ(out[1].distance, 0);
  EXPECT_TRUE(out[1].exact);
}

// Regression: equal normalized text of long texts (more than kSketchSize
// distinct n-grams) was reported with similarity_exact, though estimated.
TEST(Dedup, EqualTextOfLongTextsReportsAnEstimate) {
  auto d = MakeDedup();
  std::string text;
  for (int i = 0; i < 200; ++i) text += "word" + std::to_string(i * 7919 % 1000) + " ";
  auto out = DecideTexts(*d, {text, text + "!!", "short text here", "short text here!"});
  ASSERT_TRUE(out[1].duplicate);
  EXPECT_TRUE(out[1].exact);
  EXPECT_FALSE(out[1].similarity_exact);
  ASSERT_TRUE(out[3].duplicate);  // short: both sets whole
  EXPECT_TRUE(out[3].similarity_exact);
}

TEST(Dedup, DistanceExactlyKIsADuplicateAndKPlusOneIsNot) {
  for (int k : {0, 1, 3, 5, 8}) {
    auto d = MakeDedup(k);
    const uint64_t base = 0x0123456789abcdefULL;
    ASSERT_FALSE(d->ProcessSignature(Sig(1, base)).value().duplicate);
    // k + 1 bits away: kept.
    auto far = d->ProcessSignature(Sig(2, base ^ (Bits(k + 1) << 20))).value();
    EXPECT_FALSE(far.duplicate) << "k=" << k;
    // exactly k bits away (from base; the other kept doc is further): duplicate.
    auto at_k = d->ProcessSignature(Sig(3, base ^ (Bits(k) << 40))).value();
    EXPECT_TRUE(at_k.duplicate) << "k=" << k;
    EXPECT_EQ(at_k.duplicate_of, 0u);
    EXPECT_EQ(at_k.distance, k);
    EXPECT_EQ(at_k.exact, false);
    EXPECT_EQ(d->next_sequence(), 3u);
  }
}

TEST(Dedup, NearestKeptWinsThenSmallestSequence) {
  auto d = MakeDedup(3);
  const uint64_t q = 0xfedcba9876543210ULL;
  // Kept documents pairwise more than k = 3 apart.
  EXPECT_FALSE(d->ProcessSignature(Sig(10, q ^ 0b111)).value().duplicate);             // seq 0, dist 3
  EXPECT_FALSE(d->ProcessSignature(Sig(11, q ^ (0b11ULL << 30))).value().duplicate);    // seq 1, dist 2
  EXPECT_FALSE(d->ProcessSignature(Sig(12, q ^ (0b11ULL << 50))).value().duplicate);    // seq 2, dist 2
  auto dec = d->ProcessSignature(Sig(13, q)).value();
  EXPECT_TRUE(dec.duplicate);
  EXPECT_EQ(dec.distance, 2);
  EXPECT_EQ(dec.duplicate_of, 1u);  // nearest, then smallest sequence number
  // Duplicates are never added to the index: no chains.
  EXPECT_EQ(d->index().size(), 3u);
  auto chained = d->ProcessSignature(Sig(14, q ^ (0b1ULL << 10))).value();
  EXPECT_TRUE(chained.duplicate);
  EXPECT_NE(chained.duplicate_of, 3u);
}

TEST(Dedup, ExactFastPathMakesNoDifferenceToDecisions) {
  std::vector<std::vector<DedupDecision>> results;
  for (bool fast : {true, false}) {
    auto d = MakeDedup(3, fast);
    results.push_back(DecideTexts(*d, {"alpha beta gamma delta", "unrelated words entirely", "alpha beta gamma delta",
                               "", "...", "", "alpha beta gamma delta"}));
  }
  EXPECT_EQ(results[0], results[1]);
  EXPECT_TRUE(results[1][2].exact);
  EXPECT_EQ(results[1][2].duplicate_of, 0u);
}

// Regression (issue 17, adversarial test): an empty text had no sketch, so
// every later text of empty normalized form ("!!!", emoji, rules of dashes)
// matched it by fingerprint distance, as an exact duplicate of similarity 1.
TEST(Dedup, AnEmptyTextIsNotTheDuplicateOfPunctuation) {
  for (int threads : {1, 2}) {
    auto d = MakeDedup();
    const auto out = DecideTexts(*d, {"", "!!!", "???", "\xF0\x9F\x98\x80\xF0\x9F\x98\x80 \xF0\x9F\x8E\x89", "|---|---|---|", "", " \t "},
                                 threads);
    for (size_t i = 1; i <= 4; ++i) EXPECT_FALSE(out[i].duplicate) << i << " threads " << threads;
    for (size_t i : {5, 6}) {
      EXPECT_TRUE(out[i].duplicate) << i;
      EXPECT_EQ(out[i].duplicate_of, 0u);
      EXPECT_DOUBLE_EQ(out[i].similarity, 1.0);
    }
  }
  // In the other order too: "" after "!!!" is not its duplicate.
  auto d = MakeDedup();
  EXPECT_FALSE(DecideTexts(*d, {"!!!", ""})[1].duplicate);
}

TEST(Dedup, TextsWithoutFeaturesOnlyMatchByContent) {
  auto d = MakeDedup(8);
  auto out = DecideTexts(*d, {"", "real text with words", "", "   ", "!!!", "!!!", ""});
  // "" is kept first; later "" are exact duplicates of it.
  EXPECT_FALSE(out[0].duplicate);
  EXPECT_FALSE(out[0].has_features);
  EXPECT_TRUE(out[1].has_features);
  EXPECT_FALSE(out[1].duplicate);
  EXPECT_TRUE(out[2].duplicate);
  EXPECT_EQ(out[2].duplicate_of, 0u);
  EXPECT_TRUE(out[2].exact);
  EXPECT_TRUE(out[6].duplicate);
  EXPECT_EQ(out[6].duplicate_of, 0u);
  // "!!!" repeats collapse onto the first "!!!" (its normalized text may or
  // may not equal ""'s; either way it matches only by content).
  EXPECT_TRUE(out[5].duplicate);
  EXPECT_TRUE(out[5].exact);
  EXPECT_EQ(out[5].distance, 0);
  for (const auto& dec : out) {
    if (dec.duplicate) {
      EXPECT_TRUE(dec.exact);  // never matched by fingerprint
    }
  }
  // Featureless documents are not in the index.
  EXPECT_EQ(d->index().size(), 1u);

  // At the signature level: a featureless doc never matches an equal fingerprint.
  auto e = MakeDedup(8);
  ASSERT_FALSE(e->ProcessSignature(Sig(1, 0)).value().duplicate);
  auto none = e->ProcessSignature(DocSignature{2, 0, false}).value();
  EXPECT_FALSE(none.duplicate);
  auto featured = e->ProcessSignature(Sig(3, 0)).value();
  EXPECT_TRUE(featured.duplicate);
  EXPECT_EQ(featured.duplicate_of, 0u);  // not the featureless seq 1
  auto same_content = e->ProcessSignature(DocSignature{2, 12345, false}).value();
  EXPECT_TRUE(same_content.duplicate);
  EXPECT_EQ(same_content.duplicate_of, 1u);
  EXPECT_TRUE(same_content.exact);
}

TEST(Dedup, FirstWinsInInputOrderAcrossBatches) {
  const std::vector<std::string> texts = {
      "first version of the announcement about the meeting on tuesday afternoon in room twelve",
      "other text about gardening tomatoes and peppers in the spring season with compost",
      "first version of the announcement about the meeting on tuesday afternoon in room twelve",
      "other text about gardening tomatoes and peppers in the spring season with compost",
  };
  auto one = MakeDedup();
  auto all = DecideTexts(*one, texts);
  // The same texts fed one per batch give the same decisions.
  auto split = MakeDedup();
  std::vector<DedupDecision> pieces;
  for (const auto& t : texts) pieces.push_back(DecideTexts(*split, {t})[0]);
  EXPECT_EQ(all, pieces);
  EXPECT_EQ(all[2].duplicate_of, 0u);
  EXPECT_EQ(all[3].duplicate_of, 1u);
  // Reversed order: the other copy wins.
  auto rev = MakeDedup();
  auto r = DecideTexts(*rev, {texts[2], texts[0]});
  EXPECT_FALSE(r[0].duplicate);
  EXPECT_EQ(r[1].duplicate_of, 0u);
}

using testing::SampleTexts;

TEST(Dedup, DeterministicAcrossThreadCountsAndBatchSizes) {
  const auto texts = SampleTexts();
  ASSERT_GT(texts.size(), 1000u);
  std::vector<std::string_view> views(texts.begin(), texts.end());
  std::vector<DedupDecision> reference;
  DedupStats reference_stats;
  for (int threads : {1, 2, 4}) {
    for (size_t batch : {size_t{100000}, size_t{333}}) {
      auto d = MakeDedup();
      std::vector<DedupDecision> all, part;
      for (size_t i = 0; i < views.size(); i += batch) {
        const size_t n = std::min(batch, views.size() - i);
        ASSERT_TRUE(d->ProcessBatch(std::span(views).subspan(i, n), &part, threads).ok());
        all.insert(all.end(), part.begin(), part.end());
      }
      if (reference.empty()) {
        reference = all;
        reference_stats = d->stats();
        continue;
      }
      EXPECT_EQ(all, reference) << "threads=" << threads << " batch=" << batch;
      EXPECT_EQ(d->stats().kept, reference_stats.kept);
    }
  }
  // The sample is built to contain both kinds of duplicates.
  EXPECT_GT(reference_stats.exact_duplicates, 100u);
  EXPECT_GT(reference_stats.near_duplicates, 100u);
  // Every duplicate points at an earlier kept document.
  for (size_t i = 0; i < reference.size(); ++i) {
    if (!reference[i].duplicate) continue;
    ASSERT_LT(reference[i].duplicate_of, i);
    EXPECT_FALSE(reference[reference[i].duplicate_of].duplicate);
    // Within k, or found by the re-check with a passing similarity.
    if (reference[i].distance > 3) {
      EXPECT_GE(reference[i].similarity, 0.35);
    }
  }
}

// --memory-limit's rounds (tools/cmd_stage.cc, docs/SCALING.md "Deciding in
// bounded memory") at the library level: each round decides its part with
// the matches earlier rounds found as priors (DecideBatch), then probes every
// later document on 2 threads (ProbeBatch). Without stop keys the decisions
// are the one set's, field for field: cuts that fall inside a decide slice,
// under settings that change what a match is.
TEST(Dedup, RoundsWithThreadedProbesDecideAsOneSet) {
  std::vector<std::string> texts;
  for (const char* b : {"zh-short", "en-short", "zh-long", "en-long"}) {
    for (std::string t : SampleTexts(std::string(NEARDUP_SOURCE_DIR "/data/natural/dev/") + b + ".jsonl")) {
      texts.push_back(std::move(t));
    }
  }
  for (std::string t : SampleTexts()) texts.push_back(std::move(t));
  // Repeats, exact and edited, of texts from all over: the last round holds
  // duplicates of the first round's documents.
  const size_t distinct = texts.size();
  for (size_t i = 0; i < 1200; ++i) {
    const std::string& t = texts[(i * 7919) % distinct];
    texts.push_back(i % 2 == 0 ? t : t + " (via)");
  }
  std::vector<std::string_view> views(texts.begin(), texts.end());
  const size_t n = views.size();
  struct Variant {
    const char* name;
    void (*set)(DedupOptions*);
  };
  const Variant variants[] = {
      {"default", [](DedupOptions*) {}},
      {"no exact fast path", [](DedupOptions* o) { o->exact_fast_path = false; }},
      {"re-check off", [](DedupOptions* o) { o->recheck.enabled = false; }},
      {"sketches in a file", [](DedupOptions* o) { o->sketch_dir = ::testing::TempDir(); }},
  };
  for (size_t vi = 0; vi < std::size(variants); ++vi) {
    if (!testing::RunsCase(static_cast<int>(vi), 2)) continue;
    const Variant& v = variants[vi];
    SCOPED_TRACE(v.name);
    DedupOptions options;
    options.recheck.anchor_max_postings = kMaxAnchorPostings;  // no stop keys
    v.set(&options);
    auto one = Deduplicator::Create(options);
    ASSERT_TRUE(one.ok());
    std::vector<DedupDecision> reference;
    ASSERT_TRUE(one.value()->ProcessBatch(views, &reference, 1).ok());
    std::vector<DocSignature> sigs(one.value()->batch_signatures().begin(), one.value()->batch_signatures().end());
    ASSERT_GT(one.value()->stats().near_duplicates, 100u);
    std::vector<std::optional<DuplicateMatch>> prior(n);
    std::vector<DedupDecision> got(n);
    size_t start = 0;
    for (size_t cut : {n / 3 + 7, 2 * n / 3 + 300, n}) {
      auto round = Deduplicator::Create(options);
      ASSERT_TRUE(round.ok());
      round.value()->RestoreProgress(DedupStats{}, start);
      std::vector<DedupDecision> part;
      ASSERT_TRUE(round.value()
                      ->DecideBatch(std::span(sigs).subspan(start, cut - start), &part, 2,
                                    std::span(prior).subspan(start, cut - start))
                      .ok());
      std::copy(part.begin(), part.end(), got.begin() + static_cast<std::ptrdiff_t>(start));
      std::vector<std::optional<DuplicateMatch>> later(prior.begin() + static_cast<std::ptrdiff_t>(cut), prior.end());
      ASSERT_TRUE(round.value()->ProbeBatch(std::span(sigs).subspan(cut), &later, 2).ok());
      std::copy(later.begin(), later.end(), prior.begin() + static_cast<std::ptrdiff_t>(cut));
      start = cut;
    }
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(got[i], reference[i]) << "document " << i;
  }
}

// ProcessBatch on several threads searches the documents kept before each
// slice of the batch in parallel, then in order only those kept since
// (NearDupSet::ProbedAnchors / Combine; Deduplicator::DecideOnThreads). On
// the natural corpus (templated text: anchors turn into stop keys within a
// batch, the case that must fall back to a whole search) and under settings
// that make stop keys, wide radii, missing sketches and exact repeats
// common, every decision equals the one-thread one.
TEST(Dedup, ThreadedBatchesDecideExactlyAsOneThread) {
  std::vector<std::string> texts;
  for (const char* b : {"zh-short", "en-short", "zh-long", "en-long"}) {
    for (std::string t : SampleTexts(std::string(NEARDUP_SOURCE_DIR "/data/natural/dev/") + b + ".jsonl")) {
      texts.push_back(std::move(t));
    }
  }
  ASSERT_GT(texts.size(), 5000u);
  // Exact repeats of earlier texts, some within the same slice.
  for (size_t i = 0; i < 600; ++i) texts.push_back(texts[(i * 7919) % texts.size()]);
  std::vector<std::string_view> views(texts.begin(), texts.end());
  std::vector<testing::RuleVariant> variants = testing::RuleVariants();
  variants.push_back({"sketches in a file", [](DedupOptions* o) { o->sketch_dir = ::testing::TempDir(); }});
  for (size_t vi = 0; vi < variants.size(); ++vi) {
    if (!testing::RunsCase(static_cast<int>(vi), 2)) continue;
    const testing::RuleVariant& v = variants[vi];
    DedupOptions options;
    v.set(&options);
    std::vector<DedupDecision> reference;
    for (auto [threads, batch] : {std::pair{1, size_t{4096}}, std::pair{2, size_t{4096}}, std::pair{3, size_t{257}},
                                  std::pair{2, size_t{1500}}}) {
      auto d = Deduplicator::Create(options);
      ASSERT_TRUE(d.ok()) << v.name;
      std::vector<DedupDecision> all, part;
      for (size_t i = 0; i < views.size(); i += batch) {
        const size_t n = std::min(batch, views.size() - i);
        ASSERT_TRUE(d.value()->ProcessBatch(std::span(views).subspan(i, n), &part, threads).ok());
        all.insert(all.end(), part.begin(), part.end());
      }
      if (reference.empty()) {
        reference = all;
        continue;
      }
      ASSERT_EQ(all.size(), reference.size());
      size_t differ = 0;
      for (size_t i = 0; i < all.size(); ++i) differ += !(all[i] == reference[i]);
      EXPECT_EQ(differ, 0u) << v.name << " threads=" << threads << " batch=" << batch;
    }
    size_t dups = 0;
    for (const DedupDecision& r : reference) dups += r.duplicate;
    EXPECT_GT(dups, 500u) << v.name;
  }
}

// Regression for DecideOnThreads: a document whose normalized text equals an
// older kept one (the exact step's answer, first by the rule) while a
// document kept earlier in its own batch is more similar: the exact answer
// must win on several threads as on one.
TEST(Dedup, ThreadedBatchKeepsTheExactAnswerFirst) {
  const std::string a = "the quick, brown fox; jumps over the lazy dog!!";
  const std::string b = "the quick brown fox jumps over the lazy dog today";
  const std::string q = "the quick brown fox jumps over the lazy dog";
  for (int threads : {1, 2}) {
    auto d = Deduplicator::Create(DedupOptions{});
    ASSERT_TRUE(d.ok());
    std::vector<std::string_view> first = {a}, second = {b, q};
    std::vector<DedupDecision> r1, r2;
    ASSERT_TRUE(d.value()->ProcessBatch(first, &r1, threads).ok());
    ASSERT_TRUE(d.value()->ProcessBatch(second, &r2, threads).ok());
    EXPECT_FALSE(r1[0].duplicate);
    EXPECT_FALSE(r2[0].duplicate) << "b must be kept for the case to matter, similarity " << r2[0].similarity;
    EXPECT_TRUE(r2[1].duplicate);
    EXPECT_EQ(r2[1].duplicate_of, 0u) << "threads=" << threads;
    EXPECT_TRUE(r2[1].exact);
  }
}

// DedupOptions::sketch_without_recheck = false: with the re-check off no
// signature carries a sketch, and every decision is the one with sketches
// (texts without features, exact repeats, edits within k and past it; one
// and two threads); with the re-check on the option changes nothing.
TEST(Dedup, ThePlainRuleDecidesAlikeWithoutSketches) {
  std::vector<std::string> texts = SampleTexts(std::string(NEARDUP_SOURCE_DIR "/data/natural/dev/zh-short.jsonl"));
  for (std::string t : SampleTexts()) texts.push_back(std::move(t));
  for (const char* odd : {"", "!!!", "???", "   ", "", "!!!"}) texts.emplace_back(odd);
  const size_t distinct = texts.size();
  for (size_t i = 0; i < 900; ++i) texts.push_back(texts[(i * 7919) % distinct] + (i % 3 ? "" : " (via)"));
  std::vector<std::string_view> views(texts.begin(), texts.end());
  for (bool recheck : {false, true}) {
    for (int threads : {1, 2}) {
      std::vector<DedupDecision> decided[2];
      for (bool sketches : {true, false}) {
        DedupOptions options;
        options.recheck.enabled = recheck;
        options.sketch_without_recheck = sketches;
        auto d = Deduplicator::Create(options);
        ASSERT_TRUE(d.ok());
        ASSERT_TRUE(d.value()->ProcessBatch(views, &decided[sketches], threads).ok());
        size_t sketched = 0;
        for (const DocSignature& sig : d.value()->batch_signatures()) sketched += sig.has_sketch();
        EXPECT_EQ(sketched > texts.size() / 2, recheck || sketches) << sketched;
        EXPECT_EQ(d.value()->Signature(texts[0]).has_sketch(), recheck || sketches);
      }
      EXPECT_EQ(decided[false], decided[true]) << "recheck=" << recheck << " threads=" << threads;
      EXPECT_GT(std::count_if(decided[false].begin(), decided[false].end(),
                              [](const DedupDecision& r) { return r.duplicate && !r.exact; }),
                100);
    }
  }
}

TEST(Dedup, SignatureMatchesProcessBatch) {
  auto d = MakeDedup();
  const std::string text = "some text to analyze, with words";
  const DocSignature sig = d->Signature(text);
  EXPECT_TRUE(sig.has_features);
  EXPECT_EQ(sig.fingerprint, d->fingerprinter().Compute(text));
  // Feeding the signature decides it like the text.
  EXPECT_FALSE(d->ProcessSignature(sig).value().duplicate);
  auto out = DecideTexts(*d, {text});
  EXPECT_TRUE(out[0].duplicate);
  EXPECT_TRUE(out[0].exact);
  EXPECT_EQ(out[0].duplicate_of, 0u);
}

TEST(ParallelFor, CoversEveryIndexOnce) {
  for (int threads : {0, 1, 2, 7}) {
    for (size_t n : {size_t{0}, size_t{1}, size_t{5}, size_t{10000}}) {
      std::vector<std::atomic<int>> hits(n);
      ParallelFor(n, threads, [&](size_t b, size_t e) {
        for (size_t i = b; i < e; ++i) hits[i].fetch_add(1);
      });
      for (size_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << i;
    }
  }
}

}  // namespace
}  // namespace neardup
