#!/usr/bin/env bash
# Coverage-guided fuzzing of the packet path with cargo-fuzz (libFuzzer, nightly Rust); the
# targets are in fuzz/ (fuzz/README.md says what each one checks).
#
#   scripts/fuzz.sh short                  # CI pass: the harness's unit tests, then every target
#                                          # for FUZZ_SHORT_SECONDS (default 10) from the seeds
#   scripts/fuzz.sh long TARGET SECONDS    # one target, corpus kept in fuzz/work/TARGET
#   scripts/fuzz.sh repro TARGET FILE      # run one input (e.g. a crash artifact) and show why
#   scripts/fuzz.sh seeds                  # regenerate the committed seeds in fuzz/corpus/
#
# Targets: parse, rewrite_window, engine. A crash (a panic or a failed check) stops the run with
# status 1 and leaves the input in fuzz/artifacts/TARGET/. Installs cargo-fuzz (cargo install
# --locked) and a C++ compiler (for libFuzzer) when missing, and rustup's nightly toolchain
# (rustup itself too: scripts/install-rustup.sh).
# FUZZ_SANITIZER=address builds with ASan (default none: the crates have no unsafe code, and
# without it the targets run several times faster).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
targets=(parse rewrite_window engine)
sanitizer=${FUZZ_SANITIZER:-none}
# Build where cargo-fuzz looks for the binaries, whatever CARGO_TARGET_DIR the caller set.
target_dir=${FUZZ_TARGET_DIR:-$root/fuzz/target}
unset CARGO_TARGET_DIR

usage() {
  sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

setup() {
  if ! command -v c++ >/dev/null 2>&1; then
    apt-get update -qq && apt-get install -y -qq build-essential >/dev/null
  fi
  # Where scripts/setup.sh chose Debian's cargo, there is no rustup: install it for the nightly
  # only (no default toolchain, profile untouched), so a plain `cargo` stays Debian's elsewhere.
  if ! command -v rustup >/dev/null 2>&1; then
    if [ ! -x "$HOME/.cargo/bin/rustup" ]; then
      "$root/scripts/install-rustup.sh" --profile minimal --default-toolchain none --no-modify-path
    fi
    export PATH="$HOME/.cargo/bin:$PATH"
  fi
  if ! cargo +nightly --version >/dev/null 2>&1; then
    rustup toolchain install nightly --profile minimal
  fi
  if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
    cargo +nightly install cargo-fuzz --locked
  fi
}

is_target() {
  local t
  for t in "${targets[@]}"; do [ "$t" = "$1" ] && return 0; done
  echo "fuzz.sh: unknown target '$1' (${targets[*]})" >&2
  exit 2
}

# run TARGET WORK_DIR LIBFUZZER_ARGS...: fuzz from the committed seeds, new inputs into WORK_DIR.
run() {
  local target=$1 work=$2
  shift 2
  mkdir -p "$work" "$root/fuzz/artifacts/$target"
  (cd fuzz && cargo +nightly fuzz run --sanitizer "$sanitizer" --target-dir "$target_dir" "$target" \
    "$work" "$root/fuzz/corpus/$target" -- \
    -artifact_prefix="$root/fuzz/artifacts/$target/" -timeout=10 -print_final_stats=1 "$@")
}

case "${1:-}" in
  short)
    setup
    seconds=${FUZZ_SHORT_SECONDS:-10}
    # The harness itself: packet builder, seed encoding round trip, scenarios reach their states.
    (cd fuzz && cargo +nightly test --release --target-dir "$target_dir" --lib --quiet)
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
    for t in "${targets[@]}"; do
      (cd fuzz && cargo +nightly fuzz build --sanitizer "$sanitizer" --target-dir "$target_dir" "$t")
    done
    for t in "${targets[@]}"; do
      echo "fuzz.sh: $t for ${seconds}s"
      if run "$t" "$work/$t" -max_total_time="$seconds" >"$work/$t.log" 2>&1; then
        grep -E '^#[0-9]+[[:space:]]+(INITED|DONE)|^stat::(number_of_executed_units|average_exec_per_sec)' "$work/$t.log"
      else
        tail -n 80 "$work/$t.log" >&2
        echo "fuzz.sh: $t failed (a crash is kept in fuzz/artifacts/$t/; scripts/fuzz.sh repro $t FILE)" >&2
        exit 1
      fi
    done
    ;;
  long)
    [ $# -eq 3 ] || usage
    is_target "$2"
    setup
    run "$2" "$root/fuzz/work/$2" -max_total_time="$3"
    ;;
  repro)
    [ $# -eq 3 ] || usage
    is_target "$2"
    setup
    input=$(realpath "$3")
    (cd fuzz && cargo +nightly fuzz run --sanitizer "$sanitizer" --target-dir "$target_dir" "$2" "$input")
    (cd fuzz && cargo +nightly fuzz fmt --sanitizer "$sanitizer" --target-dir "$target_dir" "$2" "$input") || true
    ;;
  seeds)
    (cd fuzz && cargo run --release --target-dir "$target_dir" --example gen_seeds -- corpus)
    ;;
  *)
    usage
    ;;
esac
