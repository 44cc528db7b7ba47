# cmake/KilnCuda.cmake — decides whether the CUDA backend is built (KILN_CUDA=AUTO|ON|OFF)
# and sets KILN_CUDA_SOURCES: the real backend (core/cuda/*.cu and its .cpp files) when nvcc,
# cuBLAS and cuDNN are found, else core/cuda/stub.cpp, which reports "no CUDA" and throws
# clear errors. cuDNN and cuBLAS come from the CUDA toolkit, or from KILN_CUDNN_ROOT and
# KILN_CUBLAS_ROOT (PyTorch's nvidia-* wheels: see Note [Libraries from wheels]).
# kiln_configure_cuda(target) adds the CUDA libraries to a target.
# Read next: cmake/KilnNccl.cmake, then scripts/gpu_check.sh, which sets the roots on a GPU machine.
set(KILN_CUDNN_ROOT "" CACHE PATH
    "Where cuDNN's include/ and lib/ are, when not in the CUDA toolkit (e.g. the nvidia-cudnn-cu13 wheel's nvidia/cudnn)")
set(KILN_CUBLAS_ROOT "" CACHE PATH
    "Where cuBLAS's include/ and lib/ are, used when the CUDA toolkit has none (e.g. the nvidia-cublas wheel's nvidia/cu13)")
