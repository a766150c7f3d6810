//! Wraps every frame of an Ethernet capture in outer layers (for cross-checks with other
//! decoders): `cargo run -p roce-tests --example wrap_pcap -- IN.pcap OUT.pcap WRAPPING`, where
//! WRAPPING is one of vlan, qinq, qinq9100, vxlan, geneve, gre_teb, erspan2, erspan3,
//! erspan3_platform, sll, sll2, sll_vlan.

use std::path::Path;
use std::process::ExitCode;

use roce::wire::decap::wrap::Wrapping;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [input, output, name] = &args[..] else {
        eprintln!("usage: wrap_pcap IN.pcap OUT.pcap WRAPPING");
        return ExitCode::FAILURE;
    };
    let Some(how) = Wrapping::ALL.into_iter().find(|w| w.name() == name) else {
        let names: Vec<_> = Wrapping::ALL.iter().map(|w| w.name()).collect();
        eprintln!(
            "wrap_pcap: unknown wrapping {name} (one of {})",
            names.join(", ")
        );
        return ExitCode::FAILURE;
    };
    let bytes = roce_tests::wrap::wrap_capture(Path::new(input), how);
    match std::fs::write(output, bytes) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("wrap_pcap: cannot write {output}: {e}");
            ExitCode::FAILURE
        }
    }
}
