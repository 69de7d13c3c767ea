//! Runs the checked-in seeds (and any saved fuzz regressions) through the
//! harnesses on stable, and keeps the seed files equal to `seeds.rs`.
//!
//! `METAROCE_FUZZ_WRITE_SEEDS=1 cargo test --manifest-path fuzz/Cargo.toml
//! -p metaroce-fuzz-harness` rewrites `fuzz/seeds/`.

use metaroce_fuzz_harness as h;
use std::path::{Path, PathBuf};

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn runner(target: &str) -> fn(&[u8]) {
    match target {
        "packet" => h::packet::run,
        "headers" => h::headers::run,
        "psn" => h::psn::run,
        "responder" => h::responder::run,
        "requester" => h::requester::run,
        "icrc_mutate" => h::icrc_mutate::run,
        "mrc_packet" => h::mrc_packet::run,
        "sack" => h::sack::run,
        "conn" => h::conn::run,
        t => panic!("unknown target {t}"),
    }
}

#[test]
fn seeds_are_current() {
    let write = std::env::var_os("METAROCE_FUZZ_WRITE_SEEDS").is_some();
    let mut total = 0;
    for (target, seeds) in h::seeds::all_targets() {
        let dir = fuzz_dir().join("seeds").join(target);
        if write {
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
        }
        let mut names: Vec<String> = Vec::new();
        for (name, bytes) in &seeds {
            total += bytes.len();
            let path = dir.join(name);
            if write {
                std::fs::write(&path, bytes).unwrap();
            } else {
                let on_disk =
                    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                assert_eq!(
                    &on_disk,
                    bytes,
                    "{} is stale: regenerate the seeds",
                    path.display()
                );
            }
            names.push(name.clone());
        }
        let mut files: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        files.sort();
        names.sort();
        assert_eq!(
            files,
            names,
            "{}: extra or missing seed files",
            dir.display()
        );
    }
    assert!(total < 300 * 1024, "seed corpus is {total} bytes");
}

#[test]
fn seeds_and_regressions_replay() {
    if std::env::var_os("METAROCE_FUZZ_WRITE_SEEDS").is_some() {
        return; // seeds_are_current is rewriting the files
    }
    let mut n = 0;
    for sub in ["seeds", "regressions"] {
        for (target, _) in h::seeds::all_targets() {
            let dir = fuzz_dir().join(sub).join(target);
            let Ok(rd) = std::fs::read_dir(&dir) else {
                continue;
            };
            let run = runner(target);
            for e in rd {
                let path = e.unwrap().path();
                let data = std::fs::read(&path).unwrap();
                eprintln!("replay {}", path.display());
                run(&data);
                n += 1;
            }
        }
    }
    assert!(n > 100, "only {n} inputs replayed");
}

#[test]
fn hand_made_sequences_do_something() {
    // The hand-made sequences are meant to reach the interesting states:
    // make sure the models agree with the decoders on what they describe.
    for (name, bytes) in h::seeds::responder() {
        let input = <h::responder::Input as arbitrary::Arbitrary>::arbitrary_take_rest(
            arbitrary::Unstructured::new(&bytes),
        )
        .unwrap();
        assert!(!input.steps.is_empty(), "{name}");
        assert_eq!(
            input.encode(),
            bytes,
            "{name}: encoding does not round-trip"
        );
    }
    for (name, bytes) in h::seeds::conn() {
        let input = <h::conn::Input as arbitrary::Arbitrary>::arbitrary_take_rest(
            arbitrary::Unstructured::new(&bytes),
        )
        .unwrap();
        assert!(!input.steps.is_empty(), "{name}");
        assert_eq!(
            input.encode(),
            bytes,
            "{name}: encoding does not round-trip"
        );
    }
    for (name, bytes) in h::seeds::sack() {
        let input = <h::sack::Input as arbitrary::Arbitrary>::arbitrary_take_rest(
            arbitrary::Unstructured::new(&bytes),
        )
        .unwrap();
        assert!(!input.steps.is_empty(), "{name}");
        assert_eq!(
            input.encode(),
            bytes,
            "{name}: encoding does not round-trip"
        );
    }
    for (name, bytes) in h::seeds::requester() {
        let input = <h::requester::Input as arbitrary::Arbitrary>::arbitrary_take_rest(
            arbitrary::Unstructured::new(&bytes),
        )
        .unwrap();
        assert!(!input.steps.is_empty(), "{name}");
        assert_eq!(
            input.encode(),
            bytes,
            "{name}: encoding does not round-trip"
        );
    }
}

/// `METAROCE_FUZZ_REPRO=target:path cargo test ... repro -- --nocapture`
/// runs one input (add `METAROCE_FUZZ_TRACE=1` to print every step).
#[test]
fn repro() {
    let Ok(spec) = std::env::var("METAROCE_FUZZ_REPRO") else {
        return;
    };
    let (target, path) = spec.split_once(':').expect("target:path");
    runner(target)(&std::fs::read(path).unwrap());
}

/// `METAROCE_FUZZ_STATS=1 METAROCE_FUZZ_CORPUS=target:dir cargo test ...
/// corpus_stats -- --nocapture` replays a corpus and prints what it reached.
#[test]
fn corpus_stats() {
    let Ok(spec) = std::env::var("METAROCE_FUZZ_CORPUS") else {
        return;
    };
    let (target, dir) = spec.split_once(':').expect("target:dir");
    let run = runner(target);
    let mut n = 0;
    for e in std::fs::read_dir(dir).unwrap() {
        let path = e.unwrap().path();
        if h::trace() {
            eprintln!("corpus input {}", path.display());
        }
        run(&std::fs::read(path).unwrap());
        n += 1;
    }
    println!("{n} inputs");
    for (k, v) in h::counts() {
        println!("{v:>10} {k}");
    }
}
