//! `roce gen SCENARIO -o FILE`: teaching captures made by the stack's own engine
//! (roce::scenario::lesson).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::Args;
use roce::scenario::lesson::{GenOptions, Lesson, generate};
use roce::transport::Mtu;

use super::pingpong::parse_mtu;

/// Write a teaching capture: one RoCEv2 exchange made by the real engine, with scripted faults.
///
/// Two hosts (192.168.77.1 = A, the requester, and .2 = B; with --ipv6 fd00:77::1 and ::2)
/// on a 10 Gb/s link with 2 us each way run one lesson: an RC operation, UC or UD, a loss and its recovery, an RNR wait, or
/// DCQCN at a congested queue. Faults are scripted ("drop the 3rd WRITE packet"), so each
/// capture shows exactly its point. The capture is a mirror port on the link: every frame
/// either host sends, a dropped one included (the peer never sees it). The file is pcapng;
/// frames that deserve a word carry a packet comment (dropped, retransmission, NAK and its
/// cause, CNP), shown by Wireshark and `tshark -V`. The same lesson and seed give the same
/// file, byte for byte.
#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  roce gen --list                          the lessons, one line each
  roce gen loss-gbn -o loss.pcapng         a lost packet, the NAK, go-back-N
  roce analyze loss.pcapng                 what the analyser reconstructs from it
  roce decode loss.pcapng | less           field by field
  roce ladder loss.pcapng --svg loss.svg   the exchange as a ladder diagram
  roce gen all -o lessons/                 every lesson into lessons/NAME.pcapng
  roce gen rnr -o rnr.pcapng --view        and rnr.html, its view for a browser
  roce gen write --ipv6 -o write6.pcapng   the same over IPv6 (the ICRC masks traffic class,
                                           flow label and hop limit instead)
  tshark -r loss.pcapng -Y frame.comment -T fields -e frame.number -e frame.comment")]
pub struct GenArgs {
    /// The lesson to write (see --list), or `all` for every lesson into a directory.
    #[arg(value_name = "SCENARIO", required_unless_present = "list")]
    pub scenario: Option<String>,
    /// Where to write the capture (a directory with `all`).
    #[arg(
        short = 'o',
        long = "output",
        value_name = "FILE",
        required_unless_present = "list"
    )]
    pub output: Option<PathBuf>,
    /// List the lessons and what each shows.
    #[arg(long)]
    pub list: bool,
    /// Seed of the PSNs and payload bytes.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub seed: u64,
    /// Path MTU of the connection: 256, 512, 1024, 2048 or 4096.
    #[arg(long, value_name = "N", default_value = "1024", value_parser = parse_mtu)]
    pub mtu: Mtu,
    /// The hosts speak IPv6 (fd00:77::1 and fd00:77::2) instead of IPv4.
    #[arg(long)]
    pub ipv6: bool,
    /// Also write the lesson's HTML view (`roce view`) beside it: NAME.html.
    #[arg(long)]
    pub view: bool,
}

pub fn run(args: GenArgs) -> anyhow::Result<ExitCode> {
    if args.list {
        for l in Lesson::ALL {
            crate::outln!("{:<14} {}", l.name(), l.summary())?;
        }
        return Ok(ExitCode::SUCCESS);
    }
    let (Some(scenario), Some(output)) = (args.scenario.as_deref(), args.output.as_deref()) else {
        bail!("give a SCENARIO and -o FILE (or --list)");
    };
    let opts = GenOptions {
        seed: args.seed,
        mtu: args.mtu,
        ipv6: args.ipv6,
    };
    if scenario == "all" {
        std::fs::create_dir_all(output)
            .with_context(|| format!("cannot create directory {}", output.display()))?;
        for lesson in Lesson::ALL {
            let file = output.join(format!("{}.pcapng", lesson.name()));
            write(lesson, &opts, &file, args.view)?;
        }
        return Ok(ExitCode::SUCCESS);
    }
    let Some(lesson) = Lesson::from_name(scenario) else {
        let names: Vec<&str> = Lesson::ALL.iter().map(|l| l.name()).collect();
        bail!(
            "unknown scenario {scenario:?}; one of: {}, all",
            names.join(", ")
        );
    };
    write(lesson, &opts, output, args.view)?;
    Ok(ExitCode::SUCCESS)
}

fn write(lesson: Lesson, opts: &GenOptions, path: &Path, view: bool) -> anyhow::Result<()> {
    let g = generate(lesson, opts).map_err(|e| anyhow::anyhow!("{e}"))?;
    std::fs::write(path, &g.pcapng).with_context(|| format!("cannot write {}", path.display()))?;
    let dropped = match g.dropped {
        0 => String::new(),
        n => format!(", {n} dropped by the script"),
    };
    let frames = match g.frames {
        1 => "1 frame".to_owned(),
        n => format!("{n} frames"),
    };
    crate::outln!(
        "{}: {frames}{dropped}: {}",
        path.display(),
        lesson.summary()
    )?;
    if view {
        let page = super::view::beside(path);
        let built = super::view::build(&super::view::ViewArgs {
            file: path.to_path_buf(),
            output: Some(page.clone()),
            flow: None,
            from: 1,
            count: super::view::DEFAULT_COUNT,
            // The lessons' link runs at 10 Gb/s: pause quanta count at that.
            link_gbps: 10.0,
        })?;
        std::fs::write(&page, &built.html)
            .with_context(|| format!("cannot write {}", page.display()))?;
        crate::outln!("{}: {}", page.display(), built.summary)?;
    }
    Ok(())
}
