# headlab's modules: one static library per room of the house, each linking only the modules
# (and third-party packages) it may use. The links are the arrows of docs/architecture.md:
#
#   headlab_module(NAME DIRS dir... [DEPENDS module...] [PUBLIC lib...] [PRIVATE lib...])
#
# builds headlab_<NAME> from DIRS/*.cpp, links headlab_<dep> for every DEPENDS entry (PUBLIC:
# a module may use what its dependencies use), and records the module for the house check
# (tests/house/check_includes.py via house_modules.json in the build tree), which fails when a
# source file includes a header of a module outside its dependencies' closure, or a third-party
# header of a package its module does not link.

define_property(GLOBAL PROPERTY HEADLAB_MODULES BRIEF_DOCS "headlab modules, bottom up"
  FULL_DOCS "Filled by headlab_module(); read by headlab_write_house_manifest().")

function(headlab_module name)
  cmake_parse_arguments(M "" "" "DIRS;DEPENDS;PUBLIC;PRIVATE" ${ARGN})
  set(sources)
  foreach(dir ${M_DIRS})
    file(GLOB dir_sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/${dir}/*.cpp)
    list(APPEND sources ${dir_sources})
  endforeach()
  set(target headlab_${name})
  add_library(${target} STATIC ${sources})
  set_target_properties(${target} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  target_include_directories(${target} PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}>)
  target_compile_options(${target} PRIVATE ${HEADLAB_WARNINGS})
  set(deps)
  foreach(dep ${M_DEPENDS})
    list(APPEND deps headlab_${dep})
  endforeach()
  target_link_libraries(${target} PUBLIC ${deps} ${M_PUBLIC} PRIVATE ${M_PRIVATE})
  set_property(GLOBAL APPEND PROPERTY HEADLAB_MODULES ${name})
  set_property(GLOBAL PROPERTY HEADLAB_MODULE_${name}_DIRS ${M_DIRS})
  set_property(GLOBAL PROPERTY HEADLAB_MODULE_${name}_DEPENDS ${M_DEPENDS})
  set_property(GLOBAL PROPERTY HEADLAB_MODULE_${name}_PUBLIC ${M_PUBLIC})
  set_property(GLOBAL PROPERTY HEADLAB_MODULE_${name}_PRIVATE ${M_PRIVATE})
endfunction()

# The executable's sources count as a module too (name, dirs, deps, libs), for the house check.
function(headlab_record_module name)
  cmake_parse_arguments(M "" "" "DIRS;DEPENDS;PRIVATE" ${ARGN})
  set_property(GLOBAL APPEND PROPERTY HEADLAB_MODULES ${name})
  set_property(GLOBAL PROPERTY HEADLAB_MODULE_${name}_DIRS ${M_DIRS})
  set_property(GLOBAL PROPERTY HEADLAB_MODULE_${name}_DEPENDS ${M_DEPENDS})
  set_property(GLOBAL PROPERTY HEADLAB_MODULE_${name}_PUBLIC "")
  set_property(GLOBAL PROPERTY HEADLAB_MODULE_${name}_PRIVATE ${M_PRIVATE})
endfunction()

# Writes <build>/house_modules.json: {"modules": [{"name", "dirs", "depends", "public",
# "private"}]}, bottom up.
function(headlab_write_house_manifest)
  get_property(modules GLOBAL PROPERTY HEADLAB_MODULES)
  set(entries)
  foreach(name ${modules})
    foreach(field DIRS DEPENDS PUBLIC PRIVATE)
      get_property(values GLOBAL PROPERTY HEADLAB_MODULE_${name}_${field})
      set(quoted)
      foreach(v ${values})
        list(APPEND quoted "\"${v}\"")
      endforeach()
      list(JOIN quoted ", " ${field}_json)
    endforeach()
    list(APPEND entries "    {\"name\": \"${name}\", \"dirs\": [${DIRS_json}], \"depends\": [${DEPENDS_json}], \"public\": [${PUBLIC_json}], \"private\": [${PRIVATE_json}]}")
  endforeach()
  list(JOIN entries ",\n" body)
  file(WRITE ${PROJECT_BINARY_DIR}/house_modules.json "{\"modules\": [\n${body}\n]}\n")
endfunction()
