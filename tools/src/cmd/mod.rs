//! One module per subcommand, each with its clap `Args` struct and a `run` function.

pub mod decode;
