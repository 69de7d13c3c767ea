//! `metaroce-sim`: runs one scenario in MetaRoCE mode, its lossless
//! baseline, and the RoCEv2 go-back-N model over the same network, and
//! prints their figures side by side.
//!
//! ```text
//! metaroce-sim [--seed N] [--planes K] [--gbps G] [--delay-us U] [--loss P]
//!              [--burst MEAN:LEN] [--reorder P] [--ecn N] [--buf N]
//!              [--fail-plane J@US] [--senders M] [--bytes N] [--msg N]
//!              [--paths N] [--ecmp mod|hash] [--ack-loss P] [--no-hint]
//!              [--rx-stall PERIOD_US:LEN_US] [--ack-hold MIN_US:MAX_US] [--kernel]
//!              [--loss-both P]
//!              [--tick-ms T] [--rto-min-ms T] [--no-silence]
//! ```
//!
//! `--kernel` starts from the kernel driver's regime on a link-limited path
//! (`Scenario::kernel`: one 200 Mbit/s link, ACKs queued on the way back,
//! timers on a 5 ms tick); `--loss-both P` loses data and ACKs alike.
//!
//! `--no-silence` turns the silence probes off (`ConnConfig::silence_probes`,
//! `transport.rst` 5.5.2): every RTO declares its path's packets lost.
//!
//! `--senders M` (M > 1) switches to the incast topology: M senders with
//! 25 Gbit/s NICs through a 25 Gbit/s bottleneck. Exits 1 if a run failed
//! an invariant or did not complete, 2 on bad arguments.

use metaroce_sim::net::GilbertElliott;
use metaroce_sim::sim::{jain, run, Ecmp, Mode, Report, Scenario};
use std::process::ExitCode;

fn parse_args(args: &[String]) -> Result<Scenario, String> {
    let mut sc = if args.iter().any(|a| a == "--kernel") {
        Scenario::kernel(1)
    } else {
        Scenario::multipath(1)
    };
    // Incast changes the topology: look for it first.
    if let Some(i) = args.iter().position(|a| a == "--senders") {
        let m: usize = args
            .get(i + 1)
            .and_then(|v| v.parse().ok())
            .ok_or("--senders needs a number")?;
        if !(1..=64).contains(&m) {
            return Err("--senders must be within 1..=64".into());
        }
        if m > 1 {
            sc = Scenario::incast(1, m);
        }
    }
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        if flag == "--no-hint" {
            sc.rate_hint = false;
            continue;
        }
        if flag == "--kernel" {
            continue;
        }
        if flag == "--no-silence" {
            sc.silence_probes = false;
            continue;
        }
        let val = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let num = |v: &str| -> Result<f64, String> {
            v.parse::<f64>()
                .ok()
                .filter(|x| x.is_finite() && *x >= 0.0)
                .ok_or_else(|| format!("bad value for {flag}: {v}"))
        };
        let prob = |v: &str| -> Result<f64, String> {
            let p = num(v)?;
            if p <= 1.0 {
                Ok(p)
            } else {
                Err(format!("{flag} must be within 0..1"))
            }
        };
        match flag.as_str() {
            "--seed" => sc.seed = num(val)? as u64,
            "--senders" => {}
            "--planes" => {
                let k = num(val)? as usize;
                if !(1..=64).contains(&k) {
                    return Err("--planes must be within 1..=64".into());
                }
                let c = sc.planes[0];
                sc.planes = vec![c; k];
            }
            "--gbps" => {
                let g = (num(val)? * 1000.0) as u64;
                if g == 0 {
                    return Err("--gbps must be positive".into());
                }
                sc.planes.iter_mut().for_each(|l| l.mbps = g);
            }
            "--delay-us" => {
                let d = (num(val)? * 1000.0) as u64;
                sc.planes.iter_mut().for_each(|l| l.delay_ns = d);
            }
            "--loss" => {
                let p = prob(val)?;
                sc.planes.iter_mut().for_each(|l| l.loss = p);
            }
            "--burst" => {
                let (m, len) = val.split_once(':').ok_or("--burst takes MEAN:LEN")?;
                let ge = GilbertElliott::with_mean(prob(m)?, num(len)?);
                sc.planes.iter_mut().for_each(|l| l.ge = Some(ge));
            }
            "--reorder" => {
                let p = prob(val)?;
                sc.planes.iter_mut().for_each(|l| l.reorder = p);
            }
            "--ecn" => {
                let n = num(val)? as usize;
                sc.planes.iter_mut().for_each(|l| l.ecn_pkts = n);
                if let Some(b) = &mut sc.bottleneck {
                    b.ecn_pkts = n;
                }
            }
            "--buf" => {
                let n = (num(val)? as usize).max(1);
                sc.planes.iter_mut().for_each(|l| l.buf_pkts = n);
                if let Some(b) = &mut sc.bottleneck {
                    b.buf_pkts = n;
                }
            }
            "--fail-plane" => {
                let (j, us) = val.split_once('@').ok_or("--fail-plane takes J@US")?;
                let j = num(j)? as usize;
                let t = (num(us)? * 1000.0) as u64;
                sc.planes
                    .get_mut(j)
                    .ok_or("--fail-plane: no such plane")?
                    .fail_at_ns = Some(t);
            }
            "--bytes" => sc.wl.bytes = (num(val)? as u64).max(1),
            "--msg" => sc.wl.msg = (num(val)? as u32).max(1),
            "--paths" => {
                let p = num(val)? as usize;
                if !(1..=64).contains(&p) {
                    return Err("--paths must be within 1..=64".into());
                }
                sc.paths = p as u8;
            }
            "--ecmp" => {
                sc.ecmp = match val.as_str() {
                    "mod" => Ecmp::Modulo,
                    "hash" => Ecmp::Hash,
                    _ => return Err("--ecmp takes mod or hash".into()),
                }
            }
            "--ack-loss" => sc.ack_loss = prob(val)?,
            "--loss-both" => sc = sc.with_loss_both_ways(prob(val)?),
            "--tick-ms" => sc.tick_ns = (num(val)? * 1e6) as u64,
            "--rto-min-ms" => {
                sc.rto_min_ns = ((num(val)? * 1e6) as u64).max(1);
                sc.rto_init_ns = sc.rto_init_ns.max(sc.rto_min_ns);
            }
            "--rx-stall" => {
                let (p, l) = val
                    .split_once(':')
                    .ok_or("--rx-stall takes PERIOD_US:LEN_US")?;
                let (p, l) = (num(p)? as u64 * 1000, num(l)? as u64 * 1000);
                if p == 0 || l >= p {
                    return Err("--rx-stall: 0 < LEN < PERIOD".into());
                }
                sc.rx_stall = Some((p, l));
            }
            "--ack-hold" => {
                let (lo, hi) = val
                    .split_once(':')
                    .ok_or("--ack-hold takes MIN_US:MAX_US")?;
                let (lo, hi) = (num(lo)? as u64 * 1000, num(hi)? as u64 * 1000);
                if lo > hi {
                    return Err("--ack-hold: MIN <= MAX".into());
                }
                sc.ack_hold = Some((lo, hi));
            }
            _ => return Err(format!("unknown option {flag}")),
        }
    }
    Ok(sc)
}

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

