//! Configuration: emit/parse round trips of random tables, and refusal keeps the old tables.

use super::*;
use podlink_switch::config::{emit, parse_into};
use podlink_switch::{DropReason, Event};
use proptest::prelude::*;

/// (partition id, weight, rate cap (rate, burst), members).
type PartSpec = (u16, u8, Option<(u32, u32)>, Vec<u16>);

#[derive(Debug, Clone)]
struct Pod {
    ports: Vec<(u8, Option<u16>)>, // (plane, accelerator attached or trunk)
    parts: Vec<PartSpec>,
    adaptive: bool,
    vw: [u8; 4],
    generation: u32,
}

fn pod() -> impl Strategy<Value = Pod> {
    (
        proptest::collection::vec((0u8..16, proptest::option::of(0u16..1024)), 1..=64),
        proptest::collection::vec(
            (
                0u16..1024,
                1u8..=255,
                proptest::option::of((1u32..100_000, 0u32..100_000)),
                proptest::collection::vec(0u16..1024, 0..40),
            ),
            0..6,
        ),
        any::<bool>(),
        proptest::array::uniform4(1u8..=255),
        any::<u32>(),
    )
        .prop_map(|(ports, parts, adaptive, vw, generation)| Pod {
            ports,
            parts,
            adaptive,
            vw,
            generation,
        })
}

