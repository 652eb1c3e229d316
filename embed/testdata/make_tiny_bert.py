#!/usr/bin/env python3
"""Generate the tiny BERT model the nmem-embed tests run on, and its golden vectors.

Standard library only, deterministic (the same bytes on every run):

* tiny-bert/config.json, tiny-bert/tokenizer.json, tiny-bert/model.safetensors: a BERT with
  all-MiniLM-L6-v2's layout (same tensor names, same tokenizer pipeline: BertNormalizer,
  BertPreTokenizer, WordPiece, [CLS] ... [SEP]) but 32 wide, 2 layers, 2 heads, 64 positions and
  a vocabulary of about 200 WordPiece tokens, with seeded random weights. Like the real
  tokenizer.json, this one asks for truncation and fixed padding to a length (16) that the
  embedder must override, so a test fails if the file's settings leak through.
* golden.json: for a few sentences, the token ids and the sentence vectors computed here by a
  plain-Python forward pass (embeddings + LayerNorm, self-attention, GELU in its erf form,
  LayerNorm, masked mean pooling, L2 normalisation), independently of candle and of the HF
  tokenizers library.

Usage:
    make_tiny_bert.py            write the files next to this script
    make_tiny_bert.py --check    exit 1 if the committed files differ from what would be written
    make_tiny_bert.py --forward MODEL_DIR TEXT...
                                 print the vectors of TEXTs for any BERT model folder (slow on a
                                 real model: a cross-check of the Rust engine, not a test)
"""

import json
import math
import random
import struct
import sys
import unicodedata
from pathlib import Path

HERE = Path(__file__).resolve().parent
MODEL_DIR = HERE / "tiny-bert"
GOLDEN = HERE / "golden.json"

HIDDEN = 32
LAYERS = 2
HEADS = 2
INTERMEDIATE = 64
MAX_POSITIONS = 64
TYPE_VOCAB = 2
LN_EPS = 1e-12
SEED = 20260101
# What the embedder truncates to: min(256, max_position_embeddings).
MAX_TOKENS = min(256, MAX_POSITIONS)

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
PUNCT = list("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")
DIGITS = list("0123456789")
LETTERS = [chr(c) for c in range(ord("a"), ord("z") + 1)]
WORDS = """
the an of to in is it and or for with on at by from not no
error errors test tests fix fixed bug build run runs file files src main rs py js ts
export import nightly job jobs crash crashed fail failed schedule scheduled parquet timeout
button colour color changed change migration database query index server client request
response function struct trait module cargo commit push merge branch rust python type flaky
memory cache token daemon socket config json log debug release deploy api http user data
table column row schema resume cafe refresh retry backoff lock path read write edit search
""".split()
PIECES = ["##" + p for p in "es ed ing er ly tion able ment ness".split()]


def vocabulary():
    tokens = SPECIALS + PUNCT + DIGITS + LETTERS + ["##" + c for c in LETTERS] + WORDS + PIECES
    assert len(tokens) == len(set(tokens)), "duplicate token"
    return {t: i for i, t in enumerate(tokens)}


# ---------------------------------------------------------------- the tokenizer, as HF does it


def is_control(c):
    if c in "\t\n\r":
        return False
    return unicodedata.category(c).startswith("C")


def is_whitespace(c):
    return c in " \t\n\r" or c.isspace()


def is_chinese(c):
    cp = ord(c)
    return (
        0x4E00 <= cp <= 0x9FFF
        or 0x3400 <= cp <= 0x4DBF
        or 0x20000 <= cp <= 0x2A6DF
        or 0x2A700 <= cp <= 0x2B73F
        or 0x2B740 <= cp <= 0x2B81F
        or 0x2B920 <= cp <= 0x2CEAF
        or 0xF900 <= cp <= 0xFAFF
        or 0x2F800 <= cp <= 0x2FA1F
    )


def is_punctuation(c):
    return (c.isascii() and not c.isalnum() and c.isprintable() and c != " ") or unicodedata.category(
        c
    ).startswith("P")


