// Bytes on the wire between processes: plain values and arrays appended to a buffer and read
// back in the same order. Every read is checked against the buffer's end, so a short or
// mismatched message is an error, never a read past the end.
#pragma once

#include <cstddef>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

namespace ppbench::mpi {

class WireWriter {
 public:
  template <class T>
  void put(const T& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    append(&v, sizeof v);
  }
  template <class T>
  void put_array(const T* data, std::size_t n) {
    static_assert(std::is_trivially_copyable_v<T>);
    put<std::uint64_t>(n);
    append(data, n * sizeof(T));
  }
  void put_string(const std::string& s) { put_array(s.data(), s.size()); }
  std::vector<char>& bytes() { return bytes_; }

 private:
  void append(const void* p, std::size_t n) {
    const auto* c = static_cast<const char*>(p);
    bytes_.insert(bytes_.end(), c, c + n);
  }
  std::vector<char> bytes_;
};

class WireReader {
 public:
  WireReader(const char* data, std::size_t size) : p_(data), end_(data + size) {}
  template <class T>
  T get() {
    static_assert(std::is_trivially_copyable_v<T>);
    T v;
    take(&v, sizeof v);
    return v;
  }
  // The element count of an array put by put_array, checked against the bytes left; then
  // read(dst, n) copies the elements (no alignment is assumed of the buffer).
  template <class T>
  std::size_t count() {
    const auto n = get<std::uint64_t>();
    if (n > static_cast<std::uint64_t>(end_ - p_) / sizeof(T))
      throw std::runtime_error("a message from another process is shorter than it says");
    return static_cast<std::size_t>(n);
  }
  template <class T>
  void read(T* dst, std::size_t n) {
    take(dst, n * sizeof(T));
  }
  std::string get_string() {
    std::string s(count<char>(), '\0');
    read(s.data(), s.size());
    return s;
  }
  bool done() const { return p_ == end_; }

 private:
  void take(void* v, std::size_t n) {
    if (static_cast<std::size_t>(end_ - p_) < n)
      throw std::runtime_error("a message from another process is shorter than it says");
    std::memcpy(v, p_, n);
    p_ += n;
  }
  const char* p_;
  const char* end_;
};

}  // namespace ppbench::mpi
