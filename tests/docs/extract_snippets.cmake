# Extracts the C++ snippets of the documentation so that the build compiles every one of them.
#
# Every fenced block that opens with ```cpp in the given Markdown files becomes its own
# translation unit, <output_dir>/<page>_<n>.cpp (n counts the page's cpp blocks from 1; <page> is
# the file name without .md, with characters other than letters and digits turned into '_'). Each
# file starts with a #line directive, so a compiler error names the Markdown file and line.
# Convention: a cpp block is a complete translation unit (its #includes at the top; main may be
# omitted). Blocks fenced as ```sh, ```cmake, ```text, ... are not extracted.
#
# Files are rewritten only when their text changes (an unchanged snippet is not recompiled), and
# .cpp files left over from snippets that no longer exist are removed.
#
# Two ways to use it:
#   include(extract_snippets.cmake), then
#       tessera_extract_doc_snippets(<out_var> <output_dir> <base_dir> <file.md>...)
#     sets <out_var> to the list of generated .cpp files; the Markdown files are added to the
#     directory's CMAKE_CONFIGURE_DEPENDS, so editing one re-runs the extraction. Paths in the
#     #line directives are relative to <base_dir>.
#   cmake -DOUTPUT_DIR=<dir> -DBASE_DIR=<dir> "-DFILES=<a.md>;<b.md>" -P extract_snippets.cmake
#     does the same from the command line and prints the files written.
if(CMAKE_SCRIPT_MODE_FILE STREQUAL CMAKE_CURRENT_LIST_FILE)
    cmake_minimum_required(VERSION 3.21)
endif()
include_guard(GLOBAL)

function(tessera_extract_doc_snippets out_var output_dir base_dir)
    file(MAKE_DIRECTORY "${output_dir}")
    set(generated "")
    foreach(md IN LISTS ARGN)
        get_filename_component(md "${md}" ABSOLUTE)
        get_filename_component(page "${md}" NAME_WLE)
        string(REGEX REPLACE "[^A-Za-z0-9]" "_" page "${page}")
        file(RELATIVE_PATH shown "${base_dir}" "${md}")
        file(READ "${md}" rest)

        set(line_no 0)
        set(count 0)
        set(in_cpp FALSE)     # inside a ```cpp block
        set(in_other FALSE)   # inside any other fenced block (its lines are not looked at)
        set(indent "")        # the opening fence's indentation, stripped from the block's lines
        set(block "")
        set(opened_at 0)
        # Walks the text line by line with string(FIND)/SUBSTRING rather than as a CMake list:
        # C++ is full of ';', '[' and '\', which list splitting would mangle.
        while(NOT rest STREQUAL "")
            string(FIND "${rest}" "\n" eol)
            if(eol EQUAL -1)
                set(line "${rest}")
                set(rest "")
            else()
                string(SUBSTRING "${rest}" 0 ${eol} line)
                math(EXPR next "${eol} + 1")
                string(SUBSTRING "${rest}" ${next} -1 rest)
            endif()
            string(REGEX REPLACE "\r$" "" line "${line}")
            math(EXPR line_no "${line_no} + 1")

            if(in_cpp)
                if(line MATCHES "^[ ]*```[ \t]*$")
                    math(EXPR count "${count} + 1")
                    set(file "${output_dir}/${page}_${count}.cpp")
                    math(EXPR first "${opened_at} + 1")
                    set(text "#line ${first} \"${shown}\"\n${block}")
                    set(old "")
                    if(EXISTS "${file}")
                        file(READ "${file}" old)
                    endif()
                    if(NOT old STREQUAL text)
                        file(WRITE "${file}" "${text}")
                    endif()
                    list(APPEND generated "${file}")
                    set(in_cpp FALSE)
                    set(block "")
                else()
                    string(LENGTH "${indent}" n)
                    if(n GREATER 0)
                        string(SUBSTRING "${line}" 0 ${n} head)
                        if(head STREQUAL indent)
                            string(SUBSTRING "${line}" ${n} -1 line)
                        endif()
                    endif()
                    string(APPEND block "${line}\n")
                endif()
            elseif(in_other)
                if(line MATCHES "^[ ]*```[ \t]*$")
                    set(in_other FALSE)
                endif()
            elseif(line MATCHES "^([ ]*)```cpp[ \t]*$")
                set(in_cpp TRUE)
                set(indent "${CMAKE_MATCH_1}")
                set(opened_at ${line_no})
            elseif(line MATCHES "^[ ]*```")
                set(in_other TRUE)
            endif()
        endwhile()
        if(in_cpp)
            message(FATAL_ERROR "${shown}:${opened_at}: the ```cpp block opened here is not closed")
        endif()
        if(NOT CMAKE_SCRIPT_MODE_FILE)
            set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${md}")
        endif()
    endforeach()

    # Snippets that were removed from the docs must not linger in the build.
    file(GLOB existing "${output_dir}/*.cpp")
    foreach(file IN LISTS existing)
        list(FIND generated "${file}" at)
        if(at EQUAL -1)
            file(REMOVE "${file}")
        endif()
    endforeach()
    set(${out_var} "${generated}" PARENT_SCOPE)
endfunction()

if(CMAKE_SCRIPT_MODE_FILE STREQUAL CMAKE_CURRENT_LIST_FILE)
    if(NOT OUTPUT_DIR OR NOT FILES)
        message(FATAL_ERROR "usage: cmake -DOUTPUT_DIR=<dir> [-DBASE_DIR=<dir>] "
                            "\"-DFILES=<a.md>;<b.md>\" -P extract_snippets.cmake")
    endif()
    if(NOT BASE_DIR)
        set(BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
    endif()
    tessera_extract_doc_snippets(snippets "${OUTPUT_DIR}" "${BASE_DIR}" ${FILES})
    foreach(file IN LISTS snippets)
        message("${file}")
    endforeach()
endif()