def normalize(text):
    out = []
    for c in text:
        if c == "\0" or c == "\ufffd" or is_control(c):
            continue
        if is_whitespace(c):
            out.append(" ")
        elif is_chinese(c):
            out.append(" " + c + " ")
        else:
            out.append(c)
    text = "".join(out)
    # strip_accents is null, so it follows lowercase (true): NFD, drop non-spacing marks.
    text = "".join(c for c in unicodedata.normalize("NFD", text) if unicodedata.category(c) != "Mn")
    return text.lower()


def pre_tokenize(text):
    words, current = [], []
    for c in text:
        if is_whitespace(c):
            if current:
                words.append("".join(current))
                current = []
        elif is_punctuation(c):
            if current:
                words.append("".join(current))
                current = []
            words.append(c)
        else:
            current.append(c)
    if current:
        words.append("".join(current))
    return words


def wordpiece(word, vocab):
    if len(word) > 100:
        return [vocab["[UNK]"]]
    ids, start = [], 0
    while start < len(word):
        end = len(word)
        found = None
        while start < end:
            piece = word[start:end] if start == 0 else "##" + word[start:end]
            if piece in vocab:
                found = vocab[piece]
                break
            end -= 1
        if found is None:
            return [vocab["[UNK]"]]
        ids.append(found)
        start = end
    return ids


def tokenize(text, vocab, max_tokens):
    ids = []
    for word in pre_tokenize(normalize(text)):
        ids.extend(wordpiece(word, vocab))
    ids = ids[: max_tokens - 2]
    return [vocab["[CLS]"]] + ids + [vocab["[SEP]"]]


# ---------------------------------------------------------------- the model, in plain Python


def matvec_t(weight, bias, x):
    """x @ W^T + b, with W as [out][in] (the PyTorch Linear layout)."""
    return [sum(w * v for w, v in zip(row, x)) + b for row, b in zip(weight, bias)]


def layer_norm(x, gamma, beta):
    mean = sum(x) / len(x)
    var = sum((v - mean) ** 2 for v in x) / len(x)
    inv = 1.0 / math.sqrt(var + LN_EPS)
    return [(v - mean) * inv * g + b for v, g, b in zip(x, gamma, beta)]


def gelu(x):
    return 0.5 * x * (1.0 + math.erf(x / math.sqrt(2.0)))


def forward(ids, t, cfg):
    """Sentence vector of one unpadded sequence: BERT, mean pooling, L2 normalisation."""
    hidden, heads = cfg["hidden_size"], cfg["num_attention_heads"]
    dh = hidden // heads
    word, pos, typ = t["embeddings.word_embeddings.weight"], t["embeddings.position_embeddings.weight"], t[
        "embeddings.token_type_embeddings.weight"
    ]
    xs = [
        layer_norm(
            [a + b + c for a, b, c in zip(word[i], pos[p], typ[0])],
            t["embeddings.LayerNorm.weight"],
            t["embeddings.LayerNorm.bias"],
        )
        for p, i in enumerate(ids)
    ]
    for layer in range(cfg["num_hidden_layers"]):
        pre = f"encoder.layer.{layer}."
        q = [matvec_t(t[pre + "attention.self.query.weight"], t[pre + "attention.self.query.bias"], x) for x in xs]
        k = [matvec_t(t[pre + "attention.self.key.weight"], t[pre + "attention.self.key.bias"], x) for x in xs]
        v = [matvec_t(t[pre + "attention.self.value.weight"], t[pre + "attention.self.value.bias"], x) for x in xs]
        context = [[0.0] * hidden for _ in xs]
        for h in range(heads):
            lo, hi = h * dh, (h + 1) * dh
            for i in range(len(xs)):
                scores = [sum(a * b for a, b in zip(q[i][lo:hi], k[j][lo:hi])) / math.sqrt(dh) for j in range(len(xs))]
                top = max(scores)
                exps = [math.exp(s - top) for s in scores]
                total = sum(exps)
                for j, e in enumerate(exps):
                    p = e / total
                    for d in range(lo, hi):
                        context[i][d] += p * v[j][d]
        attn = [
            layer_norm(
                [a + b for a, b in zip(matvec_t(t[pre + "attention.output.dense.weight"], t[pre + "attention.output.dense.bias"], c), x)],
                t[pre + "attention.output.LayerNorm.weight"],
                t[pre + "attention.output.LayerNorm.bias"],
            )
            for c, x in zip(context, xs)
        ]
        out = []
        for a in attn:
            inter = [gelu(z) for z in matvec_t(t[pre + "intermediate.dense.weight"], t[pre + "intermediate.dense.bias"], a)]
            o = matvec_t(t[pre + "output.dense.weight"], t[pre + "output.dense.bias"], inter)
            out.append(layer_norm([p + r for p, r in zip(o, a)], t[pre + "output.LayerNorm.weight"], t[pre + "output.LayerNorm.bias"]))
        xs = out
    pooled = [sum(x[d] for x in xs) / len(xs) for d in range(hidden)]
    norm = max(math.sqrt(sum(p * p for p in pooled)), 1e-12)
    return [p / norm for p in pooled]


