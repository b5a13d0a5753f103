# Decides whether the CUDA kernels are built. AUTO turns CUDA on when a working nvcc is found.
# The CUDA runtime is linked statically so that a CUDA build still starts on a machine with no
# driver; kernels/cuda reports the device state at run time and the engine falls back to the CPU.
set(SIGHTLINE_HAVE_CUDA OFF)
if(SIGHTLINE_CUDA STREQUAL "ON" OR SIGHTLINE_CUDA STREQUAL "AUTO")
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      # Ampere consumer, Ada, Hopper, Blackwell consumer; PTX of the newest for what comes next.
      set(CMAKE_CUDA_ARCHITECTURES 86-real 89-real 90-real 120-real 120-virtual)
    endif()
    enable_language(CUDA)
    set(CMAKE_CUDA_STANDARD 17)  # CMake 3.25 knows no CUDA20 flag for nvcc
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    set(CMAKE_CUDA_RUNTIME_LIBRARY Static)
    find_package(CUDAToolkit REQUIRED)
    set(SIGHTLINE_HAVE_CUDA ON)
    message(STATUS "Sightline: CUDA ${CMAKE_CUDA_COMPILER_VERSION}, architectures ${CMAKE_CUDA_ARCHITECTURES}")
  elseif(SIGHTLINE_CUDA STREQUAL "ON")
    message(FATAL_ERROR "SIGHTLINE_CUDA=ON but no CUDA compiler was found (set CMAKE_CUDA_COMPILER)")
  else()
    message(STATUS "Sightline: no CUDA compiler found; building the CPU-only stub for kernels/cuda")
  endif()
else()
  message(STATUS "Sightline: CUDA disabled (SIGHTLINE_CUDA=OFF)")
endif()
