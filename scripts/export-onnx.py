#!/usr/bin/env python3
"""Write a BERT sentence embedder (all-MiniLM-L6-v2, or any BERT model folder nmem imports) as an
ONNX graph for `nmem-embed-onnx`: fp32 by default (the model exactly), or quantised to int8.

The graph is written from the weights with onnx.helper: no torch, no transformers. It computes
what the candle engine (embed/src/engine.rs) computes: BERT on token ids with an attention mask,
token type 0 everywhere, mean pooling over the real tokens, L2 normalisation. Tokenisation stays
outside (the same WordPiece tokenizer.json, in Rust), so both engines see the same ids.

    export-onnx.py MODEL_DIR_OR_WHEEL OUT_DIR [--int8] [--check NMEM_EMBED_BIN]

OUT_DIR receives the model folder's files (config.json, tokenizer.json, model.safetensors,
sentence_bert_config.json when present) and model.fp32.onnx (model.int8.onnx with --int8), so
`nmemctl model import OUT_DIR` installs both. Why fp32 is the default: on nmem's eval its vectors
are candle's (worst cosine 1.0000) and the paraphrase set's A@5 is 0.585, against 0.520 for the
int8 graph (cosine 0.993), for 3 ms more CPU per query (ARCHITECTURE.md, "The query's
embedding"). The int8 graph stays for small machines: a quarter of the file (23 MB against 90)
and half the embedder's memory. With --check, the vectors of a few sentences are
compared with those of the candle engine (`nmem-embed --embed`); the script prints each cosine
and fails below 0.99. Needs the pip packages onnx, onnxruntime and numpy only.
"""

import argparse
import json
import shutil
import struct
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

MODEL_FILES = ["config.json", "tokenizer.json", "model.safetensors"]
OPTIONAL_FILES = ["sentence_bert_config.json"]
# Sentences of the parity check: short queries and longer records, the two shapes nmem embeds.
CHECK_SENTENCES = [
    "the nightly export crashed again",
    "what broke the nightly export?",
    "cargo test failed in the scheduled parquet export job: the writer timed out after 30 "
    "seconds while flushing the last row groups",
    "Edit src/retry.rs: lower the retry budget from 5 to 3 because the upstream API rate "
    "limits bursts",
    "parseInvoiceTotal returns NaN when the currency field is missing",
    "ArrowInvalid in df.to_parquet() after the schema change",
]
DTYPES = {"F32": np.float32, "F16": np.float16, "I64": np.int64}


def find_model(src: Path, work: Path) -> Path:
    """The folder holding the model files: src itself, a folder under it, or inside a wheel."""
    if src.is_file():
        with zipfile.ZipFile(src) as z:
            z.extractall(work)
        src = work
    for d in [src, *sorted(p for p in src.rglob("*") if p.is_dir())]:
        if all((d / f).is_file() for f in MODEL_FILES):
            return d
    sys.exit(f"export-onnx: no {', '.join(MODEL_FILES)} in {src}")


def read_safetensors(path: Path) -> dict:
    """Every tensor of a safetensors file as a numpy array (the format is a JSON header + bytes)."""
    data = path.read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n])
    out = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        start, end = meta["data_offsets"]
        raw = data[8 + n + start : 8 + n + end]
        arr = np.frombuffer(raw, dtype=DTYPES[meta["dtype"]]).reshape(meta["shape"])
        out[name.removeprefix("bert.")] = arr.astype(np.float32) if arr.dtype == np.float16 else arr
    return out


