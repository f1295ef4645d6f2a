// NVTX3 ranges in the "ppbench" domain, so that an Nsight Systems timeline shows every action
// ("F3.1") and transfer ("send F3.1 ->2") on the rank thread that issued it. NVTX3 is header-only
// and costs a branch when no tool is attached, so the ranges are always on.
#pragma once

#include <string>

#include <cuda_runtime_api.h>
#include <nvtx3/nvToolsExt.h>
#include <nvtx3/nvToolsExtCudaRt.h>

namespace ppbench::cuda {

inline nvtxDomainHandle_t nvtx_domain() {
  static const nvtxDomainHandle_t domain = nvtxDomainCreateA("ppbench");
  return domain;
}

// Colours by what the range is (forward, backward, transfer) so the timeline reads at a glance.
inline std::uint32_t nvtx_colour(char kind) {
  switch (kind) {
    case 'F':
      return 0xff4c9be8u;
    case 'B':
      return 0xffe8874cu;
    case 'I':
      return 0xffe8c14cu;
    case 'W':
      return 0xff6cc46cu;
    default:
      return 0xff9a9a9au;
  }
}

class NvtxRange {
 public:
  explicit NvtxRange(const std::string& name) {
    nvtxEventAttributes_t a{};
    a.version = NVTX_VERSION;
    a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    a.colorType = NVTX_COLOR_ARGB;
    a.color = nvtx_colour(name.empty() ? '?' : name[0] == '(' ? 'F' : name[0]);
    a.messageType = NVTX_MESSAGE_TYPE_ASCII;
    a.message.ascii = name.c_str();
    nvtxDomainRangePushEx(nvtx_domain(), &a);
  }
  ~NvtxRange() { nvtxDomainRangePop(nvtx_domain()); }
  NvtxRange(const NvtxRange&) = delete;
  NvtxRange& operator=(const NvtxRange&) = delete;
};

inline void name_stream(cudaStream_t s, const std::string& name) {
  nvtxNameCudaStreamA(s, name.c_str());
}

}  // namespace ppbench::cuda
