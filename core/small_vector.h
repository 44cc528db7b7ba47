// core/small_vector.h — SmallVector<T, N>: a vector that keeps up to N elements inline and
// only touches the heap beyond that. Shapes and strides are almost always short, and every op
// creates a few of them: with std::vector that was three or four mallocs per op, a third of
// the cost of a 1-element add (tests/bench/bench_core.cpp). The standard library has no
// small-buffer vector, so this is the one hand-written container in Kiln; it holds trivially
// copyable values only, which keeps it short.
// Read next: core/array_ref.h (Shape = SmallVector<int64_t, 6>).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <initializer_list>
#include <iterator>
#include <memory>
#include <type_traits>

namespace kiln {

template <class T, std::size_t N>
class SmallVector {
  static_assert(std::is_trivially_copyable_v<T>, "SmallVector holds trivially copyable values");

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
  SmallVector& operator=(const SmallVector& other) {
    if (this != &other) {
      size_ = 0;
      append(other.begin(), other.end());
    }
    return *this;
  }
  SmallVector& operator=(SmallVector&& other) noexcept {
    if (this != &other) {
      heap_.reset();
      take(std::move(other));
    }
    return *this;
  }

  T* data() { return heap_ ? heap_.get() : inline_; }
  const T* data() const { return heap_ ? heap_.get() : inline_; }
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
    std::unique_ptr<T[]> fresh(new T[cap]);
    if (size_ > 0) std::memcpy(fresh.get(), data(), size_ * sizeof(T));
    heap_ = std::move(fresh);
    capacity_ = cap;
  }
  void push_back(const T& v) {
    const T copy = v;  // v may live in this vector
    reserve(size_ + 1);
    data()[size_++] = copy;
  }
  void pop_back() { --size_; }
  void clear() { size_ = 0; }
  void resize(size_type n, const T& value = T()) {
    reserve(n);
    for (size_type i = size_; i < n; ++i) data()[i] = value;
    size_ = n;
  }
  void assign(size_type n, const T& value) {
    size_ = 0;
    resize(n, value);
  }
  T* insert(const T* pos, const T& v) { return insert(pos, &v, &v + 1); }
  T* insert(const T* pos, std::initializer_list<T> list) { return insert(pos, list.begin(), list.end()); }
  template <class It>
  T* insert(const T* pos, It first, It last) {
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
  T* erase(const T* pos) { return erase(pos, pos + 1); }
  T* erase(const T* first, const T* last) {
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
  template <class It>
  void append(It first, It last) {
    for (; first != last; ++first) push_back(static_cast<T>(*first));
  }
  void take(SmallVector&& other) {
    size_ = other.size_;
    capacity_ = other.capacity_;
    if (other.heap_) {
      heap_ = std::move(other.heap_);
    } else if (size_ > 0) {
      std::memcpy(inline_, other.inline_, size_ * sizeof(T));
    }
    other.size_ = 0;
    other.capacity_ = N;
  }

  T inline_[N > 0 ? N : 1];
  std::unique_ptr<T[]> heap_;
  size_type size_ = 0;
  size_type capacity_ = N;
};

}  // namespace kiln
