# Writes a C++ file that holds every template header as a string, so that
# NVRTC gets the headers from the binary (no files needed at run time).
# Usage: cmake -DTEMPLATE_DIR=... -DOUTPUT=... -P embed_templates.cmake
file(GLOB_RECURSE headers RELATIVE "${TEMPLATE_DIR}" "${TEMPLATE_DIR}/topk/*.cuh" "${TEMPLATE_DIR}/topk/*.h")
list(SORT headers)
set(body "// Generated from templates/ by cmake/embed_templates.cmake. Do not edit.\n")
string(APPEND body "#include <string>\n#include <utility>\n#include <vector>\n\nnamespace topk::gen {\n")
string(APPEND body "const std::vector<std::pair<std::string, std::string>>& EmbeddedTemplatesData() {\n")
string(APPEND body "  static const std::vector<std::pair<std::string, std::string>> data = {\n")
foreach(h IN LISTS headers)
  file(READ "${TEMPLATE_DIR}/${h}" text)
  string(APPEND body "    {\"${h}\", R\"TOPK_EMBED(${text})TOPK_EMBED\"},\n")
endforeach()
string(APPEND body "  };\n  return data;\n}\n}  // namespace topk::gen\n")
# Rewrite only on change so that dependants do not rebuild needlessly.
if(EXISTS "${OUTPUT}")
  file(READ "${OUTPUT}" old)
endif()
if(NOT "${old}" STREQUAL "${body}")
  file(WRITE "${OUTPUT}" "${body}")
endif()
