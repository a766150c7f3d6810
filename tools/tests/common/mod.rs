//! Helpers shared by the command-line tests: run the `roce` binary, write a capture.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub fn roce(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_roce"))
        .args(args)
        .output()
        .expect("the roce binary runs")
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
