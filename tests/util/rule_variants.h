// Settings under which a decision path must still agree with its reference
// (threaded batches, the join's oracle): many stop keys, few anchors and a
// low threshold, a wide short-text radius, sketches cut short, no exact fast
// path, the re-check off (with and without sketches).
#ifndef NEARDUP_TESTS_RULE_VARIANTS_H_
#define NEARDUP_TESTS_RULE_VARIANTS_H_

#include <vector>

#include "neardup/dedup/dedup.h"

namespace neardup::testing {

struct RuleVariant {
  const char* name;
  void (*set)(DedupOptions*);
};

inline std::vector<RuleVariant> RuleVariants() {
  return {
      {"default", [](DedupOptions*) {}},
      {"anchor_max_postings=2", [](DedupOptions* o) { o->recheck.anchor_max_postings = 2; }},
      {"anchors=3 threshold=0.5", [](DedupOptions* o) { o->recheck.anchors = 3, o->recheck.threshold = 0.5; }},
      {"short_k=6 shingle_size=2", [](DedupOptions* o) { o->recheck.short_k = 6, o->recheck.shingle_size = 2; }},
      {"sketch_max_chars=60", [](DedupOptions* o) { o->recheck.sketch_max_chars = 60; }},
      {"no exact fast path", [](DedupOptions* o) { o->exact_fast_path = false; }},
      {"re-check off", [](DedupOptions* o) { o->recheck.enabled = false; }},
      {"re-check off, no sketches", [](DedupOptions* o) { o->recheck.enabled = false, o->sketch_without_recheck = false; }},
  };
}

}  // namespace neardup::testing

#endif  // NEARDUP_TESTS_RULE_VARIANTS_H_
