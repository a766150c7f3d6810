//! `roce`: the command-line face of the roce RoCEv2 stack. Each subcommand lives in its own
//! module under `cmd/`; adding one is one line in `commands!` below.

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use roce_tools::cmd;

/// Declares the `Command` enum and its dispatch from one list: `Variant(Args) => run`.
macro_rules! commands {
    ($($variant:ident($args:ty) => $run:path,)*) => {
        #[derive(Debug, Subcommand)]
        enum Command {
            $($variant($args),)*
        }

        impl Command {
            fn run(self) -> anyhow::Result<ExitCode> {
                match self {
                    $(Command::$variant(args) => $run(args),)*
                }
            }
        }
    };
}

commands! {
    Decode(cmd::decode::DecodeArgs) => cmd::decode::run,
    Analyze(cmd::analyze::AnalyzeArgs) => cmd::analyze::run,
    Ladder(cmd::ladder::LadderArgs) => cmd::ladder::run,
    Sim(cmd::sim::SimArgs) => cmd::sim::run,
    Demo(cmd::demo::DemoArgs) => cmd::demo::run,
    Pingpong(cmd::pingpong::PingpongArgs) => cmd::pingpong::run,
    Perf(cmd::perf::PerfArgs) => cmd::perf::run,
    Rping(cmd::rping::RpingArgs) => cmd::rping::run,
    Ucmatose(cmd::ucmatose::UcmatoseArgs) => cmd::ucmatose::run,
    Udaddy(cmd::udaddy::UdaddyArgs) => cmd::udaddy::run,
    LabVerbs(cmd::lab_verbs::LabVerbsArgs) => cmd::lab_verbs::run,
    Gen(cmd::teach::GenArgs) => cmd::teach::run,
    View(cmd::view::ViewArgs) => cmd::view::run,
    Conform(cmd::conform::ConformArgs) => cmd::conform::run_cmd,
    ConformAgent(cmd::conform_agent::ConformAgentArgs) => cmd::conform_agent::run,
}

/// A pure-software RoCEv2 stack: decode and analyse captures, talk to rdma_rxe, simulate.
#[derive(Debug, Parser)]
#[command(name = "roce", version, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command.run() {
        Ok(code) => code,
        Err(e) => {
            eprintln!("roce: {}", cmd::error_line(&e));
            ExitCode::FAILURE
        }
    }
}
