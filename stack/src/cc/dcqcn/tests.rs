//! One test per rule of the reaction point.

use super::*;

const LINE: f64 = 40e9;

fn us(n: u64) -> Time {
    Time::from_micros(n)
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * b.abs().max(1.0)
}

fn paper() -> ReactionPoint {
    ReactionPoint::new(DcqcnParams::paper(LINE)).unwrap()
}

/// The paper's parameters with a 1000-byte byte counter, so tests can count byte events.
fn small_byte_counter() -> ReactionPoint {
    let mut params = DcqcnParams::paper(LINE);
    params.byte_counter = 1_000;
    ReactionPoint::new(params).unwrap()
}

/// Two back-to-back CNPs from line rate with alpha 1: R_T = LINE/2, R_C = LINE/4.
fn twice_cut() -> ReactionPoint {
    let mut rp = paper();
    rp.on_cnp(us(0));
    rp.on_cnp(us(0));
    assert!(close(rp.target_rate_bps(), LINE / 2.0));
    assert!(close(rp.rate_bps(), LINE / 4.0));
    rp
}

#[test]
fn starts_at_line_rate_with_no_timer() {
    let rp = paper();
    assert_eq!(rp.rate_bps(), LINE);
    assert_eq!(rp.stage(), Stage::Idle);
    assert_eq!(rp.next_timer(), None);
}

#[test]
fn a_cnp_cuts_the_rate_by_half_alpha_and_raises_alpha() {
    let mut params = DcqcnParams::paper(LINE);
    params.initial_alpha = 0.5;
    let mut rp = ReactionPoint::new(params).unwrap();
    rp.on_cnp(us(10));
    assert!(close(rp.rate_bps(), LINE * 0.75));
    assert_eq!(
        rp.target_rate_bps(),
        LINE,
        "R_T takes R_C from before the cut"
    );
    let g = 1.0 / 256.0;
    assert!(close(rp.alpha(), (1.0 - g) * 0.5 + g));
    assert_eq!(rp.stage(), Stage::FastRecovery);
    assert_eq!(rp.next_timer(), Some(us(65)));
}

#[test]
fn alpha_decays_once_per_period_without_cnp() {
    let mut rp = paper();
    rp.on_cnp(us(0));
    let a0 = rp.alpha();
    rp.on_timer(us(54));
    assert_eq!(rp.alpha(), a0, "nothing is due before 55 us");
    rp.on_timer(us(55));
    let g = 1.0 / 256.0;
    assert!(close(rp.alpha(), a0 * (1.0 - g)));
    rp.on_timer(us(55));
    assert!(
        close(rp.alpha(), a0 * (1.0 - g)),
        "a second call at the same time is a no-op"
    );
    rp.on_timer(us(165));
    assert!(
        close(rp.alpha(), a0 * (1.0 - g).powi(3)),
        "one late call runs every due period"
    );
}

#[test]
fn fast_recovery_halves_the_gap_f_times() {
    let mut rp = paper();
    rp.on_cnp(us(0));
    let (rt, mut rc) = (rp.target_rate_bps(), rp.rate_bps());
    assert!(close(rc, LINE / 2.0));
    for k in 1..=5 {
        rp.on_timer(us(55 * k));
        rc = (rt + rc) / 2.0;
        assert!(close(rp.rate_bps(), rc), "step {k}");
        assert_eq!(rp.target_rate_bps(), rt);
        assert_eq!(rp.stage(), Stage::FastRecovery);
    }
}

#[test]
fn additive_increase_after_f_timer_events() {
    let mut rp = twice_cut();
    rp.on_timer(us(5 * 55));
    let (rt, rc) = (rp.target_rate_bps(), rp.rate_bps());
    assert_eq!(rt, LINE / 2.0);
    rp.on_timer(us(6 * 55));
    assert_eq!(rp.stage(), Stage::AdditiveIncrease);
    assert!(close(rp.target_rate_bps(), rt + 40e6));
    assert!(close(rp.rate_bps(), (rt + 40e6 + rc) / 2.0));
}

#[test]
fn hyper_increase_once_both_counters_pass_f() {
    let mut rp = small_byte_counter();
    rp.on_cnp(us(0));
    rp.on_cnp(us(0));
    rp.on_timer(us(6 * 55));
    let mut rt = rp.target_rate_bps();
    let t = us(6 * 55);
    // Byte events 1..=5: the timer already passed F, so additive increase.
    for _ in 0..5 {
        rp.on_bytes_sent(t, 1_000);
        rt += 40e6;
        assert!(close(rp.target_rate_bps(), rt));
        assert_eq!(rp.stage(), Stage::AdditiveIncrease);
    }
    // Byte event 6: min(t, b) = 6 > F = 5, one R_HAI.
    rp.on_bytes_sent(t, 1_000);
    rt += 400e6;
    assert!(close(rp.target_rate_bps(), rt));
    assert_eq!(rp.stage(), Stage::HyperIncrease);
    // Timer event 7: min(7, 6) = 6, one R_HAI; byte event 7: min(7, 7) = 7, two.
    rp.on_timer(us(7 * 55));
    rt += 400e6;
    assert!(close(rp.target_rate_bps(), rt));
    rp.on_bytes_sent(us(7 * 55), 1_000);
    rt += 800e6;
    assert!(close(rp.target_rate_bps(), rt));
}

