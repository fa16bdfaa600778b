/* test_util.c — base/util.c's shared pieces: the one FNV-1a every string
 * table hashes with (a prefix and then the rest, as one string), the one
 * UTF-8 check (the offset of the first bad byte), paths and files. */
#include <dirent.h>
#include <sys/stat.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <string.h>
#include <unistd.h>

#include "util.h"
#include "check_util.h"

START_TEST(fnv1a_continues_over_a_prefix_as_over_the_whole) {
    /* FNV-1a's published value for "a", and the empty string is the seed */
    ck_assert_uint_eq(av_fnv1a("a", 1, AV_FNV_SEED), 0xe40c292cu);
    ck_assert_uint_eq(av_fnv1a("", 0, AV_FNV_SEED), AV_FNV_SEED);
    const char *whole = "##ing";
    ck_assert_uint_eq(av_fnv1a("ing", 3, av_fnv1a("##", 2, AV_FNV_SEED)), av_fnv1a(whole, strlen(whole), AV_FNV_SEED));
    ck_assert_uint_ne(av_fnv1a("ab", 2, AV_FNV_SEED), av_fnv1a("ba", 2, AV_FNV_SEED));
}
END_TEST

START_TEST(utf8_check_gives_the_first_bad_offset) {
    ck_assert_int_eq(av_utf8_invalid_at("plain ascii", 11), -1);
    ck_assert_int_eq(av_utf8_invalid_at("caf\xc3\xa9 \xe2\x98\x83 \xf0\x9f\x98\x80", 15), -1);
    ck_assert_int_eq(av_utf8_invalid_at("abc\xc3(", 5), 3);           /* a lead byte without its continuation */
    ck_assert_int_eq(av_utf8_invalid_at("ok\x80", 3), 2);             /* a lone continuation byte */
    ck_assert_int_eq(av_utf8_invalid_at("\xed\xa0\x80", 3), 0);       /* a UTF-16 surrogate */
    ck_assert_int_eq(av_utf8_invalid_at("\xc0\xaf", 2), 0);           /* an overlong '/' */
    ck_assert_int_eq(av_utf8_invalid_at("x\xe2\x98", 3), 1);          /* cut off at the end */
    ck_assert_int_eq(av_utf8_invalid_at("a\0b", 3), -1);              /* NUL is valid UTF-8; callers decide */
    ck_assert_int_eq(av_utf8_invalid_at("", 0), -1);
}
END_TEST

START_TEST(paths_join_with_one_slash) {
    char *p = av_path_join("dir", "name.json");
    ck_assert_str_eq(p, "dir/name.json");
    free(p);
    p = av_path_join("dir/", "name.json");
    ck_assert_str_eq(p, "dir/name.json");
    free(p);
    ck_assert(av_file_exists("tests/unit/test_util.c"));
    ck_assert(!av_file_exists("tests/no-such-file"));
}
END_TEST

/* A file held resident has the mapped file's bytes, starts on a 2 MB boundary
 * (where its pages can be huge), and both are released by munmap(map, len). */
START_TEST(a_resident_file_holds_the_mapped_bytes) {
    const size_t n = ((size_t)3 << 20) + 4097; /* past a 2 MB page, not a whole small page */
    char *content = malloc(n), path[64];
    ck_assert_ptr_nonnull(content);
    unsigned s = 7;
    for (size_t i = 0; i < n; i++) s = s * 1103515245u + 12345u, content[i] = (char)(s >> 16);
    write_temp(path, content, n);
    void *mapped, *resident;
    size_t ml, rl;
    AvErr e;
    ck_assert_int_eq(av_map_file(path, 8, "short", AV_MAP_FILE, &mapped, &ml, &e), 0);
    ck_assert_int_eq(av_map_file(path, 8, "short", AV_MAP_RESIDENT, &resident, &rl, &e), 0);
    ck_assert_uint_eq(ml, n);
    ck_assert_uint_eq(rl, n);
    ck_assert_int_eq(memcmp(mapped, content, n), 0);
    ck_assert_int_eq(memcmp(resident, content, n), 0);
    ck_assert_uint_eq((uintptr_t)resident % ((uintptr_t)2 << 20), 0);
    ck_assert_int_eq(munmap(mapped, ml), 0);
    ck_assert_int_eq(munmap(resident, rl), 0);
    unlink(path);
    free(content);
}
END_TEST

