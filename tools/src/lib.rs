//! The `roce` command's subcommands as a library, so that the binary, its tests and the fuzz
//! targets drive the same code (`fuzz/` feeds arbitrary frames through `cmd::decode`).
// Subcommand internals are public only for the binary and fuzz targets, not an API: they need
// no Debug (the lint did not apply to them while they lived in the binary alone).
#![allow(missing_debug_implementations)]

pub mod cmd;
