// The CPU backend's tensors in an MPI message: the sender's clock reading, then each tensor's
// shape and elements (a tensor whose buffer was released travels as its shape alone).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <vector>

#include "harness/executor/transport.h"
#include "harness/mpi/wire.h"
#include "workloads/cpu/pipeline_layer.h"

namespace ppbench::mpi {

template <typename T>
struct CpuTensorCodec {
  using Message = Envelope<cpu::Tensors<T>>;

  static void encode(const Message& m, std::vector<char>& out) {
    WireWriter w;
    w.put(m.sent_at);
    w.put<std::uint32_t>(static_cast<std::uint32_t>(m.payload.size()));
    for (const cpu::Tensor<T>& t : m.payload) {
      w.put_array(t.shape.data(), t.shape.size());
      w.put_array(t.data.data(), t.data.size());
    }
    out = std::move(w.bytes());
  }

  static void decode(const char* data, std::size_t size, Message& m) {
    WireReader r(data, size);
    m.sent_at = r.get<double>();
    const auto tensors = r.get<std::uint32_t>();
    if (tensors > size / 16)  // each tensor takes at least its two counts
      throw std::runtime_error("a tensor message from another process is shorter than it says");
    m.payload.resize(tensors);
    for (cpu::Tensor<T>& t : m.payload) {
      t.shape.resize(r.count<std::int64_t>());
      r.read(t.shape.data(), t.shape.size());
      t.data.resize(r.count<T>());
      r.read(t.data.data(), t.data.size());
    }
    if (!r.done())
      throw std::runtime_error("a tensor message from another process is longer than it says");
  }
};

}  // namespace ppbench::mpi
