# What the desktop widgets need beyond app/CMakeLists.txt's sightline_desktop target: the Qt
# modules (Concurrent for the workers, Multimedia for the video player) and the SVG icons under
# resources/icons. Included once, after sightline_desktop exists (today from
# packaging/CMakeLists.txt; app/CMakeLists.txt may include it directly instead).
get_property(_sl_desktop_extras_done GLOBAL PROPERTY SIGHTLINE_DESKTOP_EXTRAS_DONE)
if(TARGET sightline_desktop AND NOT _sl_desktop_extras_done)
  set_property(GLOBAL PROPERTY SIGHTLINE_DESKTOP_EXTRAS_DONE TRUE)
  target_link_libraries(sightline_desktop PUBLIC Qt6::Concurrent Qt6::Multimedia Qt6::Gui)
  # moc need not wait for the libraries the widgets link (they share no generated headers).
  set_target_properties(sightline_desktop PROPERTIES AUTOGEN_ORIGIN_DEPENDS OFF)
  file(GLOB _sl_desktop_icons RELATIVE ${PROJECT_SOURCE_DIR}/resources CONFIGURE_DEPENDS
       ${PROJECT_SOURCE_DIR}/resources/icons/*.svg)
  list(REMOVE_ITEM _sl_desktop_icons icons/sightline.svg)  # already in "sightline_resources"
  set(_sl_desktop_icon_files "")
  foreach(_icon ${_sl_desktop_icons})
    list(APPEND _sl_desktop_icon_files ${PROJECT_SOURCE_DIR}/resources/${_icon})
  endforeach()
  if(_sl_desktop_icon_files)
    qt_add_resources(sightline_desktop "sightline_desktop_icons" PREFIX "/"
      BASE ${PROJECT_SOURCE_DIR}/resources FILES ${_sl_desktop_icon_files})
  endif()
endif()
