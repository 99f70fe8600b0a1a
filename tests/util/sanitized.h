// Whether this test binary is built with ASan or TSan. Sanitized code runs
// 5-20x slower, so the heaviest sweeps take a stride of their cases there;
// the Release stage of scripts/test.sh runs every case, and the sanitizers
// still see every code path (the same races, the same recovery steps).
#ifndef NEARDUP_TESTS_SANITIZED_H_
#define NEARDUP_TESTS_SANITIZED_H_

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define NEARDUP_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
#define NEARDUP_TEST_SANITIZED 1
#endif
#endif

namespace neardup::testing {

#ifdef NEARDUP_TEST_SANITIZED
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif

// Every case in Release; every `stride`-th one (the first included) when sanitized.
inline bool RunsCase(int index, int stride) { return !kSanitized || index % stride == 0; }

}  // namespace neardup::testing

#endif  // NEARDUP_TESTS_SANITIZED_H_
