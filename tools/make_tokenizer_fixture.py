#!/usr/bin/env python3
"""writes the tokenizer reference fixtures under tests/data/ using llama.cpp (llama-cpp-python).

  tokenizer_fixture.jsonl      texts tokenized by the default model's gpt2 tokenizer
  spm_tokenizer.gguf           a tiny vocab-only llama (sentencepiece bpe) gguf trained here
  spm_tokenizer_fixture.jsonl  texts tokenized by that vocab
  (one json object per line: {"text", "add_bos", "special", "ids"}; chat records carry
   {"chat", "add_generation_prompt", "rendered", "ids"}, rendered by jinja2 from the gguf
   template the way hugging face renders it.)

texts come from files on this machine that none of us wrote: debian's fortunes, glibc locale
sources, the public-suffix test list, python's standard library, rich's emoji table.
usage: python3 tools/make_tokenizer_fixture.py [model.gguf]
"""
import collections
import glob
import json
import os
import random
import re
import sys
import unicodedata

import gguf
import jinja2.sandbox
import llama_cpp

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, 'tests', 'data')
RNG = random.Random(20261129)


def read(path):
    try:
        with open(path, encoding='utf-8') as f:
            return f.read()
    except (OSError, UnicodeDecodeError):
        return ''


def sample(items, k):
    items = list(items)
    return RNG.sample(items, min(k, len(items)))


def collect_texts():
    texts = []
    # whole fortunes (multi-line, punctuation, numbers, whitespace runs).
    fortunes = []
    for path in sorted(glob.glob('/usr/share/games/fortunes/*.u8')):
        fortunes += [f.strip('\n') for f in read(path).split('\n%\n') if 0 < len(f) < 600]
    texts += sample(fortunes, 150)
    # single fortune lines, some with leading/trailing spaces kept.
    lines = [l for f in fortunes for l in f.split('\n') if l.strip()]
    texts += sample(lines, 40)
    # non-ascii lines from glibc locale sources (cjk, cyrillic, devanagari, arabic ...).
    loc = []
    for path in sorted(glob.glob('/usr/share/i18n/locales/*')):
        found = [l for l in read(path).split('\n') if any(ord(c) > 127 for c in l) and len(l) < 300]
        loc += sample(found, 2)
    texts += sample(loc, 60)
    # month and day names etc. of every locale, written there as <Uxxxx> escapes (thai, arabic,
    # hebrew, hangul, kana, devanagari, ...); a few also in nfd form (combining marks).
    named = []
    for path in sorted(glob.glob('/usr/share/i18n/locales/*_*')):
        found = [re.sub(r'<U([0-9A-Fa-f]{4,8})>', lambda m: chr(int(m.group(1), 16)), l)
                 for l in read(path).split('\n')
                 if l.lstrip().startswith(('day', 'mon', 'abday', 'abmon', 'lang_name',
                                           'country_name', 'yesexpr', 'noexpr')) and '<U' in l]
        found = [f for f in found if any(ord(c) > 127 for c in f) and len(f) < 400]
        named += sample(found, 1)
    named = sample(named, 50)
    texts += named + [unicodedata.normalize('NFD', t) for t in named[:6]]
    # idn domains.
    psl = [l for l in read('/usr/share/doc/publicsuffix/examples/test_psl.txt').split('\n')
           if any(ord(c) > 127 for c in l)]
    texts += sample(psl, 10)
    # emoji (including multi-codepoint sequences).
    emoji = [l for l in read('/usr/lib/python3/dist-packages/pip/_vendor/rich/_emoji_codes.py')
             .split('\n') if any(ord(c) > 0x2000 for c in l)]
    texts += sample(emoji, 20)
    # code: python standard library chunks (indentation, operators, digits, tabs in makefiles).
    stdlib = os.path.dirname(os.__file__)
    for path in sorted(sample(glob.glob(os.path.join(stdlib, '*.py')), 15)):
        src = read(path).split('\n')
        start = RNG.randrange(max(1, len(src) - 12))
        texts.append('\n'.join(src[start:start + 12]))
    for path in sample(glob.glob('/usr/share/doc/*/examples/Makefile*') +
                       glob.glob('/usr/lib/python3.11/config-*/Makefile'), 2):
        src = read(path).split('\n')
        start = RNG.randrange(max(1, len(src) - 10))
        texts.append('\n'.join(src[start:start + 10]))
    # whitespace and digit edge cases built from real lines.
    picks = sample(lines, 12)
    texts += [picks[0] + '   ' + picks[1], '\t' + picks[2] + '\t\t', picks[3] + '\n\n\n' + picks[4],
              '  ' + picks[5], picks[6] + ' ', picks[7] + '\r\n' + picks[8],
              picks[9].replace(' ', '    '), ' 12345 678.90 -3e10 0x1F ', '2026-11-29 22:03:24',
              "I'm sure they'll say it's OK, we've done 'it' and I'd've", "DON'T SHOUT'S", '',
              ' ', '\n', 'caf\u00e9 na\u00efve r\u00e9sum\u00e9 \u00c5ngstr\u00f6m', '\u00a0nbsp\u3000ideographic',
              # ascii control bytes, some without a byte token in the default vocab
              picks[10] + '\x00\x04\x06\x1b[0m\x7f' + picks[11]]
    return texts


