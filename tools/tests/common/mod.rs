//! Helpers shared by the command-line tests: run the `roce` binary, write a capture.
// Each test file is its own crate and uses some of these.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub fn roce(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_roce"))
        .args(args)
        .output()
        .expect("the roce binary runs")
}

/// `roce ARGS`'s standard output, after checking it exited 0 (its stderr in the failure).
pub fn roce_ok(args: &[&str]) -> String {
    let out = roce(args);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8 output")
}

/// `roce ARGS`'s standard output as JSON, after checking it exited 0.
pub fn roce_json(args: &[&str]) -> serde_json::Value {
    let text = roce_ok(args);
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

/// `roce ARGS`'s standard output and standard error, after checking it exited with `code`
/// (its stderr in the failure).
pub fn roce_exit(args: &[&str], code: i32) -> (String, String) {
    let out = roce(args);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(code), "{args:?}: {err}");
    (String::from_utf8_lossy(&out.stdout).into_owned(), err)
}

/// `roce ARGS`'s error line, after checking it failed with status 1, one line on stderr and
/// nothing on stdout.
pub fn roce_one_line_error(args: &[&str]) -> String {
    let out = roce(args);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
    assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
    assert!(out.stdout.is_empty(), "{args:?}");
    err
}

/// Checks `text` holds every one of `needles`.
pub fn assert_contains_all(text: &str, needles: &[&str]) {
    for needle in needles {
        assert!(text.contains(needle), "{needle:?} missing from:\n{text}");
    }
}

/// A file in `group`, a directory of the target dir for one test file (tests of different
/// files run at once and must not share names).
pub fn temp_file_in(group: &str, name: &str, bytes: &[u8]) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(group);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}
