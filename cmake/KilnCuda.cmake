# cmake/KilnCuda.cmake — decides whether the CUDA backend is built (KILN_CUDA=AUTO|ON|OFF)
# and sets KILN_CUDA_SOURCES: the real backend (core/cuda/*.cu and its .cpp files) when nvcc,
# cuBLAS and cuDNN are found, else core/cuda/stub.cpp, which reports "no CUDA" and throws
# clear errors. kiln_configure_cuda(target) adds the CUDA libraries to a target.
set(KILN_WITH_CUDA OFF)
file(GLOB _kiln_cuda_cu CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/core/cuda/*.cu)
file(GLOB _kiln_cuda_cpp CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/core/cuda/*.cpp)
list(FILTER _kiln_cuda_cpp EXCLUDE REGEX "stub\\.cpp$")

if(NOT KILN_CUDA STREQUAL "OFF")
  if(NOT CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX} AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER AND _kiln_cuda_cu)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 90)  # H100/H200; override with -DCMAKE_CUDA_ARCHITECTURES=...
    endif()
    enable_language(CUDA)
    # CMake 3.25 predates nvcc's C++20 support and would refuse the C++20 the library
    # requires; nvcc 12+ takes the same flag as g++.
    if(NOT CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
      set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
      set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
    endif()
    set(CMAKE_CUDA_STANDARD 20)
    find_package(CUDAToolkit REQUIRED)
    find_library(KILN_CUDNN_LIBRARY cudnn HINTS ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_LIBRARY_ROOT}/lib64)
    find_path(KILN_CUDNN_INCLUDE cudnn.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
    if(KILN_CUDNN_LIBRARY AND KILN_CUDNN_INCLUDE)
      set(KILN_WITH_CUDA ON)
      message(STATUS "Kiln CUDA backend: ON (nvcc ${CMAKE_CUDA_COMPILER_VERSION}, CUDA toolkit "
                     "${CUDAToolkit_VERSION}, cuBLAS ${CUDA_cublas_LIBRARY}, cuDNN ${KILN_CUDNN_LIBRARY}, "
                     "architectures ${CMAKE_CUDA_ARCHITECTURES})")
    elseif(KILN_CUDA STREQUAL "ON")
      message(FATAL_ERROR "KILN_CUDA=ON but cuDNN was not found (looked for libcudnn and cudnn.h "
                          "under ${CUDAToolkit_LIBRARY_DIR} and ${CUDAToolkit_INCLUDE_DIRS})")
    else()
      message(STATUS "Kiln CUDA backend: OFF (nvcc found, but not cuDNN)")
    endif()
  elseif(KILN_CUDA STREQUAL "ON")
    message(FATAL_ERROR "KILN_CUDA=ON but no CUDA compiler was found (set CUDACXX or put nvcc on PATH)")
  else()
    message(STATUS "Kiln CUDA backend: OFF (no nvcc found; building the CPU-only stub)")
  endif()
else()
  message(STATUS "Kiln CUDA backend: OFF (KILN_CUDA=OFF)")
endif()

if(KILN_WITH_CUDA)
  set(KILN_CUDA_SOURCES ${_kiln_cuda_cu} ${_kiln_cuda_cpp})
else()
  set(KILN_CUDA_SOURCES ${PROJECT_SOURCE_DIR}/core/cuda/stub.cpp)
endif()

function(kiln_configure_cuda target)
  if(KILN_WITH_CUDA)
    # The kernels call constexpr helpers of the shared functors (core/ops/functors.h) and
    # std::numeric_limits on the device.
    target_compile_options(${target} PRIVATE
      $<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr>)
    target_include_directories(${target} PRIVATE ${KILN_CUDNN_INCLUDE})
    target_link_libraries(${target} PRIVATE CUDA::cudart CUDA::cublas CUDA::cublasLt ${KILN_CUDNN_LIBRARY})
    set_target_properties(${target} PROPERTIES CUDA_SEPARABLE_COMPILATION OFF)
  endif()
endfunction()