#[test]
fn byte_counter_counts_bytes_across_calls() {
    let mut rp = small_byte_counter();
    rp.on_cnp(us(0));
    let rc0 = rp.rate_bps();
    rp.on_bytes_sent(us(1), 999);
    assert_eq!(rp.rate_bps(), rc0);
    rp.on_bytes_sent(us(1), 1);
    assert!(close(rp.rate_bps(), (LINE + rc0) / 2.0));
}

#[test]
fn timer_and_byte_counter_restart_at_each_cnp() {
    let mut rp = small_byte_counter();
    rp.on_cnp(us(0));
    rp.on_bytes_sent(us(1), 900);
    rp.on_cnp(us(40));
    let rc = rp.rate_bps();
    assert_eq!(rp.next_timer(), Some(us(95)), "T restarted at 40 us");
    rp.on_timer(us(55));
    assert_eq!(
        rp.rate_bps(),
        rc,
        "the timer of the first cut no longer fires"
    );
    rp.on_bytes_sent(us(60), 900);
    assert_eq!(rp.rate_bps(), rc, "bytes before the cut no longer count");
    rp.on_bytes_sent(us(60), 100);
    assert!(rp.rate_bps() > rc);
}

#[test]
fn rate_stays_between_min_rate_and_line_rate() {
    let mut rp = paper();
    for k in 0..200 {
        rp.on_cnp(us(k));
    }
    assert_eq!(rp.rate_bps(), 100e6);
    // Recovery ends exactly at line rate, and the timers stop there.
    let mut now = us(200);
    while rp.next_timer().is_some() {
        now = rp.next_timer().unwrap();
        rp.on_timer(now);
        assert!(rp.rate_bps() <= LINE && rp.target_rate_bps() <= LINE);
    }
    assert_eq!(rp.rate_bps(), LINE);
    assert_eq!(rp.stage(), Stage::Idle);
    assert!(
        now < Time::from_millis(1000),
        "recovered by additive increase"
    );
}

#[test]
fn alpha_decays_missed_while_idle_apply_at_the_next_cnp() {
    let mut idle = paper();
    idle.on_cnp(us(0));
    while let Some(t) = idle.next_timer() {
        idle.on_timer(t);
    }
    let mut busy = idle.clone();
    let g = 1.0 / 256.0;
    // Back at line rate after R_T's single cut: within a few hundred us.
    let recovered_alpha = idle.alpha();
    idle.on_cnp(us(10_000));
    // The reference: the same decays applied one period at a time.
    let periods = (10_000 - busy.next_alpha.as_picos() / 1_000_000) / 55 + 1;
    for _ in 0..periods {
        busy.alpha *= 1.0 - g;
    }
    let expected = (1.0 - g) * busy.alpha + g;
    assert!(recovered_alpha > busy.alpha);
    assert!(
        (idle.alpha() - expected).abs() < 1e-12,
        "{} {}",
        idle.alpha(),
        expected
    );
}

#[test]
fn mlx5_folds_cnps_within_the_rate_reduce_period() {
    let mut rp = ReactionPoint::new(DcqcnParams::mlx5(LINE)).unwrap();
    rp.on_cnp(us(0));
    assert!(close(rp.rate_bps(), LINE / 2.0));
    rp.on_cnp(us(1));
    rp.on_cnp(us(2));
    assert_eq!(rp.cuts(), 1);
    assert_eq!(rp.cnps(), 3);
    // The pending cut comes at 4 us; the 1 us alpha timer ran up to 2 us and comes first.
    assert_eq!(rp.next_timer(), Some(us(3)));
    rp.on_timer(us(4));
    assert_eq!(rp.cuts(), 2);
    assert!(rp.rate_bps() < LINE / 2.0);
    rp.on_cnp(us(9));
    assert_eq!(rp.cuts(), 3, "5 us after the last cut: cut at once");
}

#[test]
fn mlx5_keeps_the_target_until_an_increase_happened() {
    let mut rp = ReactionPoint::new(DcqcnParams::mlx5(LINE)).unwrap();
    rp.on_cnp(us(0));
    assert_eq!(rp.target_rate_bps(), LINE);
    rp.on_cnp(us(10));
    assert_eq!(
        rp.target_rate_bps(),
        LINE,
        "no increase event between the cuts"
    );
    rp.on_timer(us(310));
    let rc = rp.rate_bps();
    rp.on_cnp(us(320));
    assert_eq!(rp.target_rate_bps(), rc);
}

#[test]
fn bad_parameters_are_refused() {
    let mut p = DcqcnParams::paper(LINE);
    p.min_rate_bps = 2.0 * LINE;
    assert!(ReactionPoint::new(p).is_err());
    let mut p = DcqcnParams::paper(LINE);
    p.g = 1.5;
    assert!(ReactionPoint::new(p).is_err());
    let mut p = DcqcnParams::paper(LINE);
    p.increase_period = Time::ZERO;
    assert!(ReactionPoint::new(p).is_err());
    assert!(ReactionPoint::new(DcqcnParams::paper(f64::INFINITY)).is_err());
    assert_eq!(Preset::from_name("mlx5"), Some(Preset::Mlx5));
    assert_eq!(Preset::from_name("nope"), None);
}