# ---------------------------------------------------------------- safetensors by hand


def f32(x):
    """Round a Python float to the nearest float32, as stored."""
    return struct.unpack("<f", struct.pack("<f", x))[0]


def tensor_shapes(vocab_size):
    shapes = {
        "embeddings.word_embeddings.weight": [vocab_size, HIDDEN],
        "embeddings.position_embeddings.weight": [MAX_POSITIONS, HIDDEN],
        "embeddings.token_type_embeddings.weight": [TYPE_VOCAB, HIDDEN],
        "embeddings.LayerNorm.weight": [HIDDEN],
        "embeddings.LayerNorm.bias": [HIDDEN],
        "pooler.dense.weight": [HIDDEN, HIDDEN],
        "pooler.dense.bias": [HIDDEN],
    }
    for layer in range(LAYERS):
        pre = f"encoder.layer.{layer}."
        for name in ("query", "key", "value"):
            shapes[pre + f"attention.self.{name}.weight"] = [HIDDEN, HIDDEN]
            shapes[pre + f"attention.self.{name}.bias"] = [HIDDEN]
        shapes[pre + "attention.output.dense.weight"] = [HIDDEN, HIDDEN]
        shapes[pre + "attention.output.dense.bias"] = [HIDDEN]
        shapes[pre + "attention.output.LayerNorm.weight"] = [HIDDEN]
        shapes[pre + "attention.output.LayerNorm.bias"] = [HIDDEN]
        shapes[pre + "intermediate.dense.weight"] = [INTERMEDIATE, HIDDEN]
        shapes[pre + "intermediate.dense.bias"] = [INTERMEDIATE]
        shapes[pre + "output.dense.weight"] = [HIDDEN, INTERMEDIATE]
        shapes[pre + "output.dense.bias"] = [HIDDEN]
        shapes[pre + "output.LayerNorm.weight"] = [HIDDEN]
        shapes[pre + "output.LayerNorm.bias"] = [HIDDEN]
    return shapes


def random_tensors(vocab_size):
    """Seeded weights, scaled so activations stay O(1) and attention is far from uniform."""
    rng = random.Random(SEED)
    tensors = {}
    for name, shape in sorted(tensor_shapes(vocab_size).items()):
        count = math.prod(shape)
        if name.endswith("LayerNorm.weight"):
            flat = [1.0 + (rng.random() * 2 - 1) * 0.2 for _ in range(count)]
        elif name.endswith("bias"):
            flat = [(rng.random() * 2 - 1) * 0.1 for _ in range(count)]
        elif name.startswith("embeddings."):
            flat = [(rng.random() * 2 - 1) * 1.0 for _ in range(count)]
        else:
            # Uniform with a standard deviation of about 1.5 / sqrt(fan_in).
            a = 1.5 * math.sqrt(3.0 / shape[-1])
            flat = [(rng.random() * 2 - 1) * a for _ in range(count)]
        flat = [f32(x) for x in flat]
        if len(shape) == 1:
            tensors[name] = flat
        else:
            tensors[name] = [flat[r * shape[1] : (r + 1) * shape[1]] for r in range(shape[0])]
    return tensors


