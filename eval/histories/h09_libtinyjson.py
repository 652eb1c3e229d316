from ._common import checks, commit, orient

LEXER = """#include "tj_internal.h"

/* Parse the 4 hex digits after \\u. p points at the 'u'. */
static int read_hex4(const char *p, uint32_t *out) {
    uint32_t v = 0;
    for (int i = 1; i <= 4; i++) {
        char c = p[i];
        v <<= 4;
        if (c >= '0' && c <= '9') v |= (uint32_t)(c - '0');
        else if (c >= 'a' && c <= 'f') v |= (uint32_t)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') v |= (uint32_t)(c - 'A' + 10);
        else return -1;
    }
    *out = v;
    return 0;
}

int tj_lex_string(tj_lexer *lx, tj_buf *out) {
    const char *p = lx->cur + 1;
    while (*p != '"') {
        if (*p == '\\\\') {
            p++;
            if (*p == 'u') {
                uint32_t cp;
                if (read_hex4(p, &cp) < 0) return TJ_ERR_ESCAPE;
                tj_buf_put_utf8(out, cp);
                p += 5;
                continue;
            }
            tj_buf_putc(out, unescape(*p++));
            continue;
        }
        tj_buf_putc(out, *p++);
    }
    lx->cur = p + 1;
    return TJ_OK;
}
"""

VALUE_C = """#include <stdlib.h>
#include "tj_internal.h"

void tj_free(tj_value *v) {
    if (!v) return;
    switch (v->type) {
    case TJ_STRING:
        free(v->u.str.ptr);
        break;
    case TJ_ARRAY:
        free(v->u.arr.items);
        break;
    case TJ_OBJECT:
        for (size_t i = 0; i < v->u.obj.len; i++) {
            free(v->u.obj.keys[i]);
            tj_free(&v->u.obj.vals[i]);
        }
        free(v->u.obj.keys);
        free(v->u.obj.vals);
        break;
    default:
        break;
    }
}
"""

PARSER_H = """#ifndef TJ_PARSER_H
#define TJ_PARSER_H

#ifndef TJ_MAX_DEPTH
#define TJ_MAX_DEPTH 1024
#endif

int tj_parse_value(tj_parser *ps, tj_value *out, int depth);

#endif
"""


