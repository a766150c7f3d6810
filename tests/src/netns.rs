//! Network namespaces and veth pairs for the tests that need root (`*_needs_root`), made with
//! iproute2 and removed on drop, so a failing test leaves nothing behind.
//!
//! A test runs its body inside a namespace by running itself again under `ip netns exec`
//! ([`Netns::rerun`]): the child finds [`inside`] set and does the work, the parent checks that
//! exactly that one test ran and passed. No `unsafe` (setns) is needed for that.

use std::process::{Command, Output};

const INSIDE_VAR: &str = "ROCE_TEST_NETNS";

/// Runs `ip ARGS`, panicking with its stderr if it fails.
pub fn ip(args: &[&str]) {
    run("ip", args);
}

/// Runs a command to completion, panicking loudly (with stderr) if it cannot run or fails.
pub fn run(program: &str, args: &[&str]) -> Output {
    let out = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {program} {args:?}: {e}"));
    assert!(
        out.status.success(),
        "{program} {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Fails the test unless it runs as root: these tests must not be skipped silently.
pub fn require_root() {
    let status = std::fs::read_to_string("/proc/self/status").expect("read /proc/self/status");
    let uid = status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .expect("no effective Uid in /proc/self/status");
    assert_eq!(
        uid, "0",
        "this test needs root (network namespaces, TAP, AF_XDP); run it as root"
    );
}

/// The namespace this process was re-run in, if any.
pub fn inside() -> Option<String> {
    std::env::var(INSIDE_VAR).ok()
}

/// A network namespace, deleted on drop.
#[derive(Debug)]
pub struct Netns {
    pub name: String,
}

impl Netns {
    /// Creates namespace `name` (replacing a stale one left by a killed run) with `lo` up.
    pub fn create(name: &str) -> Netns {
        require_root();
        let _ = Command::new("ip").args(["netns", "del", name]).output();
        ip(&["netns", "add", name]);
        let ns = Netns {
            name: name.to_owned(),
        };
        ns.ip(&["link", "set", "lo", "up"]);
        ns
    }

    /// Runs `ip -n NAME ARGS`.
    pub fn ip(&self, args: &[&str]) {
        let mut all = vec!["-n", self.name.as_str()];
        all.extend_from_slice(args);
        ip(&all);
    }

    /// Runs the test named `test` of the current test binary again inside this namespace and
    /// panics unless it ran and passed.
    pub fn rerun(&self, test: &str) {
        let exe = std::env::current_exe().expect("current test binary");
        let exe = exe.to_str().expect("test binary path is UTF-8");
        let out = Command::new("ip")
            .args([
                "netns",
                "exec",
                &self.name,
                exe,
                "--exact",
                test,
                "--nocapture",
            ])
            .args(["--test-threads", "1", "--include-ignored"])
            .env(INSIDE_VAR, &self.name)
            .output()
            .expect("run ip netns exec");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        print!("{stdout}");
        eprint!("{stderr}");
        assert!(
            out.status.success(),
            "{test} failed inside namespace {}",
            self.name
        );
        assert!(
            stdout.contains("1 passed"),
            "{test} did not run inside {}",
            self.name
        );
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .output();
    }
}

/// Creates veth pair `a` (in `ns_a`) <-> `b` (in `ns_b`), both up with the given MTU and
/// IPv4 addresses (`10.x.y.z/24`); the pair goes when either namespace does.
pub fn veth(ns_a: &Netns, a: &str, addr_a: &str, ns_b: &Netns, b: &str, addr_b: &str, mtu: usize) {
    let mtu = mtu.to_string();
    ip(&[
        "link", "add", a, "netns", &ns_a.name, "mtu", &mtu, "type", "veth", "peer", "name", b,
        "netns", &ns_b.name, "mtu", &mtu,
    ]);
    for (ns, dev, addr) in [(ns_a, a, addr_a), (ns_b, b, addr_b)] {
        ns.ip(&["addr", "add", addr, "dev", dev]);
        ns.ip(&["link", "set", dev, "up"]);
    }
}