def safetensors_bytes(tensors):
    """8-byte little-endian header length, a JSON header padded with spaces to 8 bytes, raw data."""
    header = {"__metadata__": {"format": "pt"}}
    chunks = []
    offset = 0
    # The real file carries position_ids (I64) too; candle ignores it, the loader must not choke.
    position_ids = struct.pack(f"<{MAX_POSITIONS}q", *range(MAX_POSITIONS))
    header["embeddings.position_ids"] = {"dtype": "I64", "shape": [1, MAX_POSITIONS], "data_offsets": [0, len(position_ids)]}
    chunks.append(position_ids)
    offset = len(position_ids)
    for name in sorted(tensors):
        value = tensors[name]
        if value and isinstance(value[0], list):
            shape = [len(value), len(value[0])]
            flat = [x for row in value for x in row]
        else:
            shape = [len(value)]
            flat = value
        data = struct.pack(f"<{len(flat)}f", *flat)
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [offset, offset + len(data)]}
        chunks.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(chunks)


def read_safetensors(path):
    data = Path(path).read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n])
    base = 8 + n
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__" or info["dtype"] != "F32":
            continue
        lo, hi = info["data_offsets"]
        flat = list(struct.unpack(f"<{(hi - lo) // 4}f", data[base + lo : base + hi]))
        shape = info["shape"]
        tensors[name] = flat if len(shape) == 1 else [flat[r * shape[1] : (r + 1) * shape[1]] for r in range(shape[0])]
    # Folders from some exporters prefix every name with "bert.".
    return {k[5:] if k.startswith("bert.") else k: v for k, v in tensors.items()}


# ---------------------------------------------------------------- the files


def config_json(vocab_size):
    config = {
        "architectures": ["BertModel"],
        "attention_probs_dropout_prob": 0.1,
        "hidden_act": "gelu",
        "hidden_dropout_prob": 0.1,
        "hidden_size": HIDDEN,
        "initializer_range": 0.02,
        "intermediate_size": INTERMEDIATE,
        "layer_norm_eps": LN_EPS,
        "max_position_embeddings": MAX_POSITIONS,
        "model_type": "bert",
        "num_attention_heads": HEADS,
        "num_hidden_layers": LAYERS,
        "pad_token_id": 0,
        "position_embedding_type": "absolute",
        "type_vocab_size": TYPE_VOCAB,
        "vocab_size": vocab_size,
    }
    return json.dumps(config, indent=2) + "\n"


