#!/usr/bin/env node
// oracle.mjs — expected tokenizer output for tests/tokenizer/corpus.tsv, from
// Hugging Face's tokenizer.json read by @huggingface/tokenizers (the JS port).
//
// Usage (from the repo root):
//   node tests/tokenizer/oracle.mjs [--corpus FILE] [--tokenizer FILE] [--pure | --rust DIR] \
//       > tests/tokenizer/expected.jsonl
// Defaults: tests/tokenizer/corpus.tsv and bert-base-uncased's tokenizer.json (tools/refdata.sh).
// Output: one JSON object per corpus line:
//   {"input_ids":[...],"token_type_ids":[...],"tokens":[...]}
// Nothing is truncated here; truncation is covered by tests/unit/test_tokenizer.c, whose
// expected values were taken from the Rust library.
//
// Corpus format (one input per line, LF line ends, literal UTF-8, nothing escaped):
//   A            a single sentence
//   A<TAB>B      a sentence pair; "A<TAB>" (nothing after the TAB) is a pair with an empty B
//   json:[...]   a JSON array ["A"] or ["A","B"]: the only way to write text holding
//                characters a line cannot carry (TAB inside a sentence, LF, CR, NUL and
//                other C0 controls)
// A literal U+FEFF or U+200B inside a plain line is text like any other character.
//
// Rust compatibility. AutoTokenizer runs the Rust `tokenizers` library; the JS port
// differs from it in a few places, which this script patches (pass --pure to see the
// port's own output). With the patches the output equals, line for line, that of the
// Rust library's node binding (npm package `tokenizers` 0.23, not a project dependency:
// it is 64 MB); `--rust DIR` runs that binding instead of the port, DIR being its
// installed package folder (e.g. after `npm install --prefix /tmp/rt tokenizers`,
// DIR=/tmp/rt/node_modules/tokenizers). The patches:
//   1. Lowercasing: Rust lowercases one code point at a time (char::to_lowercase), so
//      a word-final capital sigma becomes σ; JS String#toLowerCase gives ς.
//   2. Order: Rust strips accents (NFD, drop Mn) before lowercasing; the port after.
//   3. CJK spacing: the port walks UTF-16 code units, so ideographs outside the BMP
//      (U+20000...) get no spaces; Rust walks code points. Rust's table also starts
//      CJK Extension E at U+2B920 where the port (and original BERT) say U+2B820.
//   4. Pairs: the port's encode() treats an empty B as "no pair"; Rust encodes
//      [CLS] A [SEP] [SEP]. The script runs the port's pipeline steps itself.
// Not patched (no corpus line depends on it): the Rust library classifies characters
// (Cf/Co control, Mn accent, P* punctuation) with the old tables of its
// unicode_categories crate, while the port uses the JS engine's current Unicode;
// characters assigned or reclassified since (a few hundred, in recent scripts) differ.
import fs from 'node:fs';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '..', '..');
const args = process.argv.slice(2);
const opt = (name, dflt) => {
    const i = args.indexOf(name);
    return i >= 0 && i + 1 < args.length ? args[i + 1] : dflt;
};
const corpusPath = opt('--corpus', path.join(here, 'corpus.tsv'));
// the default: bert-base-uncased's tokenizer.json from tools/refdata.sh ($ATTNVIZ_REFDATA when set)
const refdata = (name) => process.env.ATTNVIZ_REFDATA
    ? path.join(process.env.ATTNVIZ_REFDATA, name)
    : execFileSync(path.join(root, 'tools', 'refdata.sh'), [name], { encoding: 'utf8' }).trim();
const tokenizerPath = args.includes('--tokenizer')
    ? opt('--tokenizer') : path.join(refdata('bert-base-uncased'), 'tokenizer.json');
const rustDir = opt('--rust', null);
const pure = args.includes('--pure');

function parseCorpusLine(line) {
    if (line.startsWith('json:')) {
        const v = JSON.parse(line.slice(5));
        if (!Array.isArray(v) || v.length < 1 || v.length > 2 || v.some((s) => typeof s !== 'string'))
            throw new Error(`json: line must be ["A"] or ["A","B"]: ${line}`);
        return v;
    }
    const tab = line.indexOf('\t');
    return tab < 0 ? [line] : [line.slice(0, tab), line.slice(tab + 1)];
}

function readCorpus(file) {
    let text = fs.readFileSync(file, 'utf8');
    if (text.endsWith('\n')) text = text.slice(0, -1);
    return text.split('\n').map(parseCorpusLine);
}

// Rust's is_chinese_char ranges (tokenizers/src/normalizers/bert.rs).
const isCjk = (c) =>
    (c >= 0x4e00 && c <= 0x9fff) || (c >= 0x3400 && c <= 0x4dbf) ||
    (c >= 0x20000 && c <= 0x2a6df) || (c >= 0x2a700 && c <= 0x2b73f) ||
    (c >= 0x2b740 && c <= 0x2b81f) || (c >= 0x2b920 && c <= 0x2ceaf) ||
    (c >= 0xf900 && c <= 0xfaff) || (c >= 0x2f800 && c <= 0x2fa1f);

function patchForRust(normalizer) {
    if (normalizer.constructor.name !== 'BertNormalizer')
        throw new Error(`expected a BertNormalizer, got ${normalizer.constructor.name}`);
    normalizer.tokenize_chinese_chars = (text) =>
        Array.from(text, (ch) => (isCjk(ch.codePointAt(0)) ? ` ${ch} ` : ch)).join('');
    const cfg = normalizer.config;
    // Rust: strip_accents defaults to the lowercase flag, and runs first.
    const strip = cfg.strip_accents ?? cfg.lowercase;
    normalizer.normalize = function (text) {
        if (cfg.clean_text) text = this.clean_text(text);
        if (cfg.handle_chinese_chars) text = this.tokenize_chinese_chars(text);
        if (strip) text = this.strip_accents(text);
        if (cfg.lowercase) text = Array.from(text, (ch) => ch.toLowerCase()).join('');
        return text;
    };
}

async function encodeAllPort(tokenizerJson, inputs) {
    const { Tokenizer } = await import('@huggingface/tokenizers');
    const tok = new Tokenizer(tokenizerJson, {});
    if (!pure) patchForRust(tok.normalizer);
    return inputs.map(([a, b]) => {
        let tokens, types;
        if (pure) {
            const enc = tok.encode(a, { text_pair: b ?? null, return_token_type_ids: true });
            tokens = enc.tokens;
            types = enc.token_type_ids;
        } else {
            const out = tok.post_processor(tok.encode_text(a), b === undefined ? null : tok.encode_text(b), true);
            tokens = out.tokens;
            types = out.token_type_ids;
        }
        const ids = tokens.map((t) => tok.token_to_id(t));
        return { input_ids: ids, token_type_ids: types ?? ids.map(() => 0), tokens };
    });
}

async function encodeAllRust(inputs) {
    const R = createRequire(import.meta.url)(path.resolve(rustDir));
    const tok = R.Tokenizer.fromFile(tokenizerPath);
    const out = [];
    for (const [a, b] of inputs) {
        const e = await tok.encode(a, b === undefined ? null : b);
        out.push({ input_ids: e.getIds(), token_type_ids: e.getTypeIds(), tokens: e.getTokens() });
    }
    return out;
}

const inputs = readCorpus(corpusPath);
const results = rustDir
    ? await encodeAllRust(inputs)
    : await encodeAllPort(JSON.parse(fs.readFileSync(tokenizerPath, 'utf8')), inputs);
process.stdout.write(results.map((r) => JSON.stringify(r) + '\n').join(''));
