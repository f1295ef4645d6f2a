// Both transports hand a tensor over and back unchanged, bit for bit, for every dtype a
// boundary can carry (bf16, f32, and i32 as 4-byte words): device-to-device copies between two
// green-context partitions of one GPU, and NCCL point-to-point between two GPUs. Skips with a
// message without a GPU (NCCL: without two).
#include <stdexcept>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "harness/cuda/gpu_devices.h"
#include "harness/cuda/gpu_transport.h"
#include "harness/cuda/nccl_api.h"
#include "workloads/cuda/check.h"
#include "workloads/cuda/context.h"
#include "workloads/cuda/device_info.h"

namespace ppbench::cuda {
namespace {

const cuda::Shape kShape{3, 37};

std::vector<float> pattern(cuda::DType t) {
  std::vector<float> v(static_cast<std::size_t>(cuda::shape_numel(kShape)));
  for (std::size_t i = 0; i < v.size(); ++i) {
    const float x = static_cast<float>(i) * 0.37f - 11.0f;
    v[i] = t == cuda::DType::kI32    ? static_cast<float>(static_cast<int>(i) - 50)
           : t == cuda::DType::kBF16 ? cuda::round_to_bf16(x)
                                     : x;
  }
  return v;
}

P2POp op_of(P2POp::Dir dir, int peer, cuda::DType t, const Task& payload) {
  P2POp op;
  op.dir = dir;
  op.peer = peer;
  op.bytes = static_cast<std::size_t>(cuda::shape_numel(kShape)) * cuda::dtype_size(t);
  op.dtype =
      t == cuda::DType::kBF16 ? WireDType::BF16 : WireDType::F32;  // i32 travels as 4-byte words
  op.count = op.bytes / (t == cuda::DType::kBF16 ? 2 : 4);
  op.payload = payload;
  op.tag = p2p_tag(payload);
  return op;
}

// Rank 0 sends F0.0 to rank 1, which sends it back as B1.0's gradient; rank 0 compares.
void round_trip(const GpuDevices& devices, GpuTransport& transport, cuda::DType t) {
  std::vector<std::unique_ptr<cuda::DeviceArena>> arenas;
  for (int r = 0; r < 2; ++r) {
    devices.rank(r).make_current();
    arenas.push_back(std::make_unique<cuda::DeviceArena>("rank " + std::to_string(r), 1 << 20));
  }
  const std::vector<float> sent = pattern(t);
  std::vector<float> back;
  std::string error;
  // Outlive both rank threads: a receiver's copy event is handed to the sender's reclaim, which
  // may run after the receiver's thread returned (as in the executor, whose pools live with it).
  std::vector<EventPool> pools(2);
  auto rank_main = [&](int r) {
    try {
      const RankDevice& dev = devices.rank(r);
      dev.make_current();
      EventPool& events = pools[static_cast<std::size_t>(r)];
      std::vector<TransferTiming> timings;
      std::vector<PendingTransfer> pending;
      RankIo io{r,
                dev.compute,
                dev.comm,
                arenas[static_cast<std::size_t>(r)].get(),
                &events,
                &timings,
                &pending,
                Clock::now() + std::chrono::seconds(30),
                [](const Task&) { return kShape; },
                t,
                false,
                {}};
      // The executor's optimizer updates go here: once per group, sends or receives.
      int hooks = 0;
      io.after_sends = [&hooks] { ++hooks; };
      const Task fwd{Op::F, 0, 0}, bwd{Op::B, 1, 0};
      std::vector<cuda::DTensor> one(1);
      if (r == 0) {
        one[0] = cuda::DTensor(*io.arena, kShape, t);
        cuda::upload(one[0], sent);
        transport.run_group(io, {op_of(P2POp::Dir::Send, 1, t, fwd)}, one);
        std::vector<cuda::DTensor> got(1);
        transport.run_group(io, {op_of(P2POp::Dir::Recv, 1, t, bwd)}, got);
        CUDA_CHECK(cudaStreamSynchronize(dev.compute));
        back = cuda::download(got[0]);
      } else {
        transport.run_group(io, {op_of(P2POp::Dir::Recv, 0, t, fwd)}, one);
        CUDA_CHECK(cudaStreamSynchronize(dev.compute));
        std::vector<cuda::DTensor> again{one[0]};
        transport.run_group(io, {op_of(P2POp::Dir::Send, 0, t, bwd)}, again);
      }
      CUDA_CHECK(cudaStreamSynchronize(dev.comm));
      CUDA_CHECK(cudaStreamSynchronize(dev.compute));
      transport.reclaim(r, true);
      if (hooks != 2)
        throw std::runtime_error("rank " + std::to_string(r) + ": after_sends ran " +
                                 std::to_string(hooks) + " times in 2 groups");
    } catch (const std::exception& e) {
      error = e.what();
      transport.abort();
    }
  };
  { std::jthread a(rank_main, 0), b(rank_main, 1); }
  for (int r = 0; r < 2; ++r) {
    devices.rank(r).make_current();
    transport.reclaim(r, true);
  }
  ASSERT_EQ(error, "");
  ASSERT_EQ(back.size(), sent.size());
  for (std::size_t i = 0; i < sent.size(); ++i) ASSERT_EQ(back[i], sent[i]) << "element " << i;
}

const cuda::DType kDtypes[] = {cuda::DType::kBF16, cuda::DType::kF32, cuda::DType::kI32};

TEST(GpuTransport, CopiesBetweenVirtualDevicesRoundTripEveryDtype) {
  std::string why;
  if (!cuda::has_gpu(&why)) GTEST_SKIP() << "no CUDA device visible: " << why;
  GpuPlacement p;
  p.kind = GpuPlacement::Kind::VirtualDevices;
  p.gpus = {0};
  p.virtual_devices = 2;
  auto devices = GpuDevices::open(p);
  EXPECT_TRUE(devices->grant.as_requested) << devices->grant.summary;
  for (bool link : {false, true}) {
    auto transport =
        make_copy_transport(2, link ? std::optional<LinkModel>(LinkModel{50, 5}) : std::nullopt);
    for (cuda::DType t : kDtypes) {
      SCOPED_TRACE(cuda::dtype_name(t) + (link ? " with link model" : ""));
      round_trip(*devices, *transport, t);
    }
  }
}

TEST(GpuTransport, NcclRoundTripsEveryDtype) {
  std::string why;
  if (!cuda::has_gpu(&why)) GTEST_SKIP() << "no CUDA device visible: " << why;
  int n = 0;
  CUDA_CHECK(cudaGetDeviceCount(&n));
  if (n < 2) GTEST_SKIP() << "NCCL point-to-point needs two GPUs; this node shows " << n;
  if (!nccl_compiled_in()) GTEST_SKIP() << "this build has no NCCL";
  ASSERT_TRUE(try_load_nccl(&why)) << why;  // two GPUs and a build with NCCL: it must load
  GpuPlacement p;
  p.kind = GpuPlacement::Kind::Gpus;
  p.gpus = {0, 1};
  auto devices = GpuDevices::open(p);
  auto transport = make_nccl_transport(p.gpus);
  for (cuda::DType t : kDtypes) {
    SCOPED_TRACE(cuda::dtype_name(t));
    round_trip(*devices, *transport, t);
  }
}

}  // namespace
}  // namespace ppbench::cuda
