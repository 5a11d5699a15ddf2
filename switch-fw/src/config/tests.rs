use super::*;
use crate::tables::{Attachment, PartitionCfg, PortCfg, RateCap};
use podlink_protocol::wire::PartitionId;

fn aid(v: u16) -> AccelId {
    AccelId::new(v).unwrap()
}

/// 4 accelerators on ports 0..4 (two partitions), port 4 and 5 trunks to other planes.
fn sample() -> Tables {
    let mut t = Tables::new();
    t.set_num_ports(6).unwrap();
    t.set_generation(42);
    t.set_adaptive(true);
    for p in 0..4u16 {
        t.set_port(
            p,
            PortCfg {
                attach: Attachment::Accelerator(aid(p + 10)),
                plane: 0,
            },
        )
        .unwrap();
    }
    t.set_port(
        4,
        PortCfg {
            attach: Attachment::Switch,
            plane: 1,
        },
    )
    .unwrap();
    t.set_port(
        5,
        PortCfg {
            attach: Attachment::Switch,
            plane: 2,
        },
    )
    .unwrap();
    t.set_vc_weights([4, 2, 1, 1]).unwrap();
    let a = t
        .add_partition(PartitionCfg {
            id: PartitionId::new(1).unwrap(),
            weight: 3,
            rate_cap: None,
        })
        .unwrap();
    let b = t
        .add_partition(PartitionCfg {
            id: PartitionId::new(2).unwrap(),
            weight: 1,
            rate_cap: Some(RateCap {
                bytes_per_us: 500,
                burst_bytes: 4096,
            }),
        })
        .unwrap();
    for x in [10, 11, 100, 101, 102] {
        t.add_member(a, aid(x)).unwrap();
    }
    for x in [12, 13, 200] {
        t.add_member(b, aid(x)).unwrap();
    }
    for p in 0..4u16 {
        t.set_route(aid(p + 10), &[p]).unwrap();
    }
    for x in 100..=102 {
        t.set_route(aid(x), &[4, 5]).unwrap();
    }
    t.set_route(aid(200), &[5]).unwrap();
    t.validate().unwrap();
    t
}

fn emit_vec(t: &Tables) -> Vec<u8> {
    let mut buf = vec![0u8; 20_000];
    let n = emit(t, &mut buf).unwrap();
    buf.truncate(n);
    buf
}

fn parse(bytes: &[u8]) -> Result<Tables, ConfigError> {
    let mut t = Tables::new();
    parse_into(bytes, &mut t)?;
    t.validate()?;
    Ok(t)
}

/// A configuration from a header and raw sections, with a correct CRC.
fn raw(num_ports: u8, sections: &[(u8, &[u8])]) -> Vec<u8> {
    let mut v = b"PLSW".to_vec();
    v.extend_from_slice(&[
        VERSION,
        FLAG_ADAPTIVE,
        num_ports,
        0,
        0,
        0,
        0,
        1,
        0,
        0,
        0x07,
        0xd0,
    ]);
    for (ty, body) in sections {
        v.extend_from_slice(&[*ty, 0]);
        v.extend_from_slice(&(body.len() as u16).to_be_bytes());
        v.extend_from_slice(body);
    }
    reseal(v)
}

fn reseal(mut v: Vec<u8>) -> Vec<u8> {
    let crc = CRC32_BZIP2.checksum(&v);
    v.extend_from_slice(&crc.to_be_bytes());
    v
}

fn unseal(v: &[u8]) -> Vec<u8> {
    v[..v.len() - 4].to_vec()
}

const ONE_PORT: &[u8] = &[0, 0, ATTACH_ACCELERATOR, 0, 0, 5];

#[test]
fn test_round_trip() {
    let t = sample();
    let bytes = emit_vec(&t);
    let back = parse(&bytes).unwrap();
    assert_eq!(back, t);
    assert_eq!(emit_vec(&back), bytes);
}

#[test]
fn test_construct_layout() {
    let bytes = raw(1, &[(SECTION_PORTS, ONE_PORT)]);
    assert_eq!(&bytes[..4], b"PLSW");
    let t = parse(&bytes).unwrap();
    assert_eq!(t.num_ports(), 1);
    assert_eq!(t.generation(), 1);
    assert!(t.adaptive());
    assert_eq!(t.port(0).unwrap().attach, Attachment::Accelerator(aid(5)));
}