/* Reading a file in keeps av_map_file's messages: too short, not a regular file. */
START_TEST(a_resident_file_fails_as_a_mapped_one) {
    char path[64], dir[64] = "/tmp/attnviz_test_XXXXXX", fifo[96];
    write_temp(path, "abc", 3);
    void *map = (void *)1;
    size_t len = 1;
    AvErr e;
    ck_assert_int_eq(av_map_file(path, 8, "too short for a header", AV_MAP_RESIDENT, &map, &len, &e), -1);
    ck_assert_ptr_null(map);
    ck_assert_uint_eq(len, 0);
    ck_assert_ptr_nonnull(strstr(e.msg, path));
    ck_assert_ptr_nonnull(strstr(e.msg, "too short for a header (3 bytes)"));
    unlink(path);
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(fifo, sizeof fifo, "%s/fifo", dir);
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    ck_assert_int_eq(av_map_file(fifo, 8, "short", AV_MAP_RESIDENT, &map, &len, &e), -1); /* no hang on open */
    ck_assert_ptr_nonnull(strstr(e.msg, fifo));
    unlink(fifo);
    rmdir(dir);
}
END_TEST

static void put_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

static int file_is(const char *path, const char *text) {
    char buf[64] = {0};
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    return n == strlen(text) && !memcmp(buf, text, n);
}

static int entries(const char *dir) {
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    int n = 0;
    for (struct dirent *de; (de = readdir(d));) n += de->d_name[0] != '.';
    closedir(d);
    return n;
}

START_TEST(outputs_committed_together_are_all_put_back_when_a_rename_fails) {
    char dir[] = "/tmp/attnviz_outset_XXXXXX", a[96], b[96], c[96], inside[128];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(a, sizeof a, "%s/a.json", dir), snprintf(b, sizeof b, "%s/b.json", dir), snprintf(c, sizeof c, "%s/c.html", dir);
    put_file(a, "old a");
    AvOutSet set = {0};
    AvErr e;
    FILE *fa = av_outset_add(&set, a, &e), *fb = fa ? av_outset_add(&set, b, &e) : NULL, *fc = fb ? av_outset_add(&set, c, &e) : NULL;
    ck_assert_msg(fc, "%s", e.msg);
    fputs("new a", fa), fputs("new b", fb), fputs("new c", fc);
    /* the third target turns into a folder holding a file before the commit: its rename fails
     * after the first two were placed, and they are undone (a's old file back, b gone) */
    ck_assert_int_eq(mkdir(c, 0700), 0);
    snprintf(inside, sizeof inside, "%s/x", c);
    put_file(inside, "x");
    ck_assert_int_eq(av_outset_commit(&set, &e), -1);
    ck_assert_msg(strstr(e.msg, "c.html: cannot rename into place"), "%s", e.msg);
    ck_assert_msg(file_is(a, "old a"), "a.json was not put back");
    ck_assert_msg(access(b, F_OK) != 0, "b.json, new, was left");
    ck_assert_int_eq(entries(dir), 2); /* a.json and the folder: no temporary, no kept link */
    /* and a set that can be placed is placed whole */
    unlink(inside), rmdir(c);
    fa = av_outset_add(&set, a, &e), fb = fa ? av_outset_add(&set, b, &e) : NULL;
    ck_assert_msg(fb, "%s", e.msg);
    fputs("new a", fa), fputs("new b", fb);
    ck_assert_msg(av_outset_commit(&set, &e) == 0, "%s", e.msg);
    ck_assert(file_is(a, "new a") && file_is(b, "new b"));
    ck_assert_int_eq(entries(dir), 2);
    unlink(a), unlink(b), rmdir(dir);
}
END_TEST

