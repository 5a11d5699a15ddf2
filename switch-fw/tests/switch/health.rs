//! Health hysteresis: against a reference model, and end to end through the switch.

use super::*;
use podlink_switch::health::{Grade, HealthMonitor};
use podlink_switch::{Event, Health, HealthPolicy};
use proptest::prelude::*;

/// Reference: the table in `health.rs`.
fn model(grades: &[Grade], p: &HealthPolicy) -> Vec<Health> {
    let (mut s, mut bad, mut good) = (Health::Healthy, 0u32, 0u32);
    let mut out = Vec::new();
    for &g in grades {
        let before = s;
        match g {
            Grade::Good => {
                bad = 0;
                good += 1;
                if good >= u32::from(p.recover_after) {
                    s = if s == Health::Failed {
                        Health::Degraded
                    } else {
                        Health::Healthy
                    };
                }
            }
            Grade::Bad => {
                good = 0;
                bad += 1;
                if s == Health::Healthy && bad >= u32::from(p.degrade_after) {
                    s = Health::Degraded;
                } else if s == Health::Degraded && bad >= u32::from(p.fail_after) {
                    s = Health::Failed;
                }
            }
            Grade::Critical => {
                good = 0;
                s = Health::Failed;
            }
        }
        if s != before {
            bad = 0;
            good = 0;
        }
        out.push(s);
    }
    out
}

fn grade() -> impl Strategy<Value = Grade> {
    prop_oneof![6 => Just(Grade::Good), 3 => Just(Grade::Bad), 1 => Just(Grade::Critical)]
}

proptest! {
    #[test]
    fn prop_hysteresis_matches_model(
        grades in proptest::collection::vec(grade(), 0..200),
        degrade_after in 1u8..4, fail_after in 1u8..6, recover_after in 1u8..10,
    ) {
        let p = HealthPolicy { degrade_after, fail_after, recover_after, ..HealthPolicy::default() };
        let want = model(&grades, &p);
        let mut m = HealthMonitor::new();
        for (g, w) in grades.iter().zip(want) {
            let before = m.state();
            let change = m.step(&p, *g);
            prop_assert_eq!(m.state(), w);
            prop_assert_eq!(change, (before != w).then_some((before, w)));
        }
    }

    #[test]
    fn prop_no_flapping(bads in proptest::collection::vec(any::<bool>(), 0..100)) {
        // A port that alternates good and bad windows never leaves Healthy once it has
        // degraded and never recovers faster than `recover_after` windows.
        let p = HealthPolicy::default();
        let mut m = HealthMonitor::new();
        let mut changes = 0;
        for b in bads {
            if m.step(&p, if b { Grade::Bad } else { Grade::Good }).is_some() { changes += 1; }
        }
        // Each transition needs ≥ min(degrade_after, recover_after) windows.
        prop_assert!(changes <= 100 / usize::from(p.degrade_after.min(p.recover_after)));
    }
}

#[test]
fn test_crc_errors_degrade_then_recover_and_drain() {
    let (mut sw, mut ports) = new_switch(small_pod, 64);
    let w = HealthPolicy::default().window;
    let mut now = t(0);
    let window = |sw: &mut Switch,
                  ports: &mut Vec<SimPort>,
                  now: &mut podlink_protocol::time::Instant,
                  crc: u32| {
        ports[5].inject_crc_errors(crc);
        sw.handle_timeout(*now, ports);
        *now += w;
    };
    window(&mut sw, &mut ports, &mut now, 0);
    window(&mut sw, &mut ports, &mut now, 10);
    assert_eq!(
        sw.health(5),
        Health::Healthy,
        "one bad window is not enough"
    );
    window(&mut sw, &mut ports, &mut now, 10);
    assert_eq!(sw.health(5), Health::Degraded);
    let mut saw = false;
    while let Some(e) = sw.poll_event() {
        saw |= e
            == Event::HealthChanged {
                port: 5,
                from: Health::Healthy,
                to: Health::Degraded,
            };
    }
    assert!(saw);
    // Drained: new flows avoid port 5 while others exist.
    for r in 0..40u64 {
        let h = Header::request(aid(0), aid(150), vc(0), r * 256);
        assert_ne!(
            sw.forward(now, 0, frame(r as u32, h), &mut ports)
                .unwrap()
                .port(),
            5
        );
    }
    for _ in 0..7 {
        window(&mut sw, &mut ports, &mut now, 0);
    }
    assert_eq!(
        sw.health(5),
        Health::Degraded,
        "recovery needs 8 good windows"
    );
    window(&mut sw, &mut ports, &mut now, 0);
    assert_eq!(sw.health(5), Health::Healthy);
}