#[test]
fn test_emit_buffer_too_small() {
    let t = sample();
    let n = emit_vec(&t).len();
    let mut small = vec![0u8; n - 1];
    assert_eq!(
        emit(&t, &mut small),
        Err(EmitError::BufferTooSmall { needed: n })
    );
    let mut tiny = [0u8; 3];
    assert_eq!(
        emit(&t, &mut tiny),
        Err(EmitError::BufferTooSmall { needed: n })
    );
}

#[test]
fn test_truncated_every_prefix() {
    let bytes = emit_vec(&sample());
    for n in 0..bytes.len() {
        assert!(parse(&bytes[..n]).is_err(), "prefix {n} accepted");
    }
    assert_eq!(parse(&bytes[..10]), Err(ConfigError::Truncated));
    // A section claiming more bytes than there are.
    let mut v = unseal(&raw(1, &[(SECTION_PORTS, ONE_PORT)]));
    v[HEADER_LEN + 3] = 200;
    assert_eq!(parse(&reseal(v)), Err(ConfigError::Truncated));
}

#[test]
fn test_header_errors() {
    let good = raw(1, &[(SECTION_PORTS, ONE_PORT)]);
    let mut v = good.clone();
    v[0] = b'X';
    assert_eq!(parse(&v), Err(ConfigError::BadMagic));
    let mut v = unseal(&good);
    v[4] = 3;
    assert_eq!(parse(&reseal(v)), Err(ConfigError::BadVersion(3)));
    // Read as version 2, bytes 6..8 are a port count of 256: more than this instance holds.
    let mut v = unseal(&good);
    v[4] = 2;
    assert_eq!(
        parse(&reseal(v)),
        Err(ConfigError::PortCapacity {
            ports: 256,
            capacity: 64
        })
    );
    let mut v = good.clone();
    *v.last_mut().unwrap() ^= 1;
    assert!(matches!(parse(&v), Err(ConfigError::BadCrc { .. })));
    let mut v = unseal(&good);
    v[5] = 0x80;
    assert_eq!(
        parse(&reseal(v)),
        Err(ConfigError::Reserved("header flags"))
    );
    let mut v = unseal(&good);
    v[7] = 1;
    assert_eq!(
        parse(&reseal(v)),
        Err(ConfigError::Reserved("header byte 7"))
    );
    let mut v = unseal(&good);
    v[6] = 65;
    assert_eq!(
        parse(&reseal(v)),
        Err(ConfigError::PortCapacity {
            ports: 65,
            capacity: 64
        })
    );
}

/// Version 2 describes the same tables with u16 port numbers: the sample round-trips through
/// it, and its records are laid out as documented.
#[test]
fn test_version_2_round_trip_and_layout() {
    let t = sample();
    let mut buf = vec![0u8; 20_000];
    let n = emit_version(&t, &mut buf, VERSION_2).unwrap();
    let v2 = &buf[..n];
    assert_eq!((v2[4], &v2[6..8]), (VERSION_2, &[0u8, 6][..]));
    // The first port record: port 0 as u16, plane 0, an accelerator, ID 10.
    let rec = &v2[HEADER_LEN + SECTION_HEADER_LEN..][..PORT_RECORD_LEN];
    assert_eq!(rec, &[0, 0, 0, ATTACH_ACCELERATOR, 0, 10]);
    assert_eq!(parse(v2).unwrap(), t);
    // Unknown versions are not written.
    assert_eq!(emit_version(&t, &mut buf, 3), Err(EmitError::Version(3)));
}

