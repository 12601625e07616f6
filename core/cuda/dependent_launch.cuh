// Programmatic dependent launch (Hopper, sm_90+): a kernel launched as a
// dependent of the kernel before it in the stream may have its blocks
// scheduled while that kernel's last wave still runs, instead of after it
// has drained and the launch has gone through the front end. Every block
// of such a kernel first lets its own dependents launch, then waits until
// the kernel before it has finished and its writes are visible, before it
// reads anything: only the launch latency and the drain overlap, never the
// work. Kernels that call WaitForPriorGrid also run correctly when launched
// the ordinary way (the wait returns at once). Because ours let their
// dependents launch at once, a caller's kernel launched as a dependent of
// a sort must wait for it in the same way (cudaGridDependencySynchronize),
// as it must after CUB's kernels.
//
// Where it pays (H100, docs/benchmarks.md): merge passes (partition ->
// merge -> partition ...), the merge sort +3-8% at 2^22-2^24 keys; the
// OneSweep digit passes +1% from 2^24 keys, but 2-5% slower at 2^20 (a
// pass there is one partial wave: nothing to overlap, and the waiting
// blocks hold SM slots), so radix passes use it from kDependentPassMinItems.
#ifndef SORTD_CORE_CUDA_DEPENDENT_LAUNCH_CUH_
#define SORTD_CORE_CUDA_DEPENDENT_LAUNCH_CUH_

#include <cuda_runtime.h>

#include <cstddef>

namespace sortd::cuda {

// First thing in a kernel that may be launched with LaunchDependent. The
// wait exists in code built for sm_90 and later, which is all the build
// makes (CMAKE_CUDA_ARCHITECTURES 90): a build for an older architecture
// run on a newer GPU would launch dependents without it.
__device__ __forceinline__ void WaitForPriorGrid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;");
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// kernel<<<grid, block, smem, stream>>>(args...), as a programmatic
// dependent of the stream's previous kernel when `dependent` (the kernel
// must call WaitForPriorGrid first). Returns the launch's error.
template <typename... Params, typename... Args>
cudaError_t LaunchDependent(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                            bool dependent, Args... args) {
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  cudaLaunchAttribute attribute[1];
  attribute[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute[0].val.programmaticStreamSerializationAllowed = 1;
  config.attrs = attribute;
  config.numAttrs = dependent ? 1 : 0;
  const cudaError_t err = cudaLaunchKernelEx(&config, kernel, static_cast<Params>(args)...);
  // A launch error is returned here; cleared from the thread's last error
  // (not sticky), as the <<<>>> launches' cudaGetLastError() does, so that
  // a later launch's check does not report it again.
  if (err != cudaSuccess) cudaGetLastError();
  return err;
}

// Digit passes of at least this many keys launch as dependents.
inline constexpr size_t kDependentPassMinItems = size_t{1} << 24;

}  // namespace sortd::cuda

#endif  // SORTD_CORE_CUDA_DEPENDENT_LAUNCH_CUH_
