//! `roce-sim`: runs one seeded simulation and prints its figures.
//!
//! ```text
//! roce-sim [--seed N] [--loss P] [--dup P] [--reorder P] [--wrs N] [--pmtu BYTES] [--cut-at NS] [--trace]
//! ```
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
            eprintln!("usage: roce-sim [--seed N] [--loss P] [--dup P] [--reorder P] [--wrs N] [--pmtu BYTES] [--cut-at NS] [--trace]");
            return ExitCode::from(2);
        }
    };
    println!(
        "seed {} loss {} dup {} reorder {} wrs {}/side pmtu {}",
        cfg.seed,
        cfg.net.loss,
        cfg.net.dup,
        cfg.net.reorder,
        cfg.wrs,
        cfg.pmtu.bytes()
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
