//! The targets of issue 8, asserted in the simulator (ratios within one
//! run of the same scenario and seed), plus invariants under impairments.

use metaroce_proto::cc::{HINT_HEADROOM, PACE_OVERHEAD};
use metaroce_proto::conn::ConnConfig;
use metaroce_sim::net::GilbertElliott;
use metaroce_sim::sim::{jain, run, Ecmp, Mode, Report, Scenario};

const SEEDS: [u64; 3] = [1, 2, 3];

fn lossless(sc: &Scenario) -> Scenario {
    let mut b = sc.clone();
    for l in b
        .planes
        .iter_mut()
        .chain(b.bottleneck.iter_mut())
        .chain(b.ack_link.iter_mut())
    {
        l.loss = 0.0;
        l.ge = None;
        l.fail_at_ns = None;
    }
    b.ack_loss = 0.0;
    b
}

fn ok(r: &Report, what: &str) {
    assert!(r.completed, "{what}: did not complete: {:?}", r.errors);
    assert!(r.errors.is_empty(), "{what}: {:?}", r.errors);
}

/// Goodput of `sc` relative to the same scenario without loss.
fn ratio(sc: &Scenario) -> (f64, Report, Report) {
    let r = run(sc);
    let b = run(&lossless(sc));
    ok(&r, "lossy run");
    ok(&b, "lossless run");
    (r.goodput_mbps / b.goodput_mbps, r, b)
}

#[test]
fn one_percent_loss_keeps_ninety_percent() {
    for seed in SEEDS {
        let (q, r, _) = ratio(&Scenario::multipath(seed).with_loss(0.01));
        assert!(q >= 0.90, "seed {seed}: {:.3} of lossless goodput", q);
        assert!(r.retransmits > 0, "seed {seed}: no loss happened");
    }
}

#[test]
fn ten_percent_loss_keeps_half() {
    for seed in SEEDS {
        let sc = Scenario::multipath(seed).with_loss(0.10);
        let (q, r, _) = ratio(&sc);
        assert!(q >= 0.50, "seed {seed}: {:.3} of lossless goodput", q);
        // Selective repeat: about one retransmission per lost packet.
        let lost: u64 = r.planes.iter().map(|p| p.lost).sum();
        assert!(
            r.retransmits <= lost + lost / 4 + 8,
            "seed {seed}: {} retransmissions for {lost} losses",
            r.retransmits
        );
        // The RoCEv2 go-back-N model over the same network does worse.
        let mut g = sc.clone();
        g.mode = Mode::Gbn;
        let (gq, _, _) = ratio(&g);
        assert!(q > gq, "seed {seed}: MetaRoCE {q:.3} vs go-back-N {gq:.3}");
    }
}

#[test]
fn bursty_loss_and_reordering_complete_intact() {
    for seed in SEEDS {
        let mut sc = Scenario::multipath(seed);
        for l in &mut sc.planes {
            l.ge = Some(GilbertElliott::with_mean(0.03, 6.0));
            l.reorder = 0.02;
        }
        sc.ack_loss = 0.05;
        sc.wl.msg = 3000; // messages not a multiple of the MTU
        let (q, r, _) = ratio(&sc);
        // No target in the issue for bursts; seeds 1-5 measured 47-96% of
        // lossless (RTOs when a burst takes a path's tail and its probe).
        // This catches a collapse.
        assert!(q >= 0.35, "seed {seed}: {q:.3}");
        assert!(r.retransmits > 0);
    }
}

#[test]
fn plane_failure_completes_and_recovers_within_ten_rtts() {
    for seed in SEEDS {
        let mut sc = Scenario::multipath(seed);
        let fail_at = 300_000;
        sc.planes[2].fail_at_ns = Some(fail_at);
        sc.bucket_ns = 5_000;
        let r = run(&sc);
        let b = run(&lossless(&sc));
        ok(&r, "failure run");
        assert!(
            r.planes[2].failed > 0,
            "seed {seed}: the plane carried nothing at failure"
        );
        assert!(r.repaths > 0, "seed {seed}: no repath");
        // Lossless goodput in bytes per bucket.
        let base = b.goodput_mbps * r.bucket_ns as f64 / 8.0 / 1000.0;
        let tl = r.timeline();
        let rtt = r.base_rtt_ns;
        let from = ((fail_at + 10 * rtt) / r.bucket_ns) as usize;
        let to = ((r.elapsed_ns - 10 * rtt) / r.bucket_ns) as usize;
        assert!(
            to > from + 10,
            "seed {seed}: run too short after the failure"
        );
        // Every window of ten buckets (50 us, about 3.5 RTTs) from 10 RTTs
        // after the failure on.
        for w in tl[from..to].windows(10) {
            let got = w.iter().sum::<u64>() as f64 / 10.0;
            assert!(
                got >= 0.7 * base,
                "seed {seed}: {got:.0} bytes/bucket after the failure, lossless {base:.0}: {tl:?}"
            );
        }
    }
}

