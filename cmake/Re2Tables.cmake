# cmake -DRE2_SOURCE=<dir> -DPYTHON=<python3> -DPERL=<perl> -P Re2Tables.cmake
# Debian's RE2 source tarball (+dfsg) leaves out three generated tables; Debian's build makes them
# again from the Unicode Character Database of its unicode-data package, and so does this.
if(NOT EXISTS /usr/share/unicode/UnicodeData.txt)
  message(FATAL_ERROR "RE2's tables need Debian's unicode-data package (/usr/share/unicode): "
                      "scripts/build_env.sh installs it")
endif()
set(unicode_py "${RE2_SOURCE}/re2/unicode.py")
file(READ "${unicode_py}" text)
string(REPLACE "from six.moves import urllib" "import urllib.request" text "${text}")
string(REGEX REPLACE "_UNICODE_DIR = \"[^\"]*\"" "_UNICODE_DIR = \"/usr/share/unicode\"" text "${text}")
file(WRITE "${unicode_py}" "${text}")
foreach(table perl_groups unicode_casefold unicode_groups)
  if(table STREQUAL "perl_groups")
    set(command "${PERL}" re2/make_perl_groups.pl)
  else()
    set(command "${PYTHON}" re2/make_${table}.py)
  endif()
  execute_process(COMMAND ${command} WORKING_DIRECTORY "${RE2_SOURCE}"
                  OUTPUT_FILE "${RE2_SOURCE}/re2/${table}.cc" RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "making RE2's re2/${table}.cc failed (${rc})")
  endif()
endforeach()
