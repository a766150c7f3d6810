# Sourced by the suites that run on the SoftRoCE lab (tests/lab/smoke.sh, tests/interop/run.sh,
# tests/conform/run.sh): where the lab script and our binary are, how a suite gives up, and
# the checks each makes before it starts. The caller sets `suite`, its name in messages.
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
lab=$here/tools/softroce-lab
# Where `cargo build --release` puts it: CARGO_TARGET_DIR when set (a worktree sharing a build).
roce=${CARGO_TARGET_DIR:-$here/target}/release/roce

# Says why on stderr, then the suite's tally of one failure, and exits 1.
fatal() {
  echo "$suite: FATAL: $*" >&2
  echo "$suite: 0 passed, 1 failed"
  exit 1
}

# Root (network namespace, TAP, QEMU guests), the lab script, and TAP devices.
need_lab() {
  [[ $(id -u) -eq 0 ]] || fatal "needs root (network namespace, TAP, QEMU guests)"
  [[ -x $lab ]] || fatal "$lab missing or not executable"
  [[ -c /dev/net/tun ]] || fatal "/dev/net/tun missing: no TAP devices on this kernel"
}

# The suites take no arguments (their knobs are environment variables, named in their header
# comments): -h/--help prints that header; anything else is refused before the lab is touched.
suite_args() {
  case ${1:-} in
    "") return ;;
    -h | --help)
      sed -n '2,/^[^#]/p' "$0" | sed '$d; s/^# \{0,1\}//'
      exit 0
      ;;
    *)
      echo "$suite: error: unknown argument '$1' (it takes none; see $0 --help)" >&2
      exit 2
      ;;
  esac
}