fn fair_share_check(m: usize, jain_min: f64) {
    for seed in SEEDS {
        let sc = Scenario::incast(seed, m);
        let r = run(&sc);
        ok(&r, "incast");
        let bn = r.bottleneck.expect("bottleneck");
        assert_eq!(bn.overflow, 0, "seed {seed}: the bottleneck overflowed");
        // The receiver's allocation: the bottleneck's payload capacity less
        // the hint headroom, split evenly.
        let link = sc.bottleneck.unwrap().mbps as f64;
        let payload = link * f64::from(sc.mss) / (f64::from(sc.mss) + f64::from(PACE_OVERHEAD));
        let share = payload * (1.0 - 1.0 / f64::from(HINT_HEADROOM)) / m as f64;
        let rtt = r.base_rtt_ns;
        let rates = r.rates_while_all_active(2 * rtt);
        for (i, x) in rates.iter().enumerate() {
            assert!(
                (x / share - 1.0).abs() <= 0.10,
                "seed {seed}: sender {i} at {x:.0} Mbit/s, fair share {share:.0}: {rates:?}"
            );
        }
        let j = jain(&rates);
        assert!(j >= jain_min, "seed {seed}: Jain {j:.4} {rates:?}");
        // Queue bounded by the senders' initial windows (doubled once by
        // slow start before the first ACK returns).
        let init = ConnConfig::new(1).init_cwnd_conn as usize;
        assert!(
            r.max_queue() <= 2 * m * init + 8,
            "seed {seed}: queue {}",
            r.max_queue()
        );
        // Settled (at most the ECN threshold from then on) within 2 RTTs of
        // the start (issue 34), the RTT being the one the first burst sees:
        // the base RTT plus the time the bottleneck takes to pass every
        // sender's initial window, which leaves before any feedback can
        // exist. Measured 2026-12-06: 0.71 (m 4) and 1.21 (m 8) such RTTs
        // with the burst payback, 2.5 and 3.4 without it.
        let bn_cfg = sc.bottleneck.unwrap();
        let pkt_ns = (u64::from(sc.mss) + u64::from(PACE_OVERHEAD)) * 8 * 1000 / bn_cfg.mbps;
        let burst_rtt = rtt + (m * init) as u64 * pkt_ns;
        let ecn = bn_cfg.ecn_pkts;
        let busy_end =
            (r.senders.iter().filter_map(|s| s.done_at).min().unwrap() / r.bucket_ns) as usize;
        let settled = r.queue_timeline[..busy_end]
            .iter()
            .rposition(|&q| q > ecn)
            .map_or(0, |i| (i as u64 + 1) * r.bucket_ns);
        assert!(
            settled <= 2 * burst_rtt,
            "seed {seed}: queue above {ecn} until {settled} ns, 2 RTTs are {} ns: {:?}",
            2 * burst_rtt,
            r.queue_timeline
        );
        // A lossless incast: no retransmission timer fires but (m 8) one,
        // before the senders' shares reach them (7 before the RTO floor of
        // section 6.4).
        assert!(r.timeouts <= 1, "seed {seed}: {} RTOs", r.timeouts);
    }
}

#[test]
fn incast_8_to_1_is_fair() {
    fair_share_check(8, 0.95);
}

#[test]
fn incast_4_to_1_is_fair() {
    fair_share_check(4, 0.95);
}

#[test]
fn incast_without_rate_hints_is_slower_to_settle() {
    // The hint is what makes the senders converge: without it the same
    // incast ends with a larger queue or less fairness.
    let mut sc = Scenario::incast(1, 8);
    let with = run(&sc);
    sc.rate_hint = false;
    let without = run(&sc);
    ok(&with, "with hints");
    ok(&without, "without hints");
    let jw = jain(&with.rates_while_all_active(2 * with.base_rtt_ns));
    let jo = jain(&without.rates_while_all_active(2 * without.base_rtt_ns));
    assert!(
        without.avg_queue() > with.avg_queue() || jo < jw,
        "hints changed nothing: queue {} vs {}, jain {jo} vs {jw}",
        without.avg_queue(),
        with.avg_queue()
    );
}

