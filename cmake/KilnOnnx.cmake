# cmake/KilnOnnx.cmake — decides whether onnx/ (kiln::onnx::export_model) is built on Debian's
# libonnx-dev and libprotobuf-dev (KILN_ONNX=AUTO|ON|OFF) and sets KILN_ONNX_SOURCES: onnx/*.cpp
# when ONNX's CMake package is found, else onnx/stub.cpp, whose export_model says how to get
# it. kiln_configure_onnx(target) links ONNX (and through it protobuf) into a target.
set(KILN_ONNX AUTO CACHE STRING "Build ONNX export (onnx/): AUTO, ON or OFF")
set_property(CACHE KILN_ONNX PROPERTY STRINGS AUTO ON OFF)
set(KILN_WITH_ONNX OFF)
file(GLOB _kiln_onnx_cpp CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/onnx/*.cpp)
list(FILTER _kiln_onnx_cpp EXCLUDE REGEX "stub\\.cpp$")

if(NOT KILN_ONNX STREQUAL "OFF")
  # ONNX's package names protobuf::libprotobuf as its dependency without finding it.
  find_package(Protobuf QUIET)
  find_package(ONNX CONFIG QUIET)
  if(ONNX_FOUND AND Protobuf_FOUND)
    set(KILN_WITH_ONNX ON)
    message(STATUS "Kiln ONNX export: ON (ONNX ${ONNX_VERSION}, protobuf ${Protobuf_VERSION})")
  elseif(KILN_ONNX STREQUAL "ON")
    message(FATAL_ERROR "KILN_ONNX=ON but ONNX was not found (Debian: apt-get install libonnx-dev libprotobuf-dev)")
  else()
    message(STATUS "Kiln ONNX export: OFF (libonnx-dev not found)")
  endif()
else()
  message(STATUS "Kiln ONNX export: OFF (KILN_ONNX=OFF)")
endif()

if(KILN_WITH_ONNX)
  set(KILN_ONNX_SOURCES ${_kiln_onnx_cpp})
else()
  set(KILN_ONNX_SOURCES ${PROJECT_SOURCE_DIR}/onnx/stub.cpp)
endif()

function(kiln_configure_onnx target)
  if(KILN_WITH_ONNX)
    # PRIVATE: ONNX's headers and definitions stay inside onnx/ (no public header of Kiln's
    # includes them); the static library's consumers still link it (KilnConfig.cmake finds it).
    target_link_libraries(${target} PRIVATE onnx)
  endif()
endfunction()