def special_texts(lines):
    """texts with special tokens written in them (tokenized with special on and off)."""
    a, b = sample(lines, 2)
    return ['<|im_start|>user\n' + a + '<|im_end|>\n<|im_start|>assistant\n',
            a + '<|endoftext|>' + b, '<|im_end|><|im_end|> <|im_start|>', '<|im_start <|im_end|',
            '<s>' + a + '</s>', '<|im_start|>system\n' + b + '<|im_end|>']


def write_jsonl(path, records):
    with open(path, 'w', encoding='utf-8') as f:
        for r in records:
            f.write(json.dumps(r, ensure_ascii=False) + '\n')
    print(f'{path}: {len(records)} records, {os.path.getsize(path)} bytes')


def tokenize_records(llm, texts, specials):
    records = []
    for i, t in enumerate(texts):
        add_bos = i % 3 == 0
        ids = llm.tokenize(t.encode('utf-8'), add_bos=add_bos, special=False)
        records.append({'text': t, 'add_bos': add_bos, 'special': False, 'ids': ids})
    for t in specials:
        for special in (True, False):
            ids = llm.tokenize(t.encode('utf-8'), add_bos=True, special=special)
            records.append({'text': t, 'add_bos': True, 'special': special, 'ids': ids})
    return records


def chat_records(llm, template, bos, eos, lines):
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    tmpl = env.from_string(template)
    q1, a1, q2, sysmsg = sample(lines, 4)
    convs = [
        ([{'role': 'user', 'content': q1}, {'role': 'assistant', 'content': a1},
          {'role': 'user', 'content': q2}], True),
        ([{'role': 'system', 'content': sysmsg}, {'role': 'user', 'content': q1},
          {'role': 'assistant', 'content': a1}, {'role': 'user', 'content': q2}], True),
        ([{'role': 'user', 'content': q1}, {'role': 'assistant', 'content': a1}], False),
    ]
    out = []
    for msgs, gen in convs:
        rendered = tmpl.render(messages=msgs, add_generation_prompt=gen, bos_token=bos,
                               eos_token=eos)
        ids = llm.tokenize(rendered.encode('utf-8'), add_bos=False, special=True)
        out.append({'chat': msgs, 'add_generation_prompt': gen, 'rendered': rendered, 'ids': ids})
    return out


def gguf_string(reader, key):
    f = reader.fields[key]
    return bytes(f.parts[f.data[0]]).decode('utf-8')


# ---- tiny sentencepiece-style bpe vocab ----

SPACE = '\u2581'


