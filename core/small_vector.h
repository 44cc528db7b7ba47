// core/small_vector.h — SmallVector<T, N>: a vector that keeps up to N elements inline and
// only touches the heap beyond that. Shapes and strides are almost always short, and every op
// creates a few of them: with std::vector that was three or four mallocs per op, a third of
// the cost of a 1-element add (tests/bench/bench_core.cpp). Recording an op for autograd has
// the same pattern (a node's one or two edges and its one output), so values need not be
// trivially copyable; insert and erase, which only shapes use, are kept to those that are.
// The standard library has no small-buffer vector, so this is the one hand-written container
// in Kiln.
// Read next: core/array_ref.h (Shape = SmallVector<int64_t, 6>).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <initializer_list>
#include <iterator>
#include <memory>
#include <type_traits>
#include <utility>

namespace kiln {

template <class T, std::size_t N>
class SmallVector {
  static_assert(std::is_nothrow_move_constructible_v<T>,
                "SmallVector moves its elements when it grows and must not throw half-way");
  static constexpr bool kTrivial = std::is_trivially_copyable_v<T>;

 public:
  using value_type = T;
  using iterator = T*;
  using const_iterator = const T*;
  using size_type = std::size_t;

  SmallVector() = default;
  explicit SmallVector(size_type n, const T& value = T()) { assign(n, value); }
  SmallVector(std::initializer_list<T> list) { append(list.begin(), list.end()); }
  template <class It>
    requires(!std::is_integral_v<It>)
  SmallVector(It first, It last) {
    append(first, last);
  }
  SmallVector(const SmallVector& other) { append(other.begin(), other.end()); }
  SmallVector(SmallVector&& other) noexcept { take(std::move(other)); }
  ~SmallVector() {
    clear();
    release_heap();
  }
  SmallVector& operator=(const SmallVector& other) {
    if (this != &other) {
      clear();
      append(other.begin(), other.end());
    }
    return *this;
  }
  SmallVector& operator=(SmallVector&& other) noexcept {
    if (this != &other) {
      clear();
      release_heap();
      take(std::move(other));
    }
    return *this;
  }

  T* data() { return heap_ != nullptr ? heap_ : inline_data(); }
  const T* data() const { return heap_ != nullptr ? heap_ : inline_data(); }
  size_type size() const { return size_; }
  bool empty() const { return size_ == 0; }
  size_type capacity() const { return capacity_; }
  T* begin() { return data(); }
  T* end() { return data() + size_; }
  const T* begin() const { return data(); }
  const T* end() const { return data() + size_; }
  T& operator[](size_type i) { return data()[i]; }
  const T& operator[](size_type i) const { return data()[i]; }
  T& front() { return data()[0]; }
  const T& front() const { return data()[0]; }
  T& back() { return data()[size_ - 1]; }
  const T& back() const { return data()[size_ - 1]; }

  void reserve(size_type n) {
    if (n <= capacity_) return;
    const size_type cap = std::max(n, capacity_ * 2);
    T* fresh = std::allocator<T>().allocate(cap);
    T* old = data();
    if constexpr (kTrivial) {
      if (size_ > 0) std::memcpy(fresh, old, size_ * sizeof(T));
    } else {
      std::uninitialized_move(old, old + size_, fresh);
      std::destroy(old, old + size_);
    }
    release_heap();
    heap_ = fresh;
    capacity_ = cap;
  }
  template <class... Args>
  T& emplace_back(Args&&... args) {
    if (size_ == capacity_) {
      T value(std::forward<Args>(args)...);  // args may refer into this vector
      reserve(size_ + 1);
      return *std::construct_at(data() + size_++, std::move(value));
    }
    return *std::construct_at(data() + size_++, std::forward<Args>(args)...);
  }
  void push_back(const T& v) { emplace_back(v); }
  void push_back(T&& v) { emplace_back(std::move(v)); }
  void pop_back() { std::destroy_at(data() + --size_); }
  void clear() {
    std::destroy(begin(), end());
    size_ = 0;
  }
  void resize(size_type n, const T& value = T()) {
    if (n < size_) {
      std::destroy(begin() + n, end());
      size_ = n;
      return;
    }
    reserve(n);
    while (size_ < n) std::construct_at(data() + size_++, value);
  }
  void assign(size_type n, const T& value) {
    clear();
    resize(n, value);
  }
  T* insert(const T* pos, const T& v)
    requires kTrivial
  {
    return insert(pos, &v, &v + 1);
  }
  T* insert(const T* pos, std::initializer_list<T> list)
    requires kTrivial
  {
    return insert(pos, list.begin(), list.end());
  }
  template <class It>
  T* insert(const T* pos, It first, It last)
    requires kTrivial
  {
    const auto at = static_cast<size_type>(pos - data());
    const auto count = static_cast<size_type>(std::distance(first, last));
    T buffer[N > 0 ? N : 1];
    std::unique_ptr<T[]> spill;
    T* staged = buffer;  // the inserted values, copied first: they may live in this vector
    if (count > N) {
      spill.reset(new T[count]);
      staged = spill.get();
    }
    std::copy(first, last, staged);
    reserve(size_ + count);
    T* d = data();
    std::memmove(d + at + count, d + at, (size_ - at) * sizeof(T));
    std::copy(staged, staged + count, d + at);
    size_ += count;
    return d + at;
  }
  T* erase(const T* pos)
    requires kTrivial
  {
    return erase(pos, pos + 1);
  }
  T* erase(const T* first, const T* last)
    requires kTrivial
  {
    T* d = data();
    const auto at = static_cast<size_type>(first - d);
    const auto count = static_cast<size_type>(last - first);
    std::memmove(d + at, d + at + count, (size_ - at - count) * sizeof(T));
    size_ -= count;
    return d + at;
  }

  friend bool operator==(const SmallVector& a, const SmallVector& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }

 private:
  T* inline_data() { return reinterpret_cast<T*>(inline_); }
  const T* inline_data() const { return reinterpret_cast<const T*>(inline_); }

  template <class It>
  void append(It first, It last) {
    if constexpr (std::forward_iterator<It>) {
      reserve(size_ + static_cast<size_type>(std::distance(first, last)));
    }
    for (; first != last; ++first) emplace_back(static_cast<T>(*first));
  }
  void release_heap() {
    if (heap_ != nullptr) std::allocator<T>().deallocate(heap_, capacity_);
    heap_ = nullptr;
    capacity_ = N;
  }
  // Expects this vector empty and without heap memory.
  void take(SmallVector&& other) noexcept {
    if (other.heap_ != nullptr) {
      heap_ = std::exchange(other.heap_, nullptr);
      capacity_ = std::exchange(other.capacity_, N);
      size_ = std::exchange(other.size_, 0);
      return;
    }
    if constexpr (kTrivial) {
      if (other.size_ > 0) std::memcpy(inline_, other.inline_, other.size_ * sizeof(T));
    } else {
      std::uninitialized_move(other.begin(), other.end(), inline_data());
      std::destroy(other.begin(), other.end());
    }
    size_ = std::exchange(other.size_, 0);
  }

  alignas(T) std::byte inline_[sizeof(T) * (N > 0 ? N : 1)];
  T* heap_ = nullptr;
  size_type size_ = 0;
  size_type capacity_ = N;
};

}  // namespace kiln
