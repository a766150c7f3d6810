//! What every `roce` command promises on its own command line: `--help` with examples.

mod common;
use common::roce_ok;

/// The subcommands a `--help` page lists (clap's "Commands:" section), without `help`.
fn commands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| l.trim() != "Commands:")
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| l.split_whitespace().next())
        .filter(|&name| name != "help")
        .map(String::from)
        .collect()
}

/// Every command and subcommand, as `roce --help` lists them, shows examples in its help
/// (`roce sim` had none); a command added later is held to it too.
#[test]
fn every_command_has_examples_in_its_help() {
    let top = commands(&roce_ok(&["--help"]));
    assert!(top.len() >= 15, "{top:?}");
    let mut checked = 0;
    let mut pending: Vec<Vec<String>> = top.into_iter().map(|c| vec![c]).collect();
    while let Some(path) = pending.pop() {
        let mut args: Vec<&str> = path.iter().map(String::as_str).collect();
        args.push("--help");
        let help = roce_ok(&args);
        assert!(
            help.contains("Example"),
            "roce {}: no examples",
            path.join(" ")
        );
        checked += 1;
        for sub in commands(&help) {
            let mut deeper = path.clone();
            deeper.push(sub);
            pending.push(deeper);
        }
    }
    assert!(checked >= 17, "{checked} commands checked");
}
