//! `roce-sim`: runs one seeded simulation and prints its figures.
//!
//! ```text
//! roce-sim [--seed N] [--loss P] [--dup P] [--reorder P] [--wrs N] [--pmtu BYTES] [--rq-depth N] [--cut-at NS] [--trace]
//! ```
//!
//! `--rq-depth N` sets how many receive WQEs each endpoint keeps posted
//! (default 128, deep enough that the receivers do not run dry in this
//! workload); a small depth such as 8 makes them run out between refills
//! and exercises RNR NAKs and RNR retries.
//!
//! Exits with status 1 if an invariant fails, 2 on bad arguments.

use metaroce_proto::packet::Pmtu;
use roce_sim::sim::{run, SimConfig};
use std::process::ExitCode;

fn parse_args(args: &[String]) -> Result<SimConfig, String> {
    let mut cfg = SimConfig::new(1);
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        if flag == "--trace" {
            cfg.trace = true;
            continue;
        }
        let val = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let bad = |_| format!("bad value for {flag}: {val}");
        let prob = |v: &str| -> Result<f64, String> {
            let p: f64 = v
                .parse()
                .map_err(|_| format!("bad probability for {flag}: {v}"))?;
            if (0.0..=1.0).contains(&p) {
                Ok(p)
            } else {
                Err(format!("{flag} must be within 0..1"))
            }
        };
        match flag.as_str() {
            "--seed" => cfg.seed = val.parse().map_err(bad)?,
            "--loss" => cfg.net.loss = prob(val)?,
            "--dup" => cfg.net.dup = prob(val)?,
            "--reorder" => cfg.net.reorder = prob(val)?,
            "--wrs" => cfg.wrs = val.parse().map_err(bad)?,
            "--pmtu" => {
                cfg.pmtu = Pmtu::from_bytes(val.parse().map_err(bad)?).ok_or_else(|| {
                    format!("--pmtu must be 256, 512, 1024, 2048 or 4096, not {val}")
                })?
            }
            "--rq-depth" => {
                cfg.rq_depth = val.parse().map_err(bad)?;
                if cfg.rq_depth == 0 {
                    return Err("--rq-depth must be at least 1".into());
                }
            }
            "--cut-at" => cfg.cut_at_ns = Some(val.parse().map_err(bad)?),
            _ => return Err(format!("unknown option {flag}")),
        }
    }
    Ok(cfg)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let cfg = match parse_args(&args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("roce-sim: {e}");
            eprintln!("usage: roce-sim [--seed N] [--loss P] [--dup P] [--reorder P] [--wrs N] [--pmtu BYTES] [--rq-depth N] [--cut-at NS] [--trace]");
            return ExitCode::from(2);
        }
    };
    println!(
        "seed {} loss {} dup {} reorder {} wrs {}/side pmtu {} rq depth {}",
        cfg.seed,
        cfg.net.loss,
        cfg.net.dup,
        cfg.net.reorder,
        cfg.wrs,
        cfg.pmtu.bytes(),
        cfg.rq_depth
    );
    match run(&cfg) {
        Ok(r) => {
            let completed = r.wrs_ok + r.wrs_retry_exceeded + r.wrs_flushed;
            println!(
                "WRs completed:      {completed} of {} ({} ok, {} retry exceeded, {} flushed)",
                r.wrs_posted, r.wrs_ok, r.wrs_retry_exceeded, r.wrs_flushed
            );
            println!("packets sent:       {} ({} lost)", r.packets, r.lost);
            println!("retransmissions:    {}", r.retransmits);
            println!("duplicates seen:    {}", r.duplicates);
            println!("timeouts:           {}", r.timeouts);
            println!("seq NAKs / RNR NAKs: {} / {}", r.seq_naks, r.rnr_naks);
            println!("virtual time:       {} us", r.virtual_ns / 1000);
            println!(
                "goodput:            {} bytes/s ({} Mbit/s)",
                r.goodput(),
                r.goodput() * 8 / 1_000_000
            );
            println!("PASS: all invariants held");
            ExitCode::SUCCESS
        }
        Err(e) => {
            println!("FAIL: {e}");
            ExitCode::from(1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn rq_depth_flag() {
        assert_eq!(
            parse_args(&args("")).unwrap().rq_depth,
            SimConfig::new(1).rq_depth
        );
        assert_eq!(parse_args(&args("--rq-depth 8")).unwrap().rq_depth, 8);
        assert!(parse_args(&args("--rq-depth 0")).is_err());
        assert!(parse_args(&args("--rq-depth x")).is_err());
        assert!(parse_args(&args("--rq-depth")).is_err());
    }

    #[test]
    fn zero_rq_depth_is_rejected_by_run() {
        let mut cfg = SimConfig::new(1);
        cfg.rq_depth = 0;
        assert!(run(&cfg).is_err());
    }
}