#[test]
fn spraying_shares_are_exact() {
    // Consecutive ports onto 4 equal planes: within 10% of 1/4 each.
    for seed in SEEDS {
        let r = run(&Scenario::multipath(seed));
        ok(&r, "spray");
        for (j, s) in r.plane_shares().iter().enumerate() {
            assert!(
                (s * 4.0 - 1.0).abs() <= 0.10,
                "seed {seed}: plane {j} share {s:.3}"
            );
        }
    }
    // Hashed ECMP collides: with 32 ports per connection every plane still
    // carries within 20% of its share (a handful of ports would leave
    // planes empty).
    for seed in SEEDS {
        let mut sc = Scenario::multipath(seed);
        sc.ecmp = Ecmp::Hash;
        sc.paths = 32;
        let r = run(&sc);
        ok(&r, "hashed spray");
        for (j, s) in r.plane_shares().iter().enumerate() {
            assert!(
                (s * 4.0 - 1.0).abs() <= 0.20,
                "seed {seed}: plane {j} share {s:.3}"
            );
        }
    }
}

#[test]
fn runs_are_deterministic() {
    let sc = Scenario::multipath(7).with_loss(0.05);
    let a = run(&sc);
    let b = run(&sc);
    assert_eq!(
        (a.elapsed_ns, a.packets, a.retransmits, a.timeouts),
        (b.elapsed_ns, b.packets, b.retransmits, b.timeouts)
    );
    assert_eq!(a.timeline(), b.timeline());
}

#[test]
fn gbn_model_suffers_from_loss() {
    // The comparison baseline behaves like go-back-N: at 1% loss it resends
    // more than one packet per loss.
    let mut sc = Scenario::multipath(1).with_loss(0.01);
    sc.mode = Mode::Gbn;
    let r = run(&sc);
    let lost: u64 = r.planes.iter().map(|p| p.lost).sum();
    assert!(r.completed);
    assert!(
        r.retransmits > 2 * lost,
        "{} retransmissions for {lost} losses",
        r.retransmits
    );
}

#[test]
fn lossy_plane_is_left_by_repathing() {
    // Plane 0 loses 40% of its packets, the others nothing: the paths on
    // it lose 16 packets (of at most 64) or time out, change their source
    // port and land on other planes.
    for seed in SEEDS {
        let mut sc = Scenario::multipath(seed);
        sc.planes[0].loss = 0.4;
        sc.wl.bytes = 8 << 20;
        let (q, r, _) = ratio(&sc);
        assert!(r.repaths > 0, "seed {seed}: no repath");
        let shares = r.plane_shares();
        // Measured (2026-11-30, growing path windows): 1.0-3.3% with
        // repathing; 14.5% if the port never changes (the paths stay on
        // the plane).
        assert!(
            shares[0] < 0.05,
            "seed {seed}: the lossy plane kept {shares:?}"
        );
        assert!(q >= 0.7, "seed {seed}: {q:.3} of lossless");
    }
}

/// Issue 34's loss targets in the kernel driver's regime (`Scenario::kernel`: one link-limited
/// path, data and ACKs lost alike, ACKs queued on the way back, timers on the 5 ms tick with
/// the driver's RTO floor): goodput against the same run without loss, 8 seeds each. A tail
/// loss is found by a probe that sends the newest packet again, not by an RTO: before that
/// probe existed (it needed new data to send), 2 % loss cost one or two RTOs in 6 of 8 seeds
/// (92.3 % at worst).
#[test]
fn kernel_regime_loss_targets() {
    for (loss, min) in [(0.01, 0.95), (0.02, 0.95), (0.05, 0.80), (0.10, 0.60)] {
        for seed in 1..=8 {
            let (q, r, _) = ratio(&Scenario::kernel(seed).with_loss_both_ways(loss));
            assert!(r.retransmits > 0, "{loss} seed {seed}: no loss happened");
            assert!(q >= min, "{loss} seed {seed}: {q:.3} of lossless goodput");
            if loss <= 0.05 {
                assert_eq!(r.timeouts, 0, "{loss} seed {seed}: an RTO ({q:.3})");
            }
        }
    }
}

