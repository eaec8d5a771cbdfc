// How many CTAs of one SM each a GPU keeps resident in clusters of 1, 2, 4 and 8 CTAs
// (the fact behind python/tvm_tma/kernels/residency.py; benchmarks/RESULTS.md 6q).
// For each dynamic shared memory size it prints cudaOccupancyMaxActiveClusters, then
// launches as many CTAs as the GPU has SMs (rounded down to whole clusters) of 384
// threads in clusters of that size, each spinning 200 us, and
// counts the CTAs that started more than 100 us after the first (the ones that waited
// for an SM). Build and run on the GPU machine:
//   nvcc -arch=sm_90a -o /tmp/cluster_residency benchmarks/cluster_residency.cu
//   /tmp/cluster_residency
#include <cstdio>
#include <cuda_runtime.h>
__global__ void k(int *out) {
  extern __shared__ int s[];
  unsigned smid; asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
  unsigned long long t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  if (threadIdx.x == 0) { out[blockIdx.x*4] = smid; ((unsigned long long*)out)[blockIdx.x*2+1] = t; }
  // spin ~200us so all resident CTAs overlap
  unsigned long long t0 = t, t1 = t;
  while (t1 - t0 < 200000) asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t1));
  s[threadIdx.x] = smid;
}
int main() {
  int dev=0; cudaDeviceProp p; cudaGetDeviceProperties(&p, dev);
  printf("%s SMs %d\n", p.name, p.multiProcessorCount);
  int *out; cudaMalloc(&out, 4096*16);
  for (int smem : {100*1024, 200*1024, 227*1024}) {
    cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    cudaFuncSetAttribute(k, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
    for (int cs : {1, 2, 4, 8}) {
      cudaLaunchConfig_t cfg = {};
      const int ctas = p.multiProcessorCount / cs * cs;
      cfg.gridDim = dim3(ctas); cfg.blockDim = dim3(384); cfg.dynamicSmemBytes = smem;
      cudaLaunchAttribute a[1]; a[0].id = cudaLaunchAttributeClusterDimension;
      a[0].val.clusterDim.x = cs; a[0].val.clusterDim.y = 1; a[0].val.clusterDim.z = 1;
      cfg.attrs = a; cfg.numAttrs = 1;
      int n = -1; cudaError_t e = cudaOccupancyMaxActiveClusters(&n, (void*)k, &cfg);
      // empirical: count the CTAs that start late (> 100us after the first)
      cudaLaunchKernelEx(&cfg, k, out); cudaDeviceSynchronize();
      unsigned long long h[1024*2]; cudaMemcpy(h, out, ctas*16, cudaMemcpyDeviceToHost);
      unsigned long long mn = ~0ull; for (int i=0;i<ctas;i++) if (h[2*i+1]<mn) mn=h[2*i+1];
      int late=0; for (int i=0;i<ctas;i++) if (h[2*i+1]-mn > 100000) late++;
      printf("smem %dK cluster %d: maxActiveClusters %d (%s) -> CTAs %d; late CTAs of %d: %d\n",
             smem/1024, cs, n, cudaGetErrorString(e), n*cs, ctas, late);
    }
  }
}