def train_spm_vocab(texts, n_chars=160, n_merges=1200):
    """tokens and scores: specials, 256 byte tokens, frequent chars, then merges (score -rank)."""
    words = collections.Counter()
    chars = collections.Counter()
    for t in texts:
        esc = SPACE + t.replace(' ', SPACE)
        # words start at each U+2581; merges never cross them.
        for w in esc.replace(SPACE, '\0' + SPACE).split('\0'):
            if w:
                words[w] += 1
                chars.update(w)
    alphabet = [c for c, _ in chars.most_common(n_chars)]
    known = set(alphabet)
    seqs = {w: [c if c in known else None for c in w] for w in words}
    merged = []
    for _ in range(n_merges):
        pairs = collections.Counter()
        for w, seq in seqs.items():
            for x, y in zip(seq, seq[1:]):
                if x is not None and y is not None:
                    pairs[(x, y)] += words[w]
        if not pairs:
            break
        (x, y), count = max(pairs.items(), key=lambda kv: (kv[1], kv[0]))
        if count < 2:
            break
        merged.append(x + y)
        for w, seq in seqs.items():
            i, new = 0, []
            while i < len(seq):
                if i + 1 < len(seq) and seq[i] == x and seq[i + 1] == y:
                    new.append(x + y)
                    i += 2
                else:
                    new.append(seq[i])
                    i += 1
            seqs[w] = new
    T = gguf.TokenType
    tokens = [('<unk>', 0.0, T.UNKNOWN), ('<s>', 0.0, T.CONTROL), ('</s>', 0.0, T.CONTROL)]
    tokens += [(f'<0x{b:02X}>', 0.0, T.BYTE) for b in range(256)]
    seen = set(t for t, _, _ in tokens)
    for i, c in enumerate(alphabet):
        if c not in seen:
            tokens.append((c, -1e6 - i, T.NORMAL))
            seen.add(c)
    for i, m in enumerate(merged):
        if m not in seen:
            tokens.append((m, float(-i), T.NORMAL))
            seen.add(m)
    tokens += [('<|im_start|>', 0.0, T.CONTROL), ('<|im_end|>', 0.0, T.CONTROL)]
    return tokens


def write_spm_gguf(path, tokens):
    w = gguf.GGUFWriter(path, 'llama')
    w.add_name('vqserve tiny spm tokenizer fixture')
    w.add_context_length(256)
    w.add_embedding_length(64)
    w.add_feed_forward_length(128)
    w.add_block_count(1)
    w.add_head_count(4)
    w.add_head_count_kv(4)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_dimension_count(16)
    w.add_vocab_size(len(tokens))
    w.add_tokenizer_model('llama')
    w.add_token_list([t for t, _, _ in tokens])
    w.add_token_scores([s for _, s, _ in tokens])
    w.add_token_types([int(k) for _, _, k in tokens])
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    w.add_add_bos_token(True)
    w.add_add_space_prefix(True)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main():
    model = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        ROOT, 'models', 'SmolLM2-135M-Instruct.Q4_1.gguf')
    texts = collect_texts()
    fortune_lines = [l for l in texts[150:190]]
    specials = special_texts(fortune_lines)

    llm = llama_cpp.Llama(model_path=model, vocab_only=True, verbose=False)
    reader = gguf.GGUFReader(model)
    template = gguf_string(reader, 'tokenizer.chat_template')
    records = tokenize_records(llm, texts, specials)
    records += chat_records(llm, template, '<|im_start|>', '<|im_end|>', fortune_lines)
    write_jsonl(os.path.join(DATA, 'tokenizer_fixture.jsonl'), records)

    # train the small vocab on half of the texts and test on all of them.
    spm_path = os.path.join(DATA, 'spm_tokenizer.gguf')
    write_spm_gguf(spm_path, train_spm_vocab(texts[::2]))
    spm = llama_cpp.Llama(model_path=spm_path, vocab_only=True, verbose=False)
    spm_records = tokenize_records(spm, texts, specials)
    write_jsonl(os.path.join(DATA, 'spm_tokenizer_fixture.jsonl'), spm_records)
    print(f'{spm_path}: {os.path.getsize(spm_path)} bytes')


if __name__ == '__main__':
    main()
