# Warnings for our own targets. Third-party headers come in as SYSTEM through imported targets.
add_library(sightline_warnings INTERFACE)
target_compile_options(sightline_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wnon-virtual-dtor
                            -Wcast-align -Wunused -Woverloaded-virtual -Wnull-dereference
                            -Wimplicit-fallthrough>
  $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra>)
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  target_compile_options(sightline_warnings INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-Wshadow=local>)
else()
  target_compile_options(sightline_warnings INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-Wshadow-uncaptured-local>)
endif()
if(SIGHTLINE_WERROR)
  target_compile_options(sightline_warnings INTERFACE
    $<$<COMPILE_LANGUAGE:CXX>:-Werror>
    $<$<COMPILE_LANGUAGE:CUDA>:-Werror=all-warnings -Xcompiler=-Werror>)
endif()

# sightline_target_defaults(target): our warnings and the generated config header.
function(sightline_target_defaults target)
  target_link_libraries(${target} PRIVATE sightline_warnings)
  target_include_directories(${target} PUBLIC ${CMAKE_BINARY_DIR}/generated)
endfunction()
