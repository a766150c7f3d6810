#!/usr/bin/env bash
# Fuzz smoke: builds every cargo-fuzz target and runs each for SECONDS, failing on any crash.
# usage: fuzz/run.sh SECONDS          (CI: fuzz/run.sh 30)
#
# cargo-fuzz passes nightly-only -Z flags (sanitizers, coverage); RUSTC_BOOTSTRAP=1 lets the
# stable toolchain accept them, so no nightly is needed. libFuzzer itself is built from the
# libfuzzer-sys crate with the system C++ compiler.
#
# The targets are safe Rust, so AddressSanitizer finds little here while slowing runs up to 15x
# (the capture reader's 1 MiB buffer per input); the default is no sanitizer, with overflow
# checks and debug assertions on. FUZZ_SANITIZER=address (or memory, thread) chooses another.
set -euo pipefail
secs=${1:?usage: fuzz/run.sh SECONDS}
cd "$(dirname "$0")/.."
export RUSTC_BOOTSTRAP=1
sanitizer=${FUZZ_SANITIZER:-none}

if ! command -v cargo-fuzz >/dev/null; then
  cargo install cargo-fuzz --locked
fi
if ! command -v c++ >/dev/null; then
  apt-get install -y -q g++ >/dev/null
fi

# The targets fuzz/Cargo.toml declares, so that a new one is run without a second list here.
mapfile -t targets < <(cd fuzz && cargo fuzz list)
((${#targets[@]} > 0)) || { echo "fuzz: cargo fuzz list found no targets" >&2; exit 1; }
cargo run -q -p roce-tests --example fuzz_seeds -- pcaps fuzz/corpus
(cd fuzz && cargo fuzz build --sanitizer "$sanitizer")
mkdir -p fuzz/artifacts
for t in "${targets[@]}"; do
  echo "fuzz: $t for ${secs}s"
  mkdir -p "fuzz/corpus/$t"
  log="fuzz/artifacts/$t.log"
  # A crash leaves its input in fuzz/artifacts/$t/ and makes cargo fuzz exit non-zero.
  if ! (cd fuzz && cargo fuzz run --sanitizer "$sanitizer" "$t" "corpus/$t" -- \
      -max_total_time="$secs" -rss_limit_mb=2048 -print_final_stats=1) >"$log" 2>&1; then
    tail -n 40 "$log"
    echo "fuzz: $t FAILED (log: $log; reproduce: cd fuzz && cargo fuzz run $t <artifact>)"
    exit 1
  fi
  grep -E '^#[0-9]+ +DONE' "$log" || true
done
echo "fuzz: all targets ran ${secs}s without a crash"
