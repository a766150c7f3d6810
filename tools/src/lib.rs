//! The `roce` command's subcommands as a library, so that the binary, its tests and the fuzz
//! targets drive the same code (`fuzz/` feeds arbitrary captures through `cmd::decode`).

pub mod cmd;
