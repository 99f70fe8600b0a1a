#include "neardup/near_dup_set.h"

#include <gtest/gtest.h>

namespace neardup {
namespace {

std::unique_ptr<NearDupSet> MakeSet(int k = 3, bool fast = true) {
  NearDupOptions o;
  o.k = k;
  o.exact_fast_path = fast;
  return std::move(NearDupSet::Create(o)).value();
}

DocSignature Sig(uint64_t hash, uint64_t fp, bool features = true) { return DocSignature{hash, fp, features}; }

TEST(NearDupSet, NearestFirstThenSmallestIdAndAllMatchesListed) {
  auto set = MakeSet();
  ASSERT_TRUE(set->Insert(5, Sig(1, 0b0111)).ok());  // distance 3 from 0
  ASSERT_TRUE(set->Insert(9, Sig(2, 0b0001)).ok());  // distance 1
  ASSERT_TRUE(set->Insert(7, Sig(3, 0b0010)).ok());  // distance 1
  ASSERT_TRUE(set->Insert(8, Sig(4, 0b1111)).ok());  // distance 4: out
  std::optional<DuplicateMatch> best;
  std::vector<DuplicateMatch> all;
  ASSERT_TRUE(set->FindDuplicate(Sig(99, 0), &best, &all).ok());
  ASSERT_TRUE(best.has_value());
  EXPECT_EQ(best->id, 7u);
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[1].id, 9u);
  EXPECT_EQ(all[2].id, 5u);
  EXPECT_EQ(all[2].distance, 3);
}

TEST(NearDupSet, ExactTextWinsAndIsFlagged) {
  auto set = MakeSet();
  ASSERT_TRUE(set->Insert(1, Sig(100, 0xff)).ok());
  ASSERT_TRUE(set->Insert(2, Sig(200, 0xfe)).ok());
  std::optional<DuplicateMatch> best;
  std::vector<DuplicateMatch> all;
  ASSERT_TRUE(set->FindDuplicate(Sig(200, 0xfe), &best, &all).ok());
  EXPECT_EQ(*best, (DuplicateMatch{2, 0, true}));
  ASSERT_EQ(all.size(), 2u);  // the exact one, then the near one, listed once each
  EXPECT_EQ(all[1], (DuplicateMatch{1, 1, false}));
}

TEST(NearDupSet, FeaturelessTextsMatchOnlyByExactText) {
  auto set = MakeSet(8);
  ASSERT_TRUE(set->Insert(1, Sig(7, 0, false)).ok());
  ASSERT_TRUE(set->Insert(2, Sig(8, 0, true)).ok());  // fingerprint 0 with features
  std::optional<DuplicateMatch> best;
  ASSERT_TRUE(set->FindDuplicate(Sig(9, 0, false), &best).ok());
  EXPECT_FALSE(best.has_value());  // never matched through the index
  ASSERT_TRUE(set->FindDuplicate(Sig(7, 0, false), &best).ok());
  EXPECT_EQ(best->id, 1u);
}

TEST(NearDupSet, RemoveForgetsBothExactAndNear) {
  auto set = MakeSet();
  ASSERT_TRUE(set->Insert(1, Sig(100, 0xff)).ok());
  ASSERT_TRUE(set->Insert(2, Sig(100, 0xff)).ok());  // same text stored twice (insert-always)
  EXPECT_EQ(set->Insert(2, Sig(100, 0xff)).code(), Status::Code::kAlreadyExists);
  EXPECT_TRUE(set->Remove(1, Sig(100, 0xff)));
  EXPECT_FALSE(set->Remove(1, Sig(100, 0xff)));
  std::optional<DuplicateMatch> best;
  ASSERT_TRUE(set->FindDuplicate(Sig(100, 0xff), &best).ok());
  EXPECT_EQ(best->id, 2u);
  EXPECT_TRUE(set->Remove(2, Sig(100, 0xff)));
  ASSERT_TRUE(set->FindDuplicate(Sig(100, 0xff), &best).ok());
  EXPECT_FALSE(best.has_value());
  EXPECT_EQ(set->size(), 0u);
}

TEST(NearDupSet, RejectsBadK) {
  NearDupOptions o;
  o.k = 9;
  EXPECT_EQ(NearDupSet::Create(o).status().code(), Status::Code::kInvalidArgument);
}

}  // namespace
}  // namespace neardup