/// A 1024-port wide instance: ports above 255 need version 2 (version 1 is refused by the
/// emitter), the wide instance parses it, and the 64-port instance refuses it with a typed
/// error.
#[test]
fn test_version_2_wide_ports() {
    let mut t = Tables::<1024, u16>::empty();
    t.set_num_ports(1024).unwrap();
    for p in [0u16, 700, 1023] {
        let attach = if p == 0 {
            Attachment::Switch
        } else {
            Attachment::Accelerator(aid(p))
        };
        t.set_port(p, PortCfg { attach, plane: 3 }).unwrap();
    }
    let part = t
        .add_partition(PartitionCfg {
            id: PartitionId::new(1).unwrap(),
            weight: 1,
            rate_cap: None,
        })
        .unwrap();
    for a in [700, 1023, 5] {
        t.add_member(part, aid(a)).unwrap();
    }
    t.set_route(aid(700), &[700]).unwrap();
    t.set_route(aid(1023), &[1023]).unwrap();
    t.set_route(aid(5), &[0]).unwrap();
    t.validate().unwrap();
    assert_eq!(t.home_port(aid(1023)), Some(1023));

    let mut buf = vec![0u8; 20_000];
    assert_eq!(
        emit_version(&t, &mut buf, VERSION),
        Err(EmitError::Version(VERSION))
    );
    let n = emit(&t, &mut buf).unwrap();
    let bytes = &buf[..n];
    assert_eq!(bytes[4], VERSION_2);
    let mut back = Tables::<1024, u16>::empty();
    parse_into(bytes, &mut back).unwrap();
    back.validate().unwrap();
    assert_eq!(back, t);
    assert_eq!(back.route(aid(1023)).collect::<Vec<_>>(), [1023]);
    assert_eq!(
        parse(bytes),
        Err(ConfigError::PortCapacity {
            ports: 1024,
            capacity: 64
        })
    );
    // A 256-port instance with u8 storage cannot exist (255 at most); a 200-port one refuses
    // the same bytes too.
    let mut mid = Tables::<200, u8>::empty();
    assert_eq!(
        parse_into(bytes, &mut mid),
        Err(ConfigError::PortCapacity {
            ports: 1024,
            capacity: 200
        })
    );
}

#[test]
fn test_section_errors() {
    use ConfigError::*;
    let p = (SECTION_PORTS, ONE_PORT);
    assert_eq!(parse(&raw(1, &[])), Err(MissingSection(SECTION_PORTS)));
    assert_eq!(
        parse(&raw(1, &[p, p])),
        Err(DuplicateSection(SECTION_PORTS))
    );
    assert_eq!(parse(&raw(1, &[p, (9, &[])])), Err(UnknownSection(9)));
    assert_eq!(
        parse(&raw(1, &[(SECTION_PORTS, &[0, 0, 1])])),
        Err(SectionLength(SECTION_PORTS))
    );
    assert_eq!(
        parse(&raw(1, &[p, (SECTION_VC_WEIGHTS, &[1, 1])])),
        Err(SectionLength(SECTION_VC_WEIGHTS))
    );
    assert_eq!(
        parse(&raw(1, &[p, (SECTION_VC_WEIGHTS, &[1, 0, 1, 1])])),
        Err(ZeroWeight)
    );
    let mut v = unseal(&raw(1, &[p]));
    v[HEADER_LEN + 1] = 1;
    assert_eq!(parse(&reseal(v)), Err(Reserved("section header")));
}

#[test]
fn test_port_errors() {
    use ConfigError::*;
    let one = |rec: &[u8]| parse(&raw(2, &[(SECTION_PORTS, rec)]));
    assert_eq!(one(&[2, 0, 1, 0, 0, 1]), Err(PortOutOfRange(2)));
    assert_eq!(
        one(&[0, 0, 1, 0, 0, 1, 0, 0, 2, 0, 0, 0]),
        Err(DuplicatePort(0))
    );
    assert_eq!(one(&[0, 0, 3, 0, 0, 0]), Err(BadAttachment(3)));
    assert_eq!(one(&[0, 0, 2, 0, 0, 7]), Err(BadAttachment(2)));
    assert_eq!(one(&[0, 0, 1, 0, 4, 0]), Err(IdOutOfRange(1024)));
    assert_eq!(one(&[0, 16, 1, 0, 0, 1]), Err(BadPlane(16)));
    assert_eq!(one(&[0, 0, 1, 1, 0, 1]), Err(Reserved("port record")));
}

