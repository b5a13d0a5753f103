# scripts/assets.sha256 is the one list of pinned downloads (model, samples). Turn it into a header
# so the engine and the tests check the same hashes that scripts/setup.sh checks.
set(_pins_file ${PROJECT_SOURCE_DIR}/scripts/assets.sha256)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${_pins_file})
file(STRINGS ${_pins_file} _pins REGEX "^[0-9a-f]+  ")
set(_rows "")
foreach(line IN LISTS _pins)
  string(REGEX MATCH "^([0-9a-f]+)  (.+)$" _m "${line}")
  string(APPEND _rows "    {\"${CMAKE_MATCH_2}\", \"${CMAKE_MATCH_1}\"},\n")
endforeach()
file(CONFIGURE OUTPUT ${CMAKE_BINARY_DIR}/generated/sightline/asset_pins.h CONTENT
"// Generated from scripts/assets.sha256 by cmake/SightlineAssetPins.cmake; do not edit.
#pragma once

namespace sl::generated {

struct AssetPin {
    const char* path;    // relative to the cache folder
    const char* sha256;  // lowercase hex
};

inline constexpr AssetPin kAssetPins[] = {
${_rows}};

}  // namespace sl::generated
" @ONLY)
