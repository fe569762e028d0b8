// Launch one kernel of a PTX module through the driver API, for compute-sanitizer runs.
// usage: runner MODULE.ptx KERNEL GX BX ARG...   ARG: buf:NBYTES:zero|iota32|iotaf|half  or  i32:V
// Exit status 0 if the launch and the synchronisation succeeded, 1 if not.
#include <cuda.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#define CK(x) do { CUresult r_ = (x); if (r_ != CUDA_SUCCESS) { const char* s_; cuGetErrorString(r_, &s_); \
  std::printf("runner: %s failed: %s\n", #x, s_); return 1; } } while (0)

int main(int argc, char** argv) {
  if (argc < 5) { std::printf("usage: runner MODULE KERNEL GX BX ARG...\n"); return 2; }
  std::ifstream f(argv[1]); std::stringstream ss; ss << f.rdbuf(); std::string ptx = ss.str();
  CK(cuInit(0)); CUdevice dev; CK(cuDeviceGet(&dev, 0)); CUcontext ctx; CK(cuCtxCreate(&ctx, nullptr, 0, dev));
  CUmodule mod; CK(cuModuleLoadData(&mod, ptx.c_str())); CUfunction fn; CK(cuModuleGetFunction(&fn, mod, argv[2]));
  int gx = std::atoi(argv[3]), bx = std::atoi(argv[4]);
  std::vector<CUdeviceptr> ptrs; std::vector<int> ints; std::vector<void*> params;
  ptrs.reserve(argc); ints.reserve(argc);
  for (int i = 5; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("buf:", 0) == 0) {
      size_t n = std::strtoul(a.c_str() + 4, nullptr, 10);
      std::string init = a.substr(a.find(':', 4) + 1);
      std::vector<unsigned char> host(n, 0);
      for (size_t k = 0; k + 4 <= n; k += 4) {
        unsigned v = 0; float fv = float(k / 4);
        if (init == "iota32") v = unsigned(k / 4);
        else if (init == "iotaf") std::memcpy(&v, &fv, 4);
        else if (init == "half") v = 0x3c003c00u;  // (1.0, 1.0) in f16
        std::memcpy(&host[k], &v, 4);
      }
      CUdeviceptr p; CK(cuMemAlloc(&p, n)); CK(cuMemcpyHtoD(p, host.data(), n));
      ptrs.push_back(p); params.push_back(&ptrs.back());
    } else if (a.rfind("i32:", 0) == 0) {
      ints.push_back(std::atoi(a.c_str() + 4)); params.push_back(&ints.back());
    } else { std::printf("runner: bad argument %s\n", a.c_str()); return 2; }
  }
  CK(cuLaunchKernel(fn, gx, 1, 1, bx, 1, 1, 0, nullptr, params.data(), nullptr));
  CK(cuCtxSynchronize());
  std::printf("runner: %s ok\n", argv[2]);
  return 0;
}