def tokenizer_json(vocab):
    special = lambda t: {  # noqa: E731
        "id": vocab[t],
        "content": t,
        "single_word": False,
        "lstrip": False,
        "rstrip": False,
        "normalized": False,
        "special": True,
    }
    tokenizer = {
        "version": "1.0",
        # As in the real file: settings the embedder must replace with its own.
        "truncation": {"max_length": 16, "strategy": "LongestFirst", "stride": 0},
        "padding": {
            "strategy": {"Fixed": 16},
            "direction": "Right",
            "pad_to_multiple_of": None,
            "pad_id": 0,
            "pad_type_id": 0,
            "pad_token": "[PAD]",
        },
        "added_tokens": [special(t) for t in SPECIALS],
        "normalizer": {
            "type": "BertNormalizer",
            "clean_text": True,
            "handle_chinese_chars": True,
            "strip_accents": None,
            "lowercase": True,
        },
        "pre_tokenizer": {"type": "BertPreTokenizer"},
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [
                {"SpecialToken": {"id": "[CLS]", "type_id": 0}},
                {"Sequence": {"id": "A", "type_id": 0}},
                {"SpecialToken": {"id": "[SEP]", "type_id": 0}},
            ],
            "pair": [
                {"SpecialToken": {"id": "[CLS]", "type_id": 0}},
                {"Sequence": {"id": "A", "type_id": 0}},
                {"SpecialToken": {"id": "[SEP]", "type_id": 0}},
                {"Sequence": {"id": "B", "type_id": 1}},
                {"SpecialToken": {"id": "[SEP]", "type_id": 1}},
            ],
            "special_tokens": {
                "[CLS]": {"id": "[CLS]", "ids": [vocab["[CLS]"]], "tokens": ["[CLS]"]},
                "[SEP]": {"id": "[SEP]", "ids": [vocab["[SEP]"]], "tokens": ["[SEP]"]},
            },
        },
        "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": True},
        "model": {
            "type": "WordPiece",
            "unk_token": "[UNK]",
            "continuing_subword_prefix": "##",
            "max_input_chars_per_word": 100,
            "vocab": vocab,
        },
    }
    return json.dumps(tokenizer, indent=1, ensure_ascii=False) + "\n"


SENTENCES = [
    "the nightly export crashed",
    "Scheduled parquet job FAILED with error: timeout (retry 3/5)!",
    "",
    "fix the flaky test in src/main.rs",
    "Résumé of the café migration, naïve 日本 lock",
    # Longer than the 64 positions: the embedder must truncate to 62 pieces + [CLS] + [SEP].
    " ".join(
        ["the daemon read the config file, then wrote the search index and retried the push;"] * 6
    ),
]


def build():
    vocab = vocabulary()
    tensors = random_tensors(len(vocab))
    cfg = json.loads(config_json(len(vocab)))
    cases = []
    for text in SENTENCES:
        ids = tokenize(text, vocab, MAX_TOKENS)
        vector = forward(ids, tensors, cfg)
        cases.append({"text": text, "ids": ids, "vector": [round(x, 9) for x in vector]})
    golden = {
        "comment": "Generated by make_tiny_bert.py: token ids and sentence vectors of tiny-bert.",
        "dim": HIDDEN,
        "max_tokens": MAX_TOKENS,
        "cases": cases,
    }
    return {
        MODEL_DIR / "config.json": config_json(len(vocab)).encode(),
        MODEL_DIR / "tokenizer.json": tokenizer_json(vocab).encode(),
        MODEL_DIR / "model.safetensors": safetensors_bytes(tensors),
        GOLDEN: (json.dumps(golden, indent=1, ensure_ascii=False) + "\n").encode(),
    }


def forward_folder(folder, texts):
    folder = Path(folder)
    cfg = json.loads((folder / "config.json").read_text())
    vocab = json.loads((folder / "tokenizer.json").read_text())["model"]["vocab"]
    tensors = read_safetensors(folder / "model.safetensors")
    max_tokens = min(256, cfg["max_position_embeddings"])
    for text in texts:
        ids = tokenize(text, vocab, max_tokens)
        print(json.dumps({"text": text, "ids": ids, "vector": forward(ids, tensors, cfg)}))


def main(argv):
    if len(argv) >= 3 and argv[0] == "--forward":
        forward_folder(argv[1], argv[2:])
        return 0
    files = build()
    if argv == ["--check"]:
        stale = [str(p.relative_to(HERE)) for p, data in files.items() if not p.exists() or p.read_bytes() != data]
        if stale:
            print("out of date (run embed/testdata/make_tiny_bert.py): " + ", ".join(stale), file=sys.stderr)
            return 1
        print("tiny-bert and golden.json are current")
        return 0
    if argv:
        print(__doc__, file=sys.stderr)
        return 2
    MODEL_DIR.mkdir(exist_ok=True)
    for path, data in files.items():
        path.write_bytes(data)
        print(f"wrote {path.relative_to(HERE)} ({len(data)} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
