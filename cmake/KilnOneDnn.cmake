# cmake/KilnOneDnn.cmake — decides whether the CPU's library route is built on oneDNN
# (KILN_ONEDNN=AUTO|ON|OFF) and sets KILN_ONEDNN_SOURCES: core/onednn/*.cpp when Debian's
# libdnnl-dev is found, else core/onednn/stub.cpp, with which the CPU keeps its Eigen route
# for everything. kiln_configure_onednn(target) links oneDNN into a target.
set(KILN_ONEDNN AUTO CACHE STRING "Build the oneDNN CPU route: AUTO, ON or OFF")
set_property(CACHE KILN_ONEDNN PROPERTY STRINGS AUTO ON OFF)
set(KILN_WITH_ONEDNN OFF)
file(GLOB _kiln_onednn_cpp CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/core/onednn/*.cpp)
list(FILTER _kiln_onednn_cpp EXCLUDE REGEX "stub\\.cpp$")

if(NOT KILN_ONEDNN STREQUAL "OFF")
  find_package(dnnl CONFIG QUIET)
  if(dnnl_FOUND)
    set(KILN_WITH_ONEDNN ON)
    message(STATUS "Kiln oneDNN CPU route: ON (oneDNN ${dnnl_VERSION})")
  elseif(KILN_ONEDNN STREQUAL "ON")
    message(FATAL_ERROR "KILN_ONEDNN=ON but oneDNN was not found (Debian: apt-get install libdnnl-dev)")
  else()
    message(STATUS "Kiln oneDNN CPU route: OFF (oneDNN not found; the CPU uses Eigen throughout)")
  endif()
else()
  message(STATUS "Kiln oneDNN CPU route: OFF (KILN_ONEDNN=OFF)")
endif()

if(KILN_WITH_ONEDNN)
  set(KILN_ONEDNN_SOURCES ${_kiln_onednn_cpp})
else()
  set(KILN_ONEDNN_SOURCES ${PROJECT_SOURCE_DIR}/core/onednn/stub.cpp)
endif()

function(kiln_configure_onednn target)
  if(KILN_WITH_ONEDNN)
    # PUBLIC for the static library's consumers (KilnConfig.cmake finds dnnl for them).
    target_link_libraries(${target} PUBLIC DNNL::dnnl)
  endif()
endfunction()
