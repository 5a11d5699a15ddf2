//! Printing results the way BookSim prints them.

use std::fmt::Write as _;

use super::sim::{Outcome, SampleReport, SimResult, Stat};

/// A number as C++'s default `ostream` prints a `double` (`%g`, 6 significant digits).
pub fn fmt_g(x: f64) -> String {
    if x.is_nan() {
        return if x.is_sign_negative() { "-nan" } else { "nan" }.into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "inf" } else { "-inf" }.into();
    }
    if x == 0.0 {
        return if x.is_sign_negative() { "-0" } else { "0" }.into();
    }
    let sci = format!("{x:.5e}");
    let (mant, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let strip = |s: &str| -> String {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s.to_string()
        }
    };
    if !(-4..6).contains(&exp) {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{}e{}{:02}", strip(mant), sign, exp.abs())
    } else {
        strip(&format!("{:.*}", (5 - exp) as usize, x))
    }
}

fn line3(out: &mut String, name: &str, v: (f64, f64, f64), samples: u32) {
    let _ = writeln!(out, "{name} = {} ({samples} samples)", fmt_g(v.0));
    let _ = writeln!(out, "\tminimum = {} ({samples} samples)", fmt_g(v.1));
    let _ = writeln!(out, "\tmaximum = {} ({samples} samples)", fmt_g(v.2));
}

fn stat3(s: &Stat) -> (f64, f64, f64) {
    (s.avg(), s.min, s.max)
}

/// Averages over simulations (BookSim's `_overall_*` divided by `sim_count`).
fn mean(results: &[SimResult], f: impl Fn(&SimResult) -> f64) -> f64 {
    results.iter().map(f).sum::<f64>() / results.len() as f64
}

/// The overall statistics block (BookSim's `DisplayOverallStats`) for a finished run, or the
/// same block with an infinite latency for an unstable one.
pub fn overall(outcome: &Outcome) -> String {
    let mut out = String::new();
    let (results, unstable): (Vec<SimResult>, bool) = match outcome {
        Outcome::Done(r) => (r.clone(), false),
        Outcome::Unstable { last, .. } => (vec![(**last).clone()], true),
    };
    if results.is_empty() {
        return out;
    }
    let n = results.len() as u32;
    let avg3 = |f: &dyn Fn(&SimResult) -> (f64, f64, f64)| {
        (
            mean(&results, |r| f(r).0),
            mean(&results, |r| f(r).1),
            mean(&results, |r| f(r).2),
        )
    };
    out.push_str("====== Overall Traffic Statistics ======\n");
    out.push_str("====== Traffic class 0 ======\n");
    if unstable {
        let _ = writeln!(out, "Packet latency average = inf ({n} samples)");
        let _ = writeln!(out, "Network latency average = inf ({n} samples)");
    } else {
        line3(
            &mut out,
            "Packet latency average",
            avg3(&|r| stat3(&r.plat)),
            n,
        );
        line3(
            &mut out,
            "Network latency average",
            avg3(&|r| stat3(&r.nlat)),
            n,
        );
        line3(
            &mut out,
            "Fragmentation average",
            avg3(&|r| stat3(&r.frag)),
            n,
        );
    }
    let sp = avg3(&|r| r.sent_packet_rate());
    let ap = avg3(&|r| r.accepted_packet_rate());
    let sf = avg3(&|r| r.sent_flit_rate());
    let af = avg3(&|r| r.accepted_flit_rate());
    line3(&mut out, "Injected packet rate average", sp, n);
    line3(&mut out, "Accepted packet rate average", ap, n);
    line3(&mut out, "Injected flit rate average", sf, n);
    line3(&mut out, "Accepted flit rate average", af, n);
    let _ = writeln!(
        out,
        "Injected packet size average = {} ({n} samples)",
        fmt_g(sf.0 / sp.0)
    );
    let _ = writeln!(
        out,
        "Accepted packet size average = {} ({n} samples)",
        fmt_g(af.0 / ap.0)
    );
    if !unstable {
        let _ = writeln!(
            out,
            "Hops average = {} ({n} samples)",
            fmt_g(mean(&results, |r| r.hops.avg()))
        );
    }
    out
}

/// One line per sample period (worded differently from the overall block so that the first
/// `Packet latency average` in the output is the final one).
pub fn sample_line(s: &SampleReport) -> String {
    format!(
        "sample {:>3} {}: latency {} accepted {} (change {} / {}), {} flits in flight",
        s.phase,
        if s.warming_up {
            "warm-up  "
        } else {
            "measuring"
        },
        fmt_g(s.latency),
        fmt_g(s.accepted),
        fmt_g(s.latency_change),
        fmt_g(s.accepted_change),
        s.in_flight
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn g_format_matches_cpp() {
        for (x, s) in [
            (7.025684, "7.02568"),
            (0.0499687, "0.0499687"),
            (11.0, "11"),
            (0.5, "0.5"),
            (61.21013, "61.2101"),
            (1234567.0, "1.23457e+06"),
            (0.00001234, "1.234e-05"),
            (0.0001234, "0.0001234"),
            (999999.6, "1e+06"),
            (0.0, "0"),
            (f64::INFINITY, "inf"),
            (f64::NAN, "nan"),
            (-2.5, "-2.5"),
        ] {
            assert_eq!(fmt_g(x), s, "{x}");
        }
    }

    /// With no samples BookSim prints `-nan` for the average and the maximum (its `Stats`
    /// start the maximum at a negated NaN) and `nan` for the minimum.
    #[test]
    fn an_empty_statistic_prints_as_booksim_does() {
        let mut out = String::new();
        line3(
            &mut out,
            "Packet latency average",
            stat3(&Stat::default()),
            1,
        );
        assert_eq!(
            out,
            "Packet latency average = -nan (1 samples)\n\tminimum = nan (1 samples)\n\t\
             maximum = -nan (1 samples)\n"
        );
    }
}
