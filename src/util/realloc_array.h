// A growable array of trivially copyable values that grows with realloc
// (internal to the library).
//
// Why: the Hamming index keeps one fingerprint and one id per row in two
// arrays of 10M+ entries, grown under a namespace's lock. A std::vector's
// growth allocates fresh memory, faults every page of it in and copies
// every element: at 10M rows that was a 60-140 ms pause of the namespace
// every 1/16 of growth (bench/results: index pauses, docs/BENCHMARKS.md).
// glibc serves blocks this large with mmap and grows them with mremap: the
// kernel moves page mappings, not bytes, and pages already touched stay
// touched.
//
// Only what the index uses: size, capacity, reserve, push_back, clear,
// release, indexing. Not thread-safe (callers lock). Throws std::bad_alloc
// when memory runs out, like std::vector.
#ifndef NEARDUP_SRC_REALLOC_ARRAY_H_
#define NEARDUP_SRC_REALLOC_ARRAY_H_

#include <cstddef>
#include <cstdlib>
#include <new>
#include <type_traits>
#include <utility>

namespace neardup::internal {

template <typename T>
class ReallocArray {
  static_assert(std::is_trivially_copyable_v<T>, "elements are moved by realloc");

 public:
  ReallocArray() = default;
  ReallocArray(const ReallocArray&) = delete;
  ReallocArray& operator=(const ReallocArray&) = delete;
  ~ReallocArray() { std::free(data_); }

  size_t size() const { return size_; }
  size_t capacity() const { return capacity_; }
  T* data() { return data_; }
  const T* data() const { return data_; }
  T& operator[](size_t i) { return data_[i]; }
  const T& operator[](size_t i) const { return data_[i]; }

  // capacity() >= n afterwards; exactly n when it grows (callers choose the
  // growth step).
  void reserve(size_t n) {
    if (n <= capacity_) return;
    void* p = std::realloc(data_, n * sizeof(T));
    if (p == nullptr) throw std::bad_alloc();
    data_ = static_cast<T*>(p);
    capacity_ = n;
  }

  // Needs capacity() > size() (callers reserve first, with their own step).
  void push_back(const T& v) { data_[size_++] = v; }

  void clear() { size_ = 0; }

  // Frees the memory (size and capacity 0).
  void release() {
    std::free(data_);
    data_ = nullptr;
    size_ = capacity_ = 0;
  }

 private:
  T* data_ = nullptr;
  size_t size_ = 0;
  size_t capacity_ = 0;
};

}  // namespace neardup::internal

#endif  // NEARDUP_SRC_REALLOC_ARRAY_H_