def build(ds):
    h = ds.history("h09", "claude-code", "/home/dev/src/libtinyjson",
                   "Small C JSON library: a heap overflow in \\u escapes, a leak in tj_free for arrays, Makefile to "
                   "CMake, a libFuzzer harness, and the nesting depth limit.",
                   start="2026-01-26T08:00:00Z", model="claude-opus-4-7")
    h.commits = [("2c9e4f1", "Add tj_get_path"), ("a3b0d77", "Number parsing: reject leading zeros"), ("61fe2c8", "v0.8.0")]

    # ---- s1: heap overflow
    s = h.session("2026-01-26T20:14:30Z", mode="default")
    s.prompt("Someone reported an ASan crash parsing a truncated string like \"\\u12. Here's the repro: "
             "printf '\"\\\\u12' | ./build/tj_cat. Find and fix it")
    orient(s)
    e_asan = s.bash("make asan >/dev/null && printf '\"\\\\u12' | ./build-asan/tj_cat", "", code=1, stderr=(
        "=================================================================\n==48211==ERROR: AddressSanitizer: heap-buffer-overflow on address 0x602000000016 "
        "at pc 0x55d0c1a3b2f4 bp 0x7ffd2b1e8a90 sp 0x7ffd2b1e8a88\nREAD of size 1 at 0x602000000016 thread T0\n"
        "    #0 0x55d0c1a3b2f3 in read_hex4 src/lexer.c:7\n    #1 0x55d0c1a3b6a1 in tj_lex_string src/lexer.c:25\n"
        "    #2 0x55d0c1a3c0de in tj_parse_value src/parser.c:88\n0x602000000016 is located 0 bytes after 6-byte region [0x602000000010,0x602000000016)\n"
        "SUMMARY: AddressSanitizer: heap-buffer-overflow src/lexer.c:7 in read_hex4\n"), desc="Reproduce under ASan", secs=12.0)
    s.read("src/lexer.c", LEXER)
    s.read("src/tj_internal.h", """typedef struct {
    const char *start;
    const char *cur;
    const char *end;
} tj_lexer;
""")
    e_overflow = s.multiedit("src/lexer.c", [
        ("static int read_hex4(const char *p, uint32_t *out) {\n    uint32_t v = 0;",
         "static int read_hex4(const char *p, const char *end, uint32_t *out) {\n    uint32_t v = 0;\n    if (end - p < 5) return -1; /* need 'u' + 4 digits */"),
        ("    while (*p != '\"') {\n        if (*p == '\\\\') {\n            p++;",
         "    while (p < lx->end && *p != '\"') {\n        if (*p == '\\\\') {\n            if (++p >= lx->end) return TJ_ERR_EOF;"),
        ("if (read_hex4(p, &cp) < 0) return TJ_ERR_ESCAPE;", "if (read_hex4(p, lx->end, &cp) < 0) return TJ_ERR_ESCAPE;"),
        ("        tj_buf_putc(out, *p++);\n    }\n    lx->cur = p + 1;", "        tj_buf_putc(out, *p++);\n    }\n    if (p >= lx->end) return TJ_ERR_EOF;\n    lx->cur = p + 1;"),
    ])
    s.read("tests/test_strings.c", """#include "test.h"

int main(void) {
    EXPECT_STR("\\"a\\\\u00e9b\\"", "a\\xc3\\xa9b");
    EXPECT_STR("\\"tab\\\\t\\"", "tab\\t");
    TEST_END();
}
""")
    e_strtest = s.edit("tests/test_strings.c", """    TEST_END();""", """    /* truncated input must fail cleanly, not read past the buffer */
    EXPECT_ERR("\\"\\\\u12", TJ_ERR_ESCAPE);
    EXPECT_ERR("\\"abc\\\\", TJ_ERR_EOF);
    EXPECT_ERR("\\"abc", TJ_ERR_EOF);
    TEST_END();""")
    s.bash("make asan >/dev/null && make -C build-asan test", "ok   test_numbers (41 checks)\nok   test_strings (9 checks)\nok   test_objects (27 checks)\n"
           "ok   test_path (12 checks)\nall tests passed\n", desc="Tests under ASan", secs=14.0)
    s.stop("read_hex4 read 4 digits after \\u without checking the input end, and tj_lex_string's loop only stopped "
           "at a closing quote, so a truncated string read past the buffer. Both now check lx->end: a short \\u escape "
           "returns TJ_ERR_ESCAPE and an unterminated string TJ_ERR_EOF. Added the three truncated inputs to "
           "tests/test_strings.c; everything passes under ASan.")
    s.prompt("commit with a CVE-style message, no number yet")
    commit(s, "lexer: bounds-check \\u escapes and unterminated strings (heap over-read)", ["src/lexer.c", "tests/test_strings.c"],
           "f17a3c9", 12, 5)
    s.stop("Committed as f17a3c9.")
    s.end()

    # ---- s2: leak in tj_free
    s = h.session("2026-01-29T19:40:11Z", mode="acceptEdits")
    s.prompt("valgrind in CI reports 'definitely lost' blocks in test_objects since we added nested arrays. Track it down")
    orient(s)
    e_valgrind = s.bash("valgrind --leak-check=full --error-exitcode=1 ./build/tests/test_objects 2>&1 | tail -12", "", code=1, stderr=(
        "==51007== 96 (48 direct, 48 indirect) bytes in 2 blocks are definitely lost in loss record 3 of 4\n"
        "==51007==    at 0x4848899: malloc (vg_replace_malloc.c:381)\n==51007==    by 0x10A3C1: tj_buf_take (buf.c:61)\n"
        "==51007==    by 0x10B0F2: tj_parse_string (parser.c:41)\n==51007==    by 0x10B61A: tj_parse_array (parser.c:120)\n"
        "==51007== LEAK SUMMARY:\n==51007==    definitely lost: 48 bytes in 2 blocks\n==51007==    indirectly lost: 48 bytes in 2 blocks\n"
        "==51007== ERROR SUMMARY: 1 errors from 1 contexts (suppressed: 0 from 0)\n"), desc="Valgrind the object tests", secs=6.0)
    s.read("src/value.c", VALUE_C)
    e_leakfix = s.edit("src/value.c", """    case TJ_ARRAY:
        free(v->u.arr.items);
        break;""", """    case TJ_ARRAY:
        /* elements own memory too (strings, nested arrays/objects) */
        for (size_t i = 0; i < v->u.arr.len; i++)
            tj_free(&v->u.arr.items[i]);
        free(v->u.arr.items);
        break;""")
    s.bash("make >/dev/null && valgrind --leak-check=full --error-exitcode=1 ./build/tests/test_objects 2>&1 | tail -3",
           "==51388== All heap blocks were freed -- no leaks are possible\n==51388== \n==51388== ERROR SUMMARY: 0 errors from 0 contexts (suppressed: 0 from 0)\n",
           desc="Valgrind again", secs=7.0)
    s.stop("tj_free released an array's items buffer but not the elements, so strings and nested containers inside "
           "arrays leaked (objects already recursed). TJ_ARRAY now frees each element first; valgrind is clean.")
    s.prompt("commit")
    checks(s, "c")
    commit(s, "tj_free: free array elements (leak)", ["src/value.c"], "93d0b5e", 4, 0)
    s.stop("Committed as 93d0b5e.")
    s.end()

    # ---- s3: make -> cmake
    s = h.session("2026-02-03T20:02:47Z", mode="acceptEdits")
    e_p_cmake = s.prompt("Two downstream projects asked for find_package(tinyjson) support and someone wants to build "
                         "it with MSVC. Our hand-written Makefile can't do either. Move the build to CMake (>= 3.20), "
                         "keep `make test`-like usage via ctest, and install a config package.")
    orient(s)
    s.read("Makefile", """CC ?= cc
CFLAGS ?= -O2 -Wall -Wextra -std=c99
SRC = src/lexer.c src/parser.c src/value.c src/buf.c src/path.c src/number.c

build/libtinyjson.a: $(SRC:src/%.c=build/%.o)
\t$(AR) rcs $@ $^

build/%.o: src/%.c
\t@mkdir -p build
\t$(CC) $(CFLAGS) -Iinclude -c $< -o $@
""")
    e_cmakelists = s.write("CMakeLists.txt", """cmake_minimum_required(VERSION 3.20)
project(tinyjson VERSION 0.9.0 LANGUAGES C)

option(TJ_BUILD_TESTS "Build the tests" ON)
set(TJ_MAX_DEPTH 1024 CACHE STRING "Maximum nesting depth accepted by the parser")

add_library(tinyjson src/lexer.c src/parser.c src/value.c src/buf.c src/path.c src/number.c)
add_library(tinyjson::tinyjson ALIAS tinyjson)
target_include_directories(tinyjson PUBLIC $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/include> $<INSTALL_INTERFACE:include>)
target_compile_features(tinyjson PUBLIC c_std_99)
target_compile_definitions(tinyjson PRIVATE TJ_MAX_DEPTH=${TJ_MAX_DEPTH})

include(GNUInstallDirs)
install(TARGETS tinyjson EXPORT tinyjsonTargets)
install(DIRECTORY include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT tinyjsonTargets NAMESPACE tinyjson:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/tinyjson)

if(TJ_BUILD_TESTS)
  enable_testing()
  foreach(t numbers strings objects path)
    add_executable(test_${t} tests/test_${t}.c)
    target_link_libraries(test_${t} PRIVATE tinyjson)
    add_test(NAME ${t} COMMAND test_${t})
  endforeach()
endif()
""")
    e_fmod = s.bash("cmake -S . -B build -G Ninja && cmake --build build", "", code=1, stderr=(
        "-- The C compiler identification is GNU 13.3.0\n-- Configuring done (0.3s)\n-- Generating done (0.0s)\n"
        "[9/14] Linking C executable test_numbers\nFAILED: test_numbers\n"
        "/usr/bin/ld: libtinyjson.a(number.c.o): in function `tj_number_is_integral':\nnumber.c:(.text+0x1c4): undefined reference to `fmod'\n"
        "collect2: error: ld returned 1 exit status\nninja: build stopped: subcommand failed.\n"), desc="Configure and build", secs=6.0)
    s.edit("CMakeLists.txt", "target_compile_definitions(tinyjson PRIVATE TJ_MAX_DEPTH=${TJ_MAX_DEPTH})",
           "target_compile_definitions(tinyjson PRIVATE TJ_MAX_DEPTH=${TJ_MAX_DEPTH})\n"
           "find_library(MATH_LIBRARY m)\nif(MATH_LIBRARY)\n  target_link_libraries(tinyjson PUBLIC ${MATH_LIBRARY}) # fmod; not needed on MSVC\nendif()")
    s.bash("cmake -S . -B build -G Ninja && cmake --build build && ctest --test-dir build --output-on-failure",
           "[14/14] Linking C executable test_path\nTest project /home/dev/src/libtinyjson/build\n    Start 1: numbers\n1/4 Test #1: numbers ..........   Passed    0.00 sec\n"
           "2/4 Test #2: strings ..........   Passed    0.00 sec\n3/4 Test #3: objects ..........   Passed    0.00 sec\n4/4 Test #4: path .............   Passed    0.00 sec\n\n"
           "100% tests passed, 0 tests failed out of 4\n", desc="Build and ctest", secs=8.0)
    s.write("cmake/tinyjsonConfig.cmake.in", """@PACKAGE_INIT@
include("${CMAKE_CURRENT_LIST_DIR}/tinyjsonTargets.cmake")
check_required_components(tinyjson)
""")
    s.bash("git rm -q Makefile && cmake --install build --prefix /tmp/tj && ls /tmp/tj/lib/cmake/tinyjson", "tinyjsonConfig.cmake\ntinyjsonConfigVersion.cmake\n"
           "tinyjsonTargets-noconfig.cmake\ntinyjsonTargets.cmake\n", desc="Remove Makefile, test the install", secs=3.0)
    s.stop("The build is CMake now (3.20+): a tinyjson library with the tinyjson::tinyjson alias, an exported config "
           "package for find_package(tinyjson), TJ_MAX_DEPTH as a cache variable, and ctest for the 4 test programs. "
           "The first build failed linking test_numbers (undefined reference to fmod): libm is now linked when found, "
           "which keeps MSVC working. The Makefile is removed.")
    s.prompt("commit and update the README build section")
    s.read("README.md", """# libtinyjson

## Build

    make
    make test
""")
    s.edit("README.md", """    make
    make test""", """    cmake -S . -B build
    cmake --build build
    ctest --test-dir build

Use from CMake: `find_package(tinyjson 0.9 REQUIRED)` and link `tinyjson::tinyjson`.""")
    commit(s, "Build with CMake; install a find_package config", ["CMakeLists.txt", "cmake/tinyjsonConfig.cmake.in", "README.md", "Makefile"],
           "5be4f02", 52, 14, add="-A")
    s.stop("Committed as 5be4f02 with the README updated.")
    s.end()

    # ---- s4: fuzzing, depth limit
    s = h.session("2026-02-10T21:05:09Z", mode="acceptEdits")
    s.prompt("add a libFuzzer harness for tj_parse and run it for a while")
    orient(s)
    s.write("fuzz/fuzz_parse.c", """#include <stddef.h>
#include <stdint.h>
#include "tinyjson.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    tj_value v;
    if (tj_parse((const char *)data, size, &v) == TJ_OK) tj_free(&v);
    return 0;
}
""")
    s.edit("CMakeLists.txt", "if(TJ_BUILD_TESTS)", """option(TJ_FUZZ "Build the libFuzzer harness (clang)" OFF)
if(TJ_FUZZ)
  add_executable(fuzz_parse fuzz/fuzz_parse.c)
  target_compile_options(fuzz_parse PRIVATE -fsanitize=fuzzer,address)
  target_link_options(fuzz_parse PRIVATE -fsanitize=fuzzer,address)
  target_link_libraries(fuzz_parse PRIVATE tinyjson)
endif()

if(TJ_BUILD_TESTS)""")
    e_fuzzcrash = s.bash("CC=clang cmake -S . -B build-fuzz -DTJ_FUZZ=ON -DCMAKE_C_FLAGS=-fsanitize=address >/dev/null && cmake --build build-fuzz >/dev/null && "
                         "./build-fuzz/fuzz_parse -max_total_time=600 fuzz/corpus 2>&1 | tail -8", "", code=1, stderr=(
                             "#1048576\tpulse  cov: 612 ft: 1903 corp: 311/19Kb exec/s: 58254 rss: 412Mb\n"
                             "==77120==ERROR: AddressSanitizer: stack-overflow on address 0x7ffe0a7b1ff8 (pc 0x5613d0e2a1b7 bp 0x7ffe0a7b2010 sp 0x7ffe0a7b2000 T0)\n"
                             "    #0 0x5613d0e2a1b7 in tj_parse_value src/parser.c:71\n    #1 0x5613d0e2b9a0 in tj_parse_array src/parser.c:118\n"
                             "    #2 0x5613d0e2a4f2 in tj_parse_value src/parser.c:95\nSUMMARY: AddressSanitizer: stack-overflow src/parser.c:71 in tj_parse_value\n"
                             "artifact_prefix='./'; Test unit written to ./crash-3b1f0c9e7d2a5e4f8a6b1c0d9e8f7a6b5c4d3e2f\n"), desc="Fuzz for 10 minutes", secs=412.0)
    s.bash("head -c 60 crash-3b1f0c9e7d2a5e4f8a6b1c0d9e8f7a6b5c4d3e2f; echo; wc -c crash-3b1f0c9e7d2a5e4f8a6b1c0d9e8f7a6b5c4d3e2f",
           "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\n1000 crash-3b1f0c9e7d2a5e4f8a6b1c0d9e8f7a6b5c4d3e2f\n", desc="Look at the crash input")
    s.read("src/parser.h", PARSER_H)
    s.grep("TJ_MAX_DEPTH", "src/parser.h:5:#define TJ_MAX_DEPTH 1024\nsrc/parser.c:70:    if (depth > TJ_MAX_DEPTH) return TJ_ERR_DEPTH;\n"
           "CMakeLists.txt:5:set(TJ_MAX_DEPTH 1024 CACHE STRING \"Maximum nesting depth accepted by the parser\")\n", path=".")
    e_depth512 = s.edit("src/parser.h", "#define TJ_MAX_DEPTH 1024", "#define TJ_MAX_DEPTH 512")
    s.edit("CMakeLists.txt", 'set(TJ_MAX_DEPTH 1024 CACHE STRING', 'set(TJ_MAX_DEPTH 512 CACHE STRING')
    s.bash("cmake --build build-fuzz >/dev/null && ./build-fuzz/fuzz_parse crash-3b1f0c9e7d2a5e4f8a6b1c0d9e8f7a6b5c4d3e2f 2>&1 | tail -2",
           "Executed crash-3b1f0c9e7d2a5e4f8a6b1c0d9e8f7a6b5c4d3e2f in 0 ms\n*** NOTE: fuzzing was not performed, you have only executed the target code on a fuzz target.\n",
           desc="Replay the crash", secs=20.0)
    s.stop("The fuzzer found a stack overflow: 1000 nested '[' under ASan (whose frames are larger) blow the stack "
           "before the 1024 depth check triggers. Lowered the default TJ_MAX_DEPTH to 512 (parser.h and the CMake cache "
           "variable); the crash input now returns TJ_ERR_DEPTH. Fuzzing 10 more minutes found nothing else.")
    s.prompt("add the crash as a regression test and commit")
    s.bash("mkdir -p tests/regress && mv crash-3b1f0c9e7d2a5e4f8a6b1c0d9e8f7a6b5c4d3e2f tests/regress/deep-nesting-1000.json", "", desc="Keep the crash input")
    s.read("tests/test_objects.c", """#include "test.h"

int main(void) {
    EXPECT_OK("{\\"a\\": [1, 2, {\\"b\\": null}]}");
    TEST_END();
}
""")
    s.edit("tests/test_objects.c", """    TEST_END();""", """    EXPECT_FILE_ERR("regress/deep-nesting-1000.json", TJ_ERR_DEPTH);
    TEST_END();""")
    s.bash("cmake --build build && ctest --test-dir build", "100% tests passed, 0 tests failed out of 4\n", desc="ctest", secs=5.0)
    commit(s, "Fuzz harness; default max depth 512 (stack overflow found by libFuzzer)",
           ["fuzz/fuzz_parse.c", "CMakeLists.txt", "src/parser.h", "tests/test_objects.c", "tests/regress/deep-nesting-1000.json"], "0ad6e91", 35, 3)
    s.stop("Committed as 0ad6e91.")
    s.end()

    # ---- s5: depth 256 for embedded users
    s = h.session("2026-02-24T19:31:55Z", mode="acceptEdits")
    e_p_256 = s.prompt("The ESP32 folks run the parser on an 8KB task stack and still overflow at depth ~300. Make the "
                       "default 256 and document how to raise it with -DTJ_MAX_DEPTH.")
    orient(s)
    s.read("src/parser.h")
    e_depth256 = s.edit("src/parser.h", "#define TJ_MAX_DEPTH 512", "#define TJ_MAX_DEPTH 256 /* ~28 bytes of stack per level on -Os builds */")
    s.edit("CMakeLists.txt", 'set(TJ_MAX_DEPTH 512 CACHE STRING', 'set(TJ_MAX_DEPTH 256 CACHE STRING')
    s.read("README.md")
    e_readme_depth = s.edit("README.md", "Use from CMake: `find_package(tinyjson 0.9 REQUIRED)` and link `tinyjson::tinyjson`.",
                            "Use from CMake: `find_package(tinyjson 0.9 REQUIRED)` and link `tinyjson::tinyjson`.\n\n"
                            "Nesting depth: the parser rejects documents nested deeper than `TJ_MAX_DEPTH` (default 256) with "
                            "`TJ_ERR_DEPTH`. Raise it with `-DTJ_MAX_DEPTH=1024` if your stack allows.")
    s.bash("cmake -S . -B build >/dev/null && cmake --build build && ctest --test-dir build", "100% tests passed, 0 tests failed out of 4\n", desc="ctest", secs=6.0)
    s.bash("grep -rn 'TJ_MAX_DEPTH\\|depth' CHANGELOG.md | head -3", "CHANGELOG.md:5:- Default max nesting depth is 512 (was 1024)\n", desc="Changelog mentions")
    s.read("CHANGELOG.md", """# Changelog

## Unreleased
- Build with CMake, `find_package(tinyjson)`
- Default max nesting depth is 512 (was 1024)
""")
    s.edit("CHANGELOG.md", "- Default max nesting depth is 512 (was 1024)", "- Default max nesting depth is 256 (was 1024); set `TJ_MAX_DEPTH` to change it")
    s.stop("Default TJ_MAX_DEPTH is 256 in parser.h and the CMake cache variable; README explains -DTJ_MAX_DEPTH, "
           "the changelog entry is updated. Tests pass (the 1000-deep regression input still gets TJ_ERR_DEPTH).")
    s.prompt("commit and tag 0.9.0")
    commit(s, "Default max depth 256; document TJ_MAX_DEPTH", ["src/parser.h", "CMakeLists.txt", "README.md", "CHANGELOG.md"], "7e3c18b", 6, 3)
    s.bash("git tag -a v0.9.0 -m 'libtinyjson 0.9.0' && git push origin main v0.9.0", "",
           stderr="To github.com:tinyjson/libtinyjson.git\n   0ad6e91..7e3c18b  main -> main\n * [new tag]         v0.9.0 -> v0.9.0\n", desc="Tag and push")
    s.stop("Committed 7e3c18b and pushed tag v0.9.0.")
    s.end()

    h.q("fix_location", "Where was the heap buffer overflow on truncated strings fixed?", "heap overflow truncated string",
        "src/lexer.c: read_hex4 and tj_lex_string now check against lx->end.", ["src/lexer.c"], [e_overflow])
    h.q("failed_command", "What did AddressSanitizer report for the truncated \\u escape?", "asan report escape",
        "heap-buffer-overflow, READ of size 1 in read_hex4 at src/lexer.c:7.", ["heap-buffer-overflow"], [e_asan])
    h.q("fix_location", "What was leaking memory according to valgrind and where did we fix it?", "valgrind memory leak",
        "Array elements were never freed; src/value.c tj_free now frees each element for TJ_ARRAY.", ["src/value.c"], [e_leakfix])
    h.q("decision", "Why did we move the build from make to CMake?", "make to cmake",
        "Downstream projects wanted find_package(tinyjson) and someone wanted to build with MSVC.", ["find_package(tinyjson)"], [e_p_cmake])
    h.q("failed_command", "Which link error did the first CMake build hit?", "cmake link error",
        "undefined reference to `fmod' linking test_numbers; fixed by linking libm when found.", ["undefined reference to `fmod'"], [e_fmod])
    h.q("knowledge_update", "What is the default maximum nesting depth of the parser now?", "max nesting depth",
        "256 (1024 -> 512 -> 256).", ["TJ_MAX_DEPTH 256"], [e_depth256])
    h.q("temporal", "When the fuzzer first crashed the parser, what did we change the depth limit to?", "fuzzer crash depth",
        "512 (from 1024), after a stack overflow on 1000 nested '['.", ["TJ_MAX_DEPTH 512"], [e_depth512])
    h.q("failed_command", "What did the libFuzzer run find?", "libfuzzer run",
        "AddressSanitizer stack-overflow in tj_parse_value (src/parser.c:71) on deeply nested arrays.", ["stack-overflow"], [e_fuzzcrash])
    h.q("file_history", "What did we add to CMakeLists.txt when creating the CMake build?", "cmakelists build",
        "CMakeLists.txt: tinyjson library + alias, exported config package, TJ_MAX_DEPTH cache var, ctest for 4 tests.",
        ["CMakeLists.txt"], [e_cmakelists])
    h.q("decision", "Why was the default depth lowered the second time?", "depth limit embedded",
        "ESP32 users run on an 8KB task stack and overflowed around depth 300.", ["ESP32"], [e_p_256])
