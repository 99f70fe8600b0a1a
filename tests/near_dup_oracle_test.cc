// NearDupSet against a brute-force oracle: the rule of near_dup_set.h (steps
// 1-4, the pair rule through DecidePair) written naively -- every kept
// document is looked at, candidates are those within the search radius or
// sharing a probed, non-stop anchor (the anchor table modelled with plain
// maps, stop keys included) -- over randomized streams of short and long,
// Chinese and English texts with edits, inserts and removals. The best
// match and the whole `all` list must agree at every step.
#include <gtest/gtest.h>

#include <filesystem>

#include <algorithm>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <ostream>
#include <string>
#include <vector>

#include "neardup/dedup/near_dup_set.h"
#include "neardup/dedup/pair_rule.h"
#include "neardup/dedup/signature.h"
#include "neardup/text/fingerprint.h"

namespace neardup {
namespace {

class Oracle {
 public:
  explicit Oracle(const NearDupOptions& o) : o_(o) {}

  void Insert(DocId id, const DocSignature& sig) {
    Kept k{sig, {}};
    if (KeepsSketch(sig)) {
      ++sketches_;
      const int m = std::max(o_.recheck.anchors, RecheckOptions{}.anchors);
      const size_t cap = static_cast<size_t>(o_.recheck.anchor_max_postings);
      for (uint32_t a : sig.sketch.anchors) {
        if (static_cast<int>(k.anchors.size()) == m) break;
        if (stop_.count(a)) continue;
        k.anchors.push_back(a);
        auto& ids = postings_[a];
        if (ids.size() + 1 > cap) {  // more than cap documents: a stop key for good
          stop_.insert(a);
          postings_.erase(a);
        } else {
          ids.insert(id);
        }
      }
    }
    kept_.emplace(id, std::move(k));
  }

  void Remove(DocId id) {
    auto it = kept_.find(id);
    ASSERT_NE(it, kept_.end());
    if (KeepsSketch(it->second.sig)) --sketches_;
    for (uint32_t a : it->second.anchors) {
      auto p = postings_.find(a);
      if (p == postings_.end()) continue;
      p->second.erase(id);
      if (p->second.empty()) postings_.erase(p);
    }
    kept_.erase(it);
  }

  // Steps 1-4 of near_dup_set.h, by looking at every kept document.
  std::vector<DuplicateMatch> All(const DocSignature& doc) const {
    const RecheckOptions& r = o_.recheck;
    std::vector<DuplicateMatch> out;
    // 1. Exact: the first kept copy of the same normalized text that passes
    // the pair rule (at distance 0; punctuation counts in the similarity).
    std::vector<DocId> exact;  // ascending (map order)
    for (const auto& [id, k] : kept_) {
      if (k.sig.content_hash == doc.content_hash) exact.push_back(id);
    }
    std::optional<DocId> exact_answer;
    if (!exact.empty() && (o_.exact_fast_path || !doc.has_features)) {
      for (DocId id : exact) {
        const DocSignature& ks = kept_.at(id).sig;
        const PairSide kept = doc.has_sketch() && KeepsSketch(ks) ? PairSide::Of(ks) : PairSide{};
        const PairDecision pd = DecidePair(o_, PairSide::Of(doc), kept, 0);
        if (!pd.duplicate) continue;
        DuplicateMatch m{id, 0, true, pd.similarity, pd.rechecked};
        m.similarity_exact = pd.exact;
        out.push_back(m);
        exact_answer = id;
        break;
      }
    }
    if (!doc.has_features) return out;
    // 2. Candidates: within the radius, or under a probed anchor.
    const bool sketches = doc.has_sketch() && sketches_ > 0;
    const bool short_doc = r.enabled && doc.has_sketch() && IsShortText(r, doc.num_chars);
    const int radius = short_doc ? std::max(o_.k, r.short_k) : o_.k;
    std::set<DocId> by_anchor;
    if (r.enabled && r.anchors > 0 && sketches) {
      int probed = 0;
      for (uint32_t a : doc.sketch.anchors) {
        if (probed == r.anchors) break;
        if (stop_.count(a)) continue;
        ++probed;
        auto p = postings_.find(a);
        if (p != postings_.end()) by_anchor.insert(p->second.begin(), p->second.end());
      }
    }
    std::vector<DuplicateMatch> near;
    for (const auto& [id, k] : kept_) {
      if (exact_answer == id) continue;
      // Featureless texts are not in the fingerprint index, but keep their
      // sketch and anchors.
      if (!k.sig.has_features && !by_anchor.count(id)) continue;
      const int d = HammingDistance(doc.fingerprint, k.sig.fingerprint);
      if (d > radius && !by_anchor.count(id)) continue;
      // 3. The pair rule; the kept side's sketch only if the set keeps it.
      const PairSide kept = sketches && KeepsSketch(k.sig) ? PairSide::Of(k.sig) : PairSide{};
      const PairDecision pd = DecidePair(o_, PairSide::Of(doc), kept, d);
      if (!pd.duplicate) continue;
      DuplicateMatch m{id, d, false, pd.similarity, pd.rechecked};
      m.similarity_exact = pd.exact;
      m.exact = std::find(exact.begin(), exact.end(), id) != exact.end();
      near.push_back(m);
    }
    // 4. Best first: most similar (re-check on), nearest, smallest id.
    std::sort(near.begin(), near.end(), [&](const DuplicateMatch& a, const DuplicateMatch& b) {
      if (r.enabled && a.similarity != b.similarity) return a.similarity > b.similarity;
      return a.distance != b.distance ? a.distance < b.distance : a.id < b.id;
    });
    out.insert(out.end(), near.begin(), near.end());
    return out;
  }

