// core/cuda/host_device.h — KILN_HOST_DEVICE marks functions that run on both CPU and GPU.
// The one place outside the CUDA sources that looks at __CUDACC__, so that elementwise
// functors (core/ops/functors.h) are written once for both backends.
#pragma once

#if defined(__CUDACC__)
#define KILN_HOST_DEVICE __host__ __device__
#else
#define KILN_HOST_DEVICE
#endif
