# System libraries for ingest and the app. scripts/setup.sh installs all of them on Debian bookworm.
find_package(Qt6 6.2 REQUIRED COMPONENTS Core Gui Widgets Concurrent Sql Test Multimedia MultimediaWidgets Network)
find_package(PkgConfig REQUIRED)
pkg_check_modules(POPPLER_QT6 REQUIRED IMPORTED_TARGET poppler-qt6)
pkg_check_modules(FFMPEG REQUIRED IMPORTED_TARGET libavformat libavcodec libavutil libswscale libswresample)
pkg_check_modules(LIBZIP REQUIRED IMPORTED_TARGET libzip)
pkg_check_modules(TESSERACT REQUIRED IMPORTED_TARGET tesseract)
pkg_check_modules(SQLITE3 REQUIRED IMPORTED_TARGET sqlite3)

# Debian's pocketsphinx.pc names /usr/include/sphinxbase, which does not exist (sphinxbase's headers
# live in /usr/include/<multiarch>/sphinxbase), so build the imported target by hand.
find_path(POCKETSPHINX_INCLUDE_DIR pocketsphinx.h PATH_SUFFIXES pocketsphinx)
find_path(SPHINXBASE_INCLUDE_DIR sphinxbase/cmd_ln.h
          PATHS /usr/include/${CMAKE_LIBRARY_ARCHITECTURE} /usr/include)
find_library(POCKETSPHINX_LIBRARY pocketsphinx)
find_library(SPHINXBASE_LIBRARY sphinxbase)
if(POCKETSPHINX_INCLUDE_DIR AND POCKETSPHINX_LIBRARY)
  add_library(sightline_pocketsphinx INTERFACE)
  target_include_directories(sightline_pocketsphinx SYSTEM INTERFACE ${POCKETSPHINX_INCLUDE_DIR}
                             ${SPHINXBASE_INCLUDE_DIR} ${SPHINXBASE_INCLUDE_DIR}/sphinxbase)
  target_link_libraries(sightline_pocketsphinx INTERFACE ${POCKETSPHINX_LIBRARY})
  if(SPHINXBASE_LIBRARY)
    target_link_libraries(sightline_pocketsphinx INTERFACE ${SPHINXBASE_LIBRARY})
  endif()
  add_library(Sightline::PocketSphinx ALIAS sightline_pocketsphinx)
  message(STATUS "Sightline: pocketsphinx ${POCKETSPHINX_LIBRARY} (headers ${POCKETSPHINX_INCLUDE_DIR})")
else()
  message(FATAL_ERROR "pocketsphinx not found: run scripts/setup.sh (libpocketsphinx-dev)")
endif()