  std::vector<DocId> Ids() const {
    std::vector<DocId> ids;
    for (const auto& [id, k] : kept_) ids.push_back(id);
    return ids;
  }
  const DocSignature& SigOf(DocId id) const { return kept_.at(id).sig; }

 private:
  bool KeepsSketch(const DocSignature& s) const {
    return s.has_sketch() && s.num_chars <= static_cast<uint32_t>(o_.recheck.sketch_max_chars);
  }
  struct Kept {
    DocSignature sig;
    std::vector<uint32_t> anchors;  // those it was added under
  };
  NearDupOptions o_;
  std::map<DocId, Kept> kept_;
  std::map<uint32_t, std::set<DocId>> postings_;
  std::set<uint32_t> stop_;
  size_t sketches_ = 0;
};

// ---- random texts ----------------------------------------------------------------

std::string Utf8(char32_t c) {
  std::string s;
  if (c < 0x80) {
    s += static_cast<char>(c);
  } else if (c < 0x800) {
    s += static_cast<char>(0xC0 | (c >> 6));
    s += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    s += static_cast<char>(0xE0 | (c >> 12));
    s += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (c & 0x3F));
  }
  return s;
}

// A text as units (Chinese characters or English words), so edits are by unit.
struct Units {
  bool chinese = false;
  std::vector<std::string> u;
  std::string Text() const {
    std::string t;
    for (size_t i = 0; i < u.size(); ++i) {
      if (!chinese && i) t += ' ';
      t += u[i];
    }
    return t;
  }
};

class TextSource {
 public:
  explicit TextSource(uint64_t seed) : rng_(seed) {}

  std::string Unit(bool chinese) {
    if (chinese) return Utf8(0x4E00 + static_cast<char32_t>(rng_() % 300));  // a small pool: shared shingles
    static const char* kWords[] = {"river", "market", "signal", "engine", "quiet",  "yellow", "garden", "winter",
                                   "paper", "silver", "north",  "window", "forest", "number", "castle", "planet",
                                   "coffee", "bridge", "mirror", "rocket", "pencil", "valley", "thunder", "island"};
    return kWords[rng_() % 24];
  }

  Units Fresh() {
    Units t;
    t.chinese = rng_() % 2;
    const bool long_text = rng_() % 3 == 0;
    const size_t n = t.chinese ? (long_text ? 250 + rng_() % 200 : 8 + rng_() % 40)
                               : (long_text ? 60 + rng_() % 60 : 3 + rng_() % 12);
    for (size_t i = 0; i < n; ++i) t.u.push_back(Unit(t.chinese));
    return t;
  }

  Units Edit(Units t) {
    const int edits = 1 + static_cast<int>(rng_() % 4);
    for (int e = 0; e < edits && !t.u.empty(); ++e) {
      const size_t at = rng_() % t.u.size();
      switch (rng_() % 3) {
        case 0: t.u[at] = Unit(t.chinese); break;
        case 1: t.u.insert(t.u.begin() + static_cast<std::ptrdiff_t>(at), Unit(t.chinese)); break;
        default: if (t.u.size() > 2) t.u.erase(t.u.begin() + static_cast<std::ptrdiff_t>(at)); break;
      }
    }
    return t;
  }

  std::mt19937_64& rng() { return rng_; }