#[test]
fn test_route_and_partition_errors() {
    use ConfigError::*;
    let ports: &[u8] = &[0, 0, 1, 0, 0, 5, 1, 0, 2, 0, 0, 0];
    let p = (SECTION_PORTS, ports);
    let part = |members: &[u8]| {
        let mut b = vec![0, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        b.extend_from_slice(members);
        b
    };
    let go = |s: &[(u8, &[u8])]| {
        let mut all = vec![p];
        all.extend_from_slice(s);
        parse(&raw(2, &all))
    };
    // Route to a port that does not exist.
    assert_eq!(
        go(&[(SECTION_ROUTES, &[0, 9, 0, 1, 1, 7])]),
        Err(RouteToNonexistentPort { dst: 9, port: 7 })
    );
    assert_eq!(
        go(&[(SECTION_ROUTES, &[0, 9, 0, 1, 1, 0])]),
        Err(RouteToWrongAccelerator { dst: 9, port: 0 })
    );
    assert_eq!(
        go(&[(SECTION_ROUTES, &[0, 9, 0, 1, 0])]),
        Err(EmptyRoute(9))
    );
    assert_eq!(
        go(&[(SECTION_ROUTES, &[0, 9, 0, 0, 1, 1])]),
        Err(EmptyRange)
    );
    assert_eq!(
        go(&[(SECTION_ROUTES, &[3, 0xff, 0, 2, 1, 1])]),
        Err(IdOutOfRange(1024))
    );
    assert_eq!(
        go(&[(SECTION_ROUTES, &[0, 9, 0, 1, 1, 1, 0, 9, 0, 1, 1, 1])]),
        Err(DuplicateRoute(9))
    );
    assert_eq!(
        go(&[(SECTION_ROUTES, &[0, 9, 0, 1, 9, 1, 1, 1, 1, 1, 1, 1, 1, 1])]),
        Err(TooManyWays(9))
    );
    // A member without a route is refused; with one it is fine.
    let m = part(&[0, 5, 0, 1, 0, 9, 0, 1]);
    assert_eq!(go(&[(SECTION_PARTITION, &m)]), Err(EmptyRoute(5)));
    let m9 = part(&[0, 9, 0, 1]);
    assert_eq!(go(&[(SECTION_PARTITION, &m9)]), Err(EmptyRoute(9)));
    let ok = go(&[
        (SECTION_PARTITION, &m),
        (SECTION_ROUTES, &[0, 9, 0, 1, 1, 1, 0, 5, 0, 1, 1, 0]),
    ])
    .unwrap();
    assert_eq!(ok.partition_of(aid(9)), Some(0));
    assert_eq!(
        go(&[(SECTION_PARTITION, &m), (SECTION_PARTITION, &m)]),
        Err(DuplicatePartition(1))
    );
    assert_eq!(
        go(&[(SECTION_PARTITION, &part(&[0, 5, 0, 2, 0, 6, 0, 1]))]),
        Err(DuplicateMember(6))
    );
    assert_eq!(
        go(&[(SECTION_PARTITION, &part(&[0, 5, 0]))]),
        Err(SectionLength(SECTION_PARTITION))
    );
    assert_eq!(
        go(&[(SECTION_PARTITION, &[0, 1, 1])]),
        Err(SectionLength(SECTION_PARTITION))
    );
    assert_eq!(
        go(&[(SECTION_PARTITION, &[0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0])]),
        Err(ZeroWeight)
    );
    assert_eq!(
        go(&[(SECTION_PARTITION, &[0, 1, 1, 2, 0, 0, 0, 0, 0, 0, 0, 0])]),
        Err(Reserved("partition flags"))
    );
    assert_eq!(
        go(&[(SECTION_PARTITION, &[0, 1, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0])]),
        Err(Reserved("rate fields without the rate-cap flag"))
    );
    assert_eq!(
        go(&[(SECTION_PARTITION, &[0, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0])]),
        Err(ZeroRate)
    );
    assert_eq!(
        go(&[(SECTION_PARTITION, &[4, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0])]),
        Err(Reserved("partition id above 1023"))
    );
}

#[test]
fn test_errors_display() {
    let e = ConfigError::RouteToWrongAccelerator { dst: 3, port: 1 };
    assert!(e.to_string().contains("another accelerator"));
    assert_eq!(
        ConfigError::BadMagic.to_string(),
        "bad magic (not a podlink switch configuration)"
    );
}