START_TEST(messages_cut_echoed_strings_and_long_numbers) {
    char name[600], digits[402];
    memset(name, 'x', 521), name[521] = '\0';
    memset(digits, '9', 400), digits[400] = '\0';
    AvErr e;
    av_err(&e, "tensor '%s' and %s, and %d", name, digits, 123456789);
    char want[200];
    memset(want, 'x', AV_ERR_ECHO), want[AV_ERR_ECHO] = '\0';
    ck_assert_msg(strstr(e.msg, want) && !strstr(e.msg, "xxx'x") && strstr(e.msg, want)[AV_ERR_ECHO] == '\'', "%s", e.msg);
    ck_assert_msg(strstr(e.msg, " and 999999999999...(160 digits), and 123456789"), "%s", e.msg);
    /* a 25-digit number stays whole; so does 100% */
    av_err(&e, "%s %.0f %d%%", "1234567890123456789012345", 1e24, 100);
    ck_assert_str_eq(e.msg, "1234567890123456789012345 999999999999999983222784 100%");
}
END_TEST

/* A mapped file is held read-only from a 2 MB boundary; made resident, the
 * same address holds the same bytes, now private memory (anonymous), so every
 * pointer the readers made into the mapping stays good. */
START_TEST(a_mapping_made_resident_keeps_its_address_and_bytes) {
    const size_t n = ((size_t)5 << 20) + 123;
    char *content = malloc(n), path[64];
    ck_assert_ptr_nonnull(content);
    for (size_t i = 0; i < n; i++) content[i] = (char)(i * 2654435761u >> 13);
    write_temp(path, content, n);
    void *map;
    size_t len;
    AvErr e;
    ck_assert_int_eq(av_map_file(path, 8, "short", AV_MAP_FILE, &map, &len, &e), 0);
    ck_assert_uint_eq((uintptr_t)map % ((uintptr_t)2 << 20), 0);
    const char *inside = (const char *)map + 3000000; /* a pointer a reader made before */
    AvMemUse before, after;
    ck_assert_int_eq(av_memory_used(&before), 0);
    ck_assert_int_eq(av_map_make_resident(map, len, path, &e), 0);
    ck_assert_int_eq(av_memory_used(&after), 0);
    ck_assert_int_eq(memcmp(map, content, n), 0);
    ck_assert_int_eq(*inside, content[3000000]);
    /* the copy is the process's own memory: at least the file's bytes more of it */
    ck_assert_msg(after.anon - before.anon >= (double)n * 0.95, "anonymous memory grew by %.0f for %zu bytes",
                  after.anon - before.anon, n);
    ck_assert_int_eq(munmap(map, len), 0);
    unlink(path);
    free(content);
}
END_TEST

/* What the loader does with a model's files once it has accepted them: a
 * resident copy only when asked for, read in place and small beside both
 * physical and free memory; else mapped, read as the passes need them. */
START_TEST(the_hold_plan_copies_only_small_files_used_in_place) {
    const double G = 1e9;
    ck_assert_int_eq(av_hold_plan(0.4 * G, 1, 1, 20 * G, 24 * G), AV_HOLD_RESIDENT);
    ck_assert_int_eq(av_hold_plan(0.4 * G, 0, 1, 20 * G, 24 * G), AV_HOLD_MAPPED);   /* one pass */
    ck_assert_int_eq(av_hold_plan(0.4 * G, 1, 0, 20 * G, 24 * G), AV_HOLD_MAPPED);   /* quantized */
    ck_assert_int_eq(av_hold_plan(4.9 * G, 1, 1, 12 * G, 16 * G), AV_HOLD_MAPPED);   /* over a quarter of 16 GB */
    ck_assert_int_eq(av_hold_plan(4.9 * G, 1, 1, 9 * G, 32 * G), AV_HOLD_MAPPED);    /* over half of what is free */
    ck_assert_int_eq(av_hold_plan(4.9 * G, 1, 1, 12 * G, 24 * G), AV_HOLD_RESIDENT); /* an F16 2.4B on 24 GB */
    ck_assert_int_eq(av_hold_plan(13 * G, 1, 1, 12 * G, 16 * G), AV_HOLD_MAPPED);    /* gpt-oss-20b, 16 GB */
    ck_assert_int_eq(av_hold_plan(0.1 * G, 1, 1, 0, 0), AV_HOLD_MAPPED);             /* memory unknown */
}
END_TEST

