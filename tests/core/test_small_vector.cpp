// SmallVector keeps short runs inline and moves to the heap beyond them; it must construct,
// move and destroy non-trivial values (autograd edges hold shared_ptrs) exactly once each.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "core/small_vector.h"

namespace kiln {
namespace {

TEST(SmallVector, GrowsPastItsInlineCapacityKeepingValuesInOrder) {
  SmallVector<std::int64_t, 2> v{1, 2};
  EXPECT_EQ(v.capacity(), 2u);
  v.push_back(3);
  v.push_back(v[0]);  // a value that lives in the vector being grown
  ASSERT_EQ(v.size(), 4u);
  EXPECT_GE(v.capacity(), 4u);
  EXPECT_EQ(v, (SmallVector<std::int64_t, 2>{1, 2, 3, 1}));
  v.insert(v.begin() + 1, {7, 8});
  EXPECT_EQ(v, (SmallVector<std::int64_t, 2>{1, 7, 8, 2, 3, 1}));
  v.erase(v.begin(), v.begin() + 2);
  EXPECT_EQ(v, (SmallVector<std::int64_t, 2>{8, 2, 3, 1}));
}

TEST(SmallVector, OwnsNonTrivialValuesThroughGrowthMovesAndCopies) {
  auto token = std::make_shared<int>(42);
  {
    SmallVector<std::shared_ptr<int>, 2> v;
    v.push_back(token);
    v.push_back(token);
    EXPECT_EQ(token.use_count(), 3);
    v.push_back(v.front());  // grows to the heap while copying one of its own elements
    EXPECT_EQ(token.use_count(), 4);

    SmallVector<std::shared_ptr<int>, 2> copy = v;
    EXPECT_EQ(token.use_count(), 7);
    SmallVector<std::shared_ptr<int>, 2> moved = std::move(copy);  // steals the heap block
    EXPECT_EQ(token.use_count(), 7);
    EXPECT_TRUE(copy.empty());  // NOLINT(bugprone-use-after-move): moved-from is empty

    SmallVector<std::shared_ptr<int>, 2> small;
    small.push_back(token);
    SmallVector<std::shared_ptr<int>, 2> small_moved = std::move(small);  // moves inline values
    EXPECT_EQ(token.use_count(), 8);
    EXPECT_EQ(*small_moved[0], 42);

    moved.pop_back();
    EXPECT_EQ(token.use_count(), 7);
    moved.resize(1);
    EXPECT_EQ(token.use_count(), 6);
    moved = small_moved;  // copy-assign over existing values
    EXPECT_EQ(token.use_count(), 6);
    v.clear();
    EXPECT_EQ(token.use_count(), 3);
  }
  EXPECT_EQ(token.use_count(), 1);
}

TEST(SmallVector, EmplacesInPlace) {
  SmallVector<std::string, 1> v;
  v.emplace_back(3, 'x');
  v.emplace_back("second");
  ASSERT_EQ(v.size(), 2u);
  EXPECT_EQ(v[0], "xxx");
  EXPECT_EQ(v[1], "second");
}

}  // namespace
}  // namespace kiln
