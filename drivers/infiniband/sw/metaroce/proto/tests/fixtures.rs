//! Parses every packet in `tests/fixtures/*.hex` and checks its ICRC.

use metaroce_proto::icrc::{
    icrc_compute, icrc_compute_rxe_flush, icrc_verify, icrc_write, icrc_write_rxe_flush,
    IPV4_HDR_LEN, IPV6_HDR_LEN, UDP_HDR_LEN,
};
use metaroce_proto::opcode::Opcode;
use metaroce_proto::packet::{build, parse};
use std::path::Path;

fn load(path: &Path) -> Vec<u8> {
    let text = std::fs::read_to_string(path).unwrap();
    let hex: String = text
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .flat_map(|l| l.chars().filter(|c| !c.is_whitespace()))
        .collect();
    assert!(
        hex.len() % 2 == 0,
        "{}: odd number of hex digits",
        path.display()
    );
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect()
}

/// Splits a fixture into IP header, UDP header and UDP payload.
fn split(pkt: &[u8]) -> (&[u8], &[u8], &[u8]) {
    let ip_len = match pkt[0] >> 4 {
        4 => IPV4_HDR_LEN,
        6 => IPV6_HDR_LEN,
        v => panic!("IP version {v}"),
    };
    let (ip, rest) = pkt.split_at(ip_len);
    let (udp, ib) = rest.split_at(UDP_HDR_LEN);
    assert_eq!(u16::from_be_bytes([udp[2], udp[3]]), 4791, "not RoCEv2");
    assert_eq!(
        usize::from(u16::from_be_bytes([udp[4], udp[5]])),
        UDP_HDR_LEN + ib.len(),
        "UDP length"
    );
    (ip, udp, ib)
}

fn fixtures() -> Vec<(String, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../../../tools/testing/selftests/drivers/infiniband/metaroce/fixtures");
    let mut out: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "hex"))
        .map(|p| {
            (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                load(&p),
            )
        })
        .collect();
    out.sort();
    out
}

#[test]
fn every_fixture_parses_and_verifies() {
    let all = fixtures();
    assert!(all.len() >= 2);
    for (name, pkt) in &all {
        let (ip, udp, ib) = split(pkt);
        assert_eq!(icrc_verify(ip, udp, ib), Ok(()), "{name}");
        let p = parse(ib).unwrap_or_else(|e| panic!("{name}: {e:?}"));
        let (body, _) = ib.split_at(ib.len() - 4);
        // rdma_rxe's FLUSH requests carry its own ICRC (see the test below).
        let want = if p.hdr.bth.opcode == Opcode::RcFlush {
            icrc_compute_rxe_flush(ip, udp, body)
        } else {
            icrc_compute(ip, udp, body)
        };
        assert_eq!(p.icrc, want.unwrap(), "{name}");
        // Re-encoding the parsed headers and payload gives the same bytes.
        let mut out = vec![0u8; ib.len()];
        assert_eq!(build(&p.hdr, p.payload, &mut out), Ok(ib.len()), "{name}");
        assert_eq!(
            &out[..ib.len() - 4 - usize::from(p.hdr.bth.pad)],
            &ib[..ib.len() - 4 - usize::from(p.hdr.bth.pad)]
        );
    }
}

#[test]
fn cnp_fields() {
    let pkt =
        load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../../../tools/testing/selftests/drivers/infiniband/metaroce/fixtures/cx4lx-cnp-ipv4.hex"));
    let (_, _, ib) = split(&pkt);
    let p = parse(ib).unwrap();
    assert_eq!(p.hdr.bth.opcode, metaroce_proto::opcode::Opcode::Cnp);
    assert_eq!(p.hdr.bth.resv8, 0x40, "BECN");
    assert_eq!(p.hdr.bth.dest_qp, 0x118);
    assert_eq!(p.payload.len(), 16);
    assert_eq!(p.icrc, 0x2A00_FD82);
}

/// rdma_rxe (Linux 7.3) computes a FLUSH request's ICRC over its headers twice (its opcode table
/// has no payload offset for FLUSH): the captured requests fail the IBTA computation and match
/// `icrc_compute_rxe_flush`; `icrc_verify` takes both forms for FLUSH, and `icrc_write_rxe_flush`
/// reproduces rdma_rxe's trailer byte for byte while `icrc_write` writes the IBTA one.
#[test]
fn rxe_flush_requests_carry_rxe_icrc() {
    let mut n = 0;
    for (name, pkt) in fixtures().into_iter().filter(|(n, _)| n.contains("op1c")) {
        n += 1;
        let (ip, udp, ib) = split(&pkt);
        let p = parse(ib).unwrap();
        assert_eq!(p.hdr.bth.opcode, Opcode::RcFlush, "{name}");
        assert!(
            p.hdr.feth.is_some() && p.hdr.reth.is_some() && p.payload.is_empty(),
            "{name}"
        );
        let (body, _) = ib.split_at(ib.len() - 4);
        assert_ne!(
            p.icrc,
            icrc_compute(ip, udp, body).unwrap(),
            "{name}: IBTA ICRC"
        );
        let mut ours = ib.to_vec();
        icrc_write_rxe_flush(ip, udp, &mut ours).unwrap();
        assert_eq!(ours, ib, "{name}: rdma_rxe's trailer");
        icrc_write(ip, udp, &mut ours).unwrap();
        assert_ne!(ours, ib, "{name}");
        assert_eq!(
            icrc_verify(ip, udp, &ours),
            Ok(()),
            "{name}: the IBTA form is accepted too"
        );
        // The second form is for FLUSH only: the same bytes as a READ request do not verify.
        let mut read = ib.to_vec();
        read[0] = Opcode::RcReadRequest as u8;
        let k = read.len() - 4;
        let rxe_form = icrc_compute_rxe_flush(ip, udp, &read[..k]).unwrap();
        read[k..].copy_from_slice(&rxe_form.to_le_bytes());
        assert!(
            icrc_verify(ip, udp, &read).is_err(),
            "{name}: rdma_rxe's form on a READ"
        );
    }
    assert_eq!(n, 2);
}

#[test]
fn any_bit_flip_is_detected() {
    for (name, pkt) in fixtures() {
        let (ip, udp, ib) = split(&pkt);
        // Byte 4 of the BTH is masked out of the ICRC; everything else counts.
        for i in (0..ib.len()).filter(|&i| i != 4) {
            let mut bad = ib.to_vec();
            bad[i] ^= 0x10;
            assert!(
                icrc_verify(ip, udp, &bad).is_err(),
                "{name}: flip at {i} undetected"
            );
        }
    }
}
