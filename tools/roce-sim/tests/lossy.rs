//! End-to-end runs of the simulator over an impaired network.
//!
//! A failure message names the seed; replay it with the command printed.

use metaroce_proto::packet::Pmtu;
use roce_sim::sim::{run, Report, SimConfig};

const PMTUS: [Pmtu; 5] = [
    Pmtu::Mtu256,
    Pmtu::Mtu512,
    Pmtu::Mtu1024,
    Pmtu::Mtu2048,
    Pmtu::Mtu4096,
];

fn lossy(seed: u64) -> SimConfig {
    let mut cfg = SimConfig::new(seed);
    cfg.net.loss = 0.01;
    cfg.net.dup = 0.01;
    cfg.net.reorder = 0.01;
    cfg.wrs = 150;
    cfg.pmtu = PMTUS[(seed % 5) as usize];
    cfg
}

fn run_or_explain(cfg: &SimConfig) -> Report {
    run(cfg).unwrap_or_else(|e| {
        panic!(
            "{e}\nreproduce with: cargo run -p roce-sim -- --seed {} --loss {} --dup {} --reorder {} --wrs {} --pmtu {}{} --trace",
            cfg.seed,
            cfg.net.loss,
            cfg.net.dup,
            cfg.net.reorder,
            cfg.wrs,
            cfg.pmtu.bytes(),
            cfg.cut_at_ns.map_or(String::new(), |t| format!(" --cut-at {t}")),
        )
    })
}

/// Runs seeds `range` at 1% loss, duplication and reordering: every WR must
/// succeed, and the figures are summed for the coverage check.
fn lossy_seeds(range: std::ops::Range<u64>) -> Report {
    let mut sum = Report::default();
    for seed in range {
        let r = run_or_explain(&lossy(seed));
        assert_eq!(r.wrs_ok, r.wrs_posted, "seed {seed}");
        sum.wrs_ok += r.wrs_ok;
        sum.retransmits += r.retransmits;
        sum.duplicates += r.duplicates;
        sum.timeouts += r.timeouts;
        sum.seq_naks += r.seq_naks;
        sum.rnr_naks += r.rnr_naks;
        sum.lost += r.lost;
    }
    sum
}

#[test]
fn lossy_seeds_0_to_50() {
    let s = lossy_seeds(0..50);
    // The impairments must actually exercise the recovery paths.
    assert!(s.lost > 0 && s.retransmits > 0 && s.duplicates > 0, "{s:?}");
    assert!(s.timeouts > 0 && s.seq_naks > 0 && s.rnr_naks > 0, "{s:?}");
}

#[test]
fn lossy_seeds_50_to_100() {
    lossy_seeds(50..100);
}

#[test]
fn lossy_seeds_100_to_150() {
    lossy_seeds(100..150);
}

#[test]
fn lossy_seeds_150_to_200() {
    lossy_seeds(150..200);
}

#[test]
fn heavy_impairment() {
    for seed in 0..10 {
        let mut cfg = lossy(1000 + seed);
        cfg.net.loss = 0.05;
        cfg.net.dup = 0.05;
        cfg.net.reorder = 0.2;
        cfg.wrs = 100;
        let r = run_or_explain(&cfg);
        assert_eq!(r.wrs_ok, r.wrs_posted, "seed {}", cfg.seed);
    }
}

#[test]
fn cut_link_exhausts_retries_and_flushes() {
    for seed in 0..20 {
        let mut cfg = lossy(seed);
        cfg.cut_at_ns = Some(10_000 + 5_000 * seed);
        let r = run_or_explain(&cfg);
        // The simulator checks that each side sees successes, then one
        // retry-exceeded WR, then flushes. A side may have finished all its
        // work before the cut; at least one has not.
        assert!(
            (1..=2).contains(&r.wrs_retry_exceeded),
            "seed {seed}: {r:?}"
        );
        assert!(r.wrs_flushed > 0 && r.timeouts >= 8, "seed {seed}: {r:?}");
        assert_eq!(
            r.wrs_ok + r.wrs_retry_exceeded + r.wrs_flushed,
            r.wrs_posted,
            "seed {seed}"
        );
    }
}

#[test]
fn runs_are_deterministic() {
    let cfg = lossy(7);
    assert_eq!(run(&cfg), run(&cfg));
    assert_ne!(run(&cfg), run(&lossy(8)));
}