fn show(name: &str, r: &Report, base: &Report) {
    let ratio = r.goodput_mbps / base.goodput_mbps.max(1e-9);
    let rates = r.rates_while_all_active(2 * r.base_rtt_ns);
    println!(
        "{name:<9} goodput {:>8.2} Gbit/s ({:>5.1}% of lossless {:.2}) | time {:>7} us | pkts {:>6} retx {:>5} rto {:>3} (spurious {:>3}, late acks {:>5}, silences {:>3}) repath {:>3} | queue max {:>4} avg {:>6.2} | jain {:.3}{}",
        r.goodput_mbps / 1000.0,
        ratio * 100.0,
        base.goodput_mbps / 1000.0,
        r.elapsed_ns / 1000,
        r.packets,
        r.retransmits,
        r.timeouts,
        r.spurious_rtos,
        r.late_acks,
        r.silences,
        r.repaths,
        r.max_queue(),
        r.avg_queue(),
        jain(&rates),
        if r.completed && r.errors.is_empty() { "" } else { "  FAILED" },
    );
    for e in &r.errors {
        println!("          error: {e}");
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let sc = match parse_args(&args) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("metaroce-sim: {e}");
            eprintln!("usage: see the comment at the top of tools/metaroce-sim/src/main.rs");
            return ExitCode::from(2);
        }
    };
    println!(
        "seed {} planes {} x {} Gbit/s, {} us one way, loss {}, senders {}, {} bytes each, {} paths, base RTT {} us",
        sc.seed,
        sc.planes.len(),
        sc.planes[0].mbps as f64 / 1000.0,
        sc.one_way_ns() as f64 / 1000.0,
        sc.planes[0].loss,
        sc.senders,
        sc.wl.bytes,
        sc.paths,
        sc.base_rtt_ns() as f64 / 1000.0,
    );
    let meta = run(&sc);
    let meta0 = run(&lossless(&sc));
    let mut gbn_sc = sc.clone();
    gbn_sc.mode = Mode::Gbn;
    let gbn = run(&gbn_sc);
    let gbn0 = run(&lossless(&gbn_sc));
    show("MetaRoCE", &meta, &meta0);
    show("RoCEv2", &gbn, &gbn0);
    let shares: Vec<String> = meta
        .plane_shares()
        .iter()
        .map(|s| format!("{:.1}%", s * 100.0))
        .collect();
    println!("MetaRoCE plane shares: {}", shares.join(" "));
    if meta.senders.len() > 1 {
        let rates: Vec<String> = meta
            .rates_while_all_active(2 * meta.base_rtt_ns)
            .iter()
            .map(|r| format!("{:.2}", r / 1000.0))
            .collect();
        println!("MetaRoCE per-sender Gbit/s: {}", rates.join(" "));
    }
    if std::env::var_os("METAROCE_SIM_QUEUES").is_some() {
        let q: Vec<String> = meta.queue_timeline.iter().map(|q| q.to_string()).collect();
        println!(
            "MetaRoCE queue per {} us: {}",
            meta.bucket_ns / 1000,
            q.join(" ")
        );
    }
    let ok = |r: &Report| r.completed && r.errors.is_empty();
    if ok(&meta) && ok(&meta0) {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn flags() {
        let sc = parse_args(&args("--loss 0.1 --planes 2 --fail-plane 1@50 --paths 16")).unwrap();
        assert_eq!(sc.planes.len(), 2);
        assert_eq!(sc.planes[1].loss, 0.1);
        assert_eq!(sc.planes[1].fail_at_ns, Some(50_000));
        assert_eq!(sc.paths, 16);
        let sc = parse_args(&args("--senders 8 --ecn 5")).unwrap();
        assert_eq!(sc.senders, 8);
        assert_eq!(sc.bottleneck.unwrap().ecn_pkts, 5);
        for bad in [
            "--loss 2",
            "--loss x",
            "--planes 0",
            "--paths 65",
            "--fail-plane 9@1",
            "--burst 0.1",
            "--ecmp foo",
            "--senders 0",
            "--gbps 0",
            "--seed",
            "--what 1",
        ] {
            assert!(parse_args(&args(bad)).is_err(), "{bad}");
        }
    }
}