 private:
  std::mt19937_64 rng_;
};

struct OracleCase {
  const char* name;
  NearDupOptions options;
};

void PrintTo(const OracleCase& c, std::ostream* os) { *os << c.name; }

std::vector<OracleCase> Cases() {
  std::vector<OracleCase> cases;
  cases.push_back({"defaults", NearDupOptions{}});
  NearDupOptions wide;
  wide.recheck.short_k = 6;
  cases.push_back({"short_k_6", wide});
  NearDupOptions stops;  // few anchors and tiny posting lists: stop keys everywhere
  stops.recheck.anchors = 3;
  stops.recheck.anchor_max_postings = 2;
  cases.push_back({"stop_keys", stops});
  NearDupOptions no_anchors;
  no_anchors.recheck.anchors = 0;
  cases.push_back({"no_anchors", no_anchors});
  NearDupOptions plain;
  plain.recheck.enabled = false;
  cases.push_back({"recheck_off", plain});
  NearDupOptions no_sketch_for_long;  // long kept texts are matched by distance only
  no_sketch_for_long.recheck.sketch_max_chars = 60;
  cases.push_back({"sketch_max_chars_60", no_sketch_for_long});
  NearDupOptions k5;
  k5.k = 5;
  k5.exact_fast_path = true;
  cases.push_back({"k5", k5});
  // The same rule with the sketch records in a file (the service's default).
  for (const char* name : {"defaults", "stop_keys", "sketch_max_chars_60"}) {
    for (size_t i = 0; i < cases.size(); ++i) {
      if (std::string(cases[i].name) != name) continue;
      OracleCase c = cases[i];
      c.name = std::string(name) == "defaults"    ? "defaults_in_file"
               : std::string(name) == "stop_keys" ? "stop_keys_in_file"
                                                  : "sketch_max_chars_60_in_file";
      c.options.sketch_dir = std::filesystem::temp_directory_path();
      cases.push_back(c);
      break;
    }
  }
  return cases;
}

std::string Describe(const std::vector<DuplicateMatch>& v) {
  std::string s;
  for (const DuplicateMatch& m : v) {
    s += "{" + std::to_string(m.id) + " d=" + std::to_string(m.distance) + (m.exact ? " exact" : "") +
         " sim=" + std::to_string(m.similarity) + "} ";
  }
  return s.empty() ? "(none)" : s;
}

class NearDupOracleTest : public ::testing::TestWithParam<OracleCase> {};

TEST_P(NearDupOracleTest, RandomStreamsAgreeWithBruteForce) {
  const NearDupOptions& options = GetParam().options;
  const Fingerprinter fp = std::move(Fingerprinter::Create(FingerprintOptions{})).value();
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    TextSource src(seed * 7919 + std::hash<std::string>{}(GetParam().name));
    auto set = std::move(NearDupSet::Create(options)).value();
    Oracle oracle(options);
    std::vector<Units> bases;  // texts that edits start from
    DocId next_id = 0;
    int duplicates = 0, near = 0;
    TextAnalysis analysis;
    for (int step = 0; step < 700; ++step) {
      auto& rng = src.rng();
      const uint64_t pick = rng() % 100;
      if (pick < 8 && !oracle.Ids().empty()) {  // remove a kept document
        const auto ids = oracle.Ids();
        const DocId id = ids[rng() % ids.size()];
        ASSERT_TRUE(set->Remove(id, oracle.SigOf(id)));
        oracle.Remove(id);
        continue;
      }
      std::string text;
      if (pick < 11) {
        text = rng() % 2 ? "!!! ... ???" : "-- --";  // no features: exact matches only
      } else if (pick < 50 || bases.empty()) {
        bases.push_back(src.Fresh());
        text = bases.back().Text();
      } else if (pick < 58) {
        text = bases[rng() % bases.size()].Text();  // an exact repeat
      } else {
        Units edited = src.Edit(bases[rng() % bases.size()]);
        if (rng() % 4 == 0) bases.push_back(edited);  // chains of edits
        text = edited.Text();
      }
      fp.Analyze(text, &analysis);
      const DocSignature sig = MakeSignature(analysis, text, RecheckOptions{}.shingle_size);
      std::optional<DuplicateMatch> best;
      std::vector<DuplicateMatch> all;
      ASSERT_TRUE(set->FindDuplicate(sig, &best, &all).ok());
      const std::vector<DuplicateMatch> want = oracle.All(sig);
      ASSERT_EQ(Describe(all), Describe(want)) << "step " << step << ": " << text;
      for (size_t i = 0; i < all.size(); ++i) {
        EXPECT_EQ(all[i].rechecked, want[i].rechecked) << "step " << step << " match " << i;
        EXPECT_EQ(all[i].similarity_exact, want[i].similarity_exact) << "step " << step << " match " << i;
      }
      ASSERT_EQ(best.has_value(), !want.empty()) << "step " << step;
      if (best) {
        EXPECT_EQ(Describe({*best}), Describe({want[0]})) << "step " << step;
      }
      // Without `all`, the same best.
      std::optional<DuplicateMatch> best_only;
      ASSERT_TRUE(set->FindDuplicate(sig, &best_only).ok());
      ASSERT_EQ(best_only.has_value(), best.has_value()) << "step " << step;
      if (best_only) {
        EXPECT_EQ(*best_only, *best) << "step " << step;
      }
      duplicates += !want.empty();
      near += want.size() > (want.empty() || !want[0].exact ? 0u : 1u);
      // Keep it unless it is a duplicate; sometimes keep it anyway (insert-always).
      if (want.empty() || rng() % 5 == 0) {
        const DocId id = next_id++;
        ASSERT_TRUE(set->Insert(id, sig).ok());
        oracle.Insert(id, sig);
      }
    }
    // The streams exercise both answers.
    EXPECT_GT(duplicates, 50);
    EXPECT_GT(near, 20);
  }
}

INSTANTIATE_TEST_SUITE_P(Policies, NearDupOracleTest, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<OracleCase>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace neardup
