# cmake/KilnNccl.cmake — decides whether distributed/ gets its NCCL backend (KILN_NCCL=AUTO|ON|OFF)
# and sets KILN_NCCL_SOURCES: distributed/nccl/process_group_nccl.cpp when the CUDA backend is
# built and nccl.h and libnccl are found (the CUDA toolkit's, or under KILN_NCCL_ROOT, e.g. the
# nvidia-nccl Python wheel's folder), else distributed/nccl/stub.cpp, which says what the build
# lacked. kiln_configure_nccl(target) links NCCL into a target. Include after KilnCuda.cmake.
set(KILN_NCCL AUTO CACHE STRING "Build the NCCL backend of kiln::distributed: AUTO, ON or OFF")
set_property(CACHE KILN_NCCL PROPERTY STRINGS AUTO ON OFF)
set(KILN_NCCL_ROOT "" CACHE PATH "Where NCCL's include/ and lib/ are, when not in the CUDA toolkit")
set(KILN_WITH_NCCL OFF)

if(KILN_NCCL STREQUAL "OFF")
  message(STATUS "Kiln distributed NCCL backend: OFF (KILN_NCCL=OFF)")
elseif(NOT KILN_WITH_CUDA)
  if(KILN_NCCL STREQUAL "ON")
    message(FATAL_ERROR "KILN_NCCL=ON needs the CUDA backend, which is OFF")
  endif()
  message(STATUS "Kiln distributed NCCL backend: OFF (no CUDA backend)")
else()
  # As for cuDNN (Note [Libraries from wheels] in KilnCuda.cmake): the wheel has only
  # libnccl.so.2, and a root that is given is the only place looked.
  _kiln_forget_on_root_change(KILN_NCCL_ROOT KILN_NCCL_INCLUDE KILN_NCCL_LIBRARY)
  if(KILN_NCCL_ROOT)
    find_path(KILN_NCCL_INCLUDE nccl.h PATHS ${KILN_NCCL_ROOT}/include NO_DEFAULT_PATH)
    find_library(KILN_NCCL_LIBRARY NAMES nccl libnccl.so.2 NAMES_PER_DIR
                 PATHS ${KILN_NCCL_ROOT}/lib ${KILN_NCCL_ROOT}/lib64 NO_DEFAULT_PATH)
  else()
    find_path(KILN_NCCL_INCLUDE nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
    find_library(KILN_NCCL_LIBRARY NAMES nccl libnccl.so.2 NAMES_PER_DIR
                 HINTS ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_LIBRARY_ROOT}/lib64)
  endif()
  if(KILN_NCCL_INCLUDE AND KILN_NCCL_LIBRARY)
    set(KILN_WITH_NCCL ON)
    _kiln_header_version(_kiln_nccl_version "${KILN_NCCL_INCLUDE}/nccl.h" NCCL_MAJOR NCCL_MINOR NCCL_PATCH)
    message(STATUS "Kiln distributed NCCL backend: ON (NCCL ${_kiln_nccl_version}, ${KILN_NCCL_LIBRARY}, "
                   "headers ${KILN_NCCL_INCLUDE})")
  elseif(KILN_NCCL STREQUAL "ON")
    message(FATAL_ERROR "KILN_NCCL=ON but NCCL was not found (looked for nccl.h and libnccl under "
                        "KILN_NCCL_ROOT='${KILN_NCCL_ROOT}' and the CUDA toolkit)")
  else()
    message(STATUS "Kiln distributed NCCL backend: OFF (NCCL not found)")
  endif()
endif()

if(KILN_WITH_NCCL)
  set(KILN_NCCL_SOURCES ${PROJECT_SOURCE_DIR}/distributed/nccl/process_group_nccl.cpp)
else()
  set(KILN_NCCL_SOURCES ${PROJECT_SOURCE_DIR}/distributed/nccl/stub.cpp)
endif()

function(kiln_configure_nccl target)
  if(KILN_WITH_NCCL)
    # process_group_nccl.cpp also calls the CUDA runtime: CUDA::cudart brings its headers, which
    # sit beside nccl.h only when NCCL is the toolkit's, not a wheel's (KILN_NCCL_ROOT).
    target_include_directories(${target} PRIVATE ${KILN_NCCL_INCLUDE})
    target_link_libraries(${target} PRIVATE ${KILN_NCCL_LIBRARY} CUDA::cudart)
  endif()
endfunction()