/// Build tables from a random pod, skipping entries the builder refuses, and routing every
/// member (over trunks, or its own port when attached here).
fn build(p: &Pod, t: &mut Tables) -> Result<(), ConfigError> {
    t.set_num_ports(p.ports.len() as u16)?;
    t.set_adaptive(p.adaptive);
    t.set_vc_weights(p.vw)?;
    t.set_generation(p.generation);
    let mut trunks = Vec::new();
    let mut home = std::collections::HashMap::new();
    for (i, (plane, a)) in p.ports.iter().enumerate() {
        let attach = match a {
            Some(a) => {
                home.entry(*a).or_insert(Vec::new()).push(i as u16);
                Attachment::Accelerator(aid(*a))
            }
            None => {
                trunks.push(i as u16);
                Attachment::Switch
            }
        };
        t.set_port(
            i as u16,
            PortCfg {
                attach,
                plane: *plane,
            },
        )?;
    }
    for (id, w, cap, members) in &p.parts {
        let cap = cap.map(|(r, b)| RateCap {
            bytes_per_us: r,
            burst_bytes: b,
        });
        let Ok(idx) = t.add_partition(PartitionCfg {
            id: PartitionId::new(*id).unwrap(),
            weight: *w,
            rate_cap: cap,
        }) else {
            continue;
        };
        for m in members {
            let ways: Vec<u16> = match home.get(m) {
                Some(h) => h.iter().copied().take(8).collect(),
                None => trunks.iter().copied().take(8).collect(),
            };
            if ways.is_empty() || t.add_member(idx, aid(*m)).is_err() {
                continue;
            }
            let _ = t.set_route(aid(*m), &ways);
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn prop_emit_parse_round_trip(p in pod()) {
        let mut a = Box::new(Tables::new());
        build(&p, &mut a).unwrap();
        prop_assume!(a.validate().is_ok());
        let mut buf = vec![0u8; 32 * 1024];
        let n = emit(&a, &mut buf).unwrap();
        let mut b = Box::new(Tables::new());
        parse_into(&buf[..n], &mut b).unwrap();
        b.validate().unwrap();
        prop_assert_eq!(&a, &b);
        let mut buf2 = vec![0u8; 32 * 1024];
        let n2 = emit(&b, &mut buf2).unwrap();
        prop_assert_eq!(&buf[..n], &buf2[..n2]);
    }

    #[test]
    fn prop_refusal_keeps_old_tables(
        flips in proptest::collection::vec((any::<prop::sample::Index>(), 1u8..=255), 1..4),
        cut in proptest::option::of(any::<prop::sample::Index>()),
    ) {
        let (mut sw, mut ports) = new_switch(small_pod, 16);
        let before = sw.tables().clone();
        let h = Header::request(aid(0), aid(150), vc(1), 0x100);
        let decision = sw.decide(0, &h);
        // A valid configuration of another pod, then damaged.
        let mut other = Box::new(Tables::new());
        small_pod_with(&mut other, false, None).unwrap();
        other.set_generation(99);
        other.validate().unwrap();
        let mut buf = vec![0u8; 8192];
        let n = emit(&other, &mut buf).unwrap();
        let mut bytes = buf[..n].to_vec();
        // Damage the content, then fix up the CRC so the damage reaches the validator
        // (for half the cases keep the bad CRC).
        for (i, x) in &flips {
            let i = i.index(bytes.len() - 4);
            bytes[i] ^= x;
        }
        if let Some(c) = cut {
            bytes.truncate(c.index(bytes.len()));
        }
        if flips.len() % 2 == 0 && bytes.len() >= 4 {
            let l = bytes.len() - 4;
            let crc = podlink_protocol::wire::crc::CRC32_BZIP2.checksum(&bytes[..l]);
            bytes[l..].copy_from_slice(&crc.to_be_bytes());
        }
        match sw.load_config(&bytes) {
            Ok(_) => {
                // Damage that still forms a valid configuration is accepted as a whole.
                prop_assert!(sw.tables().validate_clone_ok());
            }
            Err(error) => {
                prop_assert_eq!(sw.tables(), &before);
                prop_assert_eq!(sw.decide(0, &h), decision);
                prop_assert_eq!(sw.poll_event(), Some(Event::ConfigRefused { error }));
                prop_assert_eq!(sw.commit(), Err(podlink_switch::CommitError::NothingStaged));
                let r = sw.forward(t(1), 0, frame(1, h), &mut ports);
                prop_assert!(r.is_ok());
            }
        }
    }

    #[test]
    fn prop_arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        let mut t = Box::new(Tables::new());
        let _ = parse_into(&bytes, &mut t);
        let mut with_magic = b"PLSW\x01".to_vec();
        with_magic.extend_from_slice(&bytes);
        let _ = parse_into(&with_magic, &mut t);
    }
}

trait ValidateCloneOk {
    fn validate_clone_ok(&self) -> bool;
}
impl ValidateCloneOk for Tables {
    fn validate_clone_ok(&self) -> bool {
        self.clone().validate().is_ok()
    }
}

#[test]
fn test_refused_config_example() {
    let (mut sw, mut ports) = new_switch(small_pod, 16);
    let gen = sw.tables().generation();
    assert_eq!(sw.load_config(b"PLSW"), Err(ConfigError::Truncated));
    assert_eq!(sw.tables().generation(), gen);
    assert_eq!(sw.counters().refusals, 1);
    let h = Header::request(aid(0), aid(1), vc(0), 0);
    assert!(sw.forward(t(1), 0, frame(1, h), &mut ports).is_ok());
    let h = Header::request(aid(0), aid(2), vc(0), 0);
    assert_eq!(
        sw.forward(t(1), 0, frame(1, h), &mut ports),
        Err(DropReason::CrossPartition)
    );
}

#[test]
fn test_commit_swaps_banks() {
    let (mut sw, _ports) = new_switch(small_pod, 16);
    let mut other = Box::new(Tables::new());
    small_pod_with(&mut other, false, None).unwrap();
    other.set_generation(8);
    other.validate().unwrap();
    let mut buf = vec![0u8; 8192];
    let n = emit(&other, &mut buf).unwrap();
    sw.stage_config(&buf[..n]).unwrap();
    assert_eq!(
        sw.tables().generation(),
        7,
        "staging does not change the tables in force"
    );
    assert_eq!(sw.commit(), Ok(8));
    assert!(!sw.tables().adaptive());
    assert_eq!(sw.commit(), Err(podlink_switch::CommitError::NothingStaged));
}