#[test]
fn test_failed_port_is_flushed_and_unused() {
    let (mut sw, mut ports) = new_switch(small_pod, 0);
    // Queue frames on some trunk, then fail it with a burst of replays (critical).
    let h = Header::request(aid(0), aid(150), vc(0), 0);
    let p = sw.forward(t(1), 0, frame(1, h), &mut ports).unwrap().port();
    sw.forward(t(1), 0, frame(2, h), &mut ports).unwrap();
    ports[usize::from(p)].inject_replays(1000);
    sw.handle_timeout(t(0), &ports);
    assert_eq!(sw.health(p), Health::Failed);
    assert_eq!(sw.counters().ports[usize::from(p)].flushed, 2);
    // The flushed requests stay unanswered (the pin holds) but its port is unusable.
    assert_eq!(sw.flow_pin(&h), Some(p));
    let q = sw.forward(t(2), 0, frame(3, h), &mut ports).unwrap().port();
    assert_ne!(q, p);
    // `recover_after` good windows bring it back to Degraded: hashed flows keep away from it
    // until it settles (`spec-notes/switch.md#settling`).
    assert!(!sw.joining(p));
    let w = HealthPolicy::default().window;
    let mut now = t(0);
    for _ in 0..HealthPolicy::default().recover_after {
        now += w;
        sw.handle_timeout(now, &ports);
    }
    assert_eq!(sw.health(p), Health::Degraded);
    assert!(
        sw.joining(p),
        "a port out of Failed joins hashing after it settles"
    );
}

/// The operator override behaves as the health windows do: each change raises
/// `HealthChanged`, and a port forced out of `Failed` rejoins as a port recovering by
/// itself does (hashed flows settle before they take it again), instead of being used at
/// once while frames diverted from it may still be queued elsewhere.
#[test]
fn test_forced_health_raises_events_and_a_port_forced_back_joins() {
    let (mut sw, mut ports) = new_switch(small_pod, 0);
    let h = Header::request(aid(0), aid(150), vc(0), 0);
    let p = sw.forward(t(1), 0, frame(1, h), &mut ports).unwrap().port();
    while sw.poll_event().is_some() {}
    // Force `to` and see the change raised.
    let force = |sw: &mut podlink_switch::Switch<_, _>, from, to| {
        sw.force_health(p, to);
        assert_eq!(sw.health(p), to);
        let evs: Vec<Event> = core::iter::from_fn(|| sw.poll_event()).collect();
        let change = Event::HealthChanged { port: p, from, to };
        assert!(evs.contains(&change), "{evs:?}");
    };
    force(&mut sw, Health::Healthy, Health::Failed);
    let q = sw.forward(t(2), 0, frame(2, h), &mut ports).unwrap().port();
    assert_ne!(q, p);
    assert!(!sw.joining(p));
    force(&mut sw, Health::Failed, Health::Healthy);
    assert!(
        sw.joining(p),
        "a port forced out of Failed joins after it settles"
    );
    // Forcing the state it has changes nothing and raises nothing.
    sw.force_health(p, Health::Healthy);
    assert_eq!(sw.poll_event(), None);
}
