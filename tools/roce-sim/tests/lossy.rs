//! End-to-end runs of the simulator over an impaired network.
//!
//! A failure message names the seed; replay it with the command printed.

use metaroce_proto::packet::Pmtu;
use roce_sim::sim::{run, Report, SimConfig};

/// A receive queue shallow enough that the receivers run out of WQEs
/// between refills, so runs exercise RNR NAKs and RNR retries on top of
/// loss. The default depth is chosen so that they do not run out.
const RNR_RQ_DEPTH: usize = 8;

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
            "{e}\nreproduce with: cargo run -p roce-sim -- --seed {} --loss {} --dup {} --reorder {} --wrs {} --pmtu {} --rq-depth {}{} --trace",
            cfg.seed,
            cfg.net.loss,
            cfg.net.dup,
            cfg.net.reorder,
            cfg.wrs,
            cfg.pmtu.bytes(),
            cfg.rq_depth,
            cfg.cut_at_ns.map_or(String::new(), |t| format!(" --cut-at {t}")),
        )
    })
}

/// Runs seeds `range` at 1% loss, duplication and reordering, with
/// `rq_depth` receive WQEs (`None`: the default): every WR must succeed,
/// and the figures are summed for the coverage checks.
fn lossy_seeds(range: std::ops::Range<u64>, rq_depth: Option<usize>) -> Report {
    let mut sum = Report::default();
    for seed in range {
        let mut cfg = lossy(seed);
        if let Some(d) = rq_depth {
            cfg.rq_depth = d;
        }
        let r = run_or_explain(&cfg);
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
    // A shallow receive queue: RNR on top of loss.
    let s = lossy_seeds(0..50, Some(RNR_RQ_DEPTH));
    // The impairments must actually exercise the recovery paths.
    assert!(s.lost > 0 && s.retransmits > 0 && s.duplicates > 0, "{s:?}");
    assert!(s.timeouts > 0 && s.seq_naks > 0 && s.rnr_naks > 0, "{s:?}");
}

#[test]
fn lossy_seeds_50_to_100() {
    // The default receive queue: recovery from the network's impairments
    // alone; the receivers must not run dry.
    let s = lossy_seeds(50..100, None);
    assert!(s.lost > 0 && s.retransmits > 0 && s.duplicates > 0, "{s:?}");
    assert!(s.timeouts > 0 && s.seq_naks > 0, "{s:?}");
    assert_eq!(s.rnr_naks, 0, "the default rq_depth ran dry: {s:?}");
}

#[test]
fn lossy_seeds_100_to_150() {
    lossy_seeds(100..150, None);
}

#[test]
fn lossy_seeds_150_to_200() {
    lossy_seeds(150..200, None);
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
    // The cut must come before the run would have finished. With the
    // default receive queue the shortest of these runs takes 74 us uncut,
    // so the cuts fall within 10..67 us; with the shallow one RNR waits
    // stretch the runs and the cuts spread over 10..105 us.
    let default_depth = SimConfig::new(0).rq_depth;
    for (rq_depth, step) in [(default_depth, 3_000), (RNR_RQ_DEPTH, 5_000)] {
        for seed in 0..20 {
            let mut cfg = lossy(seed);
            cfg.rq_depth = rq_depth;
            cfg.cut_at_ns = Some(10_000 + step * seed);
            let r = run_or_explain(&cfg);
            let at = format!("seed {seed}, rq depth {rq_depth}");
            // The simulator checks that each side sees successes, then one
            // retry-exceeded WR, then flushes. A side may have finished all
            // its work before the cut; at least one has not.
            assert!((1..=2).contains(&r.wrs_retry_exceeded), "{at}: {r:?}");
            assert!(r.wrs_flushed > 0 && r.timeouts >= 8, "{at}: {r:?}");
            assert_eq!(
                r.wrs_ok + r.wrs_retry_exceeded + r.wrs_flushed,
                r.wrs_posted,
                "{at}"
            );
        }
    }
}

#[test]
fn runs_are_deterministic() {
    let cfg = lossy(7);
    assert_eq!(run(&cfg), run(&cfg));
    assert_ne!(run(&cfg), run(&lossy(8)));
}
