/* test_torchbin.c — the pytorch_model.bin reader against files torch.save wrote
 * (tests/ref/make_torchbin.py), each compared byte for byte with the same
 * tensors torch laid out in a .ref.safetensors beside it; and every hostile
 * file (code-running pickles, zip tricks, out-of-bounds tensors, bombs) must
 * be refused with a message naming the problem, without running anything. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "safetensors.h"
#include "torchbin.h"
#include "check_util.h"

#define DIR "tests/data/torchbin/"
#define MARKER "/tmp/attnviz_torchbin_pwned" /* what every hostile payload would create */

static uint8_t *slurp(const char *path, size_t *len) {
    FILE *fp = fopen(path, "rb");
    ck_assert_msg(fp != NULL, "cannot open %s", path);
    fseek(fp, 0, SEEK_END);
    long n = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    uint8_t *b = malloc(n > 0 ? (size_t)n : 1);
    ck_assert_ptr_nonnull(b);
    ck_assert_int_eq(fread(b, 1, (size_t)n, fp), (size_t)n);
    fclose(fp);
    *len = (size_t)n;
    return b;
}

/* NAME.bin must hold exactly the tensors of NAME.ref.safetensors: same names,
 * dtype, shape and bytes (torch wrote both). */
static void expect_matches_reference(const char *name) {
    char bin[256], ref[256];
    snprintf(bin, sizeof bin, DIR "%s.bin", name);
    snprintf(ref, sizeof ref, DIR "%s.ref.safetensors", name);
    StFile tb, st;
    AvErr e;
    ck_assert_msg(tb_open(&tb, bin, &e) == 0, "%s", e.msg);
    ck_assert_msg(st_open(&st, ref, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(tb.n_tensors, st.n_tensors);
    for (int i = 0; i < st.n_tensors; i++) {
        const StTensor *r = &st.tensors[i], *t = st_find(&tb, r->name);
        ck_assert_msg(t != NULL, "%s: tensor '%s' missing", bin, r->name);
        ck_assert_str_eq(t->dtype_name, r->dtype_name);
        ck_assert_int_eq(t->dtype, r->dtype);
        ck_assert_int_eq(t->ndim, r->ndim);
        for (int d = 0; d < r->ndim; d++) ck_assert_int_eq(t->shape[d], r->shape[d]);
        ck_assert_uint_eq(t->nbytes, r->nbytes);
        ck_assert_msg(memcmp(t->data, r->data, r->nbytes) == 0, "%s: '%s' differs from torch's bytes", bin, r->name);
        ck_assert(t->data >= tb.map && t->data + t->nbytes <= tb.map + tb.map_len);
    }
    st_close(&tb);
    st_close(&st);
}

static void expect_refused(const char *file, const char *fragment) {
    char path[256];
    snprintf(path, sizeof path, DIR "%s", file);
    StFile f;
    AvErr e;
    ck_assert_msg(tb_open(&f, path, &e) == -1, "%s was accepted", path);
    ck_assert_msg(strstr(e.msg, fragment) != NULL, "%s: expected '%s' in: %s", file, fragment, e.msg);
    ck_assert_msg(strncmp(e.msg, path, strlen(path)) == 0, "message names the file: %s", e.msg);
    ck_assert_msg(strchr(e.msg, '\n') == NULL, "one line: %s", e.msg);
    ck_assert_ptr_null(f.tensors);
    ck_assert_ptr_null(f.map);
}

/* A stored zip holding "archive/data.pkl" = pkl plus the given storages, as a
 * hostile writer would build it (for pickles too large to commit). */
typedef struct { const char *name; const uint8_t *data; size_t len; } Ent;

static void put16(uint8_t *p, unsigned v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }
static void put32(uint8_t *p, uint32_t v) { put16(p, v & 0xffff); put16(p + 2, v >> 16); }

static uint8_t *make_zip(const Ent *ents, int n, size_t *len) {
    size_t cap = 22;
    for (int i = 0; i < n; i++) cap += 30 + 46 + 2 * strlen(ents[i].name) + ents[i].len;
    uint8_t *b = calloc(cap, 1), *p = b;
    ck_assert_ptr_nonnull(b);
    uint32_t offs[8];
    ck_assert_int_le(n, 8);
    for (int i = 0; i < n; i++) {
        size_t nl = strlen(ents[i].name);
        offs[i] = (uint32_t)(p - b);
        put32(p, 0x04034b50);
        put32(p + 18, (uint32_t)ents[i].len);
        put32(p + 22, (uint32_t)ents[i].len);
        put16(p + 26, (unsigned)nl);
        memcpy(p + 30, ents[i].name, nl);
        memcpy(p + 30 + nl, ents[i].data, ents[i].len);
        p += 30 + nl + ents[i].len;
    }
    uint8_t *cd = p;
    for (int i = 0; i < n; i++) {
        size_t nl = strlen(ents[i].name);
        put32(p, 0x02014b50);
        put32(p + 20, (uint32_t)ents[i].len);
        put32(p + 24, (uint32_t)ents[i].len);
        put16(p + 28, (unsigned)nl);
        put32(p + 42, offs[i]);
        memcpy(p + 46, ents[i].name, nl);
        p += 46 + nl;
    }
    put32(p, 0x06054b50);
    put16(p + 8, (unsigned)n);
    put16(p + 10, (unsigned)n);
    put32(p + 12, (uint32_t)(p - cd));
    put32(p + 16, (uint32_t)(cd - b));
    *len = (size_t)(p + 22 - b);
    return b;
}

static void expect_pickle_refused(const uint8_t *pkl, size_t n, const char *fragment) {
    Ent ents[] = {{"archive/data.pkl", pkl, n}};
    size_t len;
    uint8_t *zip = make_zip(ents, 1, &len);
    StFile f = {0};
    AvErr e;
    ck_assert_int_eq(tb_parse(&f, zip, len, "gen.bin", &e), -1);
    ck_assert_msg(strstr(e.msg, fragment) != NULL, "expected '%s' in: %s", fragment, e.msg);
    free(zip);
}

/* ------------------------------------------------------------- valid */

START_TEST(a_struct_filled_by_the_reader_is_safe_to_close_whatever_it_held) {
    const uint8_t pkl[] = {0x80, 2, '}', '.'};
    Ent ents[] = {{"archive/data.pkl", pkl, sizeof pkl}};
    size_t len;
    uint8_t *zip = make_zip(ents, 1, &len);
    StFile f;
    AvErr e;
    GARBAGE(f);
    ck_assert_msg(tb_parse(&f, zip, len, "gen.bin", &e) == 0, "%s", e.msg);
    st_close(&f);
    GARBAGE(f);
    ck_assert_int_eq(tb_parse(&f, zip, len - 1, "gen.bin", &e), -1);
    st_close(&f);
    free(zip);
}
END_TEST

START_TEST(empty_dicts_and_empty_setitems_give_zero_tensors) {
    /* fuzz regressions: SETITEMS on an empty MARK appended 0 items to a NULL
     * array; an empty TUPLE as the first value offset a NULL stack */
    const uint8_t pkl[] = {0x80, 2, '(', 't', '}', '(', 'u', '(', 'u', '.'};
    Ent ents[] = {{"archive/data.pkl", pkl, sizeof pkl}};
    size_t len;
    uint8_t *zip = make_zip(ents, 1, &len);
    StFile f = {0};
    AvErr e;
    ck_assert_msg(tb_parse(&f, zip, len, "gen.bin", &e) == 0, "%s", e.msg);
    ck_assert_int_eq(f.n_tensors, 0);
    ck_assert_ptr_null(st_find(&f, "x"));
    st_close(&f);
    free(zip);
}
END_TEST

START_TEST(reads_float32_state_dict_exactly_as_torch_wrote_it) { expect_matches_reference("f32"); }
END_TEST

START_TEST(reads_float16_and_bfloat16_state_dicts) {
    expect_matches_reference("f16");
    expect_matches_reference("bf16");
}
END_TEST

START_TEST(reads_protocol_4_pickles_with_frames_and_stack_globals) { expect_matches_reference("proto4"); }
END_TEST

START_TEST(reads_zip64_byteorder_little_and_zero_crc_archives) {
    expect_matches_reference("zip64"); /* every size and offset in ZIP64 extra fields; torch.load accepted it */
    expect_matches_reference("little");
    expect_matches_reference("f32_nocrc"); /* zero CRCs, as torch >= 2.4 writes with checksums off */
}
END_TEST

START_TEST(tied_weights_and_offset_views_share_one_storage) {
    StFile f;
    AvErr e;
    ck_assert_msg(tb_open(&f, DIR "f32.bin", &e) == 0, "%s", e.msg);
    const StTensor *emb = st_find(&f, "emb.weight"), *dec = st_find(&f, "dec.weight"),
                   *rows = st_find(&f, "emb_rows");
    ck_assert(emb && dec && rows);
    ck_assert_ptr_eq(emb->data, dec->data);
    ck_assert_ptr_eq(rows->data, emb->data + 2 * 4 * sizeof(float)); /* w[2:5] starts at element 8 */
    ck_assert_int_eq(rows->shape[0], 3);
    ck_assert_int_eq(((uintptr_t)emb->data) % 64, 0); /* torch aligns payloads to 64 bytes */
    st_close(&f);
    ck_assert_ptr_null(f.tensors);
    ck_assert_ptr_null(f.map);
}
END_TEST

START_TEST(long_buffers_load_as_other_dtype_without_failing_the_file) {
    StFile f;
    AvErr e;
    ck_assert_msg(tb_open(&f, DIR "f32.bin", &e) == 0, "%s", e.msg);
    const StTensor *pos = st_find(&f, "position_ids"), *nbt = st_find(&f, "bn.num_batches_tracked");
    ck_assert(pos && nbt);
    ck_assert_int_eq(pos->dtype, ST_OTHER);
    ck_assert_str_eq(pos->dtype_name, "I64");
    ck_assert_int_eq(pos->ndim, 2);
    ck_assert_int_eq(pos->shape[1], 8);
    for (int i = 0; i < 8; i++) {
        int64_t v;
        memcpy(&v, pos->data + 8 * i, 8);
        ck_assert_int_eq(v, i); /* arange(8) */
    }
    ck_assert_int_eq(nbt->ndim, 0); /* a scalar: one element */
    ck_assert_uint_eq(nbt->nbytes, 8);
    const StTensor *empty = st_find(&f, "empty");
    ck_assert(empty && empty->nbytes == 0 && empty->shape[0] == 0);
    st_close(&f);
}
END_TEST

START_TEST(st_to_f32_gives_bitwise_the_same_values_as_the_safetensors_copy) {
    const char *names[] = {"f32", "f16", "bf16"};
    for (int k = 0; k < 3; k++) {
        char bin[128], ref[128];
        snprintf(bin, sizeof bin, DIR "%s.bin", names[k]);
        snprintf(ref, sizeof ref, DIR "%s.ref.safetensors", names[k]);
        StFile tb, st;
        AvErr e;
        ck_assert_msg(tb_open(&tb, bin, &e) == 0, "%s", e.msg);
        ck_assert_msg(st_open(&st, ref, &e) == 0, "%s", e.msg);
        int converted = 0;
        for (int i = 0; i < tb.n_tensors; i++) {
            const StTensor *t = &tb.tensors[i], *r = st_find(&st, t->name);
            ck_assert_ptr_nonnull(r);
            if (t->dtype == ST_OTHER) continue;
            size_t n = t->nbytes / st_dtype_size(t->dtype);
            float *a = malloc((n + 1) * sizeof *a), *b = malloc((n + 1) * sizeof *b);
            st_to_f32(t, a);
            st_to_f32(r, b);
            ck_assert_msg(memcmp(a, b, n * sizeof *a) == 0, "%s: '%s'", bin, t->name);
            converted += n > 0;
            free(a);
            free(b);
        }
        ck_assert_int_ge(converted, 10);
        st_close(&tb);
        st_close(&st);
    }
}
END_TEST

START_TEST(nested_checkpoint_dicts_flatten_to_dotted_names) {
    expect_matches_reference("nested"); /* reference names from the script's own flattening */
    StFile f;
    AvErr e;
    ck_assert_msg(tb_open(&f, DIR "nested.bin", &e) == 0, "%s", e.msg);
    ck_assert_ptr_nonnull(st_find(&f, "state_dict.w"));
    ck_assert_ptr_nonnull(st_find(&f, "model.enc.w"));
    ck_assert_str_eq(st_find(&f, "7")->dtype_name, "I32"); /* an int key */
    ck_assert_ptr_null(st_find(&f, "epoch"));             /* non-tensor values are skipped */
    ck_assert_int_eq(f.n_tensors, 4);                       /* the tuple-keyed tensor is skipped */
    st_close(&f);
}
END_TEST

START_TEST(parse_from_memory_leaves_map_null_for_st_close) {
    size_t len;
    uint8_t *buf = slurp(DIR "f32.bin", &len);
    StFile f = {0};
    AvErr e;
    ck_assert_msg(tb_parse(&f, buf, len, "mem.bin", &e) == 0, "%s", e.msg);
    ck_assert_ptr_null(f.map);
    ck_assert_int_eq(f.n_tensors, 14);
    const StTensor *w = st_find(&f, "emb.weight");
    ck_assert(w->data >= buf && w->data + w->nbytes <= buf + len);
    st_close(&f); /* frees the table only; buf is still ours */
    ck_assert_int_eq(buf[0], 'P');
    free(buf);
}
END_TEST

/* ----------------------------------------------------------- hostile */

START_TEST(refuses_os_system_reduce_without_running_it) {
    unlink(MARKER);
    expect_refused("evil_reduce.bin", "refusing pickle global 'posix.system' (only state-dict tensors are read)");
    expect_refused("evil_os_system.bin", "data.pkl offset 2: refusing pickle global 'os.system'");
    struct stat sb;
    ck_assert_msg(stat(MARKER, &sb) != 0, "a hostile payload ran");
}
END_TEST

START_TEST(refuses_eval_and_getattr_globals) {
    unlink(MARKER);
    expect_refused("evil_eval.bin", "refusing pickle global '__builtin__.eval'");
    expect_refused("evil_builtins_eval.bin", "refusing pickle global 'builtins.eval'");
    expect_refused("evil_getattr.bin", "refusing pickle global '__builtin__.getattr'");
    expect_refused("call_storage.bin", "refusing to call pickle global 'torch.FloatStorage'");
    struct stat sb;
    ck_assert_msg(stat(MARKER, &sb) != 0, "a hostile payload ran");
}
END_TEST

START_TEST(refuses_object_building_opcodes_naming_their_offset) {
    expect_refused("evil_inst.bin", "offset 41: refusing pickle opcode INST (0x69)");
    expect_refused("evil_obj.bin", "offset 4: refusing pickle opcode OBJ");
    expect_refused("evil_newobj.bin", "refusing pickle opcode NEWOBJ");
    expect_refused("evil_ext.bin", "refusing pickle opcode EXT1");
}
END_TEST

START_TEST(refuses_compressed_entries_instead_of_inflating) {
    expect_refused("deflate.bin", "zip entry 'f32/data.pkl' is compressed (method 8)");
}
END_TEST

START_TEST(refuses_truncated_and_out_of_bounds_zips) {
    expect_refused("truncated.bin", "no zip end-of-central-directory record");
    expect_refused("cd_past_eof.bin", "zip central directory");
    expect_refused("not_zip.bin", "no zip signature");
    expect_refused("no_pkl.bin", "has no <archive>/data.pkl");
}
END_TEST

START_TEST(refuses_tensors_outside_their_storage) {
    expect_refused("storage_past_end.bin", "tensor 'w': storage offset 38 + 4 elements run past its storage");
    expect_refused("storage_numel_too_big.bin", "41 F32 elements need more than the 160 bytes");
    expect_refused("storage_missing.bin", "storage '99' has no entry");
}
END_TEST

START_TEST(refuses_overflowing_shapes_and_too_many_dimensions) {
    expect_refused("huge_shape.bin", "tensor 'w': shape's element count overflows");
    expect_refused("too_many_dims.bin", "size has 9 dimensions (limit 8)");
}
END_TEST

START_TEST(refuses_stack_bombs_memo_errors_and_cycles) {
    expect_refused("stack_bomb.bin", "MARK nesting deeper than 1000");
    expect_refused("memo_oob.bin", "memo index 7 is not set");
    expect_refused("cycle.bin", "dicts nested deeper than 32");
    expect_refused("truncated_pickle.bin", "pickle truncated");
    expect_refused("no_stop.bin", "pickle ends without STOP");

    /* 1.2 M pushes: too large to commit, so built here */
    size_t n = 1200000;
    uint8_t *p = malloc(n + 3);
    p[0] = 0x80;
    p[1] = 2;
    memset(p + 2, 'N', n);
    p[n + 2] = '.';
    expect_pickle_refused(p, n + 3, "pickle stack deeper than 1000000 entries");
    free(p);
    const uint8_t bigmemo[] = {0x80, 2, '}', 'r', 0, 0, 0x10, 0, '.'}; /* LONG_BINPUT 1 << 20 */
    expect_pickle_refused(bigmemo, sizeof bigmemo, "memo index 1048576 exceeds the limit");
    const uint8_t under[] = {0x80, 2, '(', 's', '.'}; /* SETITEM across a MARK */
    expect_pickle_refused(under, sizeof under, "stack underflow");
    const uint8_t long9[] = {0x80, 2, 0x8a, 9, 1, 2, 3, 4, 5, 6, 7, 8, 9, '.'};
    expect_pickle_refused(long9, sizeof long9, "LONG1 of 9 bytes");
}
END_TEST

/* Appends a BINUNICODE of n copies of c. */
static size_t put_str(uint8_t *p, char c, size_t n) {
    p[0] = 'X';
    put32(p + 1, (uint32_t)n);
    memset(p + 5, c, n);
    return 5 + n;
}

START_TEST(refuses_name_amplification_through_shared_dicts) {
    /* 16 levels of {"aaa...": prev, "bbb...": prev}: a 4 KB pickle naming
     * 65536 tensors of ~4 KB each (256 MB) unless total name bytes are capped */
    static const char tensor[] = "ctorch._utils\n_rebuild_tensor_v2\n((X\7\0\0\0storagectorch\nFloatStorage\n"
                                 "X\1\0\0\0" "0X\3\0\0\0cpuK\1tQK\0(K\1t(K\1t\x89NtR";
    uint8_t *pkl = malloc(16384), *p = pkl;
    *p++ = 0x80;
    *p++ = 2;
    *p++ = '}';
    p += put_str(p, 't', 1);
    memcpy(p, tensor, sizeof tensor - 1);
    p += sizeof tensor - 1;
    *p++ = 's';
    for (int level = 0; level < 16; level++) {
        *p++ = 'q';
        *p++ = (uint8_t)level; /* memo[level] = the dict below */
        *p++ = '}';
        *p++ = '(';
        p += put_str(p, 'a', 250);
        *p++ = 'h';
        *p++ = (uint8_t)level;
        p += put_str(p, 'b', 250);
        *p++ = 'h';
        *p++ = (uint8_t)level;
        *p++ = 'u';
    }
    *p++ = '.';
    static const uint8_t storage[4];
    Ent ents[] = {{"archive/data.pkl", pkl, (size_t)(p - pkl)}, {"archive/data/0", storage, 4}};
    size_t len;
    uint8_t *zip = make_zip(ents, 2, &len);
    StFile f = {0};
    AvErr e;
    ck_assert_int_eq(tb_parse(&f, zip, len, "gen.bin", &e), -1);
    ck_assert_msg(strstr(e.msg, "tensor names exceed 64 MB in total") != NULL, "%s", e.msg);
    free(zip);
    free(pkl);
}
END_TEST

START_TEST(refuses_legacy_format_and_big_endian_files) {
    expect_refused("legacy.bin", "legacy torch.save format; re-save with torch>=1.6 or convert to safetensors");
    expect_refused("big_endian.bin", "big-endian");
    expect_refused("not_dict.bin", "holds a tensor, not a dict");
}
END_TEST

START_TEST(refuses_non_contiguous_tensor_naming_it) {
    expect_refused("noncontig.bin", "tensor 't' is not contiguous (size [2, 3], stride [1, 2])");
}
END_TEST

START_TEST(refuses_duplicate_tensor_names) { expect_refused("dup_names.bin", "tensor name 'w' appears twice"); }
END_TEST

START_TEST(every_generated_hostile_file_fails_as_listed) {
    FILE *fp = fopen(DIR "expected_errors.txt", "r");
    ck_assert_ptr_nonnull(fp);
    char line[512];
    int n = 0;
    while (fgets(line, sizeof line, fp)) {
        if (line[0] == '#') continue;
        line[strcspn(line, "\n")] = '\0';
        char *tab = strchr(line, '\t');
        ck_assert_ptr_nonnull(tab);
        *tab = '\0';
        expect_refused(line, tab + 1);
        n++;
    }
    fclose(fp);
    ck_assert_int_ge(n, 25);
    struct stat sb;
    ck_assert_msg(stat(MARKER, &sb) != 0, "a hostile payload ran");
}
END_TEST

START_TEST(every_truncation_and_byte_flip_fails_cleanly_or_stays_in_bounds) {
    size_t len;
    uint8_t *orig = slurp(DIR "f32_nocrc.bin", &len); /* zero CRC: flips reach the pickle */
    for (size_t cut = 0; cut < len; cut++) {
        uint8_t *b = malloc(cut ? cut : 1); /* exact size: ASan sees any overread */
        memcpy(b, orig, cut);
        StFile f = {0};
        AvErr e;
        ck_assert_msg(tb_parse(&f, b, cut, "cut.bin", &e) == -1, "accepted a %zu-byte prefix", cut);
        free(b);
    }
    uint8_t *b = malloc(len);
    for (size_t i = 0; i < len; i++) {
        memcpy(b, orig, len);
        b[i] ^= 0xff;
        StFile f = {0};
        AvErr e;
        if (tb_parse(&f, b, len, "flip.bin", &e) == 0) {
            for (int k = 0; k < f.n_tensors; k++)
                ck_assert(f.tensors[k].data >= b && f.tensors[k].data + f.tensors[k].nbytes <= b + len);
            st_close(&f);
        } else {
            ck_assert(strncmp(e.msg, "flip.bin: ", 10) == 0);
        }
    }
    free(b);
    free(orig);
}
END_TEST

START_TEST(open_reports_missing_and_empty_files) {
    StFile f;
    AvErr e;
    ck_assert_int_eq(tb_open(&f, DIR "no-such.bin", &e), -1);
    ck_assert_ptr_nonnull(strstr(e.msg, "cannot open"));
    char path[] = "/tmp/tb_emptyXXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    ck_assert_int_eq(tb_open(&f, path, &e), -1);
    ck_assert_ptr_nonnull(strstr(e.msg, "empty file"));
    unlink(path);
}
END_TEST

Suite *make_suite(void) {
    Suite *s = suite_create("torchbin");
    TCase *t = tcase_create("core");
    tcase_set_timeout(t, 60);
    tcase_add_test(t, reads_float32_state_dict_exactly_as_torch_wrote_it);
    tcase_add_test(t, reads_float16_and_bfloat16_state_dicts);
    tcase_add_test(t, reads_protocol_4_pickles_with_frames_and_stack_globals);
    tcase_add_test(t, reads_zip64_byteorder_little_and_zero_crc_archives);
    tcase_add_test(t, tied_weights_and_offset_views_share_one_storage);
    tcase_add_test(t, long_buffers_load_as_other_dtype_without_failing_the_file);
    tcase_add_test(t, st_to_f32_gives_bitwise_the_same_values_as_the_safetensors_copy);
    tcase_add_test(t, nested_checkpoint_dicts_flatten_to_dotted_names);
    tcase_add_test(t, parse_from_memory_leaves_map_null_for_st_close);
    tcase_add_test(t, a_struct_filled_by_the_reader_is_safe_to_close_whatever_it_held);
    tcase_add_test(t, empty_dicts_and_empty_setitems_give_zero_tensors);
    tcase_add_test(t, refuses_os_system_reduce_without_running_it);
    tcase_add_test(t, refuses_eval_and_getattr_globals);
    tcase_add_test(t, refuses_object_building_opcodes_naming_their_offset);
    tcase_add_test(t, refuses_compressed_entries_instead_of_inflating);
    tcase_add_test(t, refuses_truncated_and_out_of_bounds_zips);
    tcase_add_test(t, refuses_tensors_outside_their_storage);
    tcase_add_test(t, refuses_overflowing_shapes_and_too_many_dimensions);
    tcase_add_test(t, refuses_stack_bombs_memo_errors_and_cycles);
    tcase_add_test(t, refuses_name_amplification_through_shared_dicts);
    tcase_add_test(t, refuses_legacy_format_and_big_endian_files);
    tcase_add_test(t, refuses_non_contiguous_tensor_naming_it);
    tcase_add_test(t, refuses_duplicate_tensor_names);
    tcase_add_test(t, every_generated_hostile_file_fails_as_listed);
    tcase_add_test(t, every_truncation_and_byte_flip_fails_cleanly_or_stays_in_bounds);
    tcase_add_test(t, open_reports_missing_and_empty_files);
    suite_add_tcase(s, t);
    return s;
}