START_TEST(sizes_and_the_memory_available) {
    double v;
    ck_assert_int_eq(av_parse_size("16G", &v), 0);
    ck_assert(v == 16e9);
    ck_assert_int_eq(av_parse_size("500MB", &v), 0);
    ck_assert(v == 500e6);
    ck_assert_int_eq(av_parse_size("12345", &v), 0);
    ck_assert(v == 12345);
    ck_assert_int_eq(av_parse_size("12x", &v), -1);
    ck_assert_int_eq(av_parse_size("-1G", &v), -1);
    ck_assert_int_eq(av_parse_size("", &v), -1);
    const char *src;
    AvErr e;
    setenv("ATTNVIZ_MEMORY", "3.5G", 1);
    ck_assert_int_eq(av_memory_available(&v, &src, &e), 0);
    ck_assert(v == 3.5e9);
    ck_assert_str_eq(src, "ATTNVIZ_MEMORY");
    setenv("ATTNVIZ_MEMORY", "lots", 1);
    ck_assert_int_eq(av_memory_available(&v, &src, &e), -1);
    ck_assert_int_eq(e.kind, AV_ERR_USAGE);
    ck_assert_ptr_nonnull(strstr(e.msg, "ATTNVIZ_MEMORY=lots: expected a size like 16G"));
    unsetenv("ATTNVIZ_MEMORY");
    /* the kernel's estimate (Linux has said MemAvailable since 3.14), within physical memory */
    ck_assert_int_eq(av_memory_available(&v, &src, &e), 0);
    ck_assert_msg(v > 0 && v <= av_memory_physical(), "available %.0f of %.0f", v, av_memory_physical());
}
END_TEST

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fputs(text, f) >= 0, 1);
    ck_assert_int_eq(fclose(f), 0);
}

/* A cgroup's headroom: its limit less what it uses beyond the page cache,
 * in either version's files; none without a limit. */
START_TEST(a_cgroup_limit_bounds_the_memory) {
    char dir[64] = "/tmp/attnviz_cg_XXXXXX", p[128];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    double h;
    struct { const char *name, *text; } v2[] = {{"memory.max", "8000000000\n"}, {"memory.current", "3000000000\n"},
                                                  {"memory.stat", "anon 1000000000\nfile 2000000000\nkernel 1\n"}};
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, v2[i].name);
        write_file(p, v2[i].text);
    }
    ck_assert_int_eq(av_cgroup_headroom(dir, &h), 0);
    ck_assert(h == 7e9); /* 8 - (3 - 2) */
    snprintf(p, sizeof p, "%s/memory.max", dir);
    write_file(p, "max\n");
    ck_assert_int_eq(av_cgroup_headroom(dir, &h), 0);
    ck_assert(h == 0);
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, v2[i].name);
        unlink(p);
    }
    struct { const char *name, *text; } v1[] = {{"memory.limit_in_bytes", "4000000000\n"},
                                                {"memory.usage_in_bytes", "3500000000\n"},
                                                {"memory.stat", "cache 10\ntotal_cache 500000000\n"}};
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, v1[i].name);
        write_file(p, v1[i].text);
    }
    ck_assert_int_eq(av_cgroup_headroom(dir, &h), 0);
    ck_assert(h == 1e9); /* 4 - (3.5 - 0.5) */
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, v1[i].name);
        unlink(p);
    }
    rmdir(dir);
}
END_TEST

Suite *make_suite(void) {
    Suite *s = suite_create("util");
    TCase *t = tcase_create("core");
    tcase_add_test(t, fnv1a_continues_over_a_prefix_as_over_the_whole);
    tcase_add_test(t, utf8_check_gives_the_first_bad_offset);
    tcase_add_test(t, paths_join_with_one_slash);
    tcase_add_test(t, a_resident_file_holds_the_mapped_bytes);
    tcase_add_test(t, a_resident_file_fails_as_a_mapped_one);
    tcase_add_test(t, outputs_committed_together_are_all_put_back_when_a_rename_fails);
    tcase_add_test(t, messages_cut_echoed_strings_and_long_numbers);
    tcase_add_test(t, a_mapping_made_resident_keeps_its_address_and_bytes);
    tcase_add_test(t, the_hold_plan_copies_only_small_files_used_in_place);
    tcase_add_test(t, sizes_and_the_memory_available);
    tcase_add_test(t, a_cgroup_limit_bounds_the_memory);
    suite_add_tcase(s, t);
    return s;
}