/// Issue 34 item 1, the lossless stall: a receiver that stops for 12 ms of every 30 (its vCPU
/// descheduled, as under TCG) in the kernel driver's regime. Its late ACKs fire the paths'
/// RTOs; with silence probes (transport.rst 5.5.2) those timeouts declare nothing lost, so
/// nothing is sent twice but the probes and the goodput stays that of a transfer that only
/// waits. Measured 2026-12-07, seeds 1-3: 0.17 Gbit/s, 8 retransmissions, 0 RTOs, 104
/// silences; without: 0.13 Gbit/s, 2,018 retransmissions, 122 RTOs (all spurious).
#[test]
fn receiver_stalls_cost_no_spurious_retransmissions() {
    for seed in SEEDS {
        let mut sc = Scenario::kernel(seed);
        sc.rx_stall = Some((30_000_000, 12_000_000));
        let on = run(&sc);
        ok(&on, "silence probes");
        sc.silence_probes = false;
        let off = run(&sc);
        ok(&off, "no silence probes");
        assert!(off.timeouts > 0, "seed {seed}: the stalls fired no RTO");
        assert_eq!(on.timeouts, 0, "seed {seed}: an RTO with silence probes");
        assert!(on.silences > 0, "seed {seed}: no silence");
        assert!(
            on.retransmits * 100 <= on.packets,
            "seed {seed}: {} retransmissions of {} packets",
            on.retransmits,
            on.packets
        );
        assert!(
            on.goodput_mbps >= 1.15 * off.goodput_mbps,
            "seed {seed}: {:.1} against {:.1} Mbit/s",
            on.goodput_mbps,
            off.goodput_mbps
        );
    }
}

/// Runs of 8 new DATA packets per path (`ConnConfig::path_run`, what the kernel's `tx_gso`
/// batches) in the kernel driver's regime: the loss shares, averaged over 8 seeds, stay within
/// 0.01 of every packet sprayed alone (measured 2026-12-06: 0.988/0.967/0.937/0.882 against
/// 0.989/0.965/0.944/0.885 at 1/2/5/10 % loss).
#[test]
fn path_runs_keep_kernel_regime_loss_shares() {
    for loss in [0.01, 0.02, 0.05, 0.10] {
        let mean = |path_run: u8| {
            let sum: f64 = (1..=8)
                .map(|seed| {
                    let mut sc = Scenario::kernel(seed).with_loss_both_ways(loss);
                    sc.path_run = path_run;
                    ratio(&sc).0
                })
                .sum();
            sum / 8.0
        };
        let (one, eight) = (mean(1), mean(8));
        assert!(
            eight >= one - 0.01,
            "{loss}: runs of 8 keep {eight:.3} of lossless goodput, runs of 1 {one:.3}"
        );
    }
}

/// Issue 34's path-health test bed: 8 paths sprayed over 8 equal planes (10 Gbit/s each, the
/// sender's NIC their sum), one of which loses 10 % of its packets or runs at a tenth of the
/// others' rate, 16 MiB: goodput against the same scenario with every plane healthy.
fn eight_planes(seed: u64) -> Scenario {
    let mut sc = Scenario::multipath(seed);
    sc.planes = vec![metaroce_sim::net::LinkCfg::default(); 8];
    sc.nic_mbps = sc.planes.iter().map(|l| l.mbps).sum();
    sc.wl.bytes = 16 << 20;
    sc
}

/// A lossy plane costs only its retransmissions (SACK recovery, no repath needed); a slow
/// plane is left because its RTT samples stay above 4x the other paths' median (section 6.1).
/// Measured 2026-12-05, seeds 1-4: loss 0.967-0.987; slow plane 0.879-0.880 with 1-2 repaths,
/// 0.835-0.836 before slow-route repathing (the packets sprayed onto the slow plane waited in
/// its queue at the end of the transfer). The ceiling with the plane left is 71/80 of the
/// NIC's hint: 0.888.
#[test]
fn one_bad_plane_of_eight_keeps_85_percent() {
    for seed in SEEDS {
        let healthy = run(&eight_planes(seed));
        ok(&healthy, "healthy");
        let mut lossy = eight_planes(seed);
        lossy.planes[3].loss = 0.10;
        let l = run(&lossy);
        ok(&l, "lossy plane");
        let ql = l.goodput_mbps / healthy.goodput_mbps;
        assert!(ql >= 0.85, "seed {seed}: lossy plane {ql:.3}");
        assert!(l.retransmits > 0, "seed {seed}: no loss happened");
        let mut slow = eight_planes(seed);
        slow.planes[3].mbps /= 10;
        let s = run(&slow);
        ok(&s, "slow plane");
        let qs = s.goodput_mbps / healthy.goodput_mbps;
        assert!(qs >= 0.85, "seed {seed}: slow plane {qs:.3}");
        assert!(s.repaths > 0, "seed {seed}: the slow plane was not left");
        assert!(
            s.plane_shares()[3] < 0.01,
            "seed {seed}: the slow plane kept {:?}",
            s.plane_shares()
        );
    }
}