def build_graph(w: dict, cfg: dict) -> onnx.ModelProto:
    hidden, heads = cfg["hidden_size"], cfg["num_attention_heads"]
    head_dim, eps = hidden // heads, cfg.get("layer_norm_eps", 1e-12)
    if cfg.get("hidden_act", "gelu") != "gelu":
        sys.exit(f"export-onnx: hidden_act {cfg['hidden_act']!r} is not supported (gelu only)")
    inits, nodes = [], []

    def const(name, arr):
        inits.append(numpy_helper.from_array(np.ascontiguousarray(arr), name))
        return name

    def node(op, inputs, name, **attrs):
        nodes.append(helper.make_node(op, inputs, [name], name=name, **attrs))
        return name

    def linear(x, prefix, out):
        # torch Linear stores (out, in): MatMul wants (in, out), the shape quantize_dynamic reads.
        wt = const(f"{prefix}.weight_t", w[f"{prefix}.weight"].T)
        return node("Add", [node("MatMul", [x, wt], f"{out}_mm"), const(f"{prefix}.bias", w[f"{prefix}.bias"])], out)

    def layer_norm(x, prefix, out):
        return node(
            "LayerNormalization",
            [x, const(f"{prefix}.weight", w[f"{prefix}.weight"]), const(f"{prefix}.bias", w[f"{prefix}.bias"])],
            out,
            axis=-1,
            epsilon=eps,
        )

    # Embeddings: words + positions + token type 0 (folded into the positions: nmem never sets
    # another type), then LayerNorm.
    const("word_embeddings", w["embeddings.word_embeddings.weight"])
    const("pos_type", w["embeddings.position_embeddings.weight"] + w["embeddings.token_type_embeddings.weight"][0])
    const("zero", np.array([0], np.int64))
    const("one", np.array([1], np.int64))
    seq_len = node("Slice", [node("Shape", ["input_ids"], "ids_shape"), "one", const("two", np.array([2], np.int64))], "seq_len")
    positions = node("Slice", ["pos_type", "zero", seq_len], "positions")
    words = node("Gather", ["word_embeddings", "input_ids"], "words")
    x = layer_norm(node("Add", [words, positions], "emb_sum"), "embeddings.LayerNorm", "emb")

    # The attention mask as an additive bias on the scores: 0 for tokens, a large negative for
    # padding (candle's BERT uses the dtype's minimum; either makes their weight 0 after softmax).
    mask_f = node("Cast", ["attention_mask"], "mask_f", to=TensorProto.FLOAT)
    neg = node("Mul", [node("Sub", [const("onef", np.array(1.0, np.float32)), mask_f], "inv_mask"), const("big_neg", np.array(-3.4e38, np.float32))], "neg_mask")
    bias = node("Unsqueeze", [neg, const("axes12", np.array([1, 2], np.int64))], "attn_bias")  # (b, 1, 1, len)

    split_heads = const("split_heads", np.array([0, 0, heads, head_dim], np.int64))
    merge_heads = const("merge_heads", np.array([0, 0, hidden], np.int64))
    scale = const("scale", np.array(1.0 / np.sqrt(head_dim), np.float32))
    for i in range(cfg["num_hidden_layers"]):
        p = f"encoder.layer.{i}"

        def heads_of(name, perm):
            y = linear(x, f"{p}.attention.self.{name}", f"l{i}_{name}")
            return node("Transpose", [node("Reshape", [y, split_heads], f"l{i}_{name}_r")], f"l{i}_{name}_t", perm=perm)

        q = heads_of("query", [0, 2, 1, 3])  # (b, h, len, d)
        k = heads_of("key", [0, 2, 3, 1])  # (b, h, d, len)
        v = heads_of("value", [0, 2, 1, 3])
        scores = node("Add", [node("Mul", [node("MatMul", [q, k], f"l{i}_qk"), scale], f"l{i}_scaled"), bias], f"l{i}_scores")
        probs = node("Softmax", [scores], f"l{i}_probs", axis=-1)
        ctx = node("Transpose", [node("MatMul", [probs, v], f"l{i}_ctx")], f"l{i}_ctx_t", perm=[0, 2, 1, 3])
        ctx = node("Reshape", [ctx, merge_heads], f"l{i}_ctx_m")
        attn = linear(ctx, f"{p}.attention.output.dense", f"l{i}_attn")
        x = layer_norm(node("Add", [attn, x], f"l{i}_attn_res"), f"{p}.attention.output.LayerNorm", f"l{i}_attn_ln")
        inter = linear(x, f"{p}.intermediate.dense", f"l{i}_inter")
        # gelu as BERT defines it: 0.5 x (1 + erf(x / sqrt 2)).
        erf = node("Erf", [node("Mul", [inter, const(f"l{i}_rsqrt2", np.array(1 / np.sqrt(2), np.float32))], f"l{i}_gx")], f"l{i}_erf")
        gelu = node("Mul", [node("Mul", [inter, node("Add", [erf, "onef"], f"l{i}_erf1")], f"l{i}_g2"), const(f"l{i}_half", np.array(0.5, np.float32))], f"l{i}_gelu")
        out = linear(gelu, f"{p}.output.dense", f"l{i}_out")
        x = layer_norm(node("Add", [out, x], f"l{i}_out_res"), f"{p}.output.LayerNorm", f"l{i}_out_ln")

    # Mean over the real tokens, then L2 normalisation (with candle's floor of 1e-12).
    m = node("Unsqueeze", [mask_f, const("axis2", np.array([2], np.int64))], "mask_3d")
    summed = node("ReduceSum", [node("Mul", [x, m], "masked"), "one"], "summed", keepdims=0)
    counts = node("ReduceSum", [mask_f, "one"], "counts", keepdims=1)
    mean = node("Div", [summed, counts], "mean")
    norm = node("Sqrt", [node("ReduceSum", [node("Mul", [mean, mean], "sq"), "one"], "sumsq", keepdims=1)], "norm")
    norm = node("Max", [norm, const("floor", np.array(1e-12, np.float32))], "norm_floor")
    node("Div", [mean, norm], "sentence_embedding")

    graph = helper.make_graph(
        nodes,
        "nmem-bert",
        [
            helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "len"]),
            helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "len"]),
        ],
        [helper.make_tensor_value_info("sentence_embedding", TensorProto.FLOAT, ["batch", hidden])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="nmem export-onnx.py")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def candle_vector(bin_path: str, model_dir: Path, text: str):
    out = subprocess.run([bin_path, "--model-dir", str(model_dir), "--embed", text], check=True, capture_output=True, text=True)
    v = json.loads(out.stdout)
    return v["ids"], np.array(v["vector"], np.float32)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("src", type=Path, help="a model folder or the model's wheel")
    ap.add_argument("out", type=Path, help="the folder to write (created)")
    ap.add_argument("--int8", action="store_true", help="quantise to int8 (writes model.int8.onnx instead of model.fp32.onnx)")
    ap.add_argument("--check", metavar="NMEM_EMBED", help="compare with the candle engine's vectors (fails below cosine 0.99)")
    args = ap.parse_args()

    import onnxruntime as ort

    with tempfile.TemporaryDirectory() as work:
        src = find_model(args.src, Path(work))
        cfg = json.loads((src / "config.json").read_text())
        args.out.mkdir(parents=True, exist_ok=True)
        for f in MODEL_FILES + OPTIONAL_FILES:
            if (src / f).is_file() and (src / f).resolve() != (args.out / f).resolve():
                shutil.copyfile(src / f, args.out / f)
        model = build_graph(read_safetensors(src / "model.safetensors"), cfg)
        fp32 = Path(work) / "model.fp32.onnx"
        onnx.save(model, fp32)
        if not args.int8:
            target = args.out / "model.fp32.onnx"
            shutil.copyfile(fp32, target)
        else:
            from onnxruntime.quantization import QuantType, quantize_dynamic

            target = args.out / "model.int8.onnx"
            # 8-bit weights, one scale per output channel, the word-embedding table too (Gather):
            # 23 MB instead of 90. Measured on CHECK_SENTENCES against candle fp32 (worst cosine):
            # per tensor, signed 0.953; per channel, signed 0.989; per channel, unsigned 0.993.
            quantize_dynamic(
                str(fp32),
                str(target),
                weight_type=QuantType.QUInt8,
                per_channel=True,
                op_types_to_quantize=["MatMul", "Gather"],
            )
        print(f"export-onnx: wrote {target} ({target.stat().st_size / 1e6:.1f} MB)")

        if args.check:
            sess = ort.InferenceSession(str(target), providers=["CPUExecutionProvider"])
            worst = 1.0
            for text in CHECK_SENTENCES:
                ids, ref = candle_vector(args.check, args.out, text)
                ids = np.array([ids], np.int64)
                (vec,) = sess.run(None, {"input_ids": ids, "attention_mask": np.ones_like(ids)})
                cos = float(np.dot(vec[0], ref))
                worst = min(worst, cos)
                print(f"  cosine {cos:.4f}  {text[:60]}")
            print(f"export-onnx: worst cosine with the candle engine {worst:.4f}")
            if worst < 0.99:
                sys.exit("export-onnx: the ONNX model's vectors differ from candle's (cosine < 0.99)")


if __name__ == "__main__":
    main()