set(KILN_WITH_CUDA OFF)
file(GLOB _kiln_cuda_cu CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/core/cuda/*.cu)
file(GLOB _kiln_cuda_cpp CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/core/cuda/*.cpp)
list(FILTER _kiln_cuda_cpp EXCLUDE REGEX "stub\\.cpp$")

# Note [Libraries from wheels]
# On a machine whose GPU libraries come with PyTorch (the GPU machine's image), cuDNN, NCCL and
# cuBLAS live in its Python environment's nvidia-* wheels: site-packages/nvidia/cudnn/{include,
# lib}, nvidia/nccl/..., nvidia/cu13/... Those wheels carry each library under its versioned
# run-time name only (libcudnn.so.9, libnccl.so.2, libcublas.so.13), without the unversioned
# link name (libcudnn.so) that find_library(cudnn) looks for, so the versioned names are listed
# too. A root that is given is the only place looked (NO_DEFAULT_PATH): a cuDNN found elsewhere
# when one was asked for would link what nobody chose. Changing a root forgets what an earlier
# configure found, so the cache cannot keep the old copy. The library is linked by its full
# path, so the build tree's RPATH finds it at run time; cuDNN 9 then dlopens its parts
# (libcudnn_graph.so.9, ...) by name, which gpu_check.sh covers with LD_LIBRARY_PATH.

# _kiln_forget_on_root_change(ROOT VAR...): unset the cached VARs when ROOT's value changed
# since the last configure, so that the next find_* searches again.
function(_kiln_forget_on_root_change root)
  if(NOT "${${root}}" STREQUAL "${_KILN_LAST_${root}}")
    foreach(var ${ARGN})
      unset(${var} CACHE)
    endforeach()
    set(_KILN_LAST_${root} "${${root}}" CACHE INTERNAL "the ${root} the cached results were found under")
  endif()
endfunction()

# _kiln_header_version(OUT HEADER MACRO...): "9.19.0" from #define lines such as CUDNN_MAJOR,
# CUDNN_MINOR, CUDNN_PATCHLEVEL in HEADER; "unknown version" when the header has none of them.
function(_kiln_header_version out header)
  set(parts)
  if(EXISTS "${header}")
    file(STRINGS "${header}" lines REGEX "^#define [A-Z_]+ +[0-9]+ *$")
    foreach(macro ${ARGN})
      if(lines MATCHES "#define ${macro} +([0-9]+)")
        list(APPEND parts ${CMAKE_MATCH_1})
      endif()
    endforeach()
  endif()
  if(parts)
    list(JOIN parts . version)
  else()
    set(version "unknown version")
  endif()
  set(${out} "${version}" PARENT_SCOPE)
endfunction()

# cuDNN: under KILN_CUDNN_ROOT only, when it is set; else the toolkit's folders and the usual
# system paths. NAMES_PER_DIR tries both names in each folder before moving to the next.
function(_kiln_find_cudnn)
  _kiln_forget_on_root_change(KILN_CUDNN_ROOT KILN_CUDNN_LIBRARY KILN_CUDNN_INCLUDE)
  if(KILN_CUDNN_ROOT)
    find_library(KILN_CUDNN_LIBRARY NAMES cudnn libcudnn.so.9 NAMES_PER_DIR
                 PATHS ${KILN_CUDNN_ROOT}/lib ${KILN_CUDNN_ROOT}/lib64 NO_DEFAULT_PATH)
    find_path(KILN_CUDNN_INCLUDE cudnn.h PATHS ${KILN_CUDNN_ROOT}/include NO_DEFAULT_PATH)
    set(where "KILN_CUDNN_ROOT=${KILN_CUDNN_ROOT}" PARENT_SCOPE)
  else()
    find_library(KILN_CUDNN_LIBRARY NAMES cudnn libcudnn.so.9 NAMES_PER_DIR
                 HINTS ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_LIBRARY_ROOT}/lib64)
    find_path(KILN_CUDNN_INCLUDE cudnn.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
    set(where "the CUDA toolkit (${CUDAToolkit_LIBRARY_DIR}, ${CUDAToolkit_INCLUDE_DIRS}) and the "
              "system paths; set KILN_CUDNN_ROOT to a cuDNN folder, e.g. python3 -c 'import "
              "nvidia.cudnn as n; print(list(n.__path__)[0])'" PARENT_SCOPE)
  endif()
endfunction()

# cuBLAS: the toolkit's (CUDA::cublas, CUDA::cublasLt from FindCUDAToolkit) when it has one;
# else the copy under KILN_CUBLAS_ROOT, made into the same two imported targets so the rest of
# the build (tests/bench too) links CUDA::cublas either way. Kiln itself then links the wheel's
# files by path (KILN_CUBLAS_LINK), as it does cuDNN: the installed package's find_package(Kiln)
# recreates only the toolkit's CUDA:: targets, and would not know a CUDA::cublas made here.
# A library FindCUDAToolkit found only among the stubs is no cuBLAS: it links, then fails at the
# first call.
function(_kiln_find_cublas)
  if(TARGET CUDA::cublas AND TARGET CUDA::cublasLt AND NOT CUDA_cublas_LIBRARY MATCHES "/stubs/")
    find_path(KILN_CUBLAS_INCLUDE cublas_api.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
    set(KILN_CUBLAS_FROM "${CUDA_cublas_LIBRARY}, the CUDA toolkit's" PARENT_SCOPE)
    set(KILN_CUBLAS_LINK CUDA::cublas CUDA::cublasLt PARENT_SCOPE)
  elseif(KILN_CUBLAS_ROOT)
    _kiln_forget_on_root_change(KILN_CUBLAS_ROOT KILN_CUBLAS_LIBRARY KILN_CUBLASLT_LIBRARY KILN_CUBLAS_INCLUDE)
    find_library(KILN_CUBLAS_LIBRARY NAMES cublas libcublas.so.13 NAMES_PER_DIR
                 PATHS ${KILN_CUBLAS_ROOT}/lib NO_DEFAULT_PATH)
    find_library(KILN_CUBLASLT_LIBRARY NAMES cublasLt libcublasLt.so.13 NAMES_PER_DIR
                 PATHS ${KILN_CUBLAS_ROOT}/lib NO_DEFAULT_PATH)
    # The headers: the toolkit's when it has them, else the wheel's.
    find_path(KILN_CUBLAS_INCLUDE cublas_api.h HINTS ${CUDAToolkit_INCLUDE_DIRS} ${KILN_CUBLAS_ROOT}/include)
    if(NOT (KILN_CUBLAS_LIBRARY AND KILN_CUBLASLT_LIBRARY AND KILN_CUBLAS_INCLUDE))
      return()
    endif()
    if(NOT TARGET CUDA::cublasLt)
      add_library(CUDA::cublasLt UNKNOWN IMPORTED)
    endif()
    set_target_properties(CUDA::cublasLt PROPERTIES IMPORTED_LOCATION "${KILN_CUBLASLT_LIBRARY}"
                          INTERFACE_INCLUDE_DIRECTORIES "${KILN_CUBLAS_INCLUDE}")
    if(NOT TARGET CUDA::cublas)
      add_library(CUDA::cublas UNKNOWN IMPORTED)
    endif()
    set_target_properties(CUDA::cublas PROPERTIES IMPORTED_LOCATION "${KILN_CUBLAS_LIBRARY}"
                          INTERFACE_INCLUDE_DIRECTORIES "${KILN_CUBLAS_INCLUDE}"
                          INTERFACE_LINK_LIBRARIES CUDA::cublasLt)
    set(KILN_CUBLAS_FROM "${KILN_CUBLAS_LIBRARY}, from KILN_CUBLAS_ROOT" PARENT_SCOPE)
    set(KILN_CUBLAS_LINK ${KILN_CUBLAS_LIBRARY} ${KILN_CUBLASLT_LIBRARY} PARENT_SCOPE)
    set(KILN_CUBLAS_LINK_INCLUDE ${KILN_CUBLAS_INCLUDE} PARENT_SCOPE)
  else()
    return()
  endif()
  _kiln_header_version(version "${KILN_CUBLAS_INCLUDE}/cublas_api.h"
                       CUBLAS_VER_MAJOR CUBLAS_VER_MINOR CUBLAS_VER_PATCH)
  set(KILN_CUBLAS_VERSION ${version} PARENT_SCOPE)
endfunction()

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
    _kiln_find_cudnn()
    _kiln_find_cublas()
    if(KILN_CUDNN_LIBRARY AND KILN_CUDNN_INCLUDE AND KILN_CUBLAS_FROM)
      set(KILN_WITH_CUDA ON)
      _kiln_header_version(KILN_CUDNN_VERSION "${KILN_CUDNN_INCLUDE}/cudnn_version.h"
                           CUDNN_MAJOR CUDNN_MINOR CUDNN_PATCHLEVEL)
      # One line per library, each with where it came from: the first thing to read when a GPU
      # machine's build links something other than what was meant.
      message(STATUS "Kiln CUDA backend: ON (nvcc ${CMAKE_CUDA_COMPILER_VERSION}, CUDA toolkit "
                     "${CUDAToolkit_VERSION} at ${CUDAToolkit_BIN_DIR}, architectures ${CMAKE_CUDA_ARCHITECTURES})")
      message(STATUS "Kiln CUDA backend: cuBLAS ${KILN_CUBLAS_VERSION} (${KILN_CUBLAS_FROM})")
      message(STATUS "Kiln CUDA backend: cuDNN ${KILN_CUDNN_VERSION} (${KILN_CUDNN_LIBRARY}, "
                     "headers ${KILN_CUDNN_INCLUDE})")
    elseif(KILN_CUDA STREQUAL "ON" AND NOT KILN_CUBLAS_FROM)
      message(FATAL_ERROR "KILN_CUDA=ON but cuBLAS was not found (looked for CUDA::cublas in the CUDA "
                          "toolkit at ${CUDAToolkit_LIBRARY_DIR}, then for libcublas and cublas_api.h under "
                          "KILN_CUBLAS_ROOT='${KILN_CUBLAS_ROOT}')")
    elseif(KILN_CUDA STREQUAL "ON")
      message(FATAL_ERROR "KILN_CUDA=ON but cuDNN was not found (looked for libcudnn or libcudnn.so.9 "
                          "and cudnn.h under ${where})")
    else()
      message(STATUS "Kiln CUDA backend: OFF (nvcc found, but not cuBLAS and cuDNN)")
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
    if(KILN_CUBLAS_LINK_INCLUDE)  # cuBLAS from KILN_CUBLAS_ROOT
      target_include_directories(${target} SYSTEM PRIVATE ${KILN_CUBLAS_LINK_INCLUDE})
    endif()
    target_link_libraries(${target} PRIVATE CUDA::cudart ${KILN_CUBLAS_LINK} ${KILN_CUDNN_LIBRARY})
    set_target_properties(${target} PROPERTIES CUDA_SEPARABLE_COMPILATION OFF)
  endif()
endfunction()
